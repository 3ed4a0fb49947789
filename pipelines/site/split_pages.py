"""The pages that split per host (pipelines.site.per_host), each with the runs that put a host on
it and the function that renders it."""

from __future__ import annotations

from typing import Any

from core.records.run import RunRecord
from pipelines import backends as backend_cmp
from pipelines import dataset, engines, host_boards, optimization, roofline
from pipelines.site import host_boards_page, page_inputs, quality_pages, slots
from pipelines.site import hosts as hosts_pages
from pipelines.site import optimization as optimization_pages
from pipelines.site import serving as serving_pages
from pipelines.site.kinds import kinds_on
from pipelines.site.per_host import SplitPage, register


def _hosts(runs: list[RunRecord], host: str | None) -> str:
    host_docs = roofline.load_hosts()
    if host is not None:
        host_docs = [d for d in host_docs if d.host_id == host]
    return hosts_pages.hosts_page(runs, host_docs)


def _boards(runs: list[RunRecord], host: str | None) -> str:
    """One host's boards: per test and backend, its models and settings as rows (the per-host
    detail the Leaderboard links each host to; the Leaderboard itself is per workload)."""
    if host is None:
        return host_boards_page.host_boards_page(runs)
    # boards are per host: one host's are made from its own runs, their figures from the whole set's fact
    # layer (host_boards.of_host): the fleet's boards made for one host's page (one more host's run) were seconds
    return host_boards_page.host_boards_page(
        runs, host_boards.of_host(runs, list(dataset.load().runs))
    )


register(
    SplitPage(
        "boards",
        "Per-host boards",
        "measured results",
        lambda r: r.ok,
        _boards,
        always=True,
        # a board's rows are its host's runs; a run measured once is widened by the fleet's pooled noise
        # where its host has none of its own (pipelines.facts)
        reads=page_inputs.boards,
    )
)
register(SplitPage("hosts", "Hosts", "runs", lambda r: True, _hosts, fingerprints=True))
register(
    SplitPage(
        "optimization",
        "Optimization tracks",
        "sweep runs",
        lambda r: bool(r.sweep),
        lambda runs, host: optimization_pages.optimization_page(
            runs, command_lines=optimization_pages.handed()
        ),
        # a matrix that names a sweep but varies nothing (the reference workload) is no track, nor is a
        # sweep of a kind without a headline to compare (agent loops): a fleet running only those gets no
        # page of "no sweeps yet" per host (optimization.sweeps keeps a group only where some point is
        # swept and compared on its headline: the same test, without building the sweeps)
        shows=lambda runs: any(
            r.swept and optimization.compared_on_headline(r) for r in runs
        ),
    )
)
register(
    SplitPage(
        "serving",
        "Serving",
        "serving runs",
        lambda r: r.test_kind in kinds_on("serving"),
        lambda runs, host: serving_pages.serving_page(runs),
    )
)


def _compared(r: Any) -> bool:
    """A chat, serve or in-process backend run (what the Comparisons page compared first)."""
    return r.test_kind in kinds_on("comparisons") or (
        r.in_process and not backend_cmp.is_reference([r])
    )


register(
    SplitPage(
        "comparisons",
        "Comparisons",
        "chat, serve, in-process backend and served load runs",
        lambda r: (
            _compared(r) or (r.test_kind in ("load", "capacity") and bool(r.server))
        ),
        lambda runs, host: serving_pages.comparisons_page(runs),
        # served load runs only when two engine families ran the same test (pipelines.engines)
        shows=lambda runs: (
            any(_compared(r) for r in runs) or bool(engines.engine_groups(runs))
        ),
    )
)
register(
    SplitPage(
        "roles",
        "Roles",
        "runs",
        lambda r: True,
        lambda runs, host: (
            quality_pages.roles_page_for(host)
            + "\n\n"
            + slots.slots_section(runs, host)
        ),
        # a host's assignments judge its runs and every configuration measured anywhere against the whole
        # fleet's quality scores (shared), the fleet's pooled noise and the registries
        reads=page_inputs.roles_page,
    )
)
