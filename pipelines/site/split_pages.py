"""The pages that split per host (pipelines.site.per_host), each with the runs that put a host on
it and the function that renders it."""

from __future__ import annotations

from typing import Any

from pipelines import dataset, leaderboard, roofline
from pipelines.site import hosts as hosts_pages
from pipelines.site import optimization as optimization_pages
from pipelines.site import pages, quality_pages
from pipelines.site import serving as serving_pages
from pipelines.site.per_host import SplitPage, register
from core.records.run import as_record


def _hosts(runs: list[Any], host: str | None) -> str:
    host_docs = roofline.load_hosts()
    if host is not None:
        host_docs = [d for d in host_docs if d["host"]["id"] == host]
    return hosts_pages.hosts_page(runs, host_docs)


def _leaderboard(runs: list[Any], host: str | None) -> str:
    if host is None:
        return pages.leaderboard_page(runs)
    # boards are per host: one host's are those of the whole set (computed once, shared with Home)
    boards = [b for b in leaderboard.boards(list(dataset.load().runs)) if b.host_id == host]
    return pages.leaderboard_page(runs, boards)


register(SplitPage("leaderboard", "Leaderboard", "measured results", lambda r: r["status"] == "ok", _leaderboard))
register(SplitPage("hosts", "Hosts", "runs", lambda r: True, _hosts, fingerprints=True))
register(SplitPage("optimization", "Optimization tracks", "sweep runs", lambda r: bool(r["matrix"].get("sweep")),
                   lambda runs, host: optimization_pages.optimization_page(runs)))
SERVING_KINDS = ("serve", "concurrency", "load", "capacity", "probe")
register(SplitPage("serving", "Serving", "serving runs", lambda r: as_record(r).test_kind in SERVING_KINDS,
                   lambda runs, host: serving_pages.serving_page(runs)))
register(SplitPage("comparisons", "Comparisons", "chat and serve runs", lambda r: r["test"]["kind"] in ("chat", "serve"),
                   lambda runs, host: serving_pages.comparisons_page(runs)))
register(SplitPage("roles", "Roles", "runs", lambda r: True, lambda runs, host: quality_pages.roles_page_for(host)))
