"""Methodology's tables: the metrics as declared (core.metrics), the test kinds, the backends
and each backend's settings, read from their declarations.
"""

from __future__ import annotations

import json
from typing import Any

from core.kinds import all_kinds
from core.metrics import METRICS
from pipelines.site.markdown import (
    cell,
    code,
    fold,
    link,
    table,
)


def metric_definitions() -> str:
    kinds = all_kinds().values()
    rows = [
        [
            code(m.name),
            cell(m.label),
            cell(m.unit),
            "higher" if m.higher_is_better else "lower",
            cell(m.aggregation),
            cell(", ".join(k.name for k in kinds if m.name in k.metrics)),
            cell(m.description),
        ]
        for m in METRICS.values()
    ]
    return fold(
        f"Every metric ({len(rows)}): label, unit, which way is better, aggregation, tests, definition",
        table(
            ["metric", "label", "unit", "better", "aggregation", "tests", "definition"],
            rows,
        ),
    )


def test_kinds() -> str:
    """Every registered kind: what it measures, its spec's fields; linked to its own page where its
    site builder has one (pipelines/site/kinds.py) and runs of it exist."""
    from pipelines.site.kinds import kinds_with_page, page_path

    paged = set(kinds_with_page())
    rows = []
    for name, kind in all_kinds().items():
        fields = ", ".join(code(f) for f in kind.spec.model_fields if f != "kind")
        label = link(code(name), page_path(name)) if name in paged else code(name)
        rows.append([label, cell(kind.description), fields])
    return table(["kind", "what it measures", "fields"], rows)


def backends_table(declarations: list[dict[str, Any]]) -> str:
    """What each backend declares it is (runtime.backends.base.Backend.declaration): where the model
    runs, the server software it starts, the kinds it runs and what a kind means for it where that
    differs from the kind's own description (``kind_notes``), the models it measures (a local file,
    an endpoint), its prompt styles, the settings it honours."""
    rows = []
    for d in declarations:
        notes = (
            "; ".join(
                f"{code(k)}: {cell(v)}"
                for k, v in sorted((d.get("kind_notes") or {}).items())
            )
            or "—"
        )
        rows.append(
            [
                code(d["name"]),
                "in process" if d["in_process"] else "behind a server",
                cell(", ".join(d["servers"])) if d["servers"] else "—",
                ", ".join(code(k) for k in d["test_kinds"]),
                notes,
                ", ".join(code(k) for k in d.get("model_kinds") or ["file"]),
                ", ".join(code(p) for p in d["prompt_styles"]),
                ", ".join(code(f) for f in d["settings"]),
            ]
        )
    return fold(
        f"Every backend ({len(rows)}): where the model runs, servers, test kinds, models, prompt styles, settings",
        table(
            [
                "backend",
                "the model runs",
                "servers it starts",
                "test kinds",
                "what a kind means here",
                "models",
                "prompt styles",
                "settings",
            ],
            rows,
            downloads=False,
        ),
    )


def settings_table(options: list[dict[str, Any]]) -> str:
    """A backend's settings (name, type, default, help: its declaration's option table)."""
    rows = [
        [
            code(r["name"]),
            cell(r["type"]),
            code(json.dumps(r["default"])) if r["default"] is not None else "null",
            cell(r["help"]),
        ]
        for r in options
    ]
    return fold(
        f"Every setting ({len(rows)}): type, default, meaning",
        table(["setting", "type", "default", "meaning"], rows),
    )
