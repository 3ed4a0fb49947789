"""One measuring run per data folder and host at a time.

Two runs of one matrix at once would measure every configuration twice, on the same cores at
the same time. ``run_lock(root, host_id)`` takes an exclusive ``flock`` on
``<root>/<host_id>/.run.lock`` (the kernel drops it when the holder dies, however it dies) and
writes who holds it (pid, start time, command) into the file; a second run refuses at once,
naming the holder, or waits for it with ``wait_s``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from core.errors import UserError
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


@contextlib.contextmanager
def run_lock(root: Path, host_id: str, *, wait_s: float = 0.0) -> Iterator[Path]:
    """Hold the lock of ``root/host_id`` for the ``with`` block; raise LockBusy when it is held."""
    folder = Path(root) / host_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(f"another run is measuring here: {_holder(fd)}; wait for it to finish or stop it",
                                   file=relpath(folder)) from None
                time.sleep(0.2)
        info = {"pid": os.getpid(), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "command": " ".join(sys.argv)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
