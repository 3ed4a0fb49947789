"""The Roofline page: each host's measured memory bandwidth and every decode rate beside
its bandwidth bound (pipelines.roofline computes; this renders).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.metrics import METRICS
from core.records.host import HostRecord
from core.records.run import RunRecord
from pipelines import roofline as roof
from pipelines.site import charts
from pipelines.site.downsample import evenly
from pipelines.site.markdown import (
    MEASURED_BADGE,
    PROJECTED_BADGE,
    SYNTHETIC_BADGE,
    cell,
    code,
    fold,
    link,
    nbytes,
    no_data,
    num,
    pct,
    prose,
    run_link,
    table,
)

ROOFLINE_CHART_RUNS = 40  # a roofline chart of more runs than this folds
ROOFLINE_CHART_MAX = (
    80  # runs the chart draws at most (26 px each), spread over the efficiency ranking
)


def _missed_badge(text: str) -> str:
    return f'<span class="almanac-badge missed">{cell(text)}</span>'


def roofline_chart(df: pd.DataFrame) -> alt.LayerChart:
    """Measured decode rate (a dot) and its bandwidth bound (a tick) per run, joined by a rule: marks
    placed at a value, never bars from zero, so the chart draws the same on a log scale (which it
    uses when the values span an order of magnitude or more: a bar from 0 has no length there)."""
    vals = pd.concat([df["measured"], df["bound"]])
    vals = vals[vals > 0]
    log_scale = bool(len(vals)) and vals.max() / vals.min() >= 10

    def x(field: str) -> alt.X:  # every layer shares the axis: the same arguments
        scale = alt.Scale() if log_scale else alt.Scale(zero=False)
        return charts.qx(field, "decode rate", "t/s", log=log_scale, scale=scale)

    base = alt.Chart(df).encode(y=alt.Y("run:N", title=None, sort=None))
    tip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("measured:Q", format=",.1f"),
        alt.Tooltip("bound:Q", format=",.1f"),
        alt.Tooltip("efficiency:Q", format=".0%"),
    ]
    gap = base.mark_rule(color=charts.QUIET).encode(
        x=x("measured"), x2="bound:Q", tooltip=tip
    )
    bound = base.mark_tick(thickness=3, size=14, color=charts.BOUND).encode(
        x=x("bound"), tooltip=tip
    )
    measured = base.mark_point(filled=True, size=70, color=charts.MEASURED).encode(
        x=x("measured"), tooltip=tip
    )
    return (gap + bound + measured).properties(
        width="container",
        height=max(80, 26 * len(df)),
        title="Measured decode rate (dot) against the bandwidth bound (tick)",
    )


def roofline_page(runs: list[RunRecord], hosts: list[HostRecord]) -> str:
    out = ["## Host memory bandwidth", ""]
    bws = roof.latest_bandwidth(hosts)
    if not bws:
        out.append(
            no_data(
                "No host probe yet",
                "Run `invoke host.probe` on each host to measure its bandwidth.",
            )
        )
    else:
        rows = []
        for hid, b in sorted(bws.items()):
            probe = next(h for h in hosts if h.id == b.probe_id)
            for what, entries in (
                ("read", probe.read_bandwidth),
                ("copy", probe.bandwidth),
            ):
                for e in entries:
                    s = e.summary
                    ci = (
                        f"{num(s.ci95_low, 2)} – {num(s.ci95_high, 2)}"
                        if s.ci95_low is not None
                        else "—"
                    )
                    rows.append(
                        [
                            code(hid),
                            code(b.probe_id),
                            cell(b.created),
                            cell(what),
                            num(e.threads, 0),
                            f"{num(s.mean, 2)} {MEASURED_BADGE}",
                            num(s.stddev, 2),
                            ci,
                            num(s.n, 0),
                            num(e.best, 2),
                            num(b.load_before, 2),
                        ]
                    )
        out += [
            table(
                [
                    "host",
                    "probe",
                    "measured",
                    "pass",
                    "threads",
                    "GB/s (mean)",
                    "± stddev",
                    "CI95",
                    "n",
                    "best",
                    "load avg (1 min)",
                ],
                rows,
                ["l", "l", "l", "l", "r", "r", "r", "r", "r", "r", "r"],
            ),
            "",
        ]
        out.append(
            "GB/s is 10^9 bytes per second. A read pass counts the bytes read; a copy counts bytes read plus "
            "bytes written. Decode only reads, so the bound below uses the read pass where a probe has one."
        )
        out.append("")
        brow = []
        for hid, b in sorted(bws.items()):
            ratio = (
                (b.read_best_gbs / b.copy_best_gbs)
                if b.read_best_gbs and b.copy_best_gbs
                else None
            )
            brow.append(
                [
                    code(hid),
                    cell(
                        "read-only pass"
                        if b.uses == "read"
                        else "copy (read + write: this probe has no read pass; efficiencies read high)"
                    ),
                    num(b.best_gbs, 2),
                    num(b.best_threads, 0),
                    num(b.read_best_gbs, 2),
                    num(b.copy_best_gbs, 2),
                    num(ratio, 2),
                    nbytes(b.llc_bytes) if b.llc_bytes else "—",
                ]
            )
        out += [
            table(
                [
                    "host",
                    "bound uses",
                    "bound GB/s (best)",
                    "at threads",
                    "read best",
                    "copy best",
                    "read ÷ copy",
                    "last-level cache",
                ],
                brow,
                ["l", "l", "r", "r", "r", "r", "r", "r"],
            ),
            "",
        ]
        out.append(
            "Each host's bound uses its best sample (STREAM's convention); a high load average at probe time "
            "means the figure is low."
        )
        out.append("")
    rows_data = roof.roofline_rows(runs, hosts)
    out += ["## Decode efficiency per run", ""]
    if not rows_data:
        out.append(
            no_data(
                "No decode measurements yet",
                "Run `invoke bench` (tg tests and chat requests).",
            )
        )
        return "\n".join(out)
    rows = []
    chart_rows = []
    for r in sorted(
        rows_data, key=lambda r: (r["host_id"], r["model"], r["test_name"])
    ):
        m = METRICS[r["metric"]]
        read = r.get("bytes")
        bytes_txt = (
            f"{nbytes(read['total'])} <small>({nbytes(read['weights'])} weights + "
            f"{nbytes(read['kv'])} KV)</small>"
            if read
            else "—"
        )
        rows.append(
            [
                link(r["id"], run_link(r["id"])),
                code(r["host_id"]),
                cell(r["model"]) + (" " + SYNTHETIC_BADGE if r["synthetic"] else ""),
                code(r["test_name"]),
                num(r["threads"], 0) if r["threads"] else "—",
                num(r["depth_mean"], 0),
                bytes_txt,
                num(r.get("bound"), 1),
                num(r.get("bound_single"), 1),
                f"{num(r['measured'], m.decimals)} {MEASURED_BADGE}",
                pct(r.get("efficiency"), 0, sign=False),
                pct(r.get("efficiency_copy"), 0, sign=False),
                pct(r.get("efficiency_single"), 0, sign=False),
                cell(r.get("bound_uses") or "—"),
                (_missed_badge("not memory-bound") + " " if r.get("fits_llc") else "")
                + (prose(r["note"]) if r["note"] else ""),
            ]
        )
        if r.get("bound") and r["measured"]:
            chart_rows.append(
                {
                    "run": f"{r['model']} · {r['test_name']} ({r['id'][:12]})",
                    "measured": r["measured"],
                    "bound": r["bound"],
                    "uses": f"bound ({r.get('bound_uses') or 'copy'} bandwidth)",
                    "efficiency": r.get("efficiency"),
                }
            )
    out += [
        table(
            [
                "run",
                "host",
                "model",
                "test",
                "threads",
                "mean depth",
                "bytes read per token",
                "bound t/s",
                "bound t/s (1 thread)",
                "measured t/s",
                "efficiency",
                "eff. vs copy bound",
                "eff. vs 1 thread",
                "bound uses",
                "note",
            ],
            rows,
            ["l", "l", "l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l", "l"],
        ),
        "",
    ]
    out.append(
        "Bytes per token: every weight in use once (a tied embedding in full, as the output matrix; for "
        "MoE only the used experts) plus the KV cache read at each generated token's depth (flash attention "
        "skips masked cells, so sliding-window layers read at most their window). Bound = bandwidth ÷ bytes "
        "per token "
        + PROJECTED_BADGE
        + "; efficiency = measured ÷ bound. A chat run's rate is 1000 / TPOT "
        "(sampling and detokenising included). A run whose bytes per token fit in its host's last-level "
        "cache is flagged not memory-bound: its efficiency against the DRAM bound means little."
    )
    if chart_rows:
        drawn = chart_rows
        if len(chart_rows) > ROOFLINE_CHART_MAX:
            # a fleet's runs: the chart draws a bounded few over the efficiency ranking (the most and
            # the least efficient included), best first; the table above lists every run
            ranked = sorted(
                chart_rows,
                key=lambda c: -(c["efficiency"] if c["efficiency"] is not None else -1),
            )
            drawn = evenly(ranked, ROOFLINE_CHART_MAX)
        chart = roofline_chart(pd.DataFrame(drawn))
        fig = charts.embed(
            chart,
            caption="Measured decode rate (dot) and the bandwidth bound (tick) per run, joined "
            "by a line: its length is the gap to the bound."
            + (
                f" {len(drawn):,} of {len(chart_rows):,} runs drawn, spread evenly over the runs "
                "ranked by efficiency (the most and the least efficient included); the table above "
                "lists every run."
                if len(drawn) < len(chart_rows)
                else ""
            ),
        )
        # a chart of many runs folds (its rows are the table's above)
        out += [
            "",
            fig
            if len(chart_rows) <= ROOFLINE_CHART_RUNS
            else fold(
                f"The chart: every run against its bound ({len(chart_rows):,} runs)",
                fig,
                "almanac-fold",
            ),
        ]
    return "\n".join(out)
