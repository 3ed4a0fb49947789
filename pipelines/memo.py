"""Results computed once per loaded set of artifacts.

Several pages of one build ask the same pipeline question of the same artifacts (the history
series feed History, Regressions and Home). ``per_set`` keeps a function's answer for the last
few inputs, keyed by the identity of the artifacts in the list (the loaded set's objects are
shared by every page; a list built anew from them hits). The entry holds the input list, so the
identities stay valid while it is cached. Callers must treat the answer as read-only.

``per_run`` keeps a function's small answer about one record with that record (core.records:
``answer``): a question every page asks of every run (its decode point, its flags) reads the run's
heavy parts from its file once per loaded set (core.records.heavy), not once per page.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_SLOTS = 4


def per_run(fn: F) -> F:
    """``fn(record, *args)`` (hashable ``args``), computed once per record and arguments and kept with
    the record (read-only)."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(rec: Any, *args: Any) -> Any:
        return rec.answer((name, *args), lambda: fn(rec, *args))

    wrapper.answer_name = name  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def answer_name(fn: Callable[..., Any]) -> str:
    """The name a :func:`per_run` function keeps its answers under (with the record)."""
    return str(fn.answer_name)  # type: ignore[attr-defined]


def keep(fn: Callable[..., Any], rec: Any, value: Any) -> None:
    """Keep ``value`` with ``rec`` as the answer of the :func:`per_run` function ``fn`` (no arguments), as if
    computed: an answer kept between builds (pipelines.site.answer_store)."""
    rec.answer((answer_name(fn),), lambda: value)


def per_set(fn: Callable[[list[Any]], T]) -> Callable[[list[Any]], T]:
    """``fn(docs)``, kept for the last :data:`_SLOTS` lists of artifacts it was asked of (the least recently
    asked goes first), each hit found by the identity of every artifact in order. Pages alternate between
    the whole set and one host's runs: kept in the order they were first asked, the whole set's answer was
    dropped and made again every few pages. A hit compares identities only (no key of the whole list is
    built: at 100,000 artifacts that was 11 ms a call, thousands of calls a build)."""
    # (the artifacts, the answer), most recently asked first
    kept: list[tuple[list[Any], T]] = []

    @functools.wraps(fn)
    def wrapper(docs: list[Any]) -> T:
        if not isinstance(docs, (list, tuple)):
            docs = list(docs)
        n = len(docs)
        for i, (known, value) in enumerate(kept):
            if len(known) == n and (
                n == 0
                or (
                    known[0] is docs[0]
                    and known[-1] is docs[-1]
                    and all(map(operator.is_, known, docs))
                )
            ):
                if i:
                    kept.insert(0, kept.pop(i))
                return value
        # the caller's list may change later; the identities stay valid while kept
        known = list(docs)
        value = fn(known)
        kept.insert(0, (known, value))
        del kept[_SLOTS:]
        return value

    wrapper.cache_clear = kept.clear  # type: ignore[attr-defined]
    return wrapper
