"""The capacity search (kind ``capacity``; the method is described in ``core/kinds/capacity.py``):
the measuring. Which level to measure next, and why, is decided by ``runtime.load.capacity_search``
(pure, tested against a fake judge); this module measures each level it asks for, stopping a level
as soon as its verdict is settled at the look confidence (or, open loop, its queue visibly grows
without bound), so an overloaded level costs a few dozen requests. A re-visited level (a re-check)
draws new prompts and seeds and is judged on both visits pooled. The artifact keeps each visit: the
level, why it was visited, its verdict (and whether it decided anything), its cost.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.kinds import load_stats
from core.kinds.capacity import CapacityTest
from runtime.load import repeats, workload
from runtime.load.capacity_search import Search
from runtime.load.runner import Outcome, connections, failure_of, level_plan, warmup
from runtime.load.scheduler import run_level

RECHECK_INDEX = (
    500  # a re-check's prompts and seeds are drawn apart from every first visit's
)


def stop_rule(test: CapacityTest):
    """Stop a level once its SLO verdict is settled at the look confidence (a clear miss settles at the
    first look). Queue growth alone never stops a level: on a short level it is a single-run statistic
    like any other (measured here: 22 requests at 1.2 req/s, far below the knee, "grew" by Mann-Kendall),
    and a level stopped before its verdict settled decides nothing and costs a re-check."""
    conf = test.look_confidence()

    def rule(records: list[dict[str, Any]]) -> str | None:
        v = load_stats.slo_verdicts(records, test.slo, conf)
        if v["verdict"] != "unresolved":
            return f"verdict_{v['verdict']}"
        return None

    return rule


def pooled(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """A level measured twice as one: the second visit's records after the first's (their times shifted
    by the first visit's wall time, each marked ``visit: 2``), walls and plans added."""
    shift = (first.get("wall_s") or 0.0) * 1000.0
    return {
        **first,
        "requests": first["requests"]
        + repeats.shifted(again["requests"], shift, visit=2),
        "wall_s": (first.get("wall_s") or 0.0) + (again.get("wall_s") or 0.0),
        "planned": (first.get("planned") or 0) + (again.get("planned") or 0),
        "stop_reason": f"{first.get('stop_reason')}; re-check: {again.get('stop_reason')}",
        "rechecked": True,
        "visits": int(first.get("visits") or 1) + 1,
    }


async def _search(transport: Any, test: CapacityTest) -> Outcome:
    warm = await warmup(transport, test)
    grid = list(test.levels)
    conf = test.look_confidence()
    rule = stop_rule(test)
    closed = not test.open_loop
    measured: dict[int, dict[str, Any]] = {}
    visits: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    state: dict[str, Any] = {"lost": False}
    search = Search(
        grid,
        closed,
        recheck=test.recheck,
        budget=test.budget * len(grid) * test.max_requests,
        level_cost=test.max_requests,
    )

    async def visit(i: int, why: str) -> None:
        t0 = time.perf_counter()
        again = (
            i in measured
        )  # a re-check: new prompts and seeds, pooled with the first visit
        async with transport.client(connections(test, grid[i])) as client:
            nonlocal info
            reset = (
                await transport.reset_cache(client, test.cache_reset)
                if test.cache_reset != "none"
                else None
            )
            reqs, info = await workload.build(
                transport,
                client,
                test.workload,
                test.max_requests,
                i + (RECHECK_INDEX if again else 0),
            )
            level_rule = rule
            if again:
                before = measured[i]["requests"]

                def level_rule(records: list[dict[str, Any]]) -> str | None:
                    v = load_stats.slo_verdicts(before + records, test.slo, conf)
                    return (
                        f"verdict_{v['verdict']}"
                        if v["verdict"] != "unresolved"
                        else None
                    )

            plan = level_plan(
                transport,
                test,
                grid[i],
                i,
                reqs,
                stop_rule=level_rule,
                check_every=test.check_every,
                min_requests=test.min_requests,
            )
            if again:
                plan.seed_base += RECHECK_INDEX * 100_000
            lv = await run_level(transport, client, plan)
            if reset is not None:
                lv["cache_reset"] = reset
        measured[i] = pooled(measured[i], lv) if again else lv
        s = load_stats.level_summary(
            measured[i], test.slo, test.profile, conf, steady_state=test.steady_state
        )
        b = search.record(i, s)
        visits.append(
            {
                "level": grid[i],
                "index": i,
                "why": why,
                "verdict": s["slo"]["verdict"],
                "decisive": load_stats.decisive(s),
                "boundary": b,
                "requests": s["requests"],
                "stop_reason": measured[i].get("stop_reason"),
                "seconds": round(time.perf_counter() - t0, 3),
            }
        )
        if not transport.alive():
            state["lost"] = True

    while not state["lost"] and (step := search.next()) is not None:
        await visit(*step)
    state["stopped"] = search.stopped
    if state["lost"]:
        state["stopped"] = "server lost"
    levels = [measured[k] for k in sorted(measured)]
    summary = load_stats.sweep_summary(
        levels,
        test.slo,
        test.profile,
        grid=grid,
        confidence=conf,
        steady_state=test.steady_state,
    )
    answer = summary["answer"]
    records = [r for lv in levels for r in lv["requests"]]
    sent = len(records)
    exhaustive = len(grid) * test.max_requests
    metrics: dict[str, list[float]] = {
        "capacity": [answer["answer"]],
        "capacity_low": [answer["low"]],
        "capacity_high": [answer["high"]],
        "requests_sent": [float(sent)],
        "failed_requests": [float(sum(1 for r in records if not r.get("ok")))],
    }
    if summary["peak_aggregate_tps"] is not None:
        metrics["peak_aggregate_tps"] = [summary["peak_aggregate_tps"]]
    details = {
        "summary": summary,
        "workload": info,
        "answer_text": load_stats.answer_text(answer, test.slo, test.level_unit()),
        "search": {
            "grid": grid,
            "visits": visits,
            "stopped": state["stopped"],
            "requests_sent": sent,
            "exhaustive_requests": exhaustive,
            "cost_ratio": sent / exhaustive if exhaustive else None,
            "looks": test.looks(),
            "rechecked": search.rechecked,
            "budget": test.budget,
            "budget_stop": search.budget_stop,
            "look_confidence": conf,
            "confidence": test.slo.confidence,
        },
        "warmup_requests": len(warm),
    }
    return Outcome(
        metrics,
        {"levels": levels, "warmup": warm},
        details,
        failure_of(records, state["lost"], "capacity search"),
    )


def run(transport: Any, test: CapacityTest) -> Outcome:
    return asyncio.run(_search(transport, test))
