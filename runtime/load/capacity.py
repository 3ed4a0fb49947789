"""The capacity search (kind ``capacity``; the method is described in ``core/kinds/capacity.py``).

Climb the grid by doubling steps (indices 0, 1, 3, 7, ...) while levels meet the SLOs and the
server is not saturated; a level left unresolved bounds nothing, so the climb goes on until a
level is confirmed to miss (or saturates); then bisect between the last level that met them and
the first that did not, and measure the level just below the lowest confirmed miss if nothing
did yet (the interval's upper end). Every level stops as soon as its verdict is settled at the look confidence (or its
queue visibly grows without bound, open loop), so an overloaded level costs a few dozen
requests. The artifact keeps each visit: the level, why it was visited, its verdict, its cost.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.kinds import load_stats
from core.kinds.capacity import CapacityTest
from runtime.load import repeats, workload
from runtime.load.runner import Outcome, connections, failure_of, level_plan, warmup
from runtime.load.scheduler import run_level

RECHECK_INDEX = (
    500  # a re-check's prompts and seeds are drawn apart from every first visit's
)


def stop_rule(test: CapacityTest):
    """Stop a level once its SLO verdict is settled at the look confidence, or (open loop) once its
    queue grows without bound over at least ``check_every`` requests (it cannot meet the SLOs)."""
    conf = test.look_confidence()

    def rule(records: list[dict[str, Any]]) -> str | None:
        v = load_stats.slo_verdicts(records, test.slo, conf)
        if v["verdict"] != "unresolved":
            return f"verdict_{v['verdict']}"
        if (
            test.open_loop
            and len(records) >= test.check_every
            and load_stats.queue_growth(records)["growing"]
        ):
            return "queue_growing"
        return None

    return rule


def _boundary(
    s: dict[str, Any], below: dict[str, Any] | None, closed: bool
) -> str | None:
    """Why a level ends the climb (None: it met the SLOs and the server still had room)."""
    if (s.get("schedule") or {}).get("client_bound"):
        return "client_bound"
    if s["slo"]["verdict"] != "meets":
        return s["slo"]["verdict"]
    if not closed and s.get("saturated"):
        return "saturated"
    if (
        closed
        and below is not None
        and below.get("aggregate_tps")
        and s.get("aggregate_tps") is not None
        and s["aggregate_tps"]
        < below["aggregate_tps"] * (1.0 + load_stats.SATURATION_GROWTH)
    ):
        return "saturated"
    return None


BORDER = 1.5  # a level whose observed percentile is within this factor of a limit (either side) is borderline


def borderline(s: dict[str, Any]) -> bool:
    """A level whose verdict could flip on a repeat: an observed percentile within BORDER of its limit."""
    for v in (s.get("slo") or {}).get("limits", {}).values():
        value, limit = v.get("value"), v.get("limit")
        if value is None or not limit or v.get("infinite"):
            continue
        if limit / BORDER <= value <= limit * BORDER:
            return True
    return False


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
    }


async def _search(transport: Any, test: CapacityTest) -> Outcome:
    warm = await warmup(transport, test)
    grid = list(test.levels)
    conf = test.look_confidence()
    rule = stop_rule(test)
    closed = not test.open_loop
    measured: dict[int, dict[str, Any]] = {}
    summaries: dict[int, dict[str, Any]] = {}
    visits: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    state: dict[str, Any] = {"lost": False, "stopped": None}

    async def visit(i: int, why: str) -> dict[str, Any]:
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
        lv = measured[i]
        s = load_stats.level_summary(
            lv, test.slo, test.profile, conf, steady_state=test.steady_state
        )
        summaries[i] = s
        below = max((j for j in summaries if j < i), default=None)
        boundary = _boundary(
            s, summaries.get(below) if below is not None else None, closed
        )
        visits.append(
            {
                "level": grid[i],
                "index": i,
                "why": why,
                "verdict": s["slo"]["verdict"],
                "boundary": boundary,
                "requests": s["requests"],
                "stop_reason": lv.get("stop_reason"),
                "seconds": round(time.perf_counter() - t0, 3),
            }
        )
        if not transport.alive():
            state["lost"] = True
        return {"boundary": boundary}

    def confirmed_miss(i: int) -> bool:
        v = visits_by_index.get(i)
        return v is not None and v["boundary"] in ("misses", "saturated")

    visits_by_index: dict[int, dict[str, Any]] = {}

    async def look(i: int, why: str) -> str | None:
        r = await visit(i, why)
        visits_by_index[i] = visits[-1]
        return r["boundary"]

    last_ok, first_bad = -1, None
    i, step = 0, 1
    while i < len(grid) and not state["lost"]:  # climb by doubling steps
        b = await look(i, "climb")
        if b is not None:
            first_bad = i
            state["stopped"] = f"{b} at {grid[i]:g}"
            break
        last_ok = i
        if i == len(grid) - 1:
            state["stopped"] = "top of the grid met the SLOs"
            break
        i, step = min(len(grid) - 1, i + step), step * 2
    # an unresolved (or client-bound) level bounds nothing: keep climbing until a level is confirmed to
    # miss (or saturates), so the interval has an upper end
    j = first_bad
    while (
        j is not None
        and not confirmed_miss(j)
        and j < len(grid) - 1
        and not state["lost"]
    ):
        j, step = min(len(grid) - 1, j + step), step * 2
        await look(j, "bound above")
    while (
        first_bad is not None and first_bad - last_ok > 1 and not state["lost"]
    ):  # bisect
        m = (last_ok + first_bad) // 2
        b = (
            visits_by_index[m]["boundary"]
            if m in visits_by_index
            else await look(m, "bisect")
        )
        if b is None:
            last_ok = m
        else:
            first_bad = m
    # tighten the upper end: the level just below the lowest confirmed miss, if not measured yet
    for _ in range(len(grid)):
        misses = [k for k in visits_by_index if confirmed_miss(k)]
        if not misses or state["lost"]:
            break
        below = min(misses) - 1
        if below <= last_ok or below in visits_by_index:
            break
        await look(below, "tighten")
    # re-check: the answer's level and the lowest confirmed miss, where borderline, measured again with new
    # prompts and seeds and judged on both visits pooled; the answer is then read again from every verdict
    rechecked: list[float] = []
    if test.recheck and not state["lost"]:
        iv = load_stats.capacity_interval(list(summaries.values()), grid)
        targets = (
            [grid.index(iv["answer"])]
            if iv["answer"] in grid and grid.index(iv["answer"]) in summaries
            else []
        )
        if iv["lowest_miss"] is not None:
            targets.append(grid.index(iv["lowest_miss"]))
        for k in targets:
            if borderline(summaries[k]) and not state["lost"]:
                await look(k, "re-check")
                rechecked.append(grid[k])
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
            "rechecked": rechecked,
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
