"""Error and retry overhead (seed 003), measured, and implement/skip recommendations for planned
optimizations, from artifacts alone.

**Measured inputs** (``data/whatif.yaml`` ``errors:`` names the serving test): four runs of the same
chat request, with and without injected transient errors (``fault_every``), with the client's
automatic retry off and on (``retries``). From them:

* the error rate per attempt ``p`` (failed ÷ sent without retry; Wilson CI95);
* a failed attempt's time ``t_fail`` and a successful request's time ``T_ok`` (means, CI95);
* the retry cost of a retried request: its time minus a request that was not retried (Welch CI95);
* the error overhead with automatic retry: time per request with errors ÷ without − 1;
* the happy-path cost of retrying: time per request with retry on ÷ off, no errors (Welch CI95).

**Planned optimizations** (``planned:``) are judged by whether the projected gain clears the
measured cost. ``kind: retry`` (seed 003's phase 3): without automatic retry a failure reaches the
caller, who re-sends after ``resend_after_s`` (an assumption, a range):
``T_manual = T_ok + p/(1 − p) × (t_fail + resend)``; with it, ``T_auto`` is measured. Gain =
``T_manual / T_auto − 1``; its interval takes the ends of every input's interval together (p, the
resend range, T_auto). Cost = the happy-path cost. ``kind: stage``: a stage of a what-if mix made
``reduction`` faster (a range); gain = Amdahl's time saved ``r × p_s``, no time cost unless measured.

**Recommendation** (kept apart from every other verdict): IMPLEMENT when the gain's low end clears
both the cost's high end and ``min_gain``; SKIP when the gain's high end is below the larger of the
cost's low end and ``min_gain``; otherwise UNDECIDED (the intervals overlap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.records.run import RunRecord
from pipelines.gates import welch_difference
from pipelines.whatif import evaluate_mix, select_runs


def _mean_ci(values: list[float]) -> dict[str, Any]:
    s = (
        stats.summarize(values)
        if values
        else {"n": 0, "mean": None, "ci95_low": None, "ci95_high": None}
    )
    return {
        "n": s["n"],
        "mean": s["mean"],
        "lo": s.get("ci95_low"),
        "hi": s.get("ci95_high"),
    }


def _ok_e2e(rec: RunRecord) -> list[float]:
    return [
        float(r.e2e_ms) for r in rec.request_records if r.ok and r.e2e_ms is not None
    ]


def _all_e2e(rec: RunRecord) -> list[float]:
    """Every timed request's time, failed ones included (a failure after its retries is time spent too)."""
    return [float(r.e2e_ms) for r in rec.request_records if r.e2e_ms is not None]


@dataclass
class ErrorMeasurement:
    host_id: str
    runs: dict[
        str, Any
    ]  # "clean", "clean_retry", "faulty", "faulty_retry" -> RunRecord
    p: dict[str, Any] = field(default_factory=dict)
    t_fail: dict[str, Any] = field(default_factory=dict)
    t_ok: dict[str, Any] = field(default_factory=dict)
    t_auto: dict[str, Any] = field(default_factory=dict)
    t_clean: dict[str, Any] = field(default_factory=dict)
    retry_cost: dict[str, Any] = field(default_factory=dict)
    overhead: dict[str, Any] = field(default_factory=dict)
    happy_cost: dict[str, Any] = field(default_factory=dict)
    backoff_s: float | None = None
    missing: list[str] = field(default_factory=list)


def measure_errors(
    spec: Any, docs: list[Any], host_id: str, fault_every: int | None = None
) -> ErrorMeasurement:
    """The four runs of ``spec`` (model, test, matrix) on a host and what they measure: without faults
    and with them (``fault_every``: that injected rate only; None: any), retry off and on."""
    out = ErrorMeasurement(host_id, {})
    want = {
        "clean": (None, 0),
        "clean_retry": (None, 1),
        "faulty": (fault_every or "*", 0),
        "faulty_retry": (fault_every or "*", 1),
    }
    found = select_runs(
        docs, model=spec.model, test=spec.test, host_id=host_id, matrix=spec.matrix
    )
    for name, (faults, retries) in want.items():
        for r in found:
            fe = r.requested.get("fault_every")
            if (
                (fe is None) == (faults is None)
                and (faults in (None, "*") or fe == faults)
                and int(r.requested.get("retries", 1)) == retries
            ):
                out.runs[name] = r
                break
        else:
            out.missing.append(
                f"{name.replace('_', ' + ')}: no run with fault_every "
                f"{'set' if faults else 'null'} and retries {retries}"
            )
    if len(out.missing) == len(want):
        out.missing = [
            "no serving runs with injected errors on this host (`invoke bench --matrix serving-faults`)"
        ]
    if out.missing:
        return out
    faulty, faulty_retry, clean, clean_retry = (
        out.runs[k] for k in ("faulty", "faulty_retry", "clean", "clean_retry")
    )
    recs = faulty.request_records
    failed = [r for r in recs if not r.ok]
    lo, hi = stats.wilson_interval(len(failed), len(recs))
    out.p = {
        "n": len(recs),
        "failed": len(failed),
        "mean": len(failed) / len(recs) if recs else None,
        "lo": lo,
        "hi": hi,
    }
    out.t_fail = _mean_ci([float(r.elapsed_ms or 0.0) for r in failed])
    out.t_ok = _mean_ci(_ok_e2e(faulty))
    out.t_auto = _mean_ci(_all_e2e(faulty_retry))
    out.t_clean = _mean_ci(_ok_e2e(clean))
    retried = [
        float(r.e2e_ms)
        for r in faulty_retry.request_records
        if r.ok and r.e2e_ms is not None and (r.attempts or 1) > 1
    ]
    plain = [
        float(r.e2e_ms)
        for r in faulty_retry.request_records
        if r.ok and r.e2e_ms is not None and (r.attempts or 1) == 1
    ]
    d, dlo, dhi = welch_difference(plain, retried)
    out.retry_cost = {"mean": d, "lo": dlo, "hi": dhi, "n": (len(plain), len(retried))}
    base = out.t_clean["mean"]
    d, dlo, dhi = welch_difference(_ok_e2e(clean), _all_e2e(faulty_retry))
    out.overhead = {
        "mean": d / base if d is not None and base else None,
        "lo": dlo / base if dlo is not None and base else None,
        "hi": dhi / base if dhi is not None and base else None,
    }
    d, dlo, dhi = welch_difference(_ok_e2e(clean), _ok_e2e(clean_retry))
    out.happy_cost = {
        "mean": d / base if d is not None and base else None,
        "lo": dlo / base if dlo is not None and base else None,
        "hi": dhi / base if dhi is not None and base else None,
        "ms": d,
        "ms_lo": dlo,
        "ms_hi": dhi,
    }
    out.backoff_s = faulty_retry.requested.get("retry_backoff_s")
    return out


def error_hosts(spec: Any, docs: list[Any]) -> list[str]:
    return sorted(
        {
            r.host_id
            for r in select_runs(
                docs, model=spec.model, test=spec.test, matrix=spec.matrix
            )
        }
    )


@dataclass
class Recommendation:
    plan: Any
    gain: tuple[
        float | None, float | None, float | None
    ]  # low, mid, high (fractions: +0.05 = 5% faster)
    cost: tuple[float | None, float | None, float | None]
    verdict: str
    reason: str
    basis: str  # how the gain was projected
    cost_basis: str


def recommend(gain: tuple, cost: tuple, min_gain: float) -> tuple[str, str]:
    glo, _, ghi = gain
    clo, _, chi = cost
    if glo is None or ghi is None:
        return "NOT MEASURED", "no projected gain: the inputs are missing"
    c_hi = chi if chi is not None else 0.0
    c_lo = clo if clo is not None else 0.0
    if glo > max(c_hi, min_gain):
        if chi is None:
            return (
                "IMPLEMENT",
                f"the gain's low end ({glo:+.1%}) clears the worth-it threshold ({min_gain:.1%})",
            )
        return "IMPLEMENT", (
            f"the gain's low end ({glo:+.1%}) clears the cost's high end ({c_hi:+.1%}) and the "
            f"worth-it threshold ({min_gain:.1%})"
        )
    if ghi < max(c_lo, min_gain):
        return "SKIP", (
            f"the gain's high end ({ghi:+.1%}) is below "
            + (
                f"the cost's low end ({c_lo:+.1%})"
                if c_lo >= min_gain
                else f"the worth-it threshold ({min_gain:.1%})"
            )
        )
    return (
        "UNDECIDED",
        "the gain's and the cost's intervals overlap (or straddle the threshold): measure more",
    )


def retry_gain(
    m: ErrorMeasurement, resend: tuple[float, float]
) -> tuple[float | None, float | None, float | None]:
    """T_manual / T_auto − 1 at the low, middle and high ends of every input."""
    if (
        m.missing
        or m.p.get("mean") is None
        or not m.t_auto.get("mean")
        or m.t_ok.get("mean") is None
    ):
        return None, None, None
    t_fail = m.t_fail.get("mean") or 0.0

    def manual(p: float, r_s: float) -> float:
        p = min(p, 0.999)
        return m.t_ok["mean"] + p / (1 - p) * (t_fail + 1000.0 * r_s)

    mid = manual(m.p["mean"], sum(resend) / 2) / m.t_auto["mean"] - 1
    lo = manual(m.p["lo"], resend[0]) / (m.t_auto["hi"] or m.t_auto["mean"]) - 1
    hi = manual(m.p["hi"], resend[1]) / (m.t_auto["lo"] or m.t_auto["mean"]) - 1
    return lo, mid, hi


def evaluate_plans(f: Any, docs: list[Any], host_id: str) -> list[Recommendation]:
    out = []
    errors = measure_errors(f.errors, docs, host_id) if f.errors is not None else None
    for plan in f.planned:
        if plan.kind == "retry":
            if errors is None or errors.missing:
                out.append(
                    Recommendation(
                        plan,
                        (None, None, None),
                        (None, None, None),
                        "NOT MEASURED",
                        "; ".join(errors.missing)
                        if errors
                        else "no errors: block in data/whatif.yaml",
                        "",
                        "",
                    )
                )
                continue
            gain = retry_gain(errors, tuple(plan.resend_after_s))
            hc = errors.happy_cost
            cost = (hc["lo"], hc["mean"], hc["hi"])
            verdict, reason = recommend(gain, cost, plan.min_gain)
            out.append(
                Recommendation(
                    plan,
                    gain,
                    cost,
                    verdict,
                    reason,
                    f"measured error rate {errors.p['mean']:.1%} per attempt; a caller re-sends after "
                    f"{plan.resend_after_s[0]:g}–{plan.resend_after_s[1]:g} s (assumed)",
                    "happy path: retry on vs off without errors (measured)",
                )
            )
            continue
        mix = next((m for m in f.mixes if m.name == plan.mix), None)
        res = evaluate_mix(mix, docs, host_id) if mix is not None else None
        share = (
            res.shares().get(plan.stage)
            if res is not None and res.per_request_ms
            else None
        )
        if share is None:
            out.append(
                Recommendation(
                    plan,
                    (None, None, None),
                    (None, None, None),
                    "NOT MEASURED",
                    f"mix {plan.mix} has no measured {plan.stage} time on this host",
                    "",
                    "",
                )
            )
            continue
        lo_r, hi_r = plan.reduction
        gain = tuple(
            1.0 / (1.0 - r * share) - 1.0 for r in (lo_r, (lo_r + hi_r) / 2, hi_r)
        )
        verdict, reason = recommend(gain, (None, None, None), plan.min_gain)
        out.append(
            Recommendation(
                plan,
                gain,
                (None, None, None),
                verdict,
                reason,
                f"{plan.stage} is {share:.1%} of the time of mix {plan.mix} (measured); "
                f"{lo_r:.0%}–{hi_r:.0%} of it removed (planned)",
                "no time cost measured",
            )
        )
    return out


# ------------------------------------------------------------------------------------------------
# The retry plan per error rate (seed 003, phase 3: "Estimated Performance Gain" per failure rate)
# ------------------------------------------------------------------------------------------------


@dataclass
class RatePlan:
    """One row of seed 003's phase-3 table: a scenario (no errors, or an injected error rate), the
    time per request when the caller re-sends a failure (current) and with automatic retry (the
    plan), the speed-up and the gain, each with its interval, and the runs it comes from."""

    fault_every: int | None  # None: the error-free row
    p: dict[str, Any]  # measured error rate per attempt (retry off), Wilson CI95
    current: tuple[float | None, float | None, float | None]  # ms: low, mid, high
    auto: dict[str, Any]  # ms: mean, lo, hi (measured)
    speedup: tuple[
        float | None, float | None, float | None
    ]  # current / auto: low, mid, high
    backoff_s: float | None
    sources: list[Any]  # RunRecords: current's, then the plan's
    basis: str


def rate_fault_values(spec: Any, docs: list[Any], host_id: str) -> list[int]:
    """The injected rates (``fault_every``) measured for ``spec`` on a host, most frequent errors last."""
    found = select_runs(
        docs, model=spec.model, test=spec.test, host_id=host_id, matrix=spec.matrix
    )
    return sorted(
        {
            int(r.requested["fault_every"])
            for r in found
            if r.requested.get("fault_every")
        },
        reverse=True,
    )


def rate_plans(
    spec: Any, docs: list[Any], host_id: str, resend: tuple[float, float]
) -> tuple[list[RatePlan], list[str]]:
    """The error-free row and one row per injected error rate, and what is missing (one line each)."""
    rows: list[RatePlan] = []
    missing: list[str] = []
    for k in rate_fault_values(spec, docs, host_id):
        m = measure_errors(spec, docs, host_id, fault_every=k)
        if m.missing:
            missing += [f"1 in {k}: {x}" for x in m.missing]
            continue
        if not rows:  # the error-free row, from the same matrix's runs without faults
            base = m.t_clean
            h = m.happy_cost
            auto = _mean_ci(_ok_e2e(m.runs["clean_retry"]))
            speed = tuple(
                None if x is None else 1.0 / (1.0 + x)
                for x in (h["hi"], h["mean"], h["lo"])
            )
            rows.append(
                RatePlan(
                    None,
                    {"n": 0, "failed": 0, "mean": 0.0, "lo": None, "hi": None},
                    (base["lo"], base["mean"], base["hi"]),
                    auto,
                    speed,
                    m.backoff_s,
                    [m.runs["clean"], m.runs["clean_retry"]],
                    "both measured: retry off and on, no injected errors (Welch CI95 on the ratio)",
                )
            )
        # Both sides from the one run with automatic retry, so that drift between runs (a busy host) cancels:
        # a retried request spent its failed attempt, the back-off and the retry; a caller who re-sends spends
        # the failed attempt, its own delay and the new request. Per request the difference is the share of
        # requests that failed once (f, Wilson CI95) times (resend - back-off).
        run = m.runs["faulty_retry"]
        recs = [r for r in run.request_records if r.e2e_ms is not None]
        retried = sum(1 for r in recs if (r.attempts or 1) > 1)
        f_lo, f_hi = stats.wilson_interval(retried, len(recs))
        f_mid = retried / len(recs) if recs else 0.0
        b = float(m.backoff_s or 0.0)
        t = m.t_auto

        def current(f: float, r_s: float, t_ms: float, b: float = b) -> float:
            return t_ms + f * 1000.0 * max(r_s - b, 0.0)

        mid_t = t["mean"]
        lo_t, hi_t = (t["lo"] or mid_t), (t["hi"] or mid_t)
        cur = (
            current(f_lo, resend[0], lo_t),
            current(f_mid, sum(resend) / 2, mid_t),
            current(f_hi, resend[1], hi_t),
        )
        speed = (
            current(f_lo, resend[0], hi_t) / hi_t,
            cur[1] / mid_t,
            current(f_hi, resend[1], lo_t) / lo_t,
        )
        rows.append(
            RatePlan(
                k,
                m.p,
                cur,
                m.t_auto,
                speed,
                m.backoff_s,
                [m.runs["faulty"], m.runs["faulty_retry"]],
                f"both from the run with automatic retry ({retried} of {len(recs)} requests retried): "
                "current adds, per "
                f"retried request, a caller's re-send after {resend[0]:g}–{resend[1]:g} s (assumed) in place of the "
                f"{b:g} s back-off",
            )
        )
    return rows, missing
