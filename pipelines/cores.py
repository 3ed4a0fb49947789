"""How many processes a build may fork: the one owner of "how many cores, and can this process fork",
for the load's workers (pipelines.light_pack), the pages' (pipelines.site.page_cache) and the run answers'
(pipelines.site.answer_store); and the one way a build forks its workers (:func:`in_forks`)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable


def can_fork() -> bool:
    """Whether this platform starts processes by fork (the workers share the loaded set copy on write)."""
    return "fork" in multiprocessing.get_all_start_methods()


def available() -> int:
    """The cores this process may run on (its affinity where the platform has one, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers(most: int) -> int:
    """How many processes to work with, this one included: one per core up to ``most``; 1 (none forked)
    where processes cannot be forked."""
    if not can_fork():
        return 1
    return max(1, min(available(), most))


def in_forks(n: int, share: Callable[[int], object]) -> None:
    """``share(w)`` for w = 1 .. n-1 in worker processes forked from this one (the loaded set shared copy on
    write), and ``share(0)`` here meanwhile; returns once every worker has ended. A worker leaves without
    running this process's exit handlers, with status 1 when its share raised: what it hands back is its
    caller's to find. An exception of ``share(0)`` is raised here, after the workers have ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for w in range(1, n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                share(w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    try:
        share(0)
    finally:
        for pid in pids:
            os.waitpid(pid, 0)
