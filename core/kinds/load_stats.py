"""Load-test statistics: pure functions over per-request records (kinds ``load`` and ``capacity``).

A request record (``runtime.load``) is the HTTP client's record (``ok``, ``error``, ``ttft_ms``,
``tpot_ms``, ``e2e_ms``, ``output_tokens``, ``chunk_ms`` ...) plus the schedule: ``scheduled_ms``
(when the profile wanted it sent, from the level's origin), ``start_ms`` (when it was sent),
``queue_ms`` (sent - scheduled: the client's own wait, never part of the server's latency) and
``dispatch_lag_ms`` (how late the client's event loop got to it). The backend computes these
figures when it measures and the pipelines compute them again from the raw records, so a page
can never disagree with the samples it links to.

Definitions (the Methodology page repeats them):

* every latency percentile is over *all* requests of a level, a failed request counting as
  infinitely slow (it never met any limit), with its distribution-free CI95 from order statistics
  (``core.stats.percentile_interval``); a percentile whose interval does not exist yet says how
  many more requests it needs;
* an SLO verdict per limit is ``meets`` (the percentile's upper confidence bound is within the
  limit), ``misses`` (its lower bound is above) or ``unresolved`` (with the requests that would
  settle it at the observed share); a level meets the SLOs when every limit meets, misses them
  when one misses;
* TPOT of a successful one-token answer is 0 (it meets any TPOT limit);
* client-bound: the client could not keep the schedule (its dispatch lag's p95 above
  ``max(10 ms, a quarter of the mean gap between arrivals)``): that level's latencies are the
  client's as much as the server's, and it is reported, never used as a verdict;
* saturated (open loop): TTFT grows over the level (Mann-Kendall trend, p < 0.01) to more than
  twice its start, or requests completed (first to last completion) at under 90% of the rate they
  were scheduled at; (closed loop) the aggregate throughput grew by less than 5% over the level below
  while the users grew.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from core import stats
from core import telemetry as telemetry_stats
from core.kinds import session_stats, steady
from core.kinds.workload import Slo

LATENCY = ("ttft_ms", "tpot_ms", "e2e_ms")
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
#: Bumped whenever these figures are computed differently: a stored summary of another version is recomputed.
# 2: ITL, counted prompt lengths, steady-state window, telemetry, turns, warm reuse;
# 3: window throughput by end; 4-6: runs pooled in a level, borderline and contradicted verdicts (capacity_interval)
LOAD_STATS_VERSION = 6
SATURATION_GROWTH = (
    0.05  # closed loop: throughput growth below this over the level below = saturated
)
COMPLETION_RATIO = 0.90  # open loop: completed / offered below this = saturated
#: A verdict is borderline when an observed percentile lies within this factor of its limit (either
#: side): one run's order statistics treat its requests as independent, but in a queue a burst slows
#: the requests around it together, so near a limit one run's verdict flips on a repeat (issue 31:
#: one level measured six times gave misses, misses, meets, misses, unresolved, misses). A borderline
#: verdict decides a capacity interval only once the level was measured in two runs or more, pooled.
BORDER = 1.5


def clean(x: Any) -> Any:
    """JSON-safe: infinities and NaN become None (the artifact writer refuses them)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


def latency_values(records: Sequence[dict[str, Any]], metric: str) -> list[float]:
    """One value per request for an SLO: the metric of a successful request (TPOT of a one-token
    answer: 0), +inf for a failed one."""
    out = []
    for r in records:
        if not r.get("ok"):
            out.append(math.inf)
            continue
        v = r.get(metric)
        if v is None:
            v = 0.0 if metric == "tpot_ms" else math.inf
        out.append(float(v))
    return out


def percentile_table(
    records: Sequence[dict[str, Any]], metric: str, confidence: float = 0.95
) -> dict[str, Any]:
    """p50/p90/p95/p99 of a metric over all requests (failures as infinite), each with its interval."""
    vals = latency_values(records, metric)
    out = {}
    for p in PERCENTILES:
        iv = stats.percentile_interval(vals, p, confidence)
        iv["infinite"] = iv["value"] is not None and math.isinf(iv["value"])
        out[f"p{p:g}"] = clean(iv)
    ok = [v for v in vals if math.isfinite(v)]
    out["mean_ok"] = float(np.mean(ok)) if ok else None
    out["n_ok"] = len(ok)
    return out


def slo_verdicts(
    records: Sequence[dict[str, Any]], slo: Slo, confidence: float | None = None
) -> dict[str, Any]:
    """Each limit's verdict (core.stats.quantile_vs_limit) and the level's: meets / misses / unresolved."""
    conf = confidence if confidence is not None else slo.confidence
    per = {}
    for metric, limit in slo.limits().items():
        v = stats.quantile_vs_limit(
            latency_values(records, metric), slo.percentile, limit, conf
        )
        v["observed_within"] = v["value"] is not None and v["value"] <= limit
        # a bound that falls on a failed request is infinite: kept as a flag (JSON has no infinity)
        v["infinite"] = [
            k
            for k in ("value", "lower", "upper")
            if v[k] is not None and math.isinf(v[k])
        ]
        per[metric] = clean(v)
    verdicts = [v["verdict"] for v in per.values()]
    overall = (
        "meets"
        if verdicts and all(x == "meets" for x in verdicts)
        else "misses"
        if "misses" in verdicts
        else "unresolved"
    )
    needs = [v["needs"] for v in per.values() if v["verdict"] == "unresolved"]
    return {
        "verdict": overall,
        "confidence": conf,
        "limits": per,
        "observed_meets": bool(per) and all(v["observed_within"] for v in per.values()),
        "needs": (None if any(n is None for n in needs) else max(needs))
        if needs
        else 0,
    }


def meets_every_limit(record: dict[str, Any], slo: Slo) -> bool:
    """One request within every limit (goodput counts these)."""
    if not record.get("ok"):
        return False
    for metric, limit in slo.limits().items():
        v = record.get(metric)
        if v is None:
            v = 0.0 if metric == "tpot_ms" else math.inf
        if v > limit:
            return False
    return True


def _pct(values: Sequence[float], q: float) -> float | None:
    arr = [v for v in values if v is not None]
    return float(np.percentile(arr, q)) if arr else None


def schedule_stats(
    records: Sequence[dict[str, Any]], profile: str, level: float
) -> dict[str, Any]:
    """Did the client keep the schedule? Its own queueing (queue_ms) and lateness (dispatch lag)."""
    queue = [r.get("queue_ms") for r in records if r.get("queue_ms") is not None]
    lag = [
        r.get("dispatch_lag_ms")
        for r in records
        if r.get("dispatch_lag_ms") is not None
    ]
    sched = sorted(
        r["scheduled_ms"] for r in records if r.get("scheduled_ms") is not None
    )
    sent = sorted(
        r["start_ms"]
        for r in records
        if r.get("start_ms") is not None and r.get("attempts", 1) > 0
    )
    out: dict[str, Any] = {
        "queue_ms_p50": _pct(queue, 50),
        "queue_ms_p95": _pct(queue, 95),
        "queue_ms_max": max(queue) if queue else None,
        "dispatch_lag_ms_p50": _pct(lag, 50),
        "dispatch_lag_ms_p95": _pct(lag, 95),
        "dispatch_lag_ms_max": max(lag) if lag else None,
        "scheduled_rps": (len(sched) - 1) / ((sched[-1] - sched[0]) / 1000)
        if len(sched) > 2 and sched[-1] > sched[0]
        else None,
        "sent_rps": (len(sent) - 1) / ((sent[-1] - sent[0]) / 1000)
        if len(sent) > 2 and sent[-1] > sent[0]
        else None,
        "drift_ms": None,
        "tolerance_ms": None,
        "client_bound": False,
    }
    if profile in ("constant", "poisson", "gamma", "trace") and lag:
        k = max(1, len(lag) // 10)
        ordered = [
            r.get("dispatch_lag_ms")
            for r in sorted(records, key=lambda r: r.get("scheduled_ms") or 0)
            if r.get("dispatch_lag_ms") is not None
        ]
        out["drift_ms"] = float(np.median(ordered[-k:]) - np.median(ordered[:k]))
        rate = out["scheduled_rps"] if profile == "trace" else level
        tol = max(10.0, 0.25 * 1000.0 / rate) if rate else 10.0
        out["tolerance_ms"] = tol
        out["client_bound"] = bool(
            out["dispatch_lag_ms_p95"] is not None and out["dispatch_lag_ms_p95"] > tol
        )
    return out


def queue_growth(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Does TTFT grow over the level, in the order requests were scheduled? (failures count at their elapsed time)"""
    ordered = sorted(
        records,
        key=lambda r: (
            r.get("scheduled_ms")
            if r.get("scheduled_ms") is not None
            else r.get("start_ms") or 0
        ),
    )
    ttft = [
        r["ttft_ms"]
        if r.get("ok") and r.get("ttft_ms") is not None
        else r.get("elapsed_ms")
        for r in ordered
    ]
    ttft = [float(v) for v in ttft if v is not None]
    tr = stats.trend(ttft)
    if tr is None:
        return {"tau": None, "p_value": None, "ratio_end_start": None, "growing": False}
    k = max(2, len(ttft) // 4)
    start, end = float(np.median(ttft[:k])), float(np.median(ttft[-k:]))
    ratio = end / start if start > 0 else None
    growing = bool(
        tr["tau"] > 0 and tr["p_value"] < 0.01 and ratio is not None and ratio > 2.0
    )
    return {
        "tau": tr["tau"],
        "p_value": tr["p_value"],
        "ratio_end_start": ratio,
        "growing": growing,
    }


def client_overhead(
    level: dict[str, Any], records: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """What the client itself cost: event-loop lag while the level ran, CPU share, parse time per request."""
    c = level.get("client") or {}
    parse = [
        r.get("client_parse_ms")
        for r in records
        if r.get("client_parse_ms") is not None
    ]
    wall = level.get("wall_s") or 0
    return {
        "loop_lag_ms_p50": c.get("loop_lag_ms_p50"),
        "loop_lag_ms_p99": c.get("loop_lag_ms_p99"),
        "loop_lag_ms_max": c.get("loop_lag_ms_max"),
        "cpu_share": (c.get("cpu_s") / wall)
        if c.get("cpu_s") is not None and wall
        else None,
        "parse_ms_per_request": float(np.mean(parse)) if parse else None,
        "loadavg_1m_start": c.get("loadavg_1m_start"),
        "loadavg_1m_end": c.get("loadavg_1m_end"),
    }


def prefix_cache(
    records: Sequence[dict[str, Any]], level: dict[str, Any]
) -> dict[str, Any]:
    """Prefix cache hit rate: prompt tokens the server took from its cache / prompt tokens, from the
    requests that reported it (usage.prompt_tokens_details.cached_tokens or llama-server's
    timings.cache_n), and from the server's /metrics counters where it exposes them."""
    rep = [
        r
        for r in records
        if r.get("ok") and r.get("cached_tokens") is not None and r.get("prompt_tokens")
    ]
    out: dict[str, Any] = {
        "requests_reporting": len(rep),
        "hit_rate": None,
        "source": None,
        "metrics_hit_rate": None,
    }
    if rep:
        out["hit_rate"] = sum(r["cached_tokens"] for r in rep) / sum(
            r["prompt_tokens"] for r in rep
        )
        out["source"] = sorted({r.get("cached_tokens_source") or "usage" for r in rep})
    m = (level.get("server_metrics") or {}).get("delta") or {}
    cached, fresh = (
        m.get("llamacpp:prompt_tokens_cached_total"),
        m.get("llamacpp:prompt_tokens_total"),
    )
    if cached is not None and fresh is not None and cached + fresh > 0:
        out["metrics_hit_rate"] = cached / (cached + fresh)
    return out


def itl_values(records: Sequence[dict[str, Any]]) -> list[float]:
    """Every gap between consecutive content chunks of the successful requests (the chat kind's
    ``itl_ms``; a load record keeps the chunk times, ``chunk_ms``, and the gaps are their differences)."""
    out: list[float] = []
    for r in records:
        if not r.get("ok"):
            continue
        if r.get("itl_ms"):
            out += [float(g) for g in r["itl_ms"]]
            continue
        c = r.get("chunk_ms") or []
        out += [float(b - a) for a, b in itertools.pairwise(c)]
    return out


def itl_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """ITL's distribution over every gap of the level: n, mean, stddev, median, p90/p95/p99, min, max
    (the chat kind's figures, without its outlier list and drift test: a level has thousands of gaps)."""
    gaps = itl_values(records)
    if not gaps:
        return None
    arr = np.asarray(gaps, float)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(arr, [50, 90, 95, 99]))
    return {
        "n": int(arr.size),
        "mean": float(arr.mean()),
        "stddev": float(arr.std(ddof=1)) if arr.size > 1 else None,
        "median": p50,
        "p90": p90,
        "p95": p95,
        "p99": p99,
        "min": float(arr.min()),
        "max": float(arr.max()),
    }


def warm_reuse(
    records: Sequence[dict[str, Any]], cache: dict[str, Any]
) -> dict[str, Any] | None:
    """A workload built not to share prefixes (each prompt starts with its own tag) whose prompts
    came from the server's cache anyway: a warm cache measured without meaning to (vLLM #52884)."""
    if any(
        r.get("prefix") is not None
        or r.get("turn") is not None
        or r.get("trace_row") is not None
        for r in records
    ):
        return None  # the cache is the point of these workloads
    rate = cache.get("hit_rate")
    if rate is None:
        return None
    return {"hit_rate": rate, "flagged": rate > WARM_REUSE_RATE}


WARM_REUSE_RATE = 0.5  # above this share of prompt tokens from the cache, a no-reuse workload ran warm
COLD_RATE = (
    0.1  # at most this share of prompt tokens from the cache: the repeat ran cold
)


def repeat_stats(level: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Each repeat of a level (``runtime.load.repeats``): its seeds, its cache reset and what the server
    said, the prompt tokens it reported from its cache, ``cold`` (at most COLD_RATE of them) and
    ``flagged``: a repeat that found its prompts in the cache (above WARM_REUSE_RATE) in a test that did
    not mean it to (``warm_intended`` false) and whose workload shares no prefixes by design."""
    reps = level.get("repeats")
    if not reps:
        return None
    records = level.get("requests") or []
    # warm_reuse judges only workloads built to share no prefixes (None for the others)
    no_sharing = warm_reuse(records, {"hit_rate": 0.0}) is not None
    out = []
    for info in reps:
        r = int(info.get("repeat") or 0)
        mine = [x for x in records if int(x.get("repeat") or 0) == r]
        rate = prefix_cache(mine, {})["hit_rate"]
        reset = info.get("cache_reset") or None
        out.append(
            {
                "repeat": r,
                "requests": len(mine),
                "workload_seed": info.get("workload_seed"),
                "arrival_seed": info.get("arrival_seed"),
                "same_workload": bool(info.get("same_workload")),
                "cache_reset": reset,
                "hit_rate": rate,
                "cold": None if rate is None else rate <= COLD_RATE,
                "flagged": bool(
                    rate is not None
                    and rate > WARM_REUSE_RATE
                    and not info.get("warm_intended")
                    and no_sharing
                ),
            }
        )
    return out


def _steady(
    records: Sequence[dict[str, Any]], fraction: float | None
) -> dict[str, Any] | None:
    """The steady-state window and the headline figures over the requests started inside it."""
    if not fraction:
        return None
    w = steady.window(records, fraction)
    if w is None:
        return None
    inside = [records[i] for i in w.pop("indices")]
    # throughput: the requests that ended inside the window (latency: those that started in it)
    ok = [
        r
        for r in records
        if r.get("ok")
        and r.get("end_ms") is not None
        and w["start_ms"] <= r["end_ms"] <= w["end_ms"]
    ]
    span = (w["end_ms"] - w["start_ms"]) / 1000.0
    toks = sum(int(r.get("output_tokens") or 0) for r in ok)
    return {
        **w,
        "span_s": span,
        "aggregate_tps": toks / span if span > 0 else None,
        "completed_rps": len(ok) / span if span > 0 else None,
        "percentiles": {m: percentile_table(inside, m) for m in LATENCY},
        "itl_ms": itl_summary(inside),
    }


def _runs_of(records: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A pooled level's records, run by run (a search's visits, a load test's repeats)."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(
            (int(r.get("visit") or 1), int(r.get("repeat") or 0)), []
        ).append(r)
    return [groups[k] for k in sorted(groups)]


def _saturated_run(
    records: Sequence[dict[str, Any]], profile: str, level: float
) -> bool:
    """One open-loop run saturated: its TTFT grew over it, or it completed under COMPLETION_RATIO of its arrivals."""
    if queue_growth(records)["growing"]:
        return True
    ends = sorted(
        r["end_ms"] for r in records if r.get("ok") and r.get("end_ms") is not None
    )
    arrivals = schedule_stats(records, profile, level).get("scheduled_rps")
    if len(ends) > 2 and ends[-1] > ends[0] and arrivals:
        return (len(ends) - 1) / (
            (ends[-1] - ends[0]) / 1000.0
        ) / arrivals < COMPLETION_RATIO
    return False


def level_summary(
    level: dict[str, Any],
    slo: Slo,
    profile: str,
    confidence: float | None = None,
    steady_state: float | None = None,
) -> dict[str, Any]:
    """Everything one level shows: counts, errors, throughput, percentiles with bounds, SLO verdicts,
    the client's schedule, saturation, the client's overhead, the prefix cache, ITL, the steady-state
    window (when asked), the server's telemetry, per-turn figures of conversations."""
    records = level.get("requests") or []
    ok = [r for r in records if r.get("ok")]
    reasons = Counter(
        (r.get("error") or {}).get("reason", "unknown")
        for r in records
        if not r.get("ok")
    )
    wall = level.get("wall_s") or 0.0
    out_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    n = len(records)
    good = sum(1 for r in records if meets_every_limit(r, slo))
    sched = schedule_stats(records, profile, float(level["level"]))
    qg = queue_growth(records)
    completed_rps = len(ok) / wall if wall else None
    offered = (
        float(level["level"])
        if profile in ("constant", "poisson", "gamma")
        else (sched.get("scheduled_rps") if profile == "trace" else None)
    )
    # kept up or not: the rate requests completed (between the first and the last completion) against
    # the rate they were actually scheduled at (a short Poisson level's realised rate is not its nominal one)
    ends = sorted(r["end_ms"] for r in ok if r.get("end_ms") is not None)
    departures = (
        (len(ends) - 1) / ((ends[-1] - ends[0]) / 1000.0)
        if len(ends) > 2 and ends[-1] > ends[0]
        else None
    )
    arrivals = sched.get("scheduled_rps")
    ratio = (
        departures / arrivals
        if (offered and departures is not None and arrivals)
        else None
    )
    saturated_open = bool(
        offered and (qg["growing"] or (ratio is not None and ratio < COMPLETION_RATIO))
    )
    runs = _runs_of(records)
    if (
        offered and len(runs) > 1
    ):  # pooled runs: saturated when any run was, each read alone
        saturated_open = any(
            _saturated_run(rr, profile, float(level["level"])) for rr in runs
        )
    return clean(
        {
            "version": LOAD_STATS_VERSION,
            "level": level["level"],
            "requests": n,
            "ok": len(ok),
            "errors": n - len(ok),
            "error_reasons": dict(sorted(reasons.items())),
            "retried": sum(1 for r in records if (r.get("attempts") or 1) > 1),
            "stop_reason": level.get("stop_reason"),
            "runs": runs_pooled(level),
            "wall_s": wall,
            "output_tokens": out_tokens,
            "aggregate_tps": out_tokens / wall if wall else None,
            "completed_rps": completed_rps,
            "offered_rps": offered,
            "departure_rps": departures,
            "completion_ratio": ratio,
            "goodput_rps": good / wall if wall else None,
            "slo_attainment": good / n if n else None,
            "prompt_tokens_mean": float(
                np.mean([r["prompt_tokens"] for r in ok if r.get("prompt_tokens")])
            )
            if any(r.get("prompt_tokens") for r in ok)
            else None,
            "output_tokens_mean": out_tokens / len(ok) if ok else None,
            "percentiles": {m: percentile_table(records, m) for m in LATENCY},
            "slo": slo_verdicts(records, slo, confidence),
            "schedule": sched,
            "queue_growth": qg,
            "saturated": saturated_open,
            "client": client_overhead(level, records),
            "prefix_cache": (cache := prefix_cache(records, level)),
            "prompt_tokens_counted_mean": float(
                np.mean(
                    [
                        r["prompt_tokens_counted"]
                        for r in ok
                        if r.get("prompt_tokens_counted")
                    ]
                )
            )
            if any(r.get("prompt_tokens_counted") for r in ok)
            else None,
            "itl_ms": itl_summary(records),
            "steady": _steady(records, steady_state),
            "telemetry": telemetry_stats.summary(level.get("telemetry")),
            "gpu_telemetry": telemetry_stats.gpu_summary(level.get("gpu_telemetry")),
            "turns": session_stats.turns(records),
            "warm_reuse": warm_reuse(records, cache),
            **({"repeats": reps} if (reps := repeat_stats(level)) is not None else {}),
        }
    )


def runs_pooled(level: dict[str, Any]) -> int:
    """How many runs a level's records pool: its repeats, or a capacity search's visits (a re-check), else 1."""
    return max(1, len(level.get("repeats") or []), int(level.get("visits") or 1))


def borderline(s: dict[str, Any]) -> bool:
    """A level whose verdict could flip on a repeat: a deciding limit's observed percentile within BORDER
    of it. A level that misses is borderline only when every limit it misses is (a clear miss of one
    limit decides, whatever the others show); one that meets, or is unresolved, when any limit is."""
    slo = s.get("slo") or {}
    limits = slo.get("limits", {})

    def near(v: dict[str, Any]) -> bool:
        value, limit = v.get("value"), v.get("limit")
        if value is None or not limit or v.get("infinite"):
            return False
        return bool(limit / BORDER <= value <= limit * BORDER)

    if slo.get("verdict") == "misses":
        missed = [v for v in limits.values() if v.get("verdict") == "misses"]
        return bool(missed) and all(near(v) for v in missed)
    return any(near(v) for v in limits.values())


def decisive(s: dict[str, Any]) -> str | None:
    """A level's verdict as a capacity interval reads it: ``meets`` or ``misses`` when it can bound the
    interval, None when it cannot: unresolved, client-bound, borderline from a single run, or a meet of
    a saturated level (open loop: its queue grew over the level, or it completed under 90% of the
    arrivals; its percentiles are those of a queue that had not reached its steady state, so a meet
    says nothing about the capacity, while a miss stands: the steady state is worse)."""
    if (s.get("schedule") or {}).get("client_bound"):
        return None
    v = (s.get("slo") or {}).get("verdict")
    if v not in ("meets", "misses"):
        return None
    if v == "meets" and s.get("saturated"):
        return None  # a queue still growing: the steady state is worse than what the run saw
    if borderline(s) and int(s.get("runs") or 1) < 2:
        return None
    return str(v)


def capacity_interval(
    summaries: Sequence[dict[str, Any]], grid: Sequence[float]
) -> dict[str, Any]:
    """The answer and its interval from the verdicts of the levels measured (any subset of ``grid``),
    the one reading rule of a capacity search and of an exhaustive sweep.

    Only decisive verdicts (``decisive``) bound it: a level unresolved, client-bound, or borderline
    from one run leaves the interval open across it; and no monotonicity is assumed: a miss that a
    level above it contradicts (its observed percentiles within the limits, whatever its verdict), or
    a meet that a level below it contradicts (observed beyond them), bounds nothing either
    (``non_monotonic`` says so). ``low``: the
    highest level decisively meeting the SLOs, uncontradicted, at or below ``high`` (0 when none);
    ``high``: the grid level just below the lowest uncontradicted decisive miss (``lowest_miss``; the
    top of the grid when there is none: ``open_above``); ``answer``: the highest measured level in
    [low, high] whose observed percentiles are within the limits (else ``low``).
    ``undecided_levels``: the measured levels whose verdicts bound nothing by themselves
    (``borderline_levels`` those among them borderline from one run)."""
    grid = sorted(float(g) for g in grid)
    by = {float(s["level"]): s for s in summaries}
    usable = {
        lv: s
        for lv, s in by.items()
        if not (s.get("schedule") or {}).get("client_bound")
    }
    verdict = {lv: decisive(s) for lv, s in usable.items()}
    within = {lv: bool(s["slo"].get("observed_meets")) for lv, s in usable.items()}
    # monotonicity is assumed by nothing here: a miss bounds the interval only when no level above it was
    # observed within the limits (whatever its verdict), a meet only when none below it was observed beyond
    misses = sorted(
        lv
        for lv, v in verdict.items()
        if v == "misses" and not any(within[u] for u in within if u > lv)
    )
    lowest_miss = misses[0] if misses else None
    below = [g for g in grid if lowest_miss is None or g < lowest_miss]
    high = below[-1] if below else 0.0
    meets = sorted(
        lv
        for lv, v in verdict.items()
        if v == "meets"
        and lv <= high
        and not any(not within[u] for u in within if u < lv)
    )
    low = meets[-1] if meets else 0.0
    observed = sorted(
        lv
        for lv, s in usable.items()
        if s["slo"]["observed_meets"] and low <= lv <= high
    )
    answer = observed[-1] if observed else low
    non_monotonic = any(
        not within[m] and any(within[u] for u in within if u > m) for m in within
    )
    return {
        "answer": answer,
        "low": low,
        "high": high,
        "open_above": lowest_miss is None,
        "lowest_miss": lowest_miss,
        "non_monotonic": non_monotonic,
        "undecided_levels": sorted(lv for lv, v in verdict.items() if v is None),
        "borderline_levels": sorted(
            lv
            for lv, s in usable.items()
            if verdict[lv] is None
            and s["slo"].get("verdict") in ("meets", "misses")
            and borderline(s)
        ),
        "saturated_meets": sorted(
            lv
            for lv, s in usable.items()
            if s["slo"].get("verdict") == "meets" and s.get("saturated")
        ),
        "client_bound_levels": sorted(
            lv for lv, s in by.items() if (s.get("schedule") or {}).get("client_bound")
        ),
    }


def closed_loop_saturation(summaries: Sequence[dict[str, Any]]) -> float | None:
    """The lowest level (users) at which aggregate throughput grew by less than SATURATION_GROWTH over
    the level measured below it: more users only queue from there on."""
    rows = sorted(
        (s for s in summaries if s.get("aggregate_tps")), key=lambda s: s["level"]
    )
    for a, b in zip(rows, rows[1:]):
        if b["aggregate_tps"] < a["aggregate_tps"] * (1.0 + SATURATION_GROWTH):
            return float(b["level"])
    return None


def sweep_summary(
    levels: Sequence[dict[str, Any]],
    slo: Slo,
    profile: str,
    grid: Sequence[float] | None = None,
    confidence: float | None = None,
    steady_state: float | None = None,
) -> dict[str, Any]:
    """Per-level summaries of a load test (or the levels a capacity search visited) and what they show."""
    rows = [
        level_summary(lv, slo, profile, confidence, steady_state)
        for lv in sorted(levels, key=lambda x: float(x["level"]))
    ]
    grid = list(grid) if grid is not None else [float(r["level"]) for r in rows]
    iv = capacity_interval(rows, grid)
    sat = (
        closed_loop_saturation(rows)
        if profile in ("synchronous", "concurrent")
        else next((float(r["level"]) for r in rows if r["saturated"]), None)
    )
    peak = max(
        (r for r in rows if r.get("aggregate_tps") is not None),
        key=lambda r: r["aggregate_tps"],
        default=None,
    )
    return clean(
        {
            "version": LOAD_STATS_VERSION,
            "profile": profile,
            "slo": slo.model_dump(),
            "levels": rows,
            "answer": iv,
            "saturation_level": sat,
            "peak_aggregate_tps": peak["aggregate_tps"] if peak else None,
            "peak_level": peak["level"] if peak else None,
            "requests": sum(r["requests"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "error_reasons": dict(
                sum((Counter(r["error_reasons"]) for r in rows), Counter())
            ),
            "client_bound_levels": iv["client_bound_levels"],
            "steady_state": steady_state,
            "warm_reuse_levels": [
                r["level"]
                for r in rows
                if (r.get("warm_reuse") or {}).get("flagged")
                or any(x["flagged"] for x in r.get("repeats") or [])
            ],
        }
    )


def stored_summary(stored: Any) -> dict[str, Any] | None:
    """A summary a run stored when it measured, if today's code would compute it the same way."""
    if (
        isinstance(stored, dict)
        and stored.get("version") == LOAD_STATS_VERSION
        and isinstance(stored.get("levels"), list)
    ):
        return stored
    return None


def answer_text(answer: dict[str, Any], slo: Slo, unit: str) -> str:
    """ "4 users [3, 5] at p95 TTFT ≤ 500 ms, p95 TPOT ≤ 50 ms" (plain text; pages escape it)."""

    def f(x: float) -> str:
        return f"{x:g}"

    above = " or more" if answer.get("open_above") else ""
    return (
        f"{f(answer['answer'])} {unit}{above} [{f(answer['low'])}, {f(answer['high'])}{'+' if above else ''}] "
        f"at {slo.describe()}"
    )
