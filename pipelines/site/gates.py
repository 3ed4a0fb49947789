"""The Projections page's go/no-go section: every gate of the catalogue, measured, with its verdict;
and the decisions on record (``decision`` artifacts written by ``invoke gates``)."""

from __future__ import annotations

from typing import Any

from core.records.decision import DecisionRecord
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines import gates as gates_mod
from pipelines.site.markdown import cell, code, link, num, run_link, table
from pipelines.site.per_host import page_hosts

VERDICT_STYLE = {
    "GO": "verified",
    "NO-GO": "missed",
    "UNDECIDED": "measured",
    "NOT MEASURED": "measured",
}


def verdict_badge(v: str) -> str:
    return f'<span class="almanac-badge {VERDICT_STYLE.get(v, "measured")}">{cell(v)}</span>'


def _fmt(g: gates_mod.Gate, v: float | None) -> str:
    if v is None:
        return "—"
    if g.quantity in ("text_agreement",):
        return f"{num(100 * v, 1)}%"
    if g.quantity == "quality_delta":
        return f"{'+' if v > 0 else ''}{num(100 * v, 1)} points"
    if g.quantity in ("ratio", "kv_cache_ratio"):
        return f"{num(v, 3)}×"
    from core.metrics import METRICS

    m = METRICS.get(g.metric or "")
    return f"{num(v, m.decimals if m else 2)} {cell(g.display_unit)}"


def _threshold(g: gates_mod.Gate, v: float) -> str:
    return _fmt(g, v)


def _evidence(r: gates_mod.GateResult, quality_link: Any) -> str:
    ev = r.evidence
    parts = []
    for role in ("candidate", "baseline"):
        i = ev.get(role)
        if not i:
            continue
        target = quality_link(i) if r.gate.quantity == "quality_delta" else run_link(i)
        parts.append(f"{role}: {link(i[:12], target)}")
    if r.gate.quantity == "quality_delta" and "lost" in ev:
        parts.append(
            f"{ev['candidate_passed']} vs {ev['baseline_passed']} passed; {ev['gained']} gained, {ev['lost']} lost"
        )
    if ev.get("kv_bytes"):
        parts.append(
            f"KV {num(ev['kv_bytes']['candidate'] / 2**20, 1)} vs {num(ev['kv_bytes']['baseline'] / 2**20, 1)} MiB"
        )
    if r.gate.quantity == "text_agreement" and ev.get("first_diff") is not None:
        parts.append(f"first difference at token {ev['first_diff']}")
    return "<br>".join(parts) or "—"


def gates_section(
    catalogue: Any,
    runs: list[RunRecord],
    quality_docs: list[QualityRecord],
    decisions: list[DecisionRecord],
) -> str:
    from pipelines.site.markdown import admonition
    from pipelines.site.quality_pages import quality_link

    if not any(o.gates for o in catalogue.optimizations):
        return ""
    out = [
        "## Go/no-go gates",
        "",
        "Optimizations of the catalogue may declare gates (seed 000's GO/NO-GO criteria): what is measured, which side "
        "is better, a target and a no-go threshold. Each gate is checked against this host's measurements: **GO** "
        "when the whole CI95 (or an exact value) is on the good side of the target, **NO-GO** when it is wholly on the "
        "bad side of the no-go threshold, **UNDECIDED** in between or when the interval straddles a threshold. An "
        "optimization is NO-GO when any gate is, GO when every gate is. `invoke gates` records each decision with its "
        "evidence (below).",
        "",
    ]
    hosts = gates_mod.gate_hosts(catalogue, runs, quality_docs)
    if not hosts:
        out += [
            admonition(
                "info",
                "No gate measured yet",
                "Run the matrices the gates name (`invoke bench --matrix projections`, `invoke bench --matrix "
                "optimization`, `invoke quality --matrix quality-gates`).",
            ),
            "",
        ]
    shown, note = page_hosts(hosts, runs)
    if note:
        out += [
            f"{note} `invoke gates` checks every host's gates and records the decisions in "
            "`data/decisions/`, published with the [open data](open-data.md).",
            "",
        ]
    for host in shown:
        out += [f"### On {code(host)}", ""]
        rows = []
        for og in gates_mod.evaluate(catalogue, runs, quality_docs, host):
            first = True
            for r in og.results:
                g = r.gate
                ci = (
                    "exact"
                    if r.exact
                    else (
                        f"{_fmt(g, r.ci95[0])} – {_fmt(g, r.ci95[1])}"
                        if r.ci95[0] is not None
                        else "—"
                    )
                )
                n = (
                    ""
                    if not r.n
                    else (
                        f"<br><small>n = {r.n[0]} items</small>"
                        if g.quantity == "quality_delta"
                        else f"<br><small>n = {r.n[0]} / {r.n[1]}</small>"
                    )
                )
                rule = (
                    f"GO {'≥' if g.direction == 'higher' else '≤'} {_threshold(g, g.target)}; "
                    f"NO-GO {'<' if g.direction == 'higher' else '>'} {_threshold(g, g.no_go)}"
                )
                rows.append(
                    [
                        (
                            f"**{cell(og.opt.name)}**<br>{verdict_badge(og.decision)}"
                            if first
                            else ""
                        ),
                        f"{cell(g.name)}<br><small>{cell(g.concern)} · {code(g.quantity)}</small>",
                        _fmt(g, r.value) + n,
                        ci,
                        cell(rule),
                        f"{verdict_badge(r.verdict)}<br><small>{cell(r.reason)}</small>",
                        _evidence(r, quality_link),
                    ]
                )
                first = False
        out += [
            table(
                [
                    "optimization (decision)",
                    "gate",
                    "measured",
                    "CI95",
                    "thresholds",
                    "verdict",
                    "evidence",
                ],
                rows,
                ["l", "l", "r", "r", "l", "l", "l"],
            ),
            "",
        ]
    hist = sorted(decisions, key=lambda d: (d.created, d.id), reverse=True)
    if hist:
        rows = []
        for d in hist:
            gates = "; ".join(f"{cell(g.id)} {cell(g.verdict)}" for g in d.gates)
            ev = sorted(
                {
                    str(v)
                    for g in d.gates
                    for k, v in g.evidence.items()
                    if k in ("candidate", "baseline") and v
                }
            )
            rows.append(
                [
                    cell(d.created[:16].replace("T", " ")),
                    code(d.host_id),
                    cell(d.optimization_name),
                    verdict_badge(d.decision),
                    gates,
                    cell(", ".join(e[:12] for e in ev)),
                    code(d.id),
                ]
            )
        out += [
            "### Decisions on record",
            "",
            "Each `invoke gates` writes a `decision` artifact (`data/decisions/`) when an optimization's decision "
            "or its evidence changed: the verdicts, values, intervals and thresholds as they stood, so a NO-GO stays "
            "on record with what it rested on.",
            "",
            table(
                [
                    "recorded (UTC)",
                    "host",
                    "optimization",
                    "decision",
                    "gates",
                    "evidence (artifact ids)",
                    "record",
                ],
                rows,
                ["l", "l", "l", "l", "l", "l", "l"],
            ),
            "",
        ]
    return "\n".join(out)
