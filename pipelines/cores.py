"""How many processes a build may fork: the one owner of "how many cores, and can this process fork",
for the load's workers (pipelines.light_pack) and the pages' (pipelines.site.page_cache)."""

from __future__ import annotations

import multiprocessing
import os


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
