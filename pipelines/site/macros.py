"""The mkdocs-macros module: registers names, nothing else. Builders live in pipelines.site.pages."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from runtime import backends

from ..runs import load_runs
from . import pages


@lru_cache(maxsize=1)
def _runs() -> tuple[dict[str, Any], ...]:
    return tuple(load_runs())


def define_env(env: Any) -> None:
    env.macro(lambda: pages.home(list(_runs())), "home_summary")
    env.macro(lambda: pages.leaderboard_page(list(_runs())), "leaderboard")
    env.macro(lambda: pages.runs_index(list(_runs())), "runs_index")
    env.macro(pages.metric_definitions, "metric_definitions")
    env.macro(pages.test_kinds, "test_kinds")
    env.macro(pages.settings_table, "settings_table")
    env.variables["backends"] = sorted(backends.BACKENDS)
