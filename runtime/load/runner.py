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
from core.kinds import load_stats
from core.kinds.load import LoadSpec, LoadTest
from runtime.load import workload
from runtime.load.scheduler import LevelPlan, run_level

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
        async with transport.client(connections(test, lv)) as client:
            reqs, info = await workload.build(
                transport, client, test.workload, planned, idx
            )
            plan = LevelPlan(
                test.profile,
                lv,
                idx,
                reqs,
                seed=test.seed,
                max_concurrency=test.max_concurrency,
                check_every=1 if rule else None,
                min_requests=min_n or 1,
                stop_rule=rule,
                seed_base=idx * 100_000,
            )
            levels.append(await run_level(transport, client, plan))
        lost = not transport.alive()
    summary = load_stats.sweep_summary(levels, test.slo, test.profile)
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
