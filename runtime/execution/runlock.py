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
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from core.artifacts import storage_error
from core.errors import StorageError, UserError
from core.paths import relpath

LOCK_NAME = ".run.lock"


class LockBusy(UserError):
    """Another run holds the data folder's lock for this host."""


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info:
        return "another process (holder unknown)"
    cmd = " ".join(str(info.get("command", "?")).split())[:120]
    return f"pid {info.get('pid', '?')} (started {info.get('started', '?')}: {cmd})"


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
    created = False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:  # read-only, permission denied, no space, a folder in its place: nothing has run yet
        raise _cannot_lock(exc, path) from None
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"another run is measuring here: {_holder(fd)}; wait for it to finish or stop it",
                        file=relpath(folder),
                    ) from None
                time.sleep(0.2)
        info = {
            "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError as exc:  # no space for even the holder's line: nothing measured could be written either
            if created:  # leave the folder as it was (the lock is still held: nobody else can have it open)
                path.unlink(missing_ok=True)
            raise _cannot_lock(exc, path) from None
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
