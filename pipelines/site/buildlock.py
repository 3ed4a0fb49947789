"""One site build per output folder at a time, swapped in whole.

Two ``invoke site.build`` into one folder both clear and fill it: one failed with a
``SameFileError`` traceback, and what was left was a mix of both. A build holds an exclusive lock
(core.flock) on ``.<folder>.build.lock`` beside the folder (not inside it: mkdocs empties the folder
it builds into); a second build exits with one line naming the holder, or waits for it
(``wait_s``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from core import flock
from core.artifacts import storage_error
from core.errors import UserError
from core.paths import relpath


class BuildBusy(UserError):
    """Another build is writing the same site folder."""


def lock_path(site: Path) -> Path:
    return site.parent / f".{site.name}.build.lock"


@contextlib.contextmanager
def build_lock(site: Path, *, wait_s: float = 0.0) -> Iterator[Path]:
    """Hold the build lock of the folder ``site`` for the ``with`` block; BuildBusy when another holds it."""
    site = Path(site)
    path = lock_path(site)
    elsewhere = "or build it elsewhere with --output DIR"  # as the build's own storage errors say
    try:
        site.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(
            exc, site.parent, "cannot write the site", elsewhere
        ) from None

    def busy(holder: str) -> BuildBusy:
        return BuildBusy(
            f"another build is writing this folder: {holder}; wait for it (--wait SECONDS) {elsewhere}",
            file=relpath(site),
        )

    def cannot(exc: OSError) -> UserError:
        # the lock lies beside the site: a folder that cannot take it cannot take the site either
        return storage_error(
            exc, path, "cannot write the site (its build lock)", elsewhere
        )

    with flock.exclusive(path, busy=busy, cannot=cannot, wait_s=wait_s):
        yield path


def swap_in(fresh: Path, site: Path) -> None:
    """Put the site built at ``fresh`` in place of ``site``; the old one is removed in the background."""
    import subprocess

    old = site.with_name(f".{site.name}.old-{os.getpid()}")
    if site.exists():
        site.rename(old)
    fresh.rename(site)
    if old.exists():
        # at the lowest CPU and I/O priority: at fleet scale the removal (tens of thousands of files) ran for
        # minutes beside whatever came next, a next build included, and took its share of both
        lowest = (["nice", "-n", "19"] if shutil.which("nice") else []) + (
            ["ionice", "-c", "3"] if shutil.which("ionice") else []
        )
        subprocess.Popen(
            [*lowest, "rm", "-rf", "--", str(old)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
