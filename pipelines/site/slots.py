"""The Roles page's "Parallel slots per role" table (seed 001, "Concurrent Inference Sweep"): per role,
each slot count tried with its aggregate t/s change and p95 multiplier, and the recommended ``-np``
(pipelines.slots). Every value from an artifact goes through ``cell()``/``num()``/``code()``."""

from __future__ import annotations

from typing import Any

from pipelines import slots as sl
from pipelines.site.markdown import cell, code, link, num, prose, run_link, table


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{'+' if v > 0 else ''}{num(100 * v, 1)}%"


def _gain(g: dict[str, Any] | None) -> str:
    if g is None:
        return "—"
    ci = (
        f"<br><small>{_pct(g['lo'])} – {_pct(g['hi'])}, {cell(g.get('verdict'))}</small>"
        if g["lo"] is not None
        else ""
    )
    return _pct(g["mean"]) + ci


def slots_table(plan: sl.SlotsFile, rows: list[sl.RoleSlots]) -> str:
    out = []
    for rs in rows:
        base = (
            link(rs.baseline.id[:12], run_link(rs.baseline.id))
            if rs.baseline is not None
            else ""
        )
        if not rs.points:
            out.append(
                [
                    f"**{cell(rs.role)}**",
                    code(rs.test),
                    f"**{num(rs.recommended, 0)}**" if rs.recommended else "—",
                    "—",
                    "—",
                    "—",
                    cell("; ".join(rs.missing)) or "not measured",
                    base or "—",
                ]
            )
            continue
        for i, p in enumerate(rs.points):
            out.append(
                [
                    f"**{cell(rs.role)}**" if i == 0 else cell(rs.role),
                    code(rs.test),
                    f"**{num(rs.recommended, 0)}**"
                    + (f"<br><small>{cell(rs.reason)}</small>" if i == 0 else ""),
                    f"-np {num(p.slots, 0)} ({num(p.slots, 0)} clients)",
                    f"{_gain(p.gain)}<br><small>{num(p.base_agg_tps, 1)} → {num(p.agg_tps, 1)} t/s</small>",
                    f"{num(p.p95_multiplier, 2)}<br><small>{num(p.base_p95_ms, 0)} → {num(p.p95_ms, 0)} ms</small>",
                    cell(p.why),
                    " · ".join(
                        link(x.id[:12], run_link(x.id))
                        for x in (rs.baseline, p.run)
                        if x is not None
                    ),
                ]
            )
        for miss in rs.missing:
            tried, _, why = miss.partition(": ")
            out.append(
                [
                    cell(rs.role),
                    code(rs.test),
                    f"**{num(rs.recommended, 0)}**" if rs.recommended else "—",
                    f"{cell(tried)}: not measured",
                    "—",
                    "—",
                    cell(why or miss),
                    base or "—",
                ]
            )
    return table(
        [
            "role",
            "workload",
            "recommended -np",
            "slots tried",
            "aggregate t/s change (CI95)",
            "p95 multiplier",
            "verdict",
            "source",
        ],
        out,
        ["l", "l", "r", "l", "r", "r", "l", "l"],
    )


def slots_section(docs: list[Any], host: str | None) -> str:
    plan = sl.load_slots()
    if plan is None:
        return ""
    hosts = (
        sl.hosts(plan, docs)
        if host is None
        else [h for h in sl.hosts(plan, docs) if h == host]
    )
    if not hosts:
        return ""
    out = [
        "## Parallel slots per role",
        "",
        prose(
            f"Seed 001's concurrent inference sweep, measured: each role's workload (data/slots.yaml) sent to "
            f"{plan.model} behind llama-server with 1, 2 and 4 parallel slots (-np) sharing one KV cache, by as "
            "many clients at once as there are slots. The aggregate change is k slots against one slot under the "
            "same k clients (ratio of the mean per-request generation rate, CI95; the wall-clock aggregates "
            "below it); the p95 multiplier is a request's p95 time with the slots full against one client alone. "
            f"A slot count is accepted when its gain's CI95 low end is above +{plan.min_gain:.0%} and its p95 "
            f"multiplier at most {plan.max_p95_multiplier:g}; the recommended -np is the largest accepted, else 1."
        ),
        "",
    ]
    for h in hosts:
        out += [
            f"### Slots on {code(h)}",
            "",
            slots_table(plan, sl.role_slots(plan, docs, h)),
            "",
        ]
    return "\n".join(out)
