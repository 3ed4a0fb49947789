"""An exclusive lock on a file, held by one process at a time (the run lock, the site's build lock).

``exclusive(path)`` takes an ``flock`` on ``path`` (created when missing; the kernel drops the lock
when the holder dies, however it dies) and writes who holds it (pid, start time, command) into the
file; a second holder is refused at once with ``busy(holder)``, or waits up to ``wait_s`` for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from core.errors import UserError


def holder(fd: int) -> str:
    """Who holds the lock open on ``fd``, in words (from what the holder wrote into the file)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info:
        return "another process (holder unknown)"
    cmd = " ".join(str(info.get("command", "?")).split())[:120]
    return f"pid {info.get('pid', '?')} (started {info.get('started', '?')}: {cmd})"


@contextlib.contextmanager
def exclusive(
    path: Path,
    *,
    busy: Callable[[str], UserError],
    cannot: Callable[[OSError], UserError],
    wait_s: float = 0.0,
) -> Iterator[Path]:
    """Hold the lock of ``path`` for the ``with`` block. ``busy(holder)`` is raised when another
    process holds it past ``wait_s``; ``cannot(exc)`` when the file cannot be created or written
    (a file created here is removed again then)."""
    created = False
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except (
        OSError
    ) as exc:  # read-only, permission denied, no space, a folder in its place
        raise cannot(exc) from None
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy(holder(fd)) from None
                time.sleep(0.2)
        info = {
            "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError as exc:  # no space for even the holder's line
            if created:  # leave the folder as it was (the lock is still held: nobody else can have it open)
                path.unlink(missing_ok=True)
            raise cannot(exc) from None
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
