"""A second process that makes the build's pages from the end of the page list while MkDocs' own page loop
works from the start.

MkDocs makes each page in turn, in one process: the macros' Markdown, then Markdown to HTML. Every step of
that is kept between builds under the key of what it is made from (pipelines.site.page_cache for per-host
pages, pipelines.site.set_macros for the fleet pages, pipelines.site.html_cache for the HTML), and a kept
step is what making it again would give. So a forked worker that makes pages only fills those caches, and
the page loop finds there whatever the worker made first:

* after the navigation is made (``start``, from the hooks' ``on_nav``), one worker is forked. It claims the
  pages from the last one backwards and runs MkDocs' own step on each (``_populate_page``: the same events,
  the same hooks), its output going to the caches only: it writes no site file and logs nothing (a
  step that logged a warning is not cached, so the page loop makes that page again and logs it there);
* the page loop claims each page before making it (``claim``, from ``on_pre_page``). A page the worker has
  not reached is the loop's; one the worker is making is waited for; one it made is a cache hit. The two
  meet somewhere in the middle and the worker stops there;
* once every page is made (``finish``, from ``on_env``) the worker has ended; a failed build ends it too.

Measured on the 2-core VM against one process (benchmarks/results/cpu/site-scale-round8.md): a cold build
10-30% faster and a rebuild after one more host 13-20%, for +0.1-0.2 GiB of peak memory at 10,000 artifacts and
+0.6-1.1 GiB at 100,000 (each process touches, and so copies, part of the loaded set it shares).

The claims are one byte per page in memory both processes share, changed under one lock. A page the worker
failed on is made by the loop, which reports its error where it always did. Off where the page cache is
off, with one core, with ``ALMANAC_PAGE_WORKERS=1``, or when the build runs beside other threads
(``mkdocs serve``: a fork copies one thread only).
"""

from __future__ import annotations

import logging
import mmap
import multiprocessing
import os
import threading
import time
from typing import Any

from pipelines.site import page_cache

FREE, LOOP, MAKING, MADE, FAILED = range(5)  # a page's claim
LEAST_PAGES = 8  # a build with fewer pages is not worth a process


class _Worker:
    def __init__(self, pid: int, index: dict[str, int], claims: mmap.mmap, lock: Any):
        self.pid, self.index, self.claims, self.lock = pid, index, claims, lock


_RUNNING: list[_Worker | None] = [None]
_IN_WORKER = [False]


def in_worker() -> bool:
    """Whether this process is the page worker (which writes no site file)."""
    return _IN_WORKER[0]


def start(config: Any, files: Any) -> None:
    """Fork the page worker for this build's pages, where it helps (see the module's doc)."""
    finish()
    if (
        not page_cache.enabled()
        or page_cache.workers() < 2
        or threading.active_count() > 1
    ):
        return
    pages = list(files.documentation_pages())
    if len(pages) < LEAST_PAGES:
        return
    claims = mmap.mmap(-1, len(pages))
    lock = multiprocessing.get_context("fork").Lock()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _work(config, files, pages, claims, lock, parent)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    _RUNNING[0] = _Worker(
        pid, {f.src_uri: i for i, f in enumerate(pages)}, claims, lock
    )


def _work(
    config: Any, files: Any, pages: list[Any], claims: mmap.mmap, lock: Any, parent: int
) -> None:
    from mkdocs.commands.build import _populate_page
    from mkdocs.structure.pages import Page

    _IN_WORKER[0] = True
    _quiet()
    for i in range(len(pages) - 1, -1, -1):
        if os.getppid() != parent:  # the build is gone
            return
        with lock:
            if claims[i] != FREE:  # the page loop got here: every page before is its
                return
            claims[i] = MAKING
        file = pages[i]
        try:
            page = file.page if file.page is not None else Page(None, file, config)
            _populate_page(page, config, files)
            page.content = (
                None  # made into the caches; this process keeps nothing of it
            )
            claims[i] = MADE
        except BaseException:
            claims[i] = FAILED


def _quiet() -> None:
    """The worker logs nothing: what it would log, the page loop logs when it makes that page (a step that
    warned is not cached). Warnings are still counted, so that such a step is not kept."""
    from pipelines.site import html_cache

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(
        devnull, 1
    )  # nor prints (a library's warning, a progress line): the loop's process does
    os.dup2(devnull, 2)
    for name in ("mkdocs", ""):
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if h is html_cache.counter()]


def claim(page: Any) -> None:
    """The page loop is about to make ``page``: claimed for the loop, or, if the worker is making it, once the
    worker is done with it (then found in the caches)."""
    w = _RUNNING[0]
    if w is None:
        return
    i = w.index.get(page.file.src_uri)
    if i is None:
        return
    with w.lock:
        state = w.claims[i]
        if state == FREE:
            w.claims[i] = LOOP
            return
    while state == MAKING:
        if _ended(w):
            return
        time.sleep(0.002)
        state = w.claims[i]


def _ended(w: _Worker) -> bool:
    try:
        pid, _status = os.waitpid(w.pid, os.WNOHANG)
    except ChildProcessError:
        return True
    if pid:
        w.pid = -1
        return True
    return False


def finish(kill: bool = False) -> tuple[int, int] | None:
    """The worker ended (its pages are all made or claimed by then); ``kill``: at once (a failed build).
    How many pages it made, of how many: None when no worker ran."""
    w = _RUNNING[0]
    _RUNNING[0] = None
    if w is None:
        return None
    if w.pid > 0:
        if kill:
            try:
                os.kill(w.pid, 9)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(w.pid, 0)
        except ChildProcessError:
            pass
    made = bytes(w.claims).count(MADE), len(w.claims)
    w.claims.close()
    return made


__all__ = ["claim", "finish", "in_worker", "start"]
