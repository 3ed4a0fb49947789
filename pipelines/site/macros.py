"""The mkdocs-macros module: registers names, nothing else. Builders live in pipelines.site.pages."""

from __future__ import annotations

from typing import Any

from runtime import backends

from .. import dataset
from ..runs import load_runs
from . import browser, manual, open_data, pages
from . import quality_pages
from . import serving as serving_pages
from . import optimization as optimization_pages
from . import hosts as hosts_pages
from .. import roofline
from .. import projections
from . import planning
from . import fidelity as fidelity_pages
from . import history_pages


def _runs() -> tuple[dict[str, Any], ...]:
    """The run artifacts of the one loaded set (pipelines.dataset: read and validated once per build)."""
    return tuple(load_runs())


def define_env(env: Any) -> None:
    env.macro(lambda: pages.home(list(_runs())), "home_summary")
    env.macro(lambda: pages.leaderboard_page(list(_runs())), "leaderboard")
    env.macro(lambda kind="run": browser.browser_page(kind, len(dataset.load().of(kind))), "runs_browser")
    env.macro(browser.viewer_page, "artifact_viewer")
    env.macro(open_data.artifact_format, "artifact_format")
    env.macro(open_data.published_paths, "published_paths")
    env.macro(pages.metric_definitions, "metric_definitions")
    env.macro(pages.test_kinds, "test_kinds")
    env.macro(pages.settings_table, "settings_table")
    env.macro(manual.manual, "task_manual")
    env.macro(lambda: serving_pages.serving_page(list(_runs())), "serving_page")
    env.macro(lambda: serving_pages.comparisons_page(list(_runs())), "comparisons_page")
    env.macro(lambda: optimization_pages.optimization_page(list(_runs())), "optimization_page")
    env.macro(lambda: hosts_pages.hosts_page(list(_runs()), roofline.load_hosts()), "hosts_page")
    env.macro(quality_pages.quality_page_from_data, "quality_scores")
    env.macro(quality_pages.ladder_from_data, "quantization_ladder")
    env.macro(quality_pages.scorers_table, "quality_scorers")
    env.macro(quality_pages.sandbox_layers, "sandbox_layers")
    env.macro(quality_pages.roles_page_from_data, "roles_page")
    env.macro(quality_pages.decision_rules, "roles_rules")
    env.macro(lambda: planning.projections_page(list(_runs()), projections.load_records()), "projections_page")
    env.macro(lambda: planning.memory_page(list(_runs()), roofline.load_hosts()), "memory_page")
    env.macro(lambda: planning.roofline_page(list(_runs()), roofline.load_hosts()), "roofline_page")
    env.macro(lambda: planning.whatif_page(list(_runs())), "whatif_page")
    env.macro(fidelity_pages.fidelity_section, "fidelity_table")
    env.macro(lambda: history_pages.history_page(list(_runs())), "history_page")
    env.macro(lambda: history_pages.regressions_page(list(_runs())), "regressions_page")
    env.macro(lambda: history_pages.host_vs_host_page(list(_runs())), "host_vs_host_page")
    env.macro(history_pages.method_text, "history_method")
    env.variables["backends"] = sorted(backends.BACKENDS)
