"""The What-if page's error and retry section: measured error rates and retry costs, and the
implement/skip recommendation of every planned optimization (pipelines.retries)."""

from __future__ import annotations

from typing import Any

from pipelines import retries as rt
from pipelines.site.markdown import (
    admonition,
    cell,
    code,
    fold,
    link,
    num,
    prose,
    run_link,
    table,
)

BADGE = {
    "IMPLEMENT": "verified",
    "SKIP": "missed",
    "UNDECIDED": "measured",
    "NOT MEASURED": "measured",
}


def _badge(v: str) -> str:
    return f'<span class="almanac-badge {BADGE.get(v, "measured")}">{cell(v)}</span>'


def _pct(v: float | None, sign: bool = True) -> str:
    if v is None:
        return "—"
    return f"{'+' if sign and v > 0 else ''}{num(100 * v, 1)}%"


def _ms(d: dict[str, Any], key: str = "mean") -> str:
    v = d.get(key)
    return "—" if v is None else num(v, 1)


def _ci_ms(d: dict[str, Any], lo: str = "lo", hi: str = "hi") -> str:
    return (
        "—"
        if d.get(lo) is None or d.get(hi) is None
        else f"{num(d[lo], 1)} – {num(d[hi], 1)}"
    )


def errors_table(m: rt.ErrorMeasurement) -> str:
    runs = m.runs
    rows = [
        [
            "error rate per attempt (no retry)",
            f"{_pct(m.p['mean'], False)} ({m.p['failed']} of {m.p['n']})",
            f"{_pct(m.p['lo'], False)} – {_pct(m.p['hi'], False)} (Wilson)",
            link(runs["faulty"].id[:12], run_link(runs["faulty"].id)),
        ],
        [
            "a failed attempt (ms)",
            _ms(m.t_fail),
            _ci_ms(m.t_fail),
            link(runs["faulty"].id[:12], run_link(runs["faulty"].id)),
        ],
        [
            "a request without errors (ms)",
            _ms(m.t_clean),
            _ci_ms(m.t_clean),
            link(runs["clean"].id[:12], run_link(runs["clean"].id)),
        ],
        [
            "a request with errors and automatic retry (ms)",
            _ms(m.t_auto),
            _ci_ms(m.t_auto),
            link(runs["faulty_retry"].id[:12], run_link(runs["faulty_retry"].id)),
        ],
        [
            f"retry cost of a retried request (ms; back-off {num(m.backoff_s, 2)} s)",
            _ms(m.retry_cost),
            _ci_ms(m.retry_cost),
            link(runs["faulty_retry"].id[:12], run_link(runs["faulty_retry"].id)),
        ],
        [
            "error overhead with automatic retry (time per request)",
            _pct(m.overhead["mean"]),
            f"{_pct(m.overhead['lo'])} – {_pct(m.overhead['hi'])}",
            "—",
        ],
        [
            "happy-path cost of retrying (retry on vs off, no errors)",
            _pct(m.happy_cost["mean"]),
            f"{_pct(m.happy_cost['lo'])} – {_pct(m.happy_cost['hi'])}",
            link(runs["clean_retry"].id[:12], run_link(runs["clean_retry"].id)),
        ],
    ]
    return table(["measured", "value", "CI95", "source"], rows, ["l", "r", "r", "l"])


def recommendations_table(recs: list[rt.Recommendation]) -> str:
    rows = []
    for r in recs:
        glo, gmid, ghi = r.gain
        clo, cmid, chi = r.cost
        rows.append(
            [
                f"**{cell(r.plan.name)}**<br><small>{code(r.plan.id)} · {cell(r.plan.source)}</small>",
                f"{_pct(gmid)}<br><small>{_pct(glo)} – {_pct(ghi)}</small>"
                if gmid is not None
                else "—",
                cell(r.basis) or "—",
                (
                    f"{_pct(cmid)}<br><small>{_pct(clo)} – {_pct(chi)}</small>"
                    if cmid is not None
                    else "none measured"
                ),
                cell(r.cost_basis) or "—",
                f"{_badge(r.verdict)}<br><small>{prose(r.reason)}</small>",
            ]
        )
    return table(
        [
            "planned optimization",
            "projected gain (interval)",
            "how",
            "measured cost (interval)",
            "cost from",
            "recommendation",
        ],
        rows,
        ["l", "r", "l", "r", "l", "l"],
    )


def _ms_range(t: tuple[float | None, float | None, float | None]) -> str:
    lo, mid, hi = t
    if mid is None:
        return "—"
    return (
        f"{num(mid, 1)}<br><small>{num(lo, 1)} – {num(hi, 1)}</small>"
        if lo is not None
        else num(mid, 1)
    )


def rate_plan_table(rows: list[rt.RatePlan]) -> str:
    """Seed 003's phase-3 table, measured: one row per scenario (error-free, then each injected rate)."""
    out = []
    for r in rows:
        if r.fault_every is None:
            scenario = "error-free (no injected errors)"
        else:
            scenario = (
                f"1 in {r.fault_every} attempts fails ({_pct(1 / r.fault_every, False)} injected)<br><small>measured "
                f"{_pct(r.p['mean'], False)}, {_pct(r.p['lo'], False)} – {_pct(r.p['hi'], False)} "
                f"({r.p['failed']} of {r.p['n']} attempts)</small>"
            )
        lo, mid, hi = r.speedup
        speed = (
            "—"
            if mid is None
            else f"{num(mid, 3)}×<br><small>{num(lo, 3)} – {num(hi, 3)}</small>"
        )
        gain = (
            "—"
            if mid is None
            else f"{_pct(mid - 1)}<br><small>{_pct(lo - 1)} – {_pct(hi - 1)}</small>"
        )
        out.append(
            [
                scenario,
                _ms_range(r.current),
                f"{_ms(r.auto)}<br><small>{_ci_ms(r.auto)}</small>",
                speed,
                gain,
                "—"
                if r.backoff_s is None
                else f"{num(r.backoff_s, 2)} s, doubled per retry",
                " · ".join(link(x.id[:12], run_link(x.id)) for x in r.sources),
            ]
        )
    return table(
        [
            "scenario (error rate)",
            "current: the caller re-sends (ms per request)",
            "with automatic retry (ms per request)",
            "speedup",
            "gain",
            "back-off",
            "source",
        ],
        out,
        ["l", "r", "r", "r", "r", "l", "l"],
    )


def rate_plan_section(f: Any, docs: list[Any], host_id: str) -> list[str]:
    """The retry plan per error rate on one host (empty where that host has no such runs)."""
    spec = f.error_rates
    if spec is None or not rt.rate_fault_values(spec, docs, host_id):
        return []
    plan = next((p for p in f.planned if p.kind == "retry"), None)
    resend = tuple(plan.resend_after_s) if plan is not None else (0.5, 2.0)
    rows, missing = rt.rate_plans(spec, docs, host_id, resend)
    out = ["#### Retry plan per error rate", ""]
    if rows:
        out += [
            f"Seed 003's phase-3 table, measured on {code(spec.test)} ({cell(spec.model)}, matrix "
            f"{code(spec.matrix or 'any')}): a loopback proxy answers every k-th attempt with HTTP 503. "
            f"**With automatic retry** is the measured time per request (failures retried after the back-off); "
            f"**current** is the same requests had the caller seen each failure and re-sent it after "
            f"{num(resend[0], 1)}–{num(resend[1], 1)} s (assumed) instead of the back-off: both sides come from the "
            "one run with retry on, so drift between runs on a busy host cancels. Speedup = current ÷ with automatic "
            "retry; its interval takes the ends of every input's interval together (the share of requests retried, "
            "Wilson CI95; the resend range; the request time's CI95). The error-free row is retry off against on "
            "with no errors (two runs, Welch CI95): what the retry logic costs when nothing fails.",
            "",
            rate_plan_table(rows),
            "",
        ]
    if missing:
        out += [f"Not measured: {prose('; '.join(missing))}.", ""]
    return out


def errors_section(f: Any, docs: list[Any]) -> str:
    if f.errors is None and not f.planned:
        return ""
    out = [
        "## Errors, retries and planned optimizations",
        "",
        "Seed 003 asks, per planned optimization, whether its gain is worth it. Here the inputs are measured: error "
        "rates and retry costs from serving runs with injected transient errors, stage shares from the mixes above. "
        "**IMPLEMENT** when the projected gain's low end clears the measured cost's high end and the worth-it "
        "threshold; **SKIP** when its high end is below them; **UNDECIDED** when the intervals overlap. Gains are "
        "fractions of the time per request (+10% = 10% faster).",
        "",
    ]
    hosts = sorted(
        set(rt.error_hosts(f.errors, docs) if f.errors else [])
        | set(rt.error_hosts(f.error_rates, docs) if f.error_rates else [])
        | {h for p in f.planned if p.kind == "stage" for h in _mix_hosts(f, p, docs)}
    )
    if not hosts:
        return "\n".join(
            out
            + [
                admonition(
                    "info",
                    "Nothing measured yet",
                    "Run `invoke bench --matrix serving-faults` (errors) and `invoke bench` (mixes).",
                ),
                "",
            ]
        )
    for h in hosts:
        out += [f"### On {code(h)}", ""]
        if f.errors is not None:
            m = rt.measure_errors(f.errors, docs, h)
            if m.missing:
                out += [f"Error and retry runs: {prose('; '.join(m.missing))}.", ""]
            else:
                out += [
                    f"Measured on {code(f.errors.test)} ({cell(f.errors.model)}): every "
                    f"{num(m.runs['faulty'].requested.get('fault_every'), 0)}th attempt answered HTTP "
                    f"{num(m.runs['faulty'].requested.get('fault_status', 503), 0)} by a loopback proxy.",
                    "",
                    errors_table(m),
                    "",
                ]
        out += rate_plan_section(f, docs, h)
        out += [recommendations_table(rt.evaluate_plans(f, docs, h)), ""]
    out += [
        fold(
            "How the gains are projected",
            "\n".join(
                [
                    "- **Automatic retry**: without it a failure reaches the caller, who "
                    "re-sends after a delay (an assumption, "
                    "given as a range): time per answered request `T_ok + p/(1 − p) × (t_fail + "
                    "resend)`, with `p`, `t_fail` and "
                    "`T_ok` measured; with it, the time per request is measured. The interval "
                    "takes the ends of every input's "
                    "interval together (the error rate's Wilson CI95, the resend range, the "
                    "retried requests' CI95). The cost is "
                    "what turning retry on costs a request when nothing fails (measured, Welch CI95).",
                    "- **A stage made faster**: Amdahl over the mix's measured stage shares: `1 "
                    "/ (1 − r × p_s) − 1`, for the "
                    "planned reduction range `r`. No time cost is measured for these (keeping a "
                    "model loaded costs memory, not "
                    "time).",
                ]
            ),
        ),
        "",
    ]
    return "\n".join(out)


def _mix_hosts(f: Any, plan: Any, docs: list[Any]) -> list[str]:
    from pipelines.whatif import mix_hosts

    mix = next((m for m in f.mixes if m.name == plan.mix), None)
    return mix_hosts(mix, docs) if mix is not None else []
