"""The figures a page shows, for the golden-pages test (tests/test_golden_pages.py).

Every data page's macro is called through the site's composition root (docs/macros.py, with a
stand-in for mkdocs-macros' env) on a data folder, and the page's numbers are read off its
rendered Markdown in order (tables, prose, chart data): a figure that changes, moves to another
row or disappears changes the list. Identifiers that are digests of a page's own text (chart ids,
table download names) are dropped first: they change with any byte of the page, not with a figure
(so is a fold's ``markdown="1"``: folding a section is no figure);
a chart's figures are its data rows (every mark's values), not its presentation (sizes, widths,
label limits, dash patterns), which may change without a figure changing.
"""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# the macros whose output depends on the artifacts (the others document the code: settings, tasks)
DATA_PAGES = (
    "home_summary",
    "leaderboard",
    "serving_page",
    "comparisons_page",
    "optimization_page",
    "hosts_page",
    "quality_scores",
    "quantization_ladder",
    "roles_page",
    "projections_page",
    "memory_page",
    "roofline_page",
    "whatif_page",
    "history_page",
    "regressions_page",
    "host_vs_host_page",
)

SPLIT = {
    "serving_page": "serving",
    "comparisons_page": "comparisons",
    "optimization_page": "optimization",
    "hosts_page": "hosts",
    "roles_page": "roles",
}  # the data pages that split per host, by macro
_DIGESTS = re.compile(
    r'chart-[0-9a-f]{10}|tables/[0-9a-f]+\.(?:csv|json)| markdown="1"'
)  # and a fold's markup
_SPEC = re.compile(
    r'(<script type="application/json" id="[^"]+-spec">)(.*?)(</script>)', re.S
)
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?%?(?![\w])")


class _Env:
    """What docs/macros.py's define_env uses of mkdocs-macros' env."""

    def __init__(self) -> None:
        self.macros: dict[str, Any] = {}
        self.variables: dict[str, Any] = {}

    def macro(self, fn: Any, name: str | None = None) -> None:
        self.macros[name or fn.__name__] = fn


def macros() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(
        "almanac_docs_macros", ROOT / "docs" / "macros.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    env = _Env()
    module.define_env(env)
    return env.macros


def _chart_data(m: re.Match[str]) -> str:
    """An embedded chart spec as its data rows alone (charts.embed writes the spec as JSON)."""
    import json

    from pipelines.site.charts import _values

    return (
        m.group(1)
        + json.dumps(_values(json.loads(m.group(2))), sort_keys=True)
        + m.group(3)
    )


def numbers(text: str) -> list[str]:
    """The numbers as a reader sees them (character references, which artifact text is written as, decoded);
    a chart's as its data rows."""
    return [
        m.rstrip(".")
        for m in _NUMBER.findall(
            _DIGESTS.sub("", html.unescape(_SPEC.sub(_chart_data, text)))
        )
    ]


def page_values(data: Path) -> dict[str, list[str]]:
    """Page -> its numbers, rendered from the data folder ``data`` (ALMANAC_DATA must point at it)."""
    import os

    from pipelines import dataset
    from pipelines.site import markdown

    assert Path(os.environ["ALMANAC_DATA"]).resolve() == data.resolve()
    markdown.reset_tables()
    dataset.freeze(data)
    try:
        m = macros()
        out = {name: numbers(m[name]()) for name in DATA_PAGES}
        # a page split per host (more hosts than one page carries: pipelines/site/per_host.py) is its index and
        # every host's page: their figures, host by host, after the index's
        from pipelines.site import per_host

        for name, split in SPLIT.items():
            if per_host.is_split(split):
                for host in sorted(per_host.hosts_of(split)):
                    out[name] += numbers(per_host.render(split, host))
        return out
    finally:
        dataset.thaw(data)
