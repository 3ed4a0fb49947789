"""What a macro made of the whole set, kept between builds, keyed by the content of everything it reads.

The fleet's pages (Home, Leaderboard, History, Memory, Projections, the split pages' indexes, ...) are
each one macro call over every artifact of the set (docs/macros.py). pipelines.site.page_cache keeps a
per-host page by its host's artifacts; these pages read every host's, so a build in which nothing
changed rendered them all again: a third of such a build at 10,000 artifacts. A macro registered through
:func:`macro` is kept by the digest of

* the macro's name and arguments, and what the caller says it reads besides the set (``extra``: the
  host that builds the site, marked on Home and the Leaderboard);
* the code and the data folder's files that are not runs or host artifacts (page_cache's shared part:
  code_digest, registries, quality, perplexity and projection artifacts, by content);
* every host's runs, their request-record sidecars and its host artifacts (page_cache.host_digest), for
  every host of the set;
* the registries the roles read (the set's own roles.yaml and models.yaml, else the project's:
  page_cache.registries), and the environment variables that choose the kinds shown.

That is every file the build reads: a hit is what the macro would return. A hit gives back the Markdown
and the table downloads the macro registered (so the build writes the same files); a miss calls the
macro and stores both. One more host changes every key here (the fleet pages show that host), so such a
build renders them as before; a build with nothing new renders none. Entries live in page_cache's
folder and are pruned with its entries; ``ALMANAC_PAGE_CACHE=0`` turns it off, and outside a build
nothing is kept.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from typing import Any

from pipelines import dataset
from pipelines.site import markdown, page_cache

VERSION = 1  # bump when an entry's format or the key's parts change
ENV = (
    "ALMANAC_KINDS",
    "ALMANAC_SITE_KINDS",
)  # what the environment chooses of what pages show


def set_digest() -> str:
    """The digest of the loaded set's content, as the whole-set macros' keys read it (once per build)."""
    return _set_digest()


def _set_digest() -> str:
    ds = dataset.load()
    return str(page_cache.per_build("set_macros:set", lambda: _digest_of(ds)))


def _digest_of(ds: dataset.Dataset) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(f"set\0v{VERSION}\0{page_cache.shared_digest(ds)}\0".encode())
    for host in page_cache.hosts(ds):
        h.update(f"host\0{host}\0{page_cache.host_digest(host)}\0".encode())
    # the registries as the roles read them: the set's own, else the project's (the only files of the
    # project's data folder a page falls back on; its measured runs are not read, nor hashed)
    h.update(f"registries\0{page_cache.registries()}\0".encode())
    for name in ENV:
        h.update(f"env\0{name}\0{os.environ.get(name, '')}\0".encode())
    return h.hexdigest()


def key(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], extra: str) -> str:
    return hashlib.blake2b(
        "\0".join(
            [
                _set_digest(),
                name,
                page_cache.stable_text((args, sorted(kwargs.items()))),
                extra,
            ]
        ).encode(),
        digest_size=20,
    ).hexdigest()


def macro(
    name: str, fn: Callable[..., str], extra: Callable[[], str] | None = None
) -> Callable[..., str]:
    """``fn`` (the macro ``name``, which reads the loaded set) with its output kept between builds by the
    content of what it reads (``extra()``: what else, as text)."""

    @functools.wraps(fn)
    def cached(*args: Any, **kwargs: Any) -> str:
        if not page_cache.enabled():
            return fn(*args, **kwargs)
        ds = dataset.load()
        entry_name = f"m-{key(name, args, kwargs, extra() if extra else '')}"
        entry = page_cache.read_entry(entry_name, ds)
        if (
            entry is not None
            and isinstance(entry.get("text"), str)
            and isinstance(entry.get("tables"), dict)
        ):
            for digest, (headers, rows) in entry["tables"].items():
                markdown.table_files()[digest] = (headers, rows)
            return str(entry["text"])
        before = set(markdown.table_files())
        text = fn(*args, **kwargs)
        tables = {d: v for d, v in markdown.table_files().items() if d not in before}
        page_cache.write_entry(entry_name, ds, {"text": text, "tables": tables})
        return text

    return cached


def kept(name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` (a JSON value that is a function of the loaded set: what a per-host page's key reads
    across hosts, the fact layer's groups the site check reads), kept between builds by the same digest
    as the macros: a build with nothing new does not figure the fact layer for it."""
    if not page_cache.enabled():
        return compute()
    ds = dataset.load()
    entry_name = f"v-{key(name, (), {}, '')}"
    memo = f"set_macros:kept:{entry_name}"
    return page_cache.per_build(memo, lambda: _kept(entry_name, ds, compute))


def _kept(entry_name: str, ds: dataset.Dataset, compute: Callable[[], Any]) -> Any:
    entry = page_cache.read_entry(entry_name, ds)
    if entry is not None and "value" in entry:
        return entry["value"]
    value = compute()
    page_cache.write_entry(entry_name, ds, {"value": value})
    return value


__all__ = ["ENV", "key", "kept", "macro"]
