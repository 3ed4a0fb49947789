"""The Per-host boards page: one board per workload and host, every configuration measured
there with its settings and figures (pipelines.host_boards groups the runs; this renders).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd

from core.metrics import METRICS
from core.records.run import RunRecord
from core.summary import Summary
from pipelines import host_boards, ranking
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
    json_of = {d.id: run_json(d) for d in list(docs)}
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
                chart_rows,
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
