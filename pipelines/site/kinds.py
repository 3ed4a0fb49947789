"""How the site shows each test kind: one registration per kind, keyed by its name.

Every kind gets, without any code here: its runs on the Leaderboard (ranked on the headline metric
its module declares), in the runs browser and viewer, in History and Host vs host, and a row in
Methodology's table of kinds. What is specific to a kind is registered here as a :class:`KindSite`:

* ``pages``: the pages organised by host whose content its runs make (their hosts appear there:
  ``serving`` for serve, concurrency, load, capacity and probe runs, ``comparisons`` for chat and serve runs);
* ``section``: a section of its own, ``section(runs) -> Markdown`` over the kind's runs, published
  as the kind's page (``kinds/<name>/``, linked from Methodology) when any run of it exists.

A built-in kind's site registration lives below; a kind added from elsewhere registers its own
from a module named in ``ALMANAC_SITE_KINDS`` (comma-separated modules, imported with the site's
macros), the way ``ALMANAC_KINDS`` names the module of the kind itself. A second registration of a
name is an error.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.records.run import RunRecord
from core.registry import Registry
from pipelines.site.markdown import admonition, code


@dataclass(frozen=True)
class KindSite:
    kind: str
    pages: tuple[str, ...] = ()
    section: Callable[[list[Any]], str] | None = None
    title: str = ""


SITES: Registry[KindSite] = Registry("site of test kind")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # a kind's name becomes a page path
_loaded = False


def register(site: KindSite) -> KindSite:
    """Add a kind's site builder; a kind registered twice is an error naming both places."""
    return SITES.add(site.kind, site, stacklevel=2)


def unregister(kind: str) -> None:
    """Remove a kind's site builder (tests that register an example kind clean up with this)."""
    SITES.pop(kind, None)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in (
        m.strip() for m in os.environ.get("ALMANAC_SITE_KINDS", "").split(",")
    ):
        if module:
            importlib.import_module(module)


def sites() -> dict[str, KindSite]:
    _load()
    return dict(SITES)


def kinds_on(page: str) -> frozenset[str]:
    """The kinds whose runs a page shows (its hosts are those with runs of these kinds)."""
    return frozenset(name for name, s in sites().items() if page in s.pages)


def with_section() -> list[str]:
    """The kinds that have a page of their own."""
    return sorted(name for name, s in sites().items() if s.section is not None)


def page_path(kind: str) -> str:
    """Where a kind's own page lives under docs/."""
    return f"kinds/{kind}.md"


def kinds_with_page() -> list[str]:
    """The kinds that get a page in this build: a section of their own and at least one run."""
    from pipelines import dataset

    have = {r.test_kind for r in dataset.load().runs}
    return [k for k in with_section() if k in have]


def kind_pages() -> list[tuple[str, str]]:
    """(path under docs/, Markdown) of every kind page this build needs (docs/gen_pages.py)."""
    out = []
    for kind in kinds_with_page():
        if not _NAME.match(kind):
            raise ValueError(f"test kind {kind!r} cannot name a page")
        title = sites()[kind].title or kind
        out.append(
            (
                page_path(kind),
                f'# {title} (`{kind}` runs)\n\n{{{{ kind_page("{kind}") }}}}\n',
            )
        )
    return out


def kind_page(kind: str, runs: list[RunRecord]) -> str:
    """The body of a kind's own page: its section over the kind's runs."""
    site = sites().get(kind)
    if site is None or site.section is None:
        return admonition(
            "warning", "No page", f"Test kind {code(kind)} has no section of its own."
        )
    mine = [r for r in runs if r.test_kind == kind]
    if not mine:
        return admonition(
            "note", "No runs yet", f"No artifact of test kind {code(kind)}."
        )
    return site.section(mine)


# -- the built-in kinds' registrations ------------------------------------------------------------
register(KindSite("serve", pages=("serving", "comparisons")))
register(KindSite("concurrency", pages=("serving",)))
register(KindSite("load", pages=("serving",)))
register(KindSite("capacity", pages=("serving",)))
register(KindSite("probe", pages=("serving",)))
register(KindSite("chat", pages=("comparisons",)))
register(KindSite("rate"))
register(KindSite("generate"))
register(
    KindSite("agent_loop")
)  # its page is docs/agents.md (the Agent loops page, pipelines/site/agent_pages.py)
