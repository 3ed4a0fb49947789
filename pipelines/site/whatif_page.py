"""The What-if page: a usage mix of data/whatif.yaml timed from measured stage timings per
host (pipelines.whatif computes; this renders), with the configuration each entry reads.
"""

from __future__ import annotations

import json

import altair as alt
import pandas as pd

from core.errors import UserError
from core.records.run import RunRecord
from pipelines import whatif as wi
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    MEASURED_BADGE,
    PROJECTED_BADGE,
    admonition,
    cell,
    code,
    link,
    no_data,
    num,
    pct,
    prose,
    run_link,
    table,
    times,
)


def _entries_table(res: wi.MixResult) -> str:
    """Which measured configuration each entry of a mix reads on the host (wi.ENTRY_RULE): its settings, runs
    and matrices, and its model load time (the configuration's figure)."""
    rows = []
    seen: set[str] = set()
    for u in res.entries:
        g = u["group"]
        if g.key in seen:
            continue
        seen.add(g.key)
        req = g.requested
        shown = {
            k: req.get(k)
            for k in (
                "type_k",
                "type_v",
                "speculative",
                "flash_attn",
                "n_threads",
                "draft_model",
            )
            if k in req
        }
        matrices = ", ".join(sorted({r.matrix_name for r in g.runs}))
        load = figures.cell_html(u["load"]) if u["load"] is not None else "not measured"
        if u["load"] is not None and u["load"].group != g.key:
            load += "<br><small>the host's configuration of the same model file and backend</small>"
        rows.append(
            [
                cell(g.model),
                code(g.test),
                cell(g.backend),
                code(json.dumps(shown, sort_keys=True)),
                cell(matrices),
                num(len(u["runs"]), 0),
                load,
            ]
        )
    return table(
        [
            "model",
            "test",
            "backend",
            "settings",
            "matrix",
            "runs with stage timings",
            "model load (s)",
        ],
        rows,
        ["l", "l", "l", "l", "l", "r", "r"],
    )


def whatif_page(runs: list[RunRecord]) -> str:
    try:
        f = wi.load_whatif()
    except UserError as exc:
        return no_data("Workload mixes missing or invalid", cell(str(exc)))
    out = [f"**Which measurements a mix reads.** {cell(wi.ENTRY_RULE)}", ""]
    chart_rows = []
    for mix in f.mixes:
        hosts = wi.mix_hosts(mix, runs)
        out += [f"## Mix {cell(mix.name)}", "", cell(mix.description), ""]
        out.append(
            table(
                [
                    "model",
                    "test",
                    "matrix (preferred)",
                    "settings",
                    "share of requests",
                    "model loads per request",
                ],
                [
                    [
                        cell(e.model),
                        code(e.test),
                        cell(e.matrix or "any"),
                        code(json.dumps(e.settings, sort_keys=True)),
                        num(e.weight / sum(x.weight for x in mix.entries) * 100, 0)
                        + "%",
                        num(e.loads_per_request, 2),
                    ]
                    for e in mix.entries
                ],
                ["l", "l", "l", "l", "r", "r"],
            )
        )
        out.append("")
        if not hosts:
            out += [
                no_data(
                    "No measurement for this mix",
                    "Run `invoke bench` to measure its tests.",
                ),
                "",
            ]
            continue
        for hid in hosts:
            res = wi.evaluate_mix(mix, runs, hid)
            out += [f"### On {code(hid)}", ""]
            if res.missing:
                out += [
                    admonition(
                        "warning",
                        "Incomplete",
                        "<br>".join(prose(m) for m in res.missing),
                    ),
                    "",
                ]
            if not res.per_request_ms:
                continue
            srcs = ", ".join(
                dict.fromkeys(
                    link(r.id, run_link(r.id))
                    for u in res.entries
                    for r in reversed(u["runs"])
                )
            )
            lo, hi = res.total_ci95()
            ci = (
                f" (CI95 {num(lo, 1)} – {num(hi, 1)} ms, propagated from each entry's CI95)"
                if lo is not None
                else " (no CI95: an entry has a single sample or pays a model load, measured once)"
            )
            out.append(
                f"Time per request: **{num(res.total_ms, 1)} ms** {MEASURED_BADGE}{ci} (weighted over the entries), "
                f"from {srcs}."
            )
            out.append("")
            out.append(_entries_table(res))
            out.append("")
            red = f.reductions
            headers = (
                ["stage", "ms per request", "share"]
                + [f"stage time −{num(r * 100, 0)}%" for r in red]
                + ["stage removed"]
            )
            rows = []
            for g in res.grid(red):
                label = wi.STAGE_LABELS.get(g["stage"], g["stage"])
                rows.append(
                    [cell(label), num(g["ms"], 2), num(g["share"] * 100, 1) + "%"]
                    + [
                        (
                            f"{times(g['gains'][r]['speedup'], 3)} "
                            f"<small>(−{num(g['gains'][r]['saved'] * 100, 1)}% time)</small>"
                        )
                        for r in red
                    ]
                    + [times(g["limit"]["speedup"], 3)]
                )
                chart_rows.append(
                    {
                        "mix": f"{mix.name} ({hid})",
                        "stage": label,
                        "share": g["share"] * 100,
                    }
                )
            out += [table(headers, rows, ["l", "r", "r"] + ["r"] * (len(red) + 1)), ""]
            top = res.grid(red)[0]
            r_mid = red[len(red) // 2]
            g = top["gains"][r_mid]
            out.append(
                f"Reading: **if {cell(wi.STAGE_LABELS.get(top['stage'], top['stage']))} took {num(r_mid * 100, 0)}% "
                f"less time (the stage {times(1 / (1 - r_mid)) if r_mid < 1 else 'infinitely'} "
                f"as fast), this mix would gain {pct(g['speedup'] - 1)} "
                f"in throughput** (time per request −{num(g['saved'] * 100, 1)}%) {PROJECTED_BADGE}. Removing that "
                "stage entirely would gain at most "
                f"{pct(top['limit']['speedup'] - 1) if top['share'] < 1 else 'everything'} "
                "(Amdahl's limit)."
            )
            out.append("")
    if chart_rows:
        df = pd.DataFrame(chart_rows)
        chart = (
            alt.Chart(df)
            .mark_bar()
            .encode(
                y=alt.Y("mix:N", title=None),
                x=charts.qx(
                    "share", "share of time per request", "%", stack="normalize"
                ),
                color=alt.Color("stage:N", title="stage"),
                tooltip=[
                    alt.Tooltip("mix:N"),
                    alt.Tooltip("stage:N"),
                    alt.Tooltip("share:Q", format=".1f"),
                ],
            )
            .properties(
                width="container",
                height=max(80, 40 * df["mix"].nunique()),
                title="Where each mix spends its time",
            )
        )
        out += [
            charts.embed(
                chart, caption="Stage shares per mix, from measured stage timings."
            ),
            "",
        ]
    from pipelines.site.batching import batching_section
    from pipelines.site.overhead import overhead_section
    from pipelines.site.retries import errors_section
    from pipelines.site.switching import switching_section

    out.append(errors_section(f, runs))
    out += overhead_section(runs)
    out += batching_section(runs)
    out += switching_section(runs)
    return "\n".join(out)
