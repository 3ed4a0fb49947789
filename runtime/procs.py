"""Child processes that cannot outlive the process that started them, and their job folders.

A worker (``runtime.execution.worker``) and every server a worker starts
ask the kernel to SIGKILL them when their parent dies (``prctl(PR_SET_PDEATHSIG)``), whatever
ended the parent: SIGKILL, SIGTERM, SIGHUP, an OOM kill. A watchdog thread in the worker backs
that up (its parent changed: it kills its own process group) and holds the runner's timeout
on its own: past its deadline the worker kills its group even when no runner is left to do it.

Job folders are named ``almanac-job-<runner pid>-*`` in the temporary directory; one whose
runner is gone (a crash, a SIGKILL) is removed by the next run (:func:`clean_stale_job_dirs`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1
JOB_PREFIX = "almanac-job-"
PARENT_ENV = "ALMANAC_PARENT_PID"
DEADLINE_ENV = (
    "ALMANAC_DEADLINE"  # time.time() past which the worker kills its own process group
)
WATCH_INTERVAL_S = 0.25


def set_pdeathsig(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: SIGKILL this child when the process that started it dies."""
    parent = os.getpid() if parent_pid is None else parent_pid

    def fn() -> None:
        if (
            set_pdeathsig() and os.getppid() != parent
        ):  # the parent died before prctl took effect
            os._exit(1)

    return fn


def _kill_own_group() -> None:
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(137)


def start_watchdog(
    *,
    parent_pid: int | None,
    deadline: float | None,
    on_fire: Callable[[], None] = _kill_own_group,
) -> threading.Thread | None:
    """In a worker: die with the parent and at the deadline. ``parent_pid`` None: read from the
    environment (the runner sets it); ``deadline`` None: read from the environment (absolute
    ``time.time()``). Returns the thread, or None when there is nothing to watch."""
    if parent_pid is None:
        raw = os.environ.get(PARENT_ENV)
        parent_pid = int(raw) if raw and raw.isdigit() else None
    if deadline is None:
        try:
            deadline = float(os.environ[DEADLINE_ENV])
        except (KeyError, ValueError):
            deadline = None
    if parent_pid is None and deadline is None:
        return None
    if parent_pid is not None:
        set_pdeathsig()
        if os.getppid() != parent_pid:  # the runner died before we got here
            on_fire()
            return None

    def watch() -> None:
        while True:
            if parent_pid is not None and os.getppid() != parent_pid:
                on_fire()
                return
            if deadline is not None and time.time() > deadline:
                os.write(
                    2,
                    b"almanac worker: past the runner's deadline; killing my process group\n",
                )
                on_fire()
                return
            time.sleep(WATCH_INTERVAL_S)

    t = threading.Thread(target=watch, name="almanac-watchdog", daemon=True)
    t.start()
    return t


def job_dir() -> tempfile.TemporaryDirectory:
    """A fresh job folder whose name carries this process's pid (so a later run knows whether it is stale)."""
    return tempfile.TemporaryDirectory(prefix=f"{JOB_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_job_dirs(
    base: Path | str | None = None,
    prefixes: tuple[str, ...] = (JOB_PREFIX, "almanac-sbx-"),
) -> list[Path]:
    """Remove job folders whose runner is gone; returns what was removed."""
    base = Path(base or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for p in entries:
        prefix = next((x for x in prefixes if p.name.startswith(x)), None)
        if prefix is None or not p.is_dir() or p.is_symlink():
            continue
        pid_part = p.name[len(prefix) :].split("-", 1)[0]
        if (
            not pid_part.isdigit()
            or _alive(int(pid_part))
            or int(pid_part) == os.getpid()
        ):
            continue
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            removed.append(p)
    return removed
