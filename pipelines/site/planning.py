"""Page bodies for the planning pages: Projections, Memory planner, Roofline, What-if.

Each builder takes loaded artifacts (and the YAML inputs) and returns Markdown; every value
from an artifact or a YAML file goes through ``cell``/``code``/``num``; every figure is
labelled measured, PROJECTED or VERIFIED.
"""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import pandas as pd

from core import metrics
from core.errors import UserError
from core.metrics import METRICS
from core.records.host import HostRecord, as_host
from core.records.projection import ProjectionRecord
from core.records.run import RunRecord
from pipelines import memory as mem
from pipelines import projections as proj
from pipelines import roofline as roof
from pipelines import whatif as wi
from pipelines.runs import latest_per_key, records
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    MISSED_BADGE,
    PROJECTED_BADGE,
    SYNTHETIC_BADGE,
    VERIFIED_BADGE,
    admonition,
    cell,
    code,
    fold,
    link,
    nbytes,
    num,
    prose,
    run_link,
    table,
    verdict_badge,
)

MEASURED_BADGE = '<span class="almanac-badge measured" title="read from a run artifact">measured</span>'


def _pct(x: float | None, decimals: int = 1, sign: bool = True) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.{decimals}f}%" if sign else f"{x * 100:.{decimals}f}%"


def _x(x: float | None, decimals: int = 2) -> str:
    return "—" if x is None else f"×{x:.{decimals}f}"


def _metric_value(metric: str, v: float | None) -> str:
    m = METRICS[metric]
    return f"{num(v, m.decimals)} {cell(m.unit)}" if v is not None else "—"


def _no_data(title: str, body: str) -> str:
    return admonition("warning", title, body)


# =====================================================================================
# Projections
# =====================================================================================
def _effect_text(o: proj.Optimization) -> str:
    e = o.effect
    m = METRICS[e.metric]
    stage = "every stage" if e.stage == "all" else f"{e.stage}"
    if e.factor is not None:
        amount = _x(e.factor)
    elif e.range is not None:
        amount = f"{_x(e.range[0])} – {_x(e.range[1])}"
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
            f"{_pct(p.verification['error'])} off",
        }[where]
        return (
            f"{head}{rng} {verdict_badge(p.status)}<br><small>{_speedup_text(ms)}; {said} "
            f"{_x(lo_sp)}–{_x(hi_sp)}</small>"
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
            f"{shown}{runs}, error {_pct(v['error'])}; "
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
                    _x(fac[1])
                    if fac and fac[0] == fac[2]
                    else (f"{_x(fac[0])}–{_x(fac[2])}" if fac else "")
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
    out.append(
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
        )
    )
    out.append("")
    # -- projected ---------------------------------------------------------------------------------
    out += ["### Projected performance", ""]
    if not ps.scenarios:
        out.append(
            _no_data(
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
                f"{figures.value(rr.baseline_figure)} {MEASURED_BADGE}",
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
                    f"{verdict_badge(status)} (error {_pct(w['mid'] / w['measured'] - 1)})"
                )
            rows.append(
                [
                    cell(w["scenario"]),
                    f"{_metric_value(metric0, w['mid'])} {PROJECTED_BADGE}",
                    f"{num(w['low'], 2)} – {num(w['high'], 2)}",
                    _x(vs),
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
            "A projected range carries the effect's range and the baselines' CI95s (each end of the effect on "
            "the same end of the interval). A weighted current or measured value carries a CI95 propagated "
            "from the CI95s of its inputs (first-order, inputs independent, added in quadrature). "
            f"{VERIFIED_BADGE} / {MISSED_BADGE}: {cell(proj.VERDICT_RULE)} {cell(proj.RATIO_VERDICT_RULE)} "
            "Baseline rule: " + cell(proj.BASELINE_RULE) + "."
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
                            f"<br><small>implied by a measured speed-up of {_x(h['speedup'])} on another test</small>"
                            if h.get("basis") == "speed-up" and h.get("speedup")
                            else ""
                        )
                    ),
                    f"{num(h['low'], m.decimals)} – {num(h['high'], m.decimals)}",
                    f"{verdict_badge(h['verdict'])} {_pct(h['error'])}",
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
        return _no_data("Inputs missing or invalid", cell(str(exc)))
    hosts = proj.projection_hosts(mix, runs)
    if not hosts:
        return _no_data(
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


# =====================================================================================
# Memory planner
# =====================================================================================
def _models_in(runs: list[RunRecord]) -> list[RunRecord]:
    """One (newest) run per model file, to read its GGUF facts from (endpoint models have none)."""
    by_sha: dict[str | None, RunRecord] = {}
    for d in latest_per_key(runs):
        if not d.has_local_file:
            continue
        cur = by_sha.get(d.model_sha256)
        if cur is None or d.created > cur.created:
            by_sha[d.model_sha256] = d
    return sorted(by_sha.values(), key=lambda d: (d.synthetic, d.model_name))


def _endpoint_models_in(runs: list[RunRecord]) -> list[tuple[str, str]]:
    """(name, where it is served) of every endpoint model with a current run: listed, not planned."""
    out = {}
    for d in latest_per_key(runs):
        if d.is_endpoint:
            out[(d.model_name, d.model_identity)] = d.model_origin
    return sorted((name, origin) for (name, _), origin in out.items())


def endpoint_models_note(runs: list[RunRecord]) -> str:
    """The memory planner's line on endpoint models: no local file, not planned ("" when there are none)."""
    eps = _endpoint_models_in(records(runs))
    if not eps:
        return ""
    rows = [
        [cell(name), cell(origin), cell("no local file: not planned")]
        for name, origin in eps
    ]
    return "\n".join(
        [
            "## Endpoint models",
            "",
            "Measured through a server that serves them, with no local file: the "
            "planner has no GGUF facts (layers, heads, tensor bytes) to plan them from.",
            "",
            table(["model", "served", "plan"], rows, max_rows=50),
            "",
        ]
    )


def _host_memory(
    runs: list[RunRecord], hosts: list[HostRecord]
) -> tuple[str | None, int | None]:
    runs, hosts = records(runs), [as_host(h) for h in hosts]
    docs = [(h.created, h.host) for h in hosts] + [(d.created, d.host) for d in runs]
    if not docs:
        return None, None
    _, h = max(docs, key=lambda x: x[0])
    return h["id"], h.get("memory_bytes")


def _baseline_rss(runs: list[RunRecord], host_id: str | None) -> int | None:
    vals = [
        d.resources.baseline_rss_bytes
        for d in records(runs)
        if d.host_id == host_id and d.resources.baseline_rss_bytes
    ]
    return int(sorted(vals)[len(vals) // 2]) if vals else None


PLAN_FOLD = "The plan: facts from the GGUF, weights, KV cache, what fits where (host RAM and each card), LoRA adapters"


def model_memory_section(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    host_id: str | None,
    host_memory: int | None,
    baseline_rss: int | None,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    """A model file's plan under its heading, folded: the page shows the planner's accuracy first and
    one line per model file (a plan is a page of tables; a reader opens the one they plan for)."""
    head = f"## {cell(doc.model_name)}" + (
        " " + SYNTHETIC_BADGE if doc.synthetic else ""
    )
    return (
        head
        + "\n\n"
        + fold(
            PLAN_FOLD,
            _model_plan(
                shape, doc, settings, host_id, host_memory, baseline_rss, gpu_checks
            ),
        )
    )


def _model_plan(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    host_id: str | None,
    host_memory: int | None,
    baseline_rss: int | None,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    out: list[str] = []
    n_swa_layers = sum(shape.swa_layers)
    facts = [
        ["file", code(doc.model_file_name)],
        ["architecture", cell(shape.architecture)],
        ["quantization", cell(doc.quantization)],
        ["layers", num(shape.n_layer, 0)],
        ["embedding", num(shape.n_embd, 0)],
        [
            "attention heads (KV heads)",
            f"{num(shape.n_head, 0)} ({cell(', '.join(sorted({str(x) for x in shape.n_head_kv})))})",
        ],
        ["head size (K / V)", f"{num(shape.head_k, 0)} / {num(shape.head_v, 0)}"],
        [
            "sliding window",
            (
                f"{num(shape.n_swa, 0)} tokens on {n_swa_layers} of {shape.n_layer} layers "
                f"({cell(shape.swa_pattern_source)})"
            )
            if shape.n_swa
            else "none",
        ],
        ["vocabulary", num(shape.n_vocab, 0)],
        ["trained context", num(shape.n_ctx_train, 0)],
        [
            "MoE",
            f"{shape.expert_used_count} of {shape.expert_count} experts per token"
            if shape.is_moe
            else "dense",
        ],
        [
            "output matrix",
            "tied to the token embedding" if shape.tied_output else "separate",
        ],
    ]
    out += [table(["fact (from the GGUF)", "value"], facts), ""]
    for note in shape.notes:
        out += [admonition("note", "Approximation", cell(note)), ""]
    # weights
    out += ["### Weights", ""]
    total = shape.weight_bytes
    rows = [
        [code(t), nbytes(b), num(b / total * 100, 1) + "%"]
        for t, b in sorted(shape.tensor_bytes_by_type.items(), key=lambda kv: -kv[1])
    ]
    rows.append(["**total**", f"**{nbytes(total)}**", "100%"])
    out += [table(["tensor type", "bytes", "share"], rows, ["l", "r", "r"]), ""]
    roles = [
        [cell(r), nbytes(shape.role_bytes(r))]
        for r in ("token_embd", "output", "experts", "other")
        if shape.role_bytes(r)
    ]
    out += [
        f"By role: {', '.join(f'{a} {b}' for a, b in roles)}. On a CPU with AVX2 (or ARM dot-product), llama.cpp "
        f"copies {nbytes(shape.repack_bytes())} of them once more into its repacked buffer.",
        "",
    ]
    # KV cache
    out += ["### KV cache", ""]
    ex_layer = next((i for i in range(shape.n_layer) if shape.n_head_kv[i]), 0)
    per_cell = {
        t: shape.kv_row_bytes(ex_layer, t, t)
        for t in settings.cache_types
        if _kv_ok(shape, t)
    }
    out.append(
        f"Per cell and attention layer: K {num(shape.head_k, 0)} × {num(shape.n_head_kv[ex_layer], 0)} values + "
        f"V {num(shape.head_v, 0)} × {num(shape.n_head_kv[ex_layer], 0)} values = "
        + ", ".join(f"{nbytes(b)} ({code(t)})" for t, b in per_cell.items())
        + f". Full-attention layers hold `pad256(n_ctx)` cells; sliding-window layers "
        f"`pad256(min(n_ctx, {shape.n_swa} + n_ubatch))` (or the full context with `swa_full`)."
    )
    out.append("")
    headers = (
        ["context"]
        + [code(t) for t in settings.cache_types]
        + [f"{code('f16')}, swa_full"]
    )
    rows = []
    beyond_any = False
    for n_ctx in settings.contexts:
        beyond = bool(shape.n_ctx_train and n_ctx > shape.n_ctx_train)
        beyond_any |= beyond
        row = [num(n_ctx, 0) + (" ⚠" if beyond else "")]
        for t in settings.cache_types:
            row.append(
                nbytes(
                    mem.kv_cache(
                        shape, n_ctx, t, t, swa_full=False, n_ubatch=settings.n_ubatch
                    ).bytes
                )
                if _kv_ok(shape, t)
                else "n/a"
            )
        row.append(
            nbytes(
                mem.kv_cache(
                    shape,
                    n_ctx,
                    "f16",
                    "f16",
                    swa_full=True,
                    n_ubatch=settings.n_ubatch,
                ).bytes
            )
            if shape.n_swa
            else "same"
        )
        rows.append(row)
    out += [table(headers, rows, ["r"] * len(headers)), ""]
    if beyond_any:
        out += [
            admonition(
                "warning",
                "Beyond the trained context",
                f"⚠ marks contexts above the model's training length ({num(shape.n_ctx_train, 0)} tokens). "
                "The memory is what llama.cpp would allocate; whether the model still answers well that far "
                "(RoPE scaling, quality) is a separate question this plan does not answer.",
            ),
            "",
        ]
    # fits
    out += ["### What fits where", ""]
    out.append(
        f"Predicted totals with a {num(settings.headroom * 100, 0)}% headroom (fits when the total is at most "
        f"{num((1 - settings.headroom) * 100, 0)}% of the memory). **Host RAM**: weights, repacked copies, KV "
        "cache, tokenizer tables, the compute pages a full micro-batch touches"
        + (
            f" and the measured process before load ({nbytes(baseline_rss)}, median of this host's runs)"
            if baseline_rss
            else ""
        )
        + (f", against {code(host_id)}'s {nbytes(host_memory)}" if host_memory else "")
        + ". **GPU**: all layers offloaded, the reserved compute buffer"
        + (
            f", and a runtime overhead of {num(settings.gpu_runtime_overhead_mib, 0)} MiB ("
            + cell(settings.gpu_runtime_overhead_source)
            + ")"
            if settings.gpu_runtime_overhead_mib
            else " (no CUDA context overhead included: "
            + cell(settings.gpu_runtime_overhead_source)
            + ")"
        )
        + ". All figures "
        + PROJECTED_BADGE
        + "."
    )
    out.append("")
    fits = mem.fits_rows(shape, settings, host_memory, baseline_rss)
    cards = settings.cards
    headers = ["context", "cache", "KV", "host RAM"] + [
        f"{cell(c.name)}<br><small>{cell(c.unit_text)}</small>" for c in cards
    ]
    rows = []
    for r in fits:
        ctx = num(r["n_ctx"], 0) + (
            " ⚠ beyond training" if r.get("beyond_training") else ""
        )
        if r["error"]:
            rows.append(
                [ctx, code(r["cache_type"]), cell(r["error"]), "—"] + ["—"] * len(cards)
            )
            continue
        host = nbytes(r["cpu"].total) + (
            " ✓" if r["host_fit"] else " ✗" if r["host_fit"] is False else ""
        )
        gpu_cells = [("✓" if ok else "✗") for ok in r["gpu_fit"].values()]
        gpu_cells[0] = f"{nbytes(r['gpu'].total)} " + gpu_cells[0]
        rows.append(
            [ctx, code(r["cache_type"]), nbytes(r["kv_bytes"]), host] + gpu_cells
        )
    out += [table(headers, rows, ["r", "l", "r", "r"] + ["c"] * len(cards)), ""]
    out.append(
        "The first GPU column also gives the predicted VRAM total. Units: every total is in GiB (2^30 bytes). "
        + cell(mem.GPU_UNITS_NOTE)
    )
    out.append("")
    out += [split_fits_table(shape, settings, fits), ""]
    out += [sweet_spots_table(shape, doc, settings, gpu_checks or []), ""]
    # LoRA
    out += ["### LoRA adapters", ""]
    dims = mem.lora_module_dims(shape)
    out.append(
        "Seed formula, with this model's projection shapes: `r × (in + out) × layers × bytes` per module "
        "(A is r × in, B is out × r), f16 (2 bytes per value). Shapes (in → out): "
        + ", ".join(
            f"{code(k)} {num(v[0], 0)} → {num(v[1], 0)}" for k, v in dims.items()
        )
        + "."
    )
    out.append("")
    headers = ["targets"] + [f"r = {r}" for r in settings.lora_ranks]
    rows = []
    for name, mods in settings.lora_targets.items():
        rows.append(
            [cell(name)]
            + [
                nbytes(mem.lora_bytes(shape, r, tuple(mods)))
                for r in settings.lora_ranks
            ]
        )
    out += [table(headers, rows, ["l"] + ["r"] * len(settings.lora_ranks)), ""]
    return "\n".join(out)


def _gpu_check_text(checks: list[dict[str, Any]]) -> str:
    """What the VRAM plan behind the sweet spots gave against this file's runs on a real GPU."""
    if not checks:
        return (
            "Checked on a GPU: no GPU run of this file is committed, so these sweet spots are planned only "
            "(the plan's accuracy on the files that did run on a GPU is under Predicted against measured)."
        )
    worst = max(checks, key=lambda c: abs(c["error"]))
    return (
        f"Checked on a GPU: the same VRAM plan against {num(len(checks), 0)} measured run(s) of this file "
        f"with every layer offloaded (peak VRAM, e.g. {link(worst['id'][:12], run_link(worst['id']))} on "
        f"{code(worst['host_id'])}): the largest error {100 * worst['error']:+.1f}% "
        f"(planned {nbytes(worst['predicted'])}, measured {nbytes(worst['measured'])})."
    )


def sweet_spots_table(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    """Seed 002's Domestic GPU Sweet Spots, per card, from the same VRAM plan (pipelines.memory.sweet_spots)."""
    sp = settings.sweet_spot
    spots = mem.sweet_spots(shape, settings)
    rows = []
    for s in spots:
        base = f"{cell(doc.model_name)} ({cell(doc.quantization)})"
        if not s.fits:
            rows.append(
                [
                    cell(s.card.name),
                    base,
                    f"✗ {nbytes(s.base_bytes)} at one sequence",
                    "—",
                    "—",
                    "—",
                ]
            )
            continue
        ctx = (
            f"{num(s.max_context, 0)} tokens<br><small>KV {nbytes(s.max_context_kv)}</small>"
            if s.max_context
            else f"none of {cell(', '.join(str(c) for c in settings.contexts))}"
        )
        batch = f"{num(s.batch, 0)}{' (the cap)' if s.capped_batch else ''}<br><small>{nbytes(s.batch_total)}</small>"
        adapters = f"{num(s.adapters, 0)}{' (the cap)' if s.capped_adapters else ''}"
        rows.append(
            [cell(s.card.name), base, f"✓ {nbytes(s.base_bytes)}", adapters, ctx, batch]
        )
    intro = (
        "The most of each that fits beside the base model on each card, by the VRAM plan above "
        f"(all layers offloaded, {code(sp.cache_type)} cache, {num(settings.headroom * 100, 0)}% headroom), "
        "each at the others' minimum: **adapters** of rank "
        f"{num(sp.adapter_rank, 0)} on {cell(', '.join(sp.adapter_targets))} "
        f"(f16, {nbytes(mem.lora_bytes(shape, sp.adapter_rank, tuple(sp.adapter_targets)))} each) beside one "
        f"sequence of {num(sp.context, 0)} tokens; the largest **context** of the planned ones at one "
        f"sequence; the **batch**: parallel sequences of {num(sp.context, 0)} tokens each (llama-server "
        f"{code('-np')}, a cache stream each; at most {num(sp.max_batch, 0)} tried), with its total. "
        "Settings: data/memory_planner.yaml, sweet_spot. All figures "
        + PROJECTED_BADGE
        + "."
    )
    return "\n".join(
        [
            "### Sweet spots per card",
            "",
            intro,
            "",
            table(
                ["card", "base", "base fits", "adapters", "KV (context)", "batch"],
                rows,
                ["l", "l", "r", "r", "r", "r"],
            ),
            "",
            _gpu_check_text(gpu_checks or []),
        ]
    )


def split_fits_table(
    shape: mem.ModelShape, settings: mem.PlannerSettings, fits: list[dict]
) -> str:
    """What fits on 2x / 4x / 8x of each card: the fewest alike cards a layer split needs (issue 29)."""
    cards = settings.cards
    counts = "/".join(f"{n}×" for n in mem.SPLIT_CARD_COUNTS)
    rows = []
    for r in fits:
        if r["error"]:
            continue
        cells = []
        for c in cards:
            n = mem.cards_needed(shape, r["n_ctx"], r["cache_type"], c.bytes, settings)
            cells.append(f"{n}×" if n else f"> {mem.SPLIT_CARD_COUNTS[-1]}")
        rows.append([num(r["n_ctx"], 0), code(r["cache_type"])] + cells)
    if not rows:
        return ""
    return "\n".join(
        [
            f"**On several cards** ({counts} of one card, split by layer: llama.cpp's default over the visible "
            "GPUs): the fewest alike cards on which every card's share (its layers' weights and KV cache, its "
            "compute buffer, the runtime overhead each GPU holds) stays within the headroom "
            + PROJECTED_BADGE
            + ". The split itself is checked per GPU against measured runs above.",
            "",
            table(
                ["context", "cache"]
                + [
                    f"{cell(c.name)}<br><small>{cell(c.unit_text)}</small>"
                    for c in cards
                ],
                rows,
                ["r", "l"] + ["c"] * len(cards),
            ),
        ]
    )


def split_vram_vs_measured(runs: list[RunRecord], overhead: int | None) -> str:
    """Runs on a host of several visible GPUs: each GPU's predicted share beside its measured peak."""
    if overhead is None:
        return ""
    latest = latest_per_key(runs)
    preds = [p for p in mem.split_predictions(latest, overhead) if len(p["gpus"]) > 1]
    if not preds:
        return ""
    rows = []
    checked = [g for p in preds for g in p["gpus"] if g["within_10pct"] is not None]
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"], p["split_mode"])):
        for g in p["gpus"]:
            rows.append(
                [
                    link(p["id"], run_link(p["id"])),
                    code(p["host_id"]),
                    cell(p["model"]),
                    code(p["test_name"]),
                    code(p["split_mode"]),
                    f"GPU{g['index']}"
                    + (
                        f" <small>{cell(g['pci_bus_id'])}</small>"
                        if g["pci_bus_id"]
                        else ""
                    ),
                    "idle: context only, not predicted"
                    if g["idle"]
                    else nbytes(g["predicted"]),
                    f"{nbytes(g['measured'])} {MEASURED_BADGE}",
                    "—" if g["error"] is None else _pct(g["error"]),
                ]
            )
    within = sum(1 for g in checked if g["within_10pct"])
    comm = sorted(
        {
            (nbytes(p["comm_overhead"]), p["comm_runs"])
            for p in preds
            if p.get("comm_overhead") is not None
        }
    )
    comm_note = (
        " A tensor split also holds its all-reduce communicators (NCCL) on each GPU, which no model "
        "fact tells: each tensor-split run is predicted with the median residual of the *other* "
        "tensor-split runs ("
        + "; ".join(f"{b} from {n} run{'s' if n != 1 else ''}" for b, n in comm)
        + "), so no run predicts itself."
        if comm
        else ""
    )
    return "\n".join(
        [
            f"**Per GPU, a model over several GPUs** (issue 29): each visible GPU's share by the split the run "
            f"used (layer: whole layers and their KV cache per GPU, the output matrix and logits on the last; "
            f"tensor: every layer's weights and KV cache by the shares, a compute buffer on each GPU; "
            f"none: everything on one GPU) plus a runtime overhead of {nbytes(overhead)} per working GPU (the "
            f"one-GPU residual above), against that GPU's peak (NVML, per process).{comm_note} "
            f"{within} of {len(checked)} working GPUs within 10%.",
            "",
            table(
                [
                    "run",
                    "host",
                    "model",
                    "test",
                    "split",
                    "GPU",
                    "predicted",
                    "measured peak",
                    "error",
                ],
                rows,
                ["l", "l", "l", "l", "l", "l", "r", "r", "r"],
            ),
        ]
    )


def _kv_ok(shape: mem.ModelShape, cache_type: str) -> bool:
    block = mem.KV_TYPES[cache_type][0]
    return shape.head_k % block == 0 and shape.head_v % block == 0


SMALL_MISS_BYTES = (
    16 * 2**20
)  # a miss this small is a fixed Python-side cost, not a missing buffer


def other_backends_note(runs: list[RunRecord], gpu: bool = False) -> str:
    """How many measured runs of other backends the planner leaves out of its accuracy (it predicts
    llama.cpp's memory), by backend; "" when none."""
    other = mem.other_backends(runs, gpu=gpu)
    n = sum(other.values())
    if not n:
        return ""
    return (
        f"**{n} run{'s' if n != 1 else ''} of other backends not scored** ("
        + ", ".join(f"{cell(b)}: {num(k, 0)}" for b, k in other.items())
        + "): the planner predicts llama.cpp's buffers, so another runtime's memory is no test of it."
    )


def predicted_vs_measured(runs: list[RunRecord]) -> str:
    known = mem.facts_by_sha(runs)
    current = latest_per_key(runs)
    preds = [
        p for p in (mem.run_prediction(d, known) for d in current) if p is not None
    ]
    skipped = other_backends_note(current)
    if not preds:
        return _no_data(
            "No CPU runs with a peak RSS yet", "Run `invoke bench` to measure one."
        ) + ("\n\n" + skipped if skipped else "")
    out = [
        "Every current CPU run: the planner's prediction for its exact settings (context, cache types, "
        "sliding-window cache, the largest batch the test decodes) against the peak RSS the run measured "
        "(the child process's VmHWM). llama.cpp's own report of its buffers (from the run's log) is shown beside.",
        "",
    ]
    rows = []
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"], p["created"])):
        rep = p["reported_mib"]
        reported = (
            "; ".join(
                f"{cell(k)} "
                + " + ".join(f"{num(v, 1)}" for v in rep[k].values())
                + " MiB"
                for k in ("model", "kv", "compute")
                if k in rep
            )
            or "—"
        )
        rows.append(
            [
                link(p["id"], run_link(p["id"])),
                cell(p["model"]),
                code(p["test_name"]),
                num(p["n_ctx"], 0),
                code(f"{p['type_k']}/{p['type_v']}"),
                f"{nbytes(p['predicted'])} {PROJECTED_BADGE}",
                f"{nbytes(p['measured'])} {MEASURED_BADGE}",
                _pct(p["error"]),
                "yes" if p["within_10pct"] else "**no**",
                reported,
            ]
        )
    out += [
        fold(
            "Every current CPU run: predicted, measured peak RSS, error, llama.cpp's own report",
            table(
                [
                    "run",
                    "model",
                    "test",
                    "n_ctx",
                    "K/V",
                    "predicted",
                    "measured peak RSS",
                    "error",
                    "within 10%",
                    "llama.cpp reported",
                ],
                rows,
                ["l", "l", "l", "r", "l", "r", "r", "r", "l", "l"],
            ),
        ),
        "",
    ]
    ok = sum(p["within_10pct"] for p in preds)
    out.append(
        f"**{ok} of {len(preds)}** predictions are within 10% of the measured peak RSS."
    )
    out.append("")
    if skipped:
        out += [skipped, ""]
    out += ["#### Accuracy per run type", ""]
    trows = []
    for rt in sorted({p["run_type"] for p in preds}):
        ps_ = [p for p in preds if p["run_type"] == rt]
        errs = [p["error"] for p in ps_]
        miss_mib = [(p["measured"] - p["predicted"]) / 2**20 for p in ps_]
        trows.append(
            [
                cell(rt),
                num(len(ps_), 0),
                f"{_pct(min(errs))} … {_pct(max(errs))}",
                f"{num(sum(p['within_10pct'] for p in ps_), 0)} of {num(len(ps_), 0)}",
                f"{num(min(miss_mib), 1)} … {num(max(miss_mib), 1)} MiB",
            ]
        )
    out += [
        table(
            [
                "run type",
                "runs",
                "error range",
                "within 10%",
                "unpredicted (measured − predicted)",
            ],
            trows,
            ["l", "r", "r", "r", "r"],
        ),
        "",
    ]
    # breakdown of the newest one of the first model
    p = max(preds, key=lambda p: p["created"])
    out += [f"#### Where the memory of {link(p['id'], run_link(p['id']))} goes", ""]
    rows = [
        [cell(k), nbytes(v), num(v / p["predicted"] * 100, 1) + "%"]
        for k, v in p["plan"].components.items()
    ]
    rows.append(["**predicted total**", f"**{nbytes(p['predicted'])}**", "100%"])
    rows.append(
        [
            "measured peak RSS",
            nbytes(p["measured"]),
            num(p["measured"] / p["predicted"] * 100, 1) + "%",
        ]
    )
    out += [table(["component", "bytes", "of predicted"], rows, ["l", "r", "r"]), ""]
    for note in p["plan"].notes:
        out.append(admonition("note", "Why the prediction can miss", cell(note)))
    bad = [x for x in preds if not x["within_10pct"]]
    small = [x for x in bad if abs(x["measured"] - x["predicted"]) <= SMALL_MISS_BYTES]
    if small:
        chat_gen = [
            (p["measured"] - p["predicted"]) / 2**20
            for p in preds
            if p["run_type"] in ("chat", "generate") and p["within_10pct"]
        ]
        rate = [
            (p["measured"] - p["predicted"]) / 2**20
            for p in preds
            if p["run_type"] == "rate"
        ]
        med = lambda v: sorted(v)[len(v) // 2] if v else None  # noqa: E731
        out.append(
            admonition(
                "info",
                "Explained: small models, a fixed unmodelled cost",
                f"{len(small)} run(s) miss by more than 10% but by at most {num(SMALL_MISS_BYTES / 2**20, 0)} MiB: "
                + ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({cell(x['model'])}, {_pct(x['error'])}, "
                    f"{num((x['measured'] - x['predicted']) / 2**20, 1)} MiB of {nbytes(x['measured'])})"
                    for x in small
                )
                + ". Their totals are small (a model of a few MiB), so a fixed cost the plan does not model weighs "
                "more than 10%: the chat and generate paths build Python-side state (the Jinja chat template, the "
                "sampler and its per-token arrays) that rate tests do not; on this data the median unpredicted "
                f"memory is {num(med(chat_gen), 1)} MiB for chat and generate runs against {num(med(rate), 1)} MiB "
                "for rate tests.",
            )
        )
        bad = [x for x in bad if x not in small]
    amx = [x for x in bad if ((x["reported_mib"] or {}).get("model") or {}).get("AMX")]
    if amx:
        parts = []
        for x in amx:
            a = x["reported_mib"]["model"]["AMX"] * 2**20
            with_amx = (
                x["predicted"]
                + a
                - x["plan"].components.get("repacked weights", 0)
                - x["measured"]
            ) / x["measured"]
            parts.append(
                f"{link(x['id'], run_link(x['id']))} ({_pct(x['error'])}; with llama.cpp's reported AMX buffer of "
                f"{nbytes(a)} in place of the repacked copies: {_pct(with_amx)})"
            )
        out.append(
            admonition(
                "info",
                "Explained: AMX weight buffers",
                "On an Intel AMX host llama.cpp copies the weights into AMX-layout buffers (its log reports "
                "them), beside the mapped file; the planner does not model that layout. "
                + ", ".join(parts)
                + ".",
            )
        )
        bad = [x for x in bad if x not in amx]
    drafted = [x for x in bad if x["run_type"].endswith("draft model")]
    if drafted:
        out.append(
            admonition(
                "info",
                "Partly explained: the context of a second model",
                ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({_pct(x['error'])}, "
                    f"{num((x['measured'] - x['predicted']) / 2**20, 1)} MiB unpredicted)"
                    for x in drafted
                )
                + ": the plan includes the draft model's weights, KV cache, buffers and tokenizer, but counts each "
                "context's compute buffer only as the pages one batch touches (est.). llama.cpp reserves a full "
                "compute buffer per context (the target's log reports "
                + ", ".join(
                    f"{num(sum((x['reported_mib'].get('compute') or {}).values()), 1)} MiB"
                    for x in drafted
                )
                + "); the draft's is not in the log excerpt read, and the unpredicted memory fits within it. A likely "
                "cause, not a measured one.",
            )
        )
        bad = [x for x in bad if x not in drafted]
    for x in bad:
        if x["incomplete"]:
            out.append(
                admonition(
                    "warning",
                    "Incomplete prediction",
                    f"{link(x['id'], run_link(x['id']))}: "
                    + "; ".join(cell(m) for m in x["incomplete"]),
                )
            )
    if bad:
        out.append(
            admonition(
                "warning",
                "Predictions off by more than 10%",
                "The prediction counts the buffers llama.cpp allocates and the process before "
                "the load; what it cannot see: Python objects a test builds (the chat path's "
                "per-token arrays, logits kept for speculative decoding with `logits_all`), the "
                "allocator's fragmentation, pages the kernel has not mapped yet for a file read "
                "with mmap on a memory-starved host, and libraries a backend loads lazily. "
                "Off: "
                + ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({_pct(x['error'])})"
                    for x in bad
                ),
            )
        )
    return "\n".join(out)


def vram_vs_measured(runs: list[RunRecord]) -> str:
    current = latest_per_key(runs)
    preds = [p for p in (mem.vram_prediction(d) for d in current) if p is not None]
    skipped = other_backends_note(current, gpu=True)
    if not preds:
        return "No run with every layer on a GPU and a measured peak VRAM yet." + (
            "\n\n" + skipped if skipped else ""
        )
    out = [
        "Runs with every layer on a GPU: weights (less the token embedding, which llama.cpp keeps on the CPU), "
        "KV cache and the reserved compute buffer, predicted "
        + PROJECTED_BADGE
        + " without any runtime overhead, "
        "against the process's peak VRAM (NVML). The residual is what the CUDA runtime itself holds (context, "
        "cuBLAS workspace, allocator pools).",
        "",
    ]
    rows = []
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"])):
        rows.append(
            [
                link(p["id"], run_link(p["id"])),
                code(p["host_id"]),
                cell(p["model"]),
                code(p["test_name"]),
                nbytes(p["predicted"]),
                f"{nbytes(p['measured'])} {MEASURED_BADGE}",
                nbytes(p["residual"]),
                "yes" if p["exact_roles"] else "no: embedding counted on the GPU",
            ]
        )
    out += [
        fold(
            "Every run with all layers on a GPU: predicted, measured peak VRAM, residual",
            table(
                [
                    "run",
                    "host",
                    "model",
                    "test",
                    "predicted (no overhead)",
                    "measured peak VRAM",
                    "residual",
                    "per-role tensor bytes in the artifact",
                ],
                rows,
                ["l", "l", "l", "l", "r", "r", "r", "l"],
            ),
        ),
        "",
    ]
    if skipped:
        out += [skipped, ""]
    return "\n".join(out)


ROOFLINE_CHART_RUNS = (
    40  # a roofline chart of more runs than this folds (every run is drawn)
)
MODELS_SHOWN = 12  # model files with a memory section of their own on the page


def memory_page(runs: list[RunRecord], hosts: list[HostRecord]) -> str:
    try:
        settings = mem.load_planner_settings()
    except UserError as exc:
        return _no_data("Planner settings missing or invalid", cell(str(exc)))
    docs = _models_in(runs)
    if not docs:
        return (
            _no_data(
                "No models measured yet",
                "Run `invoke bench`; or plan any GGUF with "
                "`invoke plan.memory --model PATH`.",
            )
            + ("\n\n" + endpoint_models_note(runs)).rstrip()
        )
    host_id, host_memory = _host_memory(runs, hosts)
    base = _baseline_rss(runs, host_id)
    overhead, n_gpu_runs = mem.gpu_overhead_from_runs(latest_per_key(runs))
    if overhead is not None:
        settings = settings.model_copy(
            update={
                "gpu_runtime_overhead_mib": overhead / mem.MiB,
                "gpu_runtime_overhead_source": f"the median residual of {n_gpu_runs} measured GPU runs",
            }
        )
    out = [
        "## Predicted against measured",
        "",
        "### Host RAM (CPU runs)",
        "",
        predicted_vs_measured(runs),
        "",
        "### GPU memory",
        "",
        vram_vs_measured(runs),
        "",
        split_vram_vs_measured(runs, overhead),
        "",
    ]
    from pipelines.site.tracks import adapter_memory_section

    lora = adapter_memory_section(runs)
    if lora:
        out += [lora, ""]
    if len(docs) > MODELS_SHOWN:
        # a section per model file: the newest few; the rest are listed (the planner plans any of them)
        newest = sorted(docs, key=lambda d: d.created, reverse=True)
        out += [
            "## Model files",
            "",
            f"{len(docs):,} model files have measurements; the {MODELS_SHOWN} most recently measured have a section "
            "below. Plan any other with `invoke plan.memory --model NAME_OR_PATH`.",
            "",
            fold(
                "The model files, newest first",
                table(
                    [
                        "model",
                        "quantization",
                        "parameters",
                        "file size",
                        "last measured",
                    ],
                    [
                        [
                            cell(d.model_name),
                            cell(d.quantization),
                            num(d.n_params, 0),
                            nbytes(d.model_size_bytes),
                            cell(d.created),
                        ]
                        for d in newest
                    ],
                    max_rows=50,
                ),
            ),
            "",
        ]
        shown = {id(d) for d in newest[:MODELS_SHOWN]}
        docs = [d for d in docs if id(d) in shown]
    for d in docs:
        try:
            shape = mem.ModelShape.from_facts(d.gguf, d.model_name)
        except UserError as exc:
            out += [f"## {cell(d.model_name)}", "", cell(str(exc)), ""]
            continue
        checks = [
            c
            for r in latest_per_key(runs)
            if r.model_sha256 == d.model_sha256
            and (c := mem.vram_prediction(r, overhead or 0)) is not None
        ]
        out.append(
            model_memory_section(shape, d, settings, host_id, host_memory, base, checks)
        )
    note = endpoint_models_note(runs)
    if note:
        out.append(note)
    return "\n".join(out)


# =====================================================================================
# Roofline
# =====================================================================================
def admonition_inline(text: str) -> str:
    return f'<span class="almanac-badge missed">{cell(text)}</span>'


def roofline_chart(df: pd.DataFrame) -> alt.LayerChart:
    """Measured decode rate (a dot) and its bandwidth bound (a tick) per run, joined by a rule: marks
    placed at a value, never bars from zero, so the chart draws the same on a log scale (which it
    uses when the values span an order of magnitude or more: a bar from 0 has no length there)."""
    vals = pd.concat([df["measured"], df["bound"]])
    vals = vals[vals > 0]
    log_scale = bool(len(vals)) and vals.max() / vals.min() >= 10
    x = {
        "what": "decode rate",
        "unit": "t/s",
        "log": log_scale,
        "scale": alt.Scale() if log_scale else alt.Scale(zero=False),
    }
    base = alt.Chart(df).encode(y=alt.Y("run:N", title=None, sort=None))
    tip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("measured:Q", format=",.1f"),
        alt.Tooltip("bound:Q", format=",.1f"),
        alt.Tooltip("efficiency:Q", format=".0%"),
    ]
    gap = base.mark_rule(color=charts.QUIET).encode(
        x=charts.qx("measured", **x), x2="bound:Q", tooltip=tip
    )
    bound = base.mark_tick(thickness=3, size=14, color=charts.BOUND).encode(
        x=charts.qx("bound", **x), tooltip=tip
    )
    measured = base.mark_point(filled=True, size=70, color=charts.MEASURED).encode(
        x=charts.qx("measured", **x), tooltip=tip
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
            _no_data(
                "No host probe yet",
                "Run `invoke host.probe` on each host to measure its bandwidth.",
            )
        )
    else:
        rows = []
        for hid, b in sorted(bws.items()):
            probe = next(h for h in map(as_host, hosts) if h.id == b.probe_id)
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
            _no_data(
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
        b = r.get("bytes")
        bytes_txt = (
            f"{nbytes(b['total'])} <small>({nbytes(b['weights'])} weights + {nbytes(b['kv'])} KV)</small>"
            if b
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
                _pct(r.get("efficiency"), 0, sign=False),
                _pct(r.get("efficiency_copy"), 0, sign=False),
                _pct(r.get("efficiency_single"), 0, sign=False),
                cell(r.get("bound_uses") or "—"),
                (
                    admonition_inline("not memory-bound") + " "
                    if r.get("fits_llc")
                    else ""
                )
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
        chart = roofline_chart(pd.DataFrame(chart_rows))
        fig = charts.embed(
            chart,
            caption="Measured decode rate (dot) and the bandwidth bound (tick) per run, joined "
            "by a line: its length is the gap to the bound.",
        )
        # every run is drawn; a chart of many runs folds (its rows are the table's above)
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


# =====================================================================================
# What-if
# =====================================================================================
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
        return _no_data("Workload mixes missing or invalid", cell(str(exc)))
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
                _no_data(
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
                            f"{_x(g['gains'][r]['speedup'], 3)} "
                            f"<small>(−{num(g['gains'][r]['saved'] * 100, 1)}% time)</small>"
                        )
                        for r in red
                    ]
                    + [_x(g["limit"]["speedup"], 3)]
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
                f"less time (the stage {_x(1 / (1 - r_mid)) if r_mid < 1 else 'infinitely'} "
                f"as fast), this mix would gain {_pct(g['speedup'] - 1)} "
                f"in throughput** (time per request −{num(g['saved'] * 100, 1)}%) {PROJECTED_BADGE}. Removing that "
                "stage entirely would gain at most "
                f"{_pct(top['limit']['speedup'] - 1) if top['share'] < 1 else 'everything'} "
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
