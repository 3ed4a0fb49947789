"""The ``load`` kind's loop: warm up, then each level of the profile, one after another.

Returns an :class:`Outcome` (metrics, raw samples, details); the backend turns it into its
result. A run whose server is lost, or in which no request succeeded, has ``failure`` set and
keeps every record it made.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from core import precision as precision_mod
from core.kinds import load_stats, steady
from core.kinds.load import LoadSpec, LoadTest
from runtime.load import repeats, workload
from runtime.load.gpu_telemetry import GpuSampler
from runtime.load.scheduler import LevelPlan, run_level
from runtime.load.telemetry import Scraper

WARMUP_INDEX = 100_000  # the warm-up's prompts are drawn apart from every level's
OPEN_LOOP_CONNECTIONS = 512


@dataclass
class Outcome:
    metrics: dict[str, list[float]]
    samples: dict[str, Any]
    details: dict[str, Any]
    failure: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def connections(test: LoadSpec, level: float) -> int:
    if test.open_loop:
        return test.max_concurrency or OPEN_LOOP_CONNECTIONS
    return max(1, int(level))


async def warmup(transport: Any, test: LoadSpec) -> list[dict[str, Any]]:
    """``warmup_requests`` untimed requests, one at a time (the server's first requests are slow)."""
    if not test.warmup_requests or test.warmup is False:
        return []
    out = []
    async with transport.client(1) as client:
        reqs, _ = await workload.build(
            transport, client, test.workload, test.warmup_requests, WARMUP_INDEX
        )
        origin = time.perf_counter_ns()
        for i, r in enumerate(reqs):
            if not transport.alive():
                break
            out.append(
                await transport.send(
                    client,
                    {**transport.base_body(), **r.body, "seed": 900_000 + i},
                    origin,
                )
            )
    return out


def level_plan(
    transport: Any,
    test: LoadSpec,
    level: float,
    index: int,
    reqs: list[workload.Request],
    *,
    stop_rule=None,
    check_every: int | None = None,
    min_requests: int = 1,
) -> LevelPlan:
    """One level's plan from the test: its arrival shape (a trace's own times, bursts, a ramp), its
    conversations (multi_turn), its stop rules (the caller's, then over-saturation) and its telemetry."""
    times = (
        [float(r.meta["trace_t_s"]) for r in reqs]
        if test.workload.kind == "trace"
        else None
    )
    sessions = None
    if test.workload.kind in ("multi_turn", "agent"):
        order: dict[str, list[int]] = {}
        for i, r in enumerate(reqs):
            order.setdefault(str(r.meta.get("session")), []).append(i)
        sessions = list(order.values())
    rule = stop_rule
    if test.oversaturation_stop:

        def rule(records: list[dict[str, Any]]) -> str | None:
            why = stop_rule(records) if stop_rule is not None else None
            if why:
                return why
            o = steady.oversaturation(records)
            return steady.reason(o) if o["oversaturated"] else None

        check_every = min(check_every or 4, 4)
    return LevelPlan(
        test.profile,
        level,
        index,
        reqs,
        seed=test.seed,
        max_concurrency=test.max_concurrency,
        check_every=check_every,
        min_requests=min_requests,
        stop_rule=rule,
        seed_base=index * 100_000,
        times=times,
        burstiness=test.burstiness,
        ramp_up=test.ramp_up,
        ramp_up_start=test.ramp_up_start,
        sessions=sessions,
        agent=test.workload.kind == "agent",
        think_time_s=test.workload.think_time_s,
        telemetry=Scraper(transport, test.telemetry_interval_s)
        if test.telemetry_interval_s
        else None,
        # NVML at the scrape's interval: the GPUs a loopback server shares with this process
        gpu_telemetry=GpuSampler(
            test.telemetry_interval_s, base_url=getattr(transport, "base_url", None)
        )
        if test.telemetry_interval_s
        else None,
    )


def failure_of(records: list[dict[str, Any]], lost: bool, what: str) -> str | None:
    if lost:
        bad = sum(1 for r in records if not r.get("ok"))
        return f"the server was lost during the {what}; {bad} of {len(records)} requests failed"
    if records and not any(r.get("ok") for r in records):
        reasons = sorted({(r.get("error") or {}).get("reason", "?") for r in records})
        return f"none of the {len(records)} requests succeeded ({', '.join(reasons)})"
    return None


def _precision_rule(test: LoadTest):
    """A stop rule from the test's precision (repeat to a precision, per level), or None."""
    p = test.precision
    if p is None:
        return None, test.requests, None

    def rule(records: list[dict[str, Any]]) -> str | None:
        rep = precision_mod.Repeater(p, test.requests, "e2e_ms")
        for r in records:
            rep.add(r.get(rep.metric) if r.get("ok") else None)
        return None if rep.more() else rep.stop_reason

    return rule, p.max_repetitions, p.min_repetitions


async def _run(transport: Any, test: LoadTest) -> Outcome:
    warm = await warmup(transport, test)
    rule, planned, min_n = _precision_rule(test)
    levels: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    lost = False
    for idx, lv in enumerate(test.levels):
        if lost:
            origin = time.perf_counter_ns()
            levels.append(
                {
                    "level": lv,
                    "index": idx,
                    "wall_s": 0.0,
                    "planned": planned,
                    "stop_reason": "server_lost",
                    "requests": [
                        transport.not_sent(
                            "server_lost",
                            "not sent: the server was lost at an earlier level",
                            origin,
                        )
                        for _ in range(planned)
                    ],
                }
            )
            continue
        parts, used = [], []
        async with transport.client(connections(test, lv)) as client:
            for rep in range(test.repeats):
                if rep and not transport.alive():
                    break
                reset = (
                    await transport.reset_cache(client, test.cache_reset)
                    if test.cache_reset != "none"
                    else None
                )
                spec = repeats.workload_for(test, rep)
                reqs, info = await workload.build(transport, client, spec, planned, idx)
                plan = level_plan(
                    transport,
                    test,
                    lv,
                    idx,
                    reqs,
                    stop_rule=rule,
                    check_every=1 if rule else None,
                    min_requests=min_n or 1,
                )
                plan.seed = repeats.arrival_seed(test, rep)
                parts.append(await run_level(transport, client, plan))
                used.append(
                    {
                        "workload_seed": spec.seed,
                        "arrival_seed": plan.seed,
                        "same_workload": test.repeat_workload == "same",
                        "warm_intended": test.warm_intended,
                        **({"cache_reset": reset} if reset is not None else {}),
                    }
                )
        levels.append(repeats.join(parts, used))
        lost = not transport.alive()
    summary = load_stats.sweep_summary(
        levels, test.slo, test.profile, steady_state=test.steady_state
    )
    answer = summary["answer"]
    records = [r for lv in levels for r in lv["requests"]]
    metrics: dict[str, list[float]] = {
        "slo_max_level": [answer["low"]],
        "capacity": [answer["answer"]],
        "capacity_low": [answer["low"]],
        "capacity_high": [answer["high"]],
        "requests_sent": [float(len(records))],
        "failed_requests": [float(sum(1 for r in records if not r.get("ok")))],
    }
    if summary["peak_aggregate_tps"] is not None:
        metrics["peak_aggregate_tps"] = [summary["peak_aggregate_tps"]]
    details = {
        "summary": summary,
        "workload": info,
        "answer_text": load_stats.answer_text(answer, test.slo, test.level_unit()),
        "warmup_requests": len(warm),
    }
    return Outcome(
        metrics,
        {"levels": levels, "warmup": warm},
        details,
        failure_of(records, lost, "load test"),
    )


def run(transport: Any, test: LoadTest) -> Outcome:
    return asyncio.run(_run(transport, test))
