"""Page bodies for the foundation pages: Home's regressions, the Per-host boards, Methodology's tables.

Each function takes loaded artifacts and returns Markdown; the macros module only calls them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd

from core.kinds import all_kinds
from core.metrics import METRICS
from core.records.run import RunRecord
from core.summary import Summary
from pipelines import host_boards, ranking
from pipelines.runs import records
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    SYNTHETIC_BADGE,
    admonition,
    as_text,
    cell,
    ci_cell,
    code,
    endpoint_badge,
    fold,
    link,
    num,
    run_json,
    run_link,
    table,
)


def _val(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else v


HOME_REGRESSIONS = (
    5  # newest regressions on the home page (all on the Regressions page)
)


def newest_regressions(docs: list[RunRecord], limit: int = HOME_REGRESSIONS) -> str:
    from pipelines import history, hostnames
    from pipelines.site.history_pages import build_value, host_cell

    steps = [
        st
        for st in history.all_steps(history.series(docs))
        if st.verdict == "regression" and not st.variant
    ][:limit]
    labels = hostnames.labels(docs)
    if not steps:
        return (
            "No regression detected (see [Regressions](regressions.md) for the method)."
        )
    rows = []
    for st in steps:
        s = st.series
        change = "; ".join(
            f"{k}: {build_value(k, v[0])} → {build_value(k, v[1])}"
            for k, v in st.build_change.items()
        )
        rows.append(
            [
                cell(st.after[0].created[:10]),
                cell(s.model),
                code(s.test),
                host_cell(labels, s.host_id),
                link(f"{num(st.change_pct, 1)}%", run_link(st.after[0].id)),
                f"{num(st.ci95_low, 3)} – {num(st.ci95_high, 3)}",
                cell(change or "—"),
            ]
        )
    return (
        table(
            [
                "measured",
                "model",
                "test",
                "host",
                "change",
                "after/before CI95",
                "build change",
            ],
            rows,
            ["l", "l", "l", "l", "r", "r", "l"],
            downloads=False,
        )
        + "\n\nAll of them, with the method: [Regressions](regressions.md)."
    )


def _setting(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def _definition(defn: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={_setting(v)}"
        for k, v in sorted(defn.items())
        if k not in ("name", "kind")
    )


def host_boards_page(docs: list[RunRecord], boards: list[Any] | None = None) -> str:
    (
        """Every board of ``docs``; or the given ``boards`` (one host's, out of the """
        """whole set's), with ``docs`` their runs."""
    )
    boards = (
        host_boards.of(docs) if boards is None else boards
    )  # computed once per set (Home shares it)
    if not boards:
        return admonition(
            "warning", "No measurements yet", "Run `invoke bench` to add some."
        )
    # boards that share a heading (same test name, host, backend) differ in their test definition: say how
    same_title: dict[tuple[str, str, str], int] = Counter(
        (b.test, b.host_id, b.backend) for b in boards
    )
    out: list[str] = []
    json_of = {d.id: run_json(d) for d in records(docs)}
    # a host of many boards reads as a list of answers: each board's best row in view, the rest folded
    many = len(boards) > BOARDS_OPEN
    for b in boards:
        m = b.metric
        title = f"## {cell(b.test)} on {code(b.host_id)} · {code(b.backend)}"
        if same_title[(b.test, b.host_id, b.backend)] > 1:
            title += f" · {code(b.key[:8])}"
        out.append(title + "\n")
        head = out
        out = []
        out.append(
            f"Ranked by **{cell(m.label)}** ({cell(m.unit)}, {'higher' if m.higher_is_better else 'lower'} is better; "
            f"{cell(m.aggregation)}) with a CI95 that treats the run as the unit (see [Methodology]"
            f"(methodology.md#statistics)): {cell(ranking.SHORT_RULE)}. "
            f"Each figure links to the newest artifact of its configuration.\n"
        )
        facts = [f"**Test:** {code(b.test_kind)} {cell(_definition(b.definition))}"]
        if not b.build_varies:
            facts.append(f"**Backend build:** {cell(b.builds[0])}")
        if b.constant:
            facts.append(
                "**Settings on every row:** "
                + cell(
                    ", ".join(
                        f"{k}={_setting(v)}" for k, v in sorted(b.constant.items())
                    )
                )
            )
        facts_text = "  \n".join(facts)
        # a test defined by its prompts (generate, chat) reads a screen long: folded, its kind still in view
        out.append(
            (
                facts_text
                if len(facts_text) <= LONG_FACTS
                else fold(
                    f"The test ({b.test_kind}), the backend build and the settings every row shares",
                    facts_text,
                )
            )
            + "\n"
        )
        recs = host_boards.board_records(b)
        build_cols = ["backend build"] if b.build_varies else []
        extra = [
            METRICS[c] for c in host_boards.extra_columns(b)
        ]  # e.g. energy per token, where measured
        headers = (
            ["#", "model", "quant"]
            + build_cols
            + [code(k) for k in b.varying]
            + [
                f"{cell(m.label)} ({cell(m.unit)}): figure, CI95, n",
                "± stddev (one run: its own; several: between runs)",
                "runs",
            ]
            + [f"{cell(x.label)} ({cell(x.unit)}) [CI95]" for x in extra]
            + ["source"]
        )
        rows = []
        chart_rows = []
        for r in recs:
            label = r["model"] + (
                ""
                if not b.varying
                else " · "
                + ", ".join(f"{k}={_setting(r['settings'][k])}" for k in b.varying)
            )
            if b.build_varies:
                label += f" · {r['backend_build']}"
            rows.append(
                [
                    cell(r["rank_label"]),
                    cell(r["model"])
                    + (" " + SYNTHETIC_BADGE if r["synthetic"] else "")
                    + (" " + endpoint_badge(r["endpoint"]) if r["endpoint"] else ""),
                    cell(r["quantization"]),
                ]
                + ([cell(r["backend_build"])] if b.build_varies else [])
                + [cell(_setting(r["settings"][k])) for k in b.varying]
                + [
                    figures.cell_html(r["figure"], stale=r["stale"]),
                    num(_val(r["stddev"]), m.decimals),
                    num(r["runs"], 0),
                ]
                + [_extra_cell(r["extra"].get(x.name), x) for x in extra]
                + [link(r["id"], run_link(r["id"]))]
            )
            chart_rows.append(
                {
                    "label": f"{r['rank_label']} {label}"
                    + (" [synthetic]" if r["synthetic"] else ""),
                    "mean": r["mean"],
                    "stddev": _val(r["stddev"]),
                    "n": r["n"],
                    "ci95_low": _val(r["ci95_low"]),
                    "ci95_high": _val(r["ci95_high"]),
                    "id": r["id"],
                    "json": json_of.get(r["id"], ""),
                }
            )
        out.append(
            table(
                headers,
                rows,
                ["r", "l", "l"]
                + ["l"] * (len(build_cols) + len(b.varying))
                + ["r", "r", "r"]
                + ["r"] * len(extra)
                + ["l"],
            )
        )
        out.append("")
        if len(chart_rows) > 1:
            chart = charts.dots_with_ci(
                pd.DataFrame(chart_rows),
                m,
                title=f"{b.test} on {b.host_id} ({b.backend})",
            )
            fig = charts.embed(
                chart,
                caption=f"{as_text(m.label)}: one dot per configuration (geometric mean of its runs) "
                "with its CI95; click a dot for its newest artifact's JSON.",
            )
            # the table above is the answer; its chart opens on demand (a host's page holds every board of it)
            out.append(
                fold(
                    f"Chart: {b.test}, {len(chart_rows)} configurations",
                    fig,
                    "almanac-fold",
                )
            )
            out.append("")
        board_body, out = out, head
        if many and recs:
            best = recs[0]
            firsts = sum(1 for r in recs if r["rank"] == 1)
            lead = (
                "**Only configuration:**"
                if len(recs) == 1
                else f"**Tied first** ({firsts} within noise of each other), e.g.:"
                if best["tied"] and firsts > 1
                else "**Ranked first:**"
                if best["rank"] == 1
                else "**Not ranked** (no interval to rank by), e.g.:"
            )
            out.append(
                f"{lead} {cell(best['model'])}"
                + (
                    ""
                    if not b.varying
                    else " · "
                    + cell(
                        ", ".join(
                            f"{k}={_setting(best['settings'][k])}" for k in b.varying
                        )
                    )
                )
                + f" — {cell(m.label)} ({cell(m.unit)}): "
                f"{figures.value(best['figure'])} "
                f"({'CI95 ' if best['figure'].has_interval else ''}{figures.interval(best['figure'])}, "
                f"n {best['figure'].n}{', stale' if best['stale'] else ''}; "
                f"of {len(recs)} configuration{'s' if len(recs) != 1 else ''}).\n"
            )
            out.append(
                fold(
                    f"{b.test}: the ranking, the test and every configuration",
                    "\n".join(board_body),
                    "almanac-fold",
                )
            )
            out.append("")
        else:
            out += board_body
    return "\n".join(out)


LONG_FACTS = 400  # characters: a board's facts longer than this are folded
BOARDS_OPEN = (
    12  # a host with more boards than this folds each board under its best row
)


def _extra_cell(s: Summary | None, m: Any) -> str:
    """A column beside the headline: its mean and CI95 ("—" where the row did not measure it)."""
    if s is None or s.mean is None:
        return "—"
    ci = ci_cell(_val(s.ci95_low), _val(s.ci95_high), m.decimals)
    return num(s.mean, m.decimals) + (f" [{ci}]" if ci != "—" else "")


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
