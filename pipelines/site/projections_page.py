"""The Projections page: every role of data/usage_mix.yaml projected per host with
data/optimizations.yaml, each projection checked against what was measured, and the go/no-go
gates beneath.

Every value from an artifact or a YAML file goes through ``cell``/``code``/``num``; every figure
is labelled measured, PROJECTED or VERIFIED.
"""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import pandas as pd

from core import metrics
from core.errors import UserError
from core.metrics import METRICS
from core.records.projection import ProjectionRecord
from core.records.run import RunRecord
from pipelines import projections as proj
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    MEASURED_BADGE,
    MISSED_BADGE,
    PROJECTED_BADGE,
    SYNTHETIC_BADGE,
    VERIFIED_BADGE,
    cell,
    code,
    fold,
    link,
    no_data,
    num,
    pct,
    run_link,
    table,
    times,
    verdict_badge,
)


def _metric_value(metric: str, v: float | None) -> str:
    m = METRICS[metric]
    return f"{num(v, m.decimals)} {cell(m.unit)}" if v is not None else "—"


def _effect_text(o: proj.Optimization) -> str:
    e = o.effect
    m = METRICS[e.metric]
    stage = "every stage" if e.stage == "all" else f"{e.stage}"
    if e.factor is not None:
        amount = times(e.factor)
    elif e.range is not None:
        amount = f"{times(e.range[0])} – {times(e.range[1])}"
    else:
        amount = "derived per role from bytes read per token (roofline)"
    return f"{amount} on {cell(stage)} (quoted on {cell(m.label)})"


def _source_text(o: proj.Optimization) -> str:
    s = o.source
    ref = (
        link(s.ref, s.url)
        if s.url and s.url.startswith(("https://", "http://"))
        else cell(s.ref)
    )
    return f"{cell(s.kind)}: {ref}" + (
        f"<br><small>{cell(s.note)}</small>" if s.note else ""
    )


def _rules_text(r: proj.Applicability) -> str:
    parts = []
    if r.min_model_bytes is not None:
        parts.append(f"model ≥ {num(r.min_model_bytes / 1e9, 0)} GB")
    if r.max_model_bytes is not None:
        parts.append(f"model ≤ {num(r.max_model_bytes / 1e9, 0)} GB")
    if r.architectures:
        parts.append("architecture in " + ", ".join(cell(a) for a in r.architectures))
    if r.exclude_architectures:
        parts.append("not " + ", ".join(cell(a) for a in r.exclude_architectures))
    if r.recurrent is False:
        parts.append("not recurrent/SSM")
    if r.recurrent is True:
        parts.append("recurrent/SSM only")
    if r.moe is not None:
        parts.append("MoE only" if r.moe else "dense only")
    if r.sliding_window is not None:
        parts.append(
            "sliding-window models only" if r.sliding_window else "no sliding window"
        )
    if r.needs_draft_same_vocab:
        parts.append("needs a draft of the same vocabulary")
    if r.device:
        parts.append(f"{r.device.upper()} only")
    if r.test_kinds:
        parts.append("workloads: " + ", ".join(cell(k) for k in r.test_kinds))
    if r.min_depth is not None:
        parts.append(f"context ≥ {num(r.min_depth, 0)}")
    return "; ".join(parts) or "always"


def _speedup_text(m: proj.MeasuredSpeedup) -> str:
    """A measured speed-up: the ratio with its CI95 (marked as a verdict of the two figures it compares), the
    two figures linked to their newest runs, and which measured point it is."""
    c = m.comparison
    ratio = figures.ratio_text(m.ratio, m.ci95_low, m.ci95_high)
    if m.ci95_low is None:
        ratio += f" (no CI95: {c.note or 'a side has no interval'})"
    unit = m.candidate.metric.unit
    points = (
        f"; the most favourable of {m.points} measured points" if m.points > 1 else ""
    )
    return (
        f"measured speed-up {figures.verdict(cell(ratio), m.baseline, m.candidate, c.verdict)}: "
        f"{figures.value(m.candidate)} ÷ {figures.value(m.baseline)} {cell(unit)} "
        f"({cell(m.candidate.metric.label)}) on {cell(m.describe())}{points}"
    )


def _projection_cell(p: proj.Projection | None, metric: str, why: str = "") -> str:
    if p is None:
        return f"— <small>{cell(why)}</small>" if why else "—"
    m = METRICS[metric]
    head = f"{num(p.mid, m.decimals)}"
    rng = (
        f" <small>({num(p.low, m.decimals)} – {num(p.high, m.decimals)})</small>"
        if p.high - p.low > 1e-9
        else ""
    )
    if p.no_effect:
        return (
            f"{head} {PROJECTED_BADGE}<br><small>no effect: acts on a stage outside "
            f"{cell(METRICS[metric].label)}</small>"
        )
    if p.measured_speedup is not None and p.verification:
        ms = p.measured_speedup
        lo_sp, _, hi_sp = p.speedup
        _, where = proj.ratio_verdict(*p.speedup, ms.ratio, ms.ci95_low, ms.ci95_high)
        said = {
            "inside": "inside the projected speed-up",
            "below": "below the projected speed-up",
            "above": "above the projected speed-up",
            "off": "overlaps the projected speed-up, but the projection is "
            f"{pct(p.verification['error'])} off",
        }[where]
        return (
            f"{head}{rng} {verdict_badge(p.status)}<br><small>{_speedup_text(ms)}; {said} "
            f"{times(lo_sp)}–{times(hi_sp)}</small>"
        )
    if p.verification:
        v = p.verification
        shown = (
            figures.value(p.measured)
            if p.measured is not None
            else link(num(v["value"], m.decimals), run_link(v["run_id"]))
        )
        runs = f" ({num(v['runs'], 0)} runs)" if (v.get("runs") or 0) > 1 else ""
        return (
            f"{head}{rng} {verdict_badge(p.status)}<br><small>measured "
            f"{shown}{runs}, error {pct(v['error'])}; "
            f"{_agreement(p.high - p.low > 1e-9, v)}</small>"
        )
    note = (
        ""
        if p.target_settings is not None
        else "<br><small>not runnable with this backend</small>"
    )
    return f"{head}{rng} {PROJECTED_BADGE}{note}"


def _coverage(w: dict[str, Any], labels: dict[str, str]) -> str:
    """Which roles a weighted average covers: all of them, or "partial" and which."""
    roles, every = w["roles"], w["all_roles"]
    named = ", ".join(cell(labels.get(r, r)) for r in roles)
    if not roles:
        return "no role has a baseline"
    if not w["partial"]:
        return f"all {len(every)} roles ({named})"
    left = ", ".join(cell(labels.get(r, r)) for r in every if r not in roles)
    return f"**partial**: {named} only ({len(roles)} of {len(every)} roles; no baseline for {left})"


def _ci_text(ci: tuple[float | None, float | None] | None) -> str:
    if not ci or ci[0] is None:
        return "<small>(no CI95: an input has none)</small>"
    return f"<small>(CI95 {num(ci[0], 2)} – {num(ci[1], 2)})</small>"


def _agreement(is_range: bool, v: dict[str, Any]) -> str:
    parts = []
    parts.append(
        "inside the projected range"
        if v["inside_range"]
        else "outside the projected range"
    )
    if v.get("within_ci95") is not None:
        parts.append(
            "projection within the measurement's CI95"
            if v["within_ci95"]
            else "projection outside the measurement's CI95"
        )
    return ", ".join(parts) or "no CI95 to compare with"


def _configuration(rr: proj.RoleResult) -> str:
    """Which configuration is the role's baseline: its backend, runs and matrices, and what else was measured."""
    b = rr.base
    assert b is not None
    g = b.group
    matrices = sorted({r.matrix_name for r in g.runs})
    parts = [
        f"{cell(g.backend)} · {num(len(g.runs), 0)} run{'s' if len(g.runs) != 1 else ''} "
        f"(matrix {', '.join(cell(x) for x in matrices)})"
    ]
    if g.variant:
        parts.append(f"build {cell(g.variant)}")
    if b.candidates > 1:
        parts.append(
            f"the representative of {b.candidates} configurations of this work on the host (the best figure, "
            "as the Leaderboard picks)"
        )
    if b.verifications:
        parts.append(
            f"{len(b.verifications)} left out: they realise an optimization (verifications)"
        )
    runs = ", ".join(link(r.id, run_link(r.id)) for r in reversed(g.runs[-3:]))
    return "<br>".join(parts) + f"<br><small>{runs}</small>"


def projections_host(
    ps: proj.ProjectionSet, history: list[dict[str, Any]], label: str | None = None
) -> str:
    metric0 = ps.mix.roles[0].metric
    labels = {r.role.role: r.role.label or r.role.role for r in ps.roles}
    out = [
        f"## {cell(label)} · {code(ps.host_id)}"
        if label and label != ps.host_id
        else f"## Host {code(ps.host_id)}",
        "",
    ]
    out.append(
        f"**Last updated:** {cell(ps.last_updated())} (the newest artifact this projection uses) · "
        f"**usage mix:** {cell(ps.mix.name)} ({code('data/usage_mix.yaml')}) · "
        f"**catalogue:** {code('data/optimizations.yaml')}"
    )
    out.append("")
    # -- current ---------------------------------------------------------------------------------
    out += [
        "### Current performance",
        "",
        "Each role's baseline is its work's figure on this host from the fact layer: the run as the unit, the "
        "Leaderboard's number for the same configuration (value, CI95, repetitions and what the interval rests "
        "on). The stage split is the share of the metric's time in each stage, from its newest run.",
        "",
    ]
    rows = []
    tw = sum(r.role.weight for r in ps.roles)
    for rr in ps.roles:
        r = rr.role
        label = cell(r.label or r.role)
        head = [
            label,
            cell(r.model),
            code(r.test),
            cell(METRICS[r.metric].label),
            num(r.weight / tw * 100, 0) + "%",
        ]
        if rr.base is None:
            if rr.not_measured:
                what = figures.missing(
                    f"{r.model} · {r.test} on {ps.host_id}",
                    "tasks.md",
                    work=rr.missing_work,
                    host=ps.host_id,
                )
            else:
                what = f"no baseline: {cell(rr.problem)}"
            rows.append(head + [what, "—", "—"])
            continue
        b = rr.baseline_doc
        assert b is not None  # a role with a baseline has its newest run
        split = ", ".join(
            f"{cell(k)} {num(v * 100, 0)}%"
            for k, v in sorted(rr.shares.items(), key=lambda kv: -kv[1])
        )
        head[1] += " " + SYNTHETIC_BADGE if b.synthetic else ""
        rows.append(
            head
            + [
                f"{figures.cell_html(rr.baseline_figure)} {MEASURED_BADGE}",
                _configuration(rr),
                f"{split}<br><small>{cell(rr.shares_source)}</small>",
            ]
        )
    out.append(
        table(
            [
                "role",
                "model",
                "test",
                "metric",
                "weight",
                "current",
                "configuration",
                "stage split",
            ],
            rows,
            ["l", "l", "l", "l", "r", "r", "l", "l"],
        )
    )
    out.append("")
    weighted = ps.weighted()
    cur = weighted[0]
    out.append(
        f"**Weighted average (current):** {_metric_value(metric0, cur['current'])} {MEASURED_BADGE} "
        f"{_ci_text(cur['current_ci95'])} · {_coverage(cur, labels)}"
    )
    out.append("")
    # -- catalogue ---------------------------------------------------------------------------------
    out += [
        "### Optimization catalogue",
        "",
        "Expected effects as their sources state them, and for each role whether the rules let them apply.",
        "",
    ]
    rows = []
    for o in ps.catalogue.optimizations:
        per_role = []
        for rr in ps.roles:
            oo = next((x for x in rr.opts if x.opt.id == o.id), None)
            if oo is None:
                continue
            name = cell(rr.role.role)
            if oo.applies:
                extra = (
                    ""
                    if oo.in_metric
                    else f" (acts on {cell(o.effect.stage)}, not part of {cell(METRICS[rr.role.metric].label)})"
                )
                fac = oo.factor
                amount = (
                    times(fac[1])
                    if fac and fac[0] == fac[2]
                    else (f"{times(fac[0])}–{times(fac[2])}" if fac else "")
                )
                per_role.append(f"{name}: applies {cell(amount)}{extra}")
            else:
                per_role.append(f"{name}: no ({cell('; '.join(oo.reasons))})")
        runnable = code(json.dumps(o.settings, sort_keys=True)) if o.settings else "—"
        rows.append(
            [
                f"**{cell(o.name)}**<br><small>{code(o.id)} · {cell(o.status)}</small>",
                _effect_text(o),
                _source_text(o),
                _rules_text(o.applies_when),
                runnable,
                "<br>".join(per_role) or "—",
            ]
        )
    # the catalogue is the same on every host (only its roles' column differs): folded, so a page of
    # several hosts stays readable (the projected figures below are the answer)
    out.append(
        fold(
            f"{len(rows)} optimizations: expected effect, source, rules and the roles they apply to here",
            table(
                [
                    "optimization",
                    "expected effect",
                    "source",
                    "applies when",
                    "settings (verification)",
                    "roles",
                ],
                rows,
            ),
            "abstract",
        )
    )
    out.append("")
    # -- projected ---------------------------------------------------------------------------------
    out += ["### Projected performance", ""]
    if not ps.scenarios:
        out.append(
            no_data(
                "Nothing applies",
                "No optimization of the catalogue applies to any role on this host.",
            )
        )
    else:
        headers = ["role", "current"] + [
            ("+ " + cell(name)) if len(ids) == 1 else cell(name)
            for name, ids in ps.scenarios
        ]
        rows = []
        for rr in ps.roles:
            r = rr.role
            if rr.base is None:
                rows.append(
                    [
                        cell(r.label or r.role),
                        "not measured" if rr.not_measured else "no baseline",
                    ]
                    + ["—"] * len(ps.scenarios)
                )
                continue
            cells = [
                cell(r.label or r.role),
                f"{figures.value(rr.base.figure)} {MEASURED_BADGE}",
            ]
            for name, ids in ps.scenarios:
                p = rr.projections.get(name)
                why = ""
                if p is None:
                    reasons = [
                        f"{oo.opt.id}: {'; '.join(oo.reasons)}"
                        for oo in rr.opts
                        if oo.opt.id in ids and not oo.applies
                    ]
                    why = "does not apply" + (
                        f" ({'; '.join(reasons)})" if reasons else ""
                    )
                cells.append(_projection_cell(p, r.metric, why))
            rows.append(cells)
        out.append(table(headers, rows, ["l", "r"] + ["r"] * len(ps.scenarios)))
        out.append("")
        gated = [(oid, d) for oid, d in ps.held_back if d != "MISSED"]
        if gated:
            out.append(
                "Not combined with the others (*all applicable*) until their go/no-go gates on this host say GO "
                "(the Go/no-go gates section below says why): "
                + ", ".join(
                    f"{code(oid)} ({cell(decision)})" for oid, decision in gated
                )
                + ". Each is still projected on its own above."
            )
            out.append("")
        slower = [oid for oid, d in ps.held_back if d == "MISSED"]
        if slower:
            out.append(
                "Held back from *all applicable*: measured on this host slower than projected (MISSED below its "
                "range), so it is not added to the others: "
                + "; ".join(
                    f"{code(oid)} ({cell(ps.missed.get(oid, ''))})" for oid in slower
                )
                + ". Each is still projected on its own above."
            )
            out.append("")
        out.append(
            f"Units: {cell(METRICS[metric0].unit)}. A cell shows the projection from the range mid-points, its range "
            "in brackets, and where the projected configuration was measured on the role's test, that "
            "measurement's figure and the error (projected ÷ measured − 1); where the optimization alone was "
            "measured on another test of this host, model and backend, its measured speed-up against the "
            "projected one."
        )
        out.append("")
        out += ["### Projected weighted average", ""]
        rows = []
        for w in weighted[1:]:
            base = w["current"]
            vs = (w["mid"] / base) if (w["mid"] and base) else None
            measured = "—"
            if w["measured"] is not None:
                status = (
                    proj.verdict(w["low"], w["high"], w["measured"], w["mid"])
                    if w["low"] is not None
                    else "MISSED"
                )
                measured = (
                    f"{_metric_value(metric0, w['measured'])} {_ci_text(w['measured_ci95'])} "
                    f"{verdict_badge(status)} (error {pct(w['mid'] / w['measured'] - 1)})"
                )
            rows.append(
                [
                    cell(w["scenario"]),
                    f"{_metric_value(metric0, w['mid'])} {PROJECTED_BADGE}",
                    f"{num(w['low'], 2)} – {num(w['high'], 2)}",
                    times(vs),
                    measured,
                    _coverage(w, labels),
                ]
            )
        cur = weighted[0]
        out.append(
            f"Current weighted average: {_metric_value(metric0, cur['current'])} {_ci_text(cur['current_ci95'])}, "
            f"covering {_coverage(cur, labels)}."
        )
        out.append("")
        out.append(
            table(
                [
                    "scenario",
                    "weighted average",
                    "range",
                    "vs current",
                    "measured (every covered role checked on its own test)",
                    "roles covered",
                ],
                rows,
                ["l", "r", "r", "r", "r", "l"],
            )
        )
        out.append("")
        out.append(
            fold(
                "How the ranges, intervals and verdicts are computed",
                "A projected range carries the effect's range and the baselines' CI95s (each end of the effect "
                "on the same end of the interval). A weighted current or measured value carries a CI95 "
                "propagated from the CI95s of its inputs (first-order, inputs independent, added in "
                f"quadrature). {VERIFIED_BADGE} / {MISSED_BADGE}: {cell(proj.VERDICT_RULE)} "
                f"{cell(proj.RATIO_VERDICT_RULE)} Baseline rule: "
                + cell(proj.BASELINE_RULE)
                + ".",
                "note",
            )
        )
        out.append("")
    # -- accuracy ----------------------------------------------------------------------------------
    out += ["### Projection accuracy over time", ""]
    hist = [h for h in history if h["host_id"] == ps.host_id]
    if not hist:
        out.append(
            "No recorded projection has been checked by a measurement yet. `invoke project` records the "
            "projections (a `projection` artifact under `data/projections/`); a later run of a projected "
            "configuration checks them."
        )
    else:
        rows = []
        for h in hist:
            m = metrics.shown(
                h["metric"]
            )  # a recorded projection's metric: maybe one this almanac does not know
            rows.append(
                [
                    cell(h["recorded"]),
                    code(h["record"]),
                    cell(h["role"]),
                    cell(h["scenario"]),
                    num(h["baseline"], m.decimals),
                    f"{num(h['projected'], m.decimals)} {PROJECTED_BADGE}",
                    (
                        (
                            link(num(h["measured"], m.decimals), run_link(h["run_id"]))
                            if h["run_id"]
                            else num(h["measured"], m.decimals)
                        )
                        + f" {MEASURED_BADGE}"
                        + (
                            "<br><small>implied by a measured speed-up of "
                            f"{times(h['speedup'])} on another test</small>"
                            if h.get("basis") == "speed-up" and h.get("speedup")
                            else ""
                        )
                    ),
                    f"{num(h['low'], m.decimals)} – {num(h['high'], m.decimals)}",
                    f"{verdict_badge(h['verdict'])} {pct(h['error'])}",
                    "—"
                    if h["within_ci95"] is None
                    else "yes"
                    if h["within_ci95"]
                    else "no",
                    cell(h["when"]),
                ]
            )
        out.append(
            table(
                [
                    "recorded",
                    "record",
                    "role",
                    "scenario",
                    "baseline",
                    "projected",
                    "measured",
                    "stated range",
                    "verdict, error",
                    "within CI95",
                    "checked",
                ],
                rows,
                ["l", "l", "l", "l", "r", "r", "r", "r", "l", "l", "l"],
            )
        )
        df = pd.DataFrame(
            [
                {
                    "recorded": h["recorded"],
                    "error": h["error"] * 100,
                    "verdict": h["verdict"],
                    "series": f"{h['role']} · {h['scenario']}",
                }
                for h in hist
            ]
        )
        chart = (
            alt.Chart(df)
            .mark_line(point=True)
            .encode(
                x=alt.X("recorded:T", title="recorded"),
                y=charts.qy("error", "projection error", "%"),
                color=alt.Color("series:N", title="role · scenario"),
                shape=alt.Shape("verdict:N", title="verdict"),
                tooltip=[
                    alt.Tooltip("recorded:T"),
                    alt.Tooltip("error:Q", format=".1f"),
                    alt.Tooltip("series:N"),
                    alt.Tooltip("verdict:N"),
                ],
            )
            .properties(
                width="container", height=220, title="Error of recorded projections"
            )
        )
        out.append("")
        out.append(
            charts.embed(
                chart, caption="projected ÷ measured − 1, per recorded projection."
            )
        )
    out.append("")
    return "\n".join(out)


def projections_page(runs: list[RunRecord], records: list[ProjectionRecord]) -> str:
    try:
        catalogue = proj.load_catalogue()
        mix = proj.load_usage_mix(catalogue=catalogue)
    except UserError as exc:
        return no_data("Inputs missing or invalid", cell(str(exc)))
    hosts = proj.projection_hosts(mix, runs)
    if not hosts:
        return no_data(
            "No baselines measured yet",
            "Run `invoke bench` and `invoke bench --matrix projections` to measure the roles of "
            "`data/usage_mix.yaml` on this host.",
        )
    from pipelines import dataset, hostnames
    from pipelines.site.per_host import page_hosts

    history = proj.accuracy_history(records, runs)
    quality_docs = list(dataset.load().quality)
    labels = hostnames.labels(runs)
    shown, note = page_hosts(hosts, runs)
    body = "\n".join(
        projections_host(
            proj.project(runs, catalogue, mix, h, quality_docs), history, labels.get(h)
        )
        for h in shown
    )
    if note:
        body = (
            f"{note} Every host's projection is written by `invoke project` to `data/projections/` "
            "and published with the [open data](open-data.md).\n\n" + body
        )
    return body + "\n\n" + gates_page_section(catalogue, runs)


def gates_page_section(catalogue: Any, runs: list[Any]) -> str:
    """The go/no-go gates (pipelines.gates) with the quality artifacts and decision records of the loaded set."""
    from pipelines import dataset
    from pipelines.site.gates import gates_section

    ds = dataset.load()
    return gates_section(catalogue, runs, list(ds.quality), list(ds.of("decision")))
