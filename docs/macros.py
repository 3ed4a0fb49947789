"""The mkdocs-macros module: registers names, nothing else.

It is the site's composition root: the page builders live in ``pipelines.site`` (which reads
artifacts only), and the few facts the site documents about the run stage itself (each
backend's settings and the command lines that reproduce its runs, the quality scorers, the
sandbox's layers) are read here from ``runtime``
and handed to them as data. ``pipelines`` and ``runtime`` never import each other
(the import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import functools
from typing import Any

from core.records.run import RunRecord
from pipelines import dataset, facts, index, projections, roofline
from pipelines.runs import load_runs
from pipelines.site import (  # noqa: F401 - split_pages registers
    agent_pages,
    browser,
    history_pages,
    home_page,
    leaderboard_page,
    manual,
    memory_page,
    methodology,
    open_data,
    parity_pages,
    per_host,
    projections_page,
    quality_pages,
    roofline_page,
    scaling_page,
    set_macros,
    split_pages,
    tradeoffs,
    whatif_page,
)
from pipelines.site import fidelity as fidelity_pages
from pipelines.site import kinds as site_kinds
from pipelines.site import load_time as load_time_page
from pipelines.site import optimization as optimization_pages
from pipelines.site import retrieval as retrieval_pages
from runtime import backends
from runtime.quality import sandbox, scorers


def _runs() -> tuple[RunRecord, ...]:
    """The run artifacts of the one loaded set (pipelines.dataset: read and validated once per build)."""
    return tuple(load_runs())


def _facts() -> facts.Facts:
    """The fact layer of the loaded set (pipelines.facts: every figure computed once per build)."""
    return facts.of_loaded()


def this_host() -> str | None:
    """The host that builds the site (its fingerprint's id; ``ALMANAC_THIS_HOST`` names another, ``none`` none):
    Home and the Leaderboard mark it as "this host"."""
    import os

    from runtime.hosts import fingerprint

    named = os.environ.get("ALMANAC_THIS_HOST")
    if named:
        return None if named == "none" else named
    if "id" not in _THIS:
        _THIS["id"] = fingerprint.host_id(fingerprint.fingerprint())
    return _THIS["id"]


_THIS: dict[str, str] = {}


def backend_declarations() -> list[dict[str, Any]]:
    """Each backend's declaration (runtime) as data for the Methodology page."""
    return [backends.backend_class(n).declaration() for n in sorted(backends.BACKENDS)]


# the macros that read the loaded set and nothing else besides the code (the others render the code's own
# declarations; fidelity_table reads benchmarks/results/, outside both, and is cheap)
_WHOLE_SET = frozenset(
    (
        "home_summary",
        "leaderboard",
        "runs_browser",
        "kind_page",
        "serving_page",
        "comparisons_page",
        "optimization_page",
        "hosts_page",
        "quality_scores",
        "quantization_ladder",
        "retrieval_stack",
        "quality_parity",
        "quality_tradeoffs",
        "agents_page",
        "roles_page",
        "projections_page",
        "memory_page",
        "roofline_page",
        "whatif_page",
        "scaling_page",
        "history_page",
        "regressions_page",
        "host_vs_host_page",
        "load_time_section",
        "verdict_rules",  # its noise table: every host's
    )
)


def on_pre_page_macros(env: Any) -> None:
    """Before each page's Markdown is rendered as a Jinja template (mkdocs-macros compiles every page's):
    the plugin's Jinja environment compiles a text it has compiled before once. Every per-host page has
    one body (pipelines.site.per_host.HOST_PAGE_BODY), compiled once instead of once per page (a template
    holds no page's values: each render is given its own)."""
    jinja = env.env
    if not getattr(jinja, "almanac_compiles_once", False):
        jinja.from_string = functools.lru_cache(maxsize=16)(jinja.from_string)
        jinja.almanac_compiles_once = True


def define_env(env: Any) -> None:
    def macro(fn: Any, name: str) -> None:
        # a macro that reads the whole set is kept between builds by that set's content (pipelines.site.set_macros)
        env.macro(
            set_macros.macro(name, fn, lambda: str(this_host()))
            if name in _WHOLE_SET
            else fn,
            name,
        )

    # the command lines that reproduce a best point of the Optimization page are its backend's (runtime)
    optimization_pages.hand(backends.command_lines)
    macro(lambda: home_page.home(_facts(), this_host()), "home_summary")
    macro(
        lambda: leaderboard_page.leaderboard_page(_facts(), this_host()), "leaderboard"
    )
    macro(
        lambda kind="run": browser.browser_page(
            kind, browser.count(kind, index.listed(dataset.load()))
        ),
        "runs_browser",
    )
    macro(browser.viewer_page, "artifact_viewer")
    macro(per_host.render, "split_page")  # one host's part: pipelines.site.page_cache
    macro(per_host.host_page, "split_host_page")  # a generated per-host page's body
    macro(open_data.artifact_format, "artifact_format")
    macro(open_data.published_paths, "published_paths")
    macro(methodology.metric_definitions, "metric_definitions")
    macro(methodology.test_kinds, "test_kinds")
    macro(lambda kind: site_kinds.kind_page(kind, list(_runs())), "kind_page")
    macro(lambda: methodology.backends_table(backend_declarations()), "backends_table")
    macro(
        lambda backend: methodology.settings_table(
            backends.settings_class(backend).option_table()
        ),
        "settings_table",
    )
    macro(manual.manual, "task_manual")
    macro(lambda: per_host.render("serving"), "serving_page")
    macro(lambda: per_host.render("comparisons"), "comparisons_page")
    macro(lambda: per_host.render("optimization"), "optimization_page")
    macro(lambda: per_host.render("hosts"), "hosts_page")
    macro(quality_pages.quality_page_from_data, "quality_scores")
    macro(quality_pages.ladder_from_data, "quantization_ladder")
    macro(lambda: retrieval_pages.retrieval_section(list(_runs())), "retrieval_stack")
    macro(parity_pages.parity_from_data, "quality_parity")
    macro(tradeoffs.tradeoffs_from_data, "quality_tradeoffs")
    macro(agent_pages.agents_from_data, "agents_page")
    macro(
        lambda: quality_pages.scorers_table(list(scorers.SCORERS.values())),
        "quality_scorers",
    )
    macro(
        lambda: quality_pages.sandbox_layers(sandbox.isolation_layers()),
        "sandbox_layers",
    )
    macro(lambda: per_host.render("roles"), "roles_page")
    macro(quality_pages.decision_rules, "roles_rules")
    macro(
        lambda: projections_page.projections_page(
            list(_runs()), projections.load_records()
        ),
        "projections_page",
    )
    macro(
        lambda: memory_page.memory_page(list(_runs()), roofline.load_hosts()),
        "memory_page",
    )
    macro(
        lambda: roofline_page.roofline_page(list(_runs()), roofline.load_hosts()),
        "roofline_page",
    )
    macro(lambda: whatif_page.whatif_page(list(_runs())), "whatif_page")
    macro(lambda: scaling_page.scaling_page(list(_runs())), "scaling_page")
    macro(fidelity_pages.fidelity_section, "fidelity_table")
    macro(lambda: history_pages.history_page(list(_runs())), "history_page")
    macro(lambda: history_pages.regressions_page(list(_runs())), "regressions_page")
    macro(lambda: history_pages.host_vs_host_page(list(_runs())), "host_vs_host_page")
    macro(history_pages.method_text, "history_method")
    macro(history_pages.fdr_text, "fdr_method")
    macro(history_pages.quiet_text, "quiet_rule")
    macro(lambda: load_time_page.section(list(_runs())), "load_time_section")
    macro(history_pages.verdict_rules, "verdict_rules")
    macro(history_pages.ranking_rule, "ranking_rule")
    env.variables["backends"] = sorted(backends.BACKENDS)
