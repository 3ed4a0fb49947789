"""One measuring run per data folder and host at a time.

Two runs of one matrix at once would measure every configuration twice, on the same cores at
the same time. ``run_lock(root, host_id)`` takes an exclusive ``flock`` on
``<root>/<host_id>/.run.lock`` (the kernel drops it when the holder dies, however it dies) and
writes who holds it (pid, start time, command) into the file; a second run refuses at once,
naming the holder, or waits for it with ``wait_s``.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from core import flock
from core.artifacts import storage_error
from core.errors import StorageError, UserError
from core.paths import relpath

LOCK_NAME = ".run.lock"


class LockBusy(UserError):
    """Another run holds the data folder's lock for this host."""


def _cannot_lock(exc: OSError, path: Path) -> StorageError:
    """A lock file that cannot be created or written: one line naming it and what to do."""
    err = storage_error(exc, path, "cannot create the run lock")
    if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST):
        err = StorageError(
            f"cannot create the run lock: something else is in its place ({exc.strerror}); "
            "remove it",
            file=relpath(path),
        )
    return err


@contextlib.contextmanager
def run_lock(root: Path, host_id: str, *, wait_s: float = 0.0) -> Iterator[Path]:
    """Hold the lock of ``root/host_id`` for the ``with`` block; raise LockBusy when it is held."""
    folder = Path(root) / host_id
    path = folder / LOCK_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # read-only, permission denied, no space, a file in its place: nothing has run yet
        raise _cannot_lock(exc, path) from None

    def busy(holder: str) -> LockBusy:
        return LockBusy(
            f"another run is measuring here: {holder}; wait for it to finish or stop it",
            file=relpath(folder),
        )

    with flock.exclusive(
        path, busy=busy, cannot=lambda exc: _cannot_lock(exc, path), wait_s=wait_s
    ):
        yield path
