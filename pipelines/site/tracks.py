"""Optimization-page sections of the tracks that need more than a sweep table: LoRA adapters,
MoE expert reduction combined with speculation, and the draft models' Pareto front.

Built from ``pipelines.adapters`` and ``pipelines.speculation`` (artifacts alone). Every value
from an artifact goes through ``cell()``/``num()``/``code()`` or ``charts.embed()``.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.records.quality import QualityRecord
from pipelines import adapters as ad
from pipelines import optimization as opt
from pipelines import speculation as spec
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    SYNTHETIC_BADGE,
    cell,
    code,
    fold,
    link,
    nbytes,
    num,
    run_link,
    table,
)

MiB = 1024**2


def _ratio(c: dict[str, Any] | None) -> str:
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" ({num(c['ci95_low'], 2)}–{num(c['ci95_high'], 2)})"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}"


def _verdict(c: dict[str, Any] | None) -> str:
    return cell(c["verdict"]) if c else "—"


def _ci(lo: Any, hi: Any, d: int = 2) -> str:
    return "—" if lo is None or hi is None else f"{num(lo, d)} – {num(hi, d)}"


# -- LoRA adapters ----------------------------------------------------------------------------
ADAPTERS_INTRO = (
    "Distinct adapters attached to the context (`lora_adapters`; llama.cpp `--lora`), each adding "
    "`scale × alpha / r × B(A x)` to the projections it targets. The table answers seed 002's "
    '"adapter count vs latency" with measurements: the rate with 0, 1, 2, 4 and 8 adapters (prefill: '
    "a pp test, decode: a tg test; llama-bench method), each against no adapter; what attaching cost "
    "(load time, llama.cpp's LoRA buffers, the resident-set growth); and the cost per adapter, fitted. "
    "The adapters are synthetic (random weights): their speed and memory are real, their effect on the "
    "text is noise."
)


def adapter_table(series: list[ad.AdapterSeries]) -> str:
    """One row per model, stage and adapter count."""
    rows = []
    for s in series:
        for p in s.points:
            rec = p.record
            rows.append(
                [
                    cell(s.model) + (" " + SYNTHETIC_BADGE if s.synthetic else ""),
                    cell(s.stage),
                    code(s.test),
                    num(p.count, 0),
                    f"{num(p.mean, 1)} <small>(CI95 {_ci(p.ci95[0], p.ci95[1], 1)}, n={p.n})</small>",
                    "baseline" if p.count == 0 else _ratio(p.comparison),
                    "—" if p.count == 0 else _verdict(p.comparison),
                    "—" if p.load_time_s is None else num(p.load_time_s * 1000, 1),
                    nbytes(p.predicted_bytes) if p.count else "—",
                    nbytes(p.buffer_bytes)
                    if p.count and p.buffer_bytes is not None
                    else "—",
                    nbytes(p.rss_growth_bytes)
                    if p.rss_growth_bytes is not None
                    else "—",
                    nbytes(p.peak_rss_bytes),
                    link(rec.id, run_link(rec.id)),
                ]
            )
    return table(
        [
            "model",
            "stage",
            "test",
            "adapters",
            "rate (t/s)",
            "vs no adapter (CI95)",
            "verdict",
            "adapter load (ms)",
            "predicted (formula)",
            "llama.cpp LoRA buffers",
            "RSS growth on attach",
            "peak RSS",
            "source",
        ],
        rows,
        ["l", "l", "l", "r", "r", "r", "l", "r", "r", "r", "r", "r", "l"],
    )


def cost_table(series: list[ad.AdapterSeries]) -> str:
    rows = []
    for s in series:
        f = s.fit
        if f is None:
            continue
        lo, hi = f["slope_ci95"]
        rlo, rhi = f["relative_ci95"]
        rows.append(
            [
                cell(s.model) + (" " + SYNTHETIC_BADGE if s.synthetic else ""),
                cell(s.stage),
                code(s.test),
                num(f["intercept"], 3),
                (
                    f"{num(f['slope'] * 1000, 1)} <small>(CI95 "
                    f"{_ci(lo * 1000 if lo is not None else None, hi * 1000 if hi is not None else None, 1)})</small>"
                ),
                (
                    f"{num(100 * f['relative'], 2)}% <small>(CI95 "
                    f"{_ci(100 * rlo if rlo is not None else None, 100 * rhi if rhi is not None else None, 2)})</small>"
                )
                if f.get("relative") is not None
                else "—",
                num(f["n"], 0),
            ]
        )
    if not rows:
        return ""
    return table(
        [
            "model",
            "stage",
            "test",
            "ms per token, no adapter (fit)",
            "µs per token per adapter",
            "per adapter, share of the time without",
            "runs",
        ],
        rows,
        ["l", "l", "l", "r", "r", "r", "r"],
    )


def adapter_chart(series: list[ad.AdapterSeries]) -> alt.TopLevelMixin | None:
    rows = []
    for s in series:
        base = s.baseline
        for p in s.points:
            if p.mean is None or base is None or not base.mean:
                continue
            rel = p.comparison or {}
            rows.append(
                {
                    "adapters": p.count,
                    "ratio": rel.get("ratio", 1.0) if p.count else 1.0,
                    "lo": rel.get("ci95_low")
                    if p.count and rel.get("ci95_low") is not None
                    else (rel.get("ratio") or 1.0),
                    "hi": rel.get("ci95_high")
                    if p.count and rel.get("ci95_high") is not None
                    else (rel.get("ratio") or 1.0),
                    "series": f"{s.model} · {s.stage} ({s.test})",
                    "id": p.record.id,
                }
            )
    if not rows:
        return None
    df = pd.DataFrame(rows)
    base = alt.Chart(df).encode(
        x=charts.qx(
            "adapters",
            "adapters attached",
            "count",
            axis=alt.Axis(values=sorted(set(df["adapters"]))),
        ),
        color=alt.Color(
            "series:N", title=None, legend=alt.Legend(orient="bottom", columns=1)
        ),
    )
    y = ("rate vs no adapter", "×")
    line = base.mark_line(point=True).encode(
        y=charts.qy("ratio", *y, scale=alt.Scale(zero=False)),
        tooltip=[
            alt.Tooltip("series:N"),
            alt.Tooltip("adapters:Q"),
            alt.Tooltip("ratio:Q", format=".3f"),
            alt.Tooltip("id:N"),
        ],
    )
    err = base.mark_errorbar().encode(y=charts.qy("lo", *y), y2=alt.Y2("hi:Q"))
    one = (
        alt.Chart(pd.DataFrame([{"y": 1.0}]))
        .mark_rule(strokeDash=[5, 4], color=charts.MUTED)
        .encode(y=charts.qy("y", *y))
    )
    return (line + err + one).properties(width="container", height=260)


def adapter_findings(series: list[ad.AdapterSeries]) -> list[str]:
    """One sentence per model and stage, from the fit and the largest count measured."""
    out = []
    for s in series:
        f = s.fit
        top = s.points[-1] if s.points else None
        if f is None or top is None or not top.count or not top.comparison:
            continue
        lo, hi = f["relative_ci95"]
        c = top.comparison
        ci = f" (CI95 {num(100 * lo, 1)}–{num(100 * hi, 1)}%)" if lo is not None else ""
        rci = (
            f" (CI95 {num(c['ci95_low'], 2)}–{num(c['ci95_high'], 2)})"
            if c.get("ci95_low") is not None
            else ""
        )
        out.append(
            f"{cell(s.model)}, {cell(s.stage)}: each adapter adds {num(100 * f['relative'], 1)}% to a token's "
            f"time{ci}; with {top.count} adapters the rate is {num(c['ratio'], 2)}× the rate without{rci}."
        )
    return out


def adapters_section(docs: list[Any]) -> list[str]:
    series = ad.adapter_series(docs)
    if not series:
        return []
    out = [f"## {cell(opt.TRACK_TITLES['adapters'])}", "", ADAPTERS_INTRO, ""]
    findings = adapter_findings(series)
    if findings:
        out += ["\n".join(f"- {f}" for f in findings), ""]
    chart = adapter_chart(series)
    if chart is not None:
        out += [
            charts.embed(
                chart,
                caption="Rate with N adapters ÷ rate with none, CI95 bars; dashed: no change.",
            ),
            "",
        ]
    costs = cost_table(series)
    if costs:
        out += [
            "### Cost per adapter",
            "",
            "Time per token (1000 ÷ the run's mean rate) fitted against the number of adapters by least squares, "
            "one point per run (the run is the unit of comparison), so the CI95 of the slope has n − 2 degrees "
            "of freedom. The slope is what each adapter adds to every token; divided by the intercept, the share "
            "of the time without adapters.",
            "",
            costs,
            "",
        ]
    out += [
        fold(
            "Adapter table: every point, its rate, ratio, load time and memory",
            adapter_table(series),
        ),
        "",
    ]
    failed = [(s, r) for s in series for r in s.failed]
    seen = set()
    rows = []
    for _s, r in failed:
        if r.id in seen:
            continue
        seen.add(r.id)
        rows.append(
            [
                cell(r.model_name),
                code(r.test_name),
                cell(", ".join(r.lora_requested)),
                f"**{cell(r.error_kind)}**",
                cell(r.error_message),
                link(r.id, run_link(r.id)),
            ]
        )
    mism = [r for r in _mismatch_runs(docs) if r.id not in seen]
    rows += [
        [
            cell(r.model_name),
            code(r.test_name),
            cell(", ".join(r.lora_requested)),
            f"**{cell(r.error_kind)}**",
            cell(r.error_message),
            link(r.id, run_link(r.id)),
        ]
        for r in mism
    ]
    if rows:
        out += [
            "### Adapters that do not fit their model",
            "",
            "An adapter is checked against the model before llama.cpp loads it (architecture, every adapted "
            "tensor, its shape); one that does not fit ends its point as a failed artifact whose message names both.",
            "",
            table(["model", "test", "adapters", "what", "reason", "source"], rows),
            "",
        ]
    return out


def _mismatch_runs(docs: list[Any]) -> list[Any]:
    from pipelines.runs import latest_per_key

    return [
        r
        for r in (d for d in latest_per_key(docs))
        if not r.ok and r.lora_requested and r.error_kind == "incompatible"
    ]


def adapter_memory_section(docs: list[Any]) -> str:
    """For the Memory planner page: adapter bytes predicted by the formula against llama.cpp's buffers."""
    rows_in = ad.memory_rows(ad.adapter_series(docs))
    if not rows_in:
        return ""
    rows = []
    for r in rows_in:
        a0 = r["adapters"][0] if r["adapters"] else {}
        what = f"r = {a0.get('rank')}, {', '.join(a0.get('targets') or [])}, {', '.join(a0.get('tensor_types') or [])}"
        load = r["load"]
        rss = r["rss"]
        rows.append(
            [
                cell(r["model"]) + (" " + SYNTHETIC_BADGE if r["synthetic"] else ""),
                code(r["host_id"]),
                num(r["count"], 0),
                cell(what),
                nbytes(r["predicted"]),
                nbytes(r["buffer"]),
                "—" if r["error"] is None else f"{num(100 * r['error'], 2)}%",
                nbytes(r["file_bytes"]),
                "—"
                if not rss
                else f"{nbytes(int(rss['mean']))} <small>(n={rss['n']})</small>",
                "—"
                if not load
                else f"{num(load['mean'] * 1000, 1)} <small>(n={load['n']})</small>",
                ", ".join(link(i[:12], run_link(i)) for i in r["ids"]),
            ]
        )
    return "\n".join(
        [
            "## LoRA adapters: predicted against measured",
            "",
            "Attached adapters measured by `invoke bench --matrix lora`: the planner's prediction (seed 002's formula "
            "`r × (in + out) × layers × bytes` per module, with the model's real shapes "
            "and the adapters' storage type) "
            "beside llama.cpp's own LoRA buffer sizes (its load log), the adapter "
            "files' tensor bytes, and the resident "
            "set's growth while attaching them (the process, measured; llama.cpp reads the tensors into buffers of its "
            "own, so the growth follows the buffers). Load time: every adapter's `llama_adapter_lora_init` plus "
            "attaching them all. Each count was measured in two runs (prefill and decode): n is the runs.",
            "",
            fold(
                "Every adapter count: predicted, llama.cpp's buffers, error, file tensors, RSS growth, load time",
                table(
                    [
                        "model",
                        "host",
                        "adapters",
                        "each adapter",
                        "predicted",
                        "llama.cpp buffers",
                        "prediction error",
                        "file tensors",
                        "RSS growth (mean)",
                        "load time, ms (mean)",
                        "sources",
                    ],
                    rows,
                    ["l", "l", "r", "l", "r", "r", "r", "r", "r", "r", "l"],
                ),
            ),
            "",
        ]
    )


# -- MoE x speculation ------------------------------------------------------------------------------
MOE_SPEC_INTRO = (
    'Seed 001\'s "MoE + spec + lookup": fewer experts per token combined with speculative decoding. Every point '
    "is compared with one baseline (the model's own expert count, plain decoding). The second ratio is what "
    "speculation adds on top of expert reduction: the speculative point against plain decoding at the same expert "
    "count, whose greedy text it must reproduce token for token (lossless check). Expert reduction changes the "
    "text itself; its divergence from the baseline is shown beside it."
)


def _mode_cell(c: spec.MoeSpecCell | None) -> str:
    if c is None:
        return "not measured"
    p = c.point
    parts = [
        f"{num(p.mean, 1)} t/s",
        "baseline"
        if p.is_baseline
        else f"{_ratio(c.vs_baseline)} {_verdict(c.vs_baseline)}",
    ]
    if c.mode != "none":
        parts.append(
            f"vs plain at {num(c.experts, 0)}: {_ratio(c.vs_plain)} {_verdict(c.vs_plain)}"
        )
        if p.acceptance is not None:
            parts.append(f"acceptance {num(p.acceptance, 1)}%")
        ll = c.lossless_vs_plain
        if ll is not None:
            parts.append(
                figures.lossless(
                    p.id,
                    ll["identical"],
                    "lossless"
                    if ll["identical"]
                    else f"**not lossless** (token {num(ll['first_diff'], 0)})",
                )
            )
    elif not p.is_baseline and p.lossless is not None:
        parts.append(
            "text = baseline's"
            if p.lossless["identical"]
            else (
                f"text diverges at token {num(p.lossless['first_diff'], 0)} "
                f"({num(100 * p.lossless['agreement'], 0)}% agree)"
            )
        )
    return "<br>".join(parts) + f"<br><small>{link(p.id[:12], run_link(p.id))}</small>"


def moe_spec_table(cells: list[spec.MoeSpecCell]) -> str:
    experts = sorted({c.experts for c in cells if c.experts is not None}, reverse=True)
    by = {(c.experts, c.mode): c for c in cells}
    modes = [m for m in spec.MODES if any(c.mode == m for c in cells)]
    rows = [[num(n, 0)] + [_mode_cell(by.get((n, m))) for m in modes] for n in experts]
    return table(
        ["experts per token"] + [cell(spec.MODE_TITLES[m]) for m in modes],
        rows,
        ["r"] + ["l"] * len(modes),
    )


def moe_spec_chart(cells: list[spec.MoeSpecCell]) -> alt.TopLevelMixin | None:
    rows = [
        {
            "experts": c.experts,
            "mode": spec.MODE_TITLES[c.mode],
            "ratio": c.vs_baseline["ratio"] if c.vs_baseline else 1.0,
            "lo": (c.vs_baseline or {}).get("ci95_low")
            or (c.vs_baseline or {}).get("ratio")
            or 1.0,
            "hi": (c.vs_baseline or {}).get("ci95_high")
            or (c.vs_baseline or {}).get("ratio")
            or 1.0,
            "id": c.point.id,
        }
        for c in cells
        if c.experts is not None and (c.vs_baseline or c.point.is_baseline)
    ]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    base = alt.Chart(df).encode(
        x=charts.qx(
            "experts",
            "experts per token",
            "count",
            axis=alt.Axis(values=sorted(set(df["experts"]))),
        ),
        color=alt.Color("mode:N", title=None),
    )
    y = ("generation rate vs baseline", "×")
    line = base.mark_line(point=True).encode(
        y=charts.qy("ratio", *y, scale=alt.Scale(zero=False)),
        tooltip=[
            alt.Tooltip("mode:N"),
            alt.Tooltip("experts:Q"),
            alt.Tooltip("ratio:Q", format=".2f"),
            alt.Tooltip("id:N"),
        ],
    )
    err = base.mark_errorbar().encode(y=charts.qy("lo", *y), y2=alt.Y2("hi:Q"))
    one = (
        alt.Chart(pd.DataFrame([{"y": 1.0}]))
        .mark_rule(strokeDash=[5, 4], color=charts.MUTED)
        .encode(y=charts.qy("y", *y))
    )
    return (line + err + one).properties(width="container", height=260)


def moe_spec_section(sw: opt.Sweep) -> list[str]:
    out = [
        f"### {cell(sw.name)} · {cell(sw.matrix)} on {code(sw.host_id)}",
        "",
        MOE_SPEC_INTRO,
        "",
    ]
    if sw.synthetic:
        out += [
            SYNTHETIC_BADGE
            + " Synthetic weights: the rates are real, the text is noise (a random model's "
            "greedy text often loops, which is what prompt lookup feeds on).",
            "",
        ]
    for test, cells in spec.moe_speculation(sw).items():
        out += [f"#### {code(test)}", ""]
        findings = spec.moe_speculation_findings(cells)
        if findings:
            out += ["\n".join(f"- {cell(f)}" for f in findings), ""]
        chart = moe_spec_chart(cells)
        if chart is not None:
            out += [
                charts.embed(
                    chart,
                    caption="Generation rate ÷ the baseline's (all experts, plain decoding), CI95 bars.",
                ),
                "",
            ]
        out += [moe_spec_table(cells), ""]
    return out


# -- draft Pareto ------------------------------------------------------------------------------------
def pareto_chart(rows: list[spec.DraftRow], score: str) -> alt.TopLevelMixin | None:
    data = []
    for r in rows:
        if not r.speedup or r.speedup.get("ratio") is None or not r.quality:
            continue
        s, q = r.speedup, r.quality
        data.append(
            {
                "draft": r.draft,
                "speedup": s["ratio"],
                "s_lo": s.get("ci95_low") or s["ratio"],
                "s_hi": s.get("ci95_high") or s["ratio"],
                "quality": 100 * q["pass_rate"],
                "q_lo": 100 * q["ci95_low"],
                "q_hi": 100 * q["ci95_high"],
                "acceptance": r.acceptance,
                "front": "Pareto front" if r.front else "dominated",
                "id": r.point.id,
            }
        )
    if not data:
        return None
    df = pd.DataFrame(data)
    base = alt.Chart(df)
    x, y = ("speed-up over plain decoding", "×"), (f"draft quality: {score}", "%")
    pts = base.mark_point(filled=True).encode(
        x=charts.qx("speedup", *x, scale=alt.Scale(zero=False)),
        y=charts.qy("quality", *y, scale=alt.Scale(zero=False)),
        size=alt.Size(
            "acceptance:Q", title="acceptance (%)", scale=alt.Scale(range=[60, 400])
        ),
        color=alt.Color(
            "front:N",
            title=None,
            scale=alt.Scale(
                domain=["Pareto front", "dominated"], range=[charts.GOOD, charts.QUIET]
            ),
        ),
        tooltip=[
            alt.Tooltip("draft:N"),
            alt.Tooltip("speedup:Q", format=".2f"),
            alt.Tooltip("quality:Q", format=".1f"),
            alt.Tooltip("acceptance:Q", format=".1f"),
            alt.Tooltip("front:N"),
            alt.Tooltip("id:N"),
        ],
    )
    ex = base.mark_rule(color=charts.QUIET).encode(
        x=charts.qx("s_lo", *x), x2="s_hi:Q", y=charts.qy("quality", *y)
    )
    ey = base.mark_rule(color=charts.QUIET).encode(
        x=charts.qx("speedup", *x), y=charts.qy("q_lo", *y), y2="q_hi:Q"
    )
    labels = base.mark_text(align="left", dx=8, dy=-8).encode(
        x=charts.qx("speedup", *x), y=charts.qy("quality", *y), text="draft:N"
    )
    front = df[df["front"] == "Pareto front"].sort_values("speedup")
    layers = [ex, ey, pts, labels]
    if len(front) > 1:
        layers.insert(
            0,
            alt.Chart(front)
            .mark_line(color=charts.GOOD, strokeDash=[4, 3])
            .encode(x=charts.qx("speedup", *x), y=charts.qy("quality", *y)),
        )
    return alt.layer(*layers).properties(width="container", height=280)


def draft_pareto_section(sw: opt.Sweep, quality_docs: list[QualityRecord]) -> list[str]:
    res = spec.draft_pareto(sw, quality_docs)
    score = res["score"]
    out = ["#### Draft quality against speed (Pareto front)", ""]
    out.append(
        "Each draft's acceptance (drafted tokens the target kept), the target's speed-up over plain decoding "
        "with it (CI95), and the draft's own quality score "
        + (
            f"({code(score)}, the suite and prompt style measured for every draft, with its Wilson CI95)"
            if score
            else "(no suite and prompt style is measured for every draft yet: `invoke quality --matrix quality-ladder`)"
        )
        + ". On the front: no other draft is at least as fast and at least as good, and better in one (by the "
        "point estimates: where two intervals overlap, their order is within noise)."
    )
    out.append("")
    for test, rows in res["tests"].items():
        if not rows:
            continue
        out += [f"{code(test)}:", ""]
        ups = [
            r.speedup
            for r in rows
            if r.speedup and r.speedup.get("ci95_high") is not None
        ]
        if ups and len(ups) == len(rows) and all(u["ci95_high"] < 1 for u in ups):
            out += [
                "No draft of this sweep makes the target faster here: every speed-up's CI95 lies below 1.",
                "",
            ]
        elif ups and any(u["ci95_low"] > 1 for u in ups):
            out += [
                "Faster than plain decoding: "
                + ", ".join(
                    cell(r.draft)
                    for r in rows
                    if r.speedup and (r.speedup.get("ci95_low") or 0) > 1
                )
                + ".",
                "",
            ]
        chart = pareto_chart(rows, score or "score") if score else None
        if chart is not None:
            out += [
                charts.embed(
                    chart,
                    caption="Speed-up (CI95) against the draft's quality score (Wilson CI95); "
                    "point size: acceptance; green: the Pareto front.",
                ),
                "",
            ]
        trs = []
        for r in rows:
            q = r.quality
            trs.append(
                [
                    cell(r.draft),
                    num(r.acceptance, 1),
                    _ratio(r.speedup),
                    _verdict(r.speedup),
                    (
                        f"{num(100 * q['pass_rate'], 1)}% ({q['passed']}/{q['n']}) <small>CI95 "
                        f"{num(100 * q['ci95_low'], 1)}–{num(100 * q['ci95_high'], 1)}%</small>"
                    )
                    if q
                    else "not measured",
                    "**yes**" if r.front else "no",
                    link(r.point.id[:12], run_link(r.point.id)),
                ]
            )
        out += [
            table(
                [
                    "draft",
                    "acceptance (%)",
                    "speed-up (CI95)",
                    "verdict",
                    "draft quality",
                    "Pareto front",
                    "source",
                ],
                trs,
                ["l", "r", "r", "l", "r", "l", "l"],
            ),
            "",
        ]
    return out
