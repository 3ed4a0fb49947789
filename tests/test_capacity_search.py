"""The capacity search's decisions (runtime.load.capacity_search) against a deterministic fake
level-judge: a pure test of the algorithm (which levels it measures, the answer and interval it
reads, what it costs), with no server. The fake judge stands in for measuring a level: it returns
the summary fields the search reads (verdict, observed percentile against its limit, requests,
runs pooled), as core.kinds.load_stats.level_summary writes them. The search against real servers
is in test_load.py, test_traffic.py and test_load_model.py."""

from __future__ import annotations

from collections.abc import Callable

from core.kinds import load_stats
from runtime.load.capacity_search import Search

LIMIT = 2000.0  # p90 TTFT limit, ms
N = 60  # max_requests: the sweep's requests a level
GRID = [round(1.0 + 0.2 * k, 1) for k in range(16)]  # 1.0 ... 4.0 req/s
COST = {
    "meets": 40,
    "misses": 20,
    "unresolved": N,
}  # a look stops a level once its verdict is settled

# judge(index, visit) -> (verdict, observed p90 TTFT); visit 2 is the pooled re-check
Judge = Callable[[int, int], tuple[str, float]]


def summary(
    level: float, verdict: str, value: float, runs: int, n: int, tpot: float = 40.0
) -> dict:
    return {
        "level": level,
        "requests": n,
        "runs": runs,
        "saturated": False,
        "schedule": {},
        "slo": {
            "verdict": verdict,
            "observed_meets": value <= LIMIT,
            "limits": {
                "ttft_ms": {
                    "value": value,
                    "limit": LIMIT,
                    "verdict": verdict,
                    "infinite": [],
                },
                "tpot_ms": {
                    "value": tpot,
                    "limit": 100.0,
                    "verdict": "meets",
                    "infinite": [],
                },
            },
        },
    }


def run(
    judge: Judge, grid: list[float] = GRID, budget: float | None = None
) -> tuple[Search, int, list[tuple[int, str]]]:
    search = Search(grid, closed=False, budget=budget, level_cost=N)
    sent: dict[int, int] = {}
    steps = []
    while (step := search.next()) is not None:
        i, why = step
        steps.append(step)
        visit = search.visits.get(i, 0) + 1
        verdict, value = judge(i, visit)
        sent[i] = sent.get(i, 0) + COST[verdict]
        search.record(i, summary(grid[i], verdict, value, visit, sent[i]))
    return search, sum(sent.values()), steps


def sweep(judge: Judge, grid: list[float] = GRID) -> dict:
    """The exhaustive sweep of the same levels (one run each), read by the same rule."""
    rows = [summary(g, *judge(i, 1), runs=1, n=N) for i, g in enumerate(grid)]
    return load_stats.capacity_interval(rows, grid)


def knee(at: int) -> Judge:
    """Monotone and clear: far within the limit up to ``at``, far beyond it above."""
    return lambda i, v: ("meets", 300.0) if i <= at else ("misses", 6000.0)


def test_monotone_clear_knee_answers_tightly_at_under_half_the_sweep():
    search, cost, steps = run(knee(6))
    iv = search.interval()
    assert (iv["answer"], iv["low"], iv["high"]) == (GRID[6], GRID[6], GRID[6])
    assert [i for i, _ in steps[:4]] == [0, 1, 3, 7]  # the climb by doubling steps
    assert [w for _, w in steps].count("climb") == 4 and "re-check" not in dict(
        steps
    ).values()
    assert cost == 3 * 40 + 20 + 40 + 40 <= 0.5 * len(GRID) * N
    assert search.stopped == "misses at 2.4"
    assert (iv["low"], iv["high"]) == (sweep(knee(6))["low"], sweep(knee(6))["high"])


def test_top_of_the_grid_met_leaves_the_interval_open_above():
    search, cost, steps = run(knee(99))
    iv = search.interval()
    assert iv["open_above"] and iv["answer"] == GRID[-1] and iv["low"] == GRID[-1]
    assert [i for i, _ in steps] == [0, 1, 3, 7, 15] and cost == 5 * 40
    assert search.stopped == "top of the grid met the SLOs"


def test_borderline_levels_are_measured_again_and_judged_pooled():
    """Levels 6 and 7 sit near the limit: 6 meets at 1.8 s, 7 misses at 2.5 s, each from one run, so
    neither bounds the interval until it is measured again; pooled, 6 still meets (decisive: two
    runs) and 7 comes out unresolved, so the interval honestly spans 7: [2.2, 2.4]."""
    table = {
        6: [("meets", 1800.0), ("meets", 1700.0)],
        7: [("misses", 2500.0), ("unresolved", 2100.0)],
    }

    def judge(i: int, visit: int) -> tuple[str, float]:
        if i in table:
            return table[i][visit - 1]
        return knee(6)(i, visit)

    search, cost, steps = run(judge)
    iv = search.interval()
    assert (iv["low"], iv["high"], iv["answer"]) == (GRID[6], GRID[7], GRID[6])
    assert sorted(search.rechecked) == [GRID[6], GRID[7]]
    assert search.visits[6] == 2 and search.visits[7] == 2
    assert max(search.visits.values()) == 2  # a level is re-checked once at most
    assert cost <= 0.5 * len(GRID) * N, cost
    # the sweep measured each level once: 6 and 7 are borderline there, so it reads [2, 2.4] - the
    # same rule, wider for having one run of each; the two intervals overlap
    sw = sweep(judge)
    assert (sw["low"], sw["high"]) == (GRID[5], GRID[7]) and sw[
        "borderline_levels"
    ] == [GRID[6], GRID[7]]
    assert iv["low"] <= sw["high"] and sw["low"] <= iv["high"]


def test_a_borderline_miss_in_the_climb_sends_the_search_above_it_for_a_decisive_one():
    """The climb's level 7 misses at 2.3 s (borderline, one run): it bounds nothing, so the search goes
    on upwards (level 15 misses clearly) and then narrows down again."""
    table = {7: [("misses", 2300.0), ("misses", 2400.0)]}

    def judge(i: int, visit: int) -> tuple[str, float]:
        return table[i][visit - 1] if i in table else knee(6)(i, visit)

    search, cost, steps = run(judge)
    assert ("bound above" in [w for _, w in steps]) and steps[4] == (15, "bound above")
    iv = search.interval()
    assert (iv["low"], iv["high"]) == (
        GRID[6],
        GRID[6],
    )  # 7 missed in both runs, pooled: decisive
    assert search.rechecked == [GRID[7]] and cost <= 0.5 * len(GRID) * N, cost


def test_non_monotone_levels_are_read_by_the_sweeps_rule():
    """One level (3) misses clearly although the levels above it meet: the search assumes monotonicity
    when it climbs and bisects, never when it answers; its interval is what the sweep's rule reads
    from the levels it measured. The sweep sees the contradiction, flags it, and its interval spans
    it: the miss at 3 bounds nothing (levels above met), the meets above 3 raise nothing (a level
    below missed), so [1.4, 2.2] - which holds the search's [1.4, 1.4]."""

    def judge(i: int, visit: int) -> tuple[str, float]:
        return ("misses", 5000.0) if i == 3 else knee(6)(i, visit)

    search, cost, steps = run(judge)
    iv = search.interval()
    assert (iv["low"], iv["high"]) == (GRID[2], GRID[2])
    assert [i for i, _ in steps] == [0, 1, 3, 2]
    sw = sweep(judge)
    assert sw["non_monotonic"] and (sw["low"], sw["high"]) == (GRID[2], GRID[6])
    assert sw["answer"] == GRID[6] and sw["lowest_miss"] == GRID[7]


def test_an_unresolved_level_keeps_the_interval_open_across_it():
    """Level 6 never settles (unresolved on both runs, observed within the limit): the interval runs
    from the last decisive meet to the level below the first decisive miss, with 6 as the answer."""

    def judge(i: int, visit: int) -> tuple[str, float]:
        return ("unresolved", 1900.0) if i == 6 else knee(6)(i, visit)

    search, cost, steps = run(judge)
    iv = search.interval()
    assert (iv["low"], iv["answer"], iv["high"]) == (GRID[5], GRID[6], GRID[6])
    assert iv["undecided_levels"] == [GRID[6]] and search.visits[6] == 2
    assert cost <= 0.5 * len(GRID) * N, cost


def test_capacity_interval_reads_a_single_borderline_run_as_deciding_nothing():
    def lv(level: float, verdict: str, value: float, runs: int = 1) -> dict:
        return summary(level, verdict, value, runs, N)

    grid = [1.0, 2.0, 3.0]
    iv = load_stats.capacity_interval(
        [lv(1, "meets", 300), lv(2, "meets", 1500), lv(3, "misses", 9000)], grid
    )
    assert (iv["low"], iv["answer"], iv["high"]) == (1.0, 2.0, 2.0)
    assert iv["borderline_levels"] == [2.0] and iv["undecided_levels"] == [2.0]
    iv = load_stats.capacity_interval(
        [lv(1, "meets", 300), lv(2, "meets", 1500, runs=2), lv(3, "misses", 9000)], grid
    )
    assert (iv["low"], iv["high"]) == (2.0, 2.0) and iv["undecided_levels"] == []
    # a clear miss of one limit decides whatever another shows: TTFT 4.5x its limit, TPOT near its own
    iv = load_stats.capacity_interval(
        [lv(1, "meets", 300), summary(2, "misses", 9000, 1, N, tpot=80.0)], grid
    )
    assert (iv["low"], iv["high"]) == (1.0, 1.0) and iv["undecided_levels"] == []
    # but a meet with a limit near it (TPOT 80 ms against 100) is borderline from one run
    iv = load_stats.capacity_interval([summary(1, "meets", 300, 1, N, tpot=80.0)], grid)
    assert iv["borderline_levels"] == [1.0] and iv["low"] == 0.0
    # an observed meet above a decisive miss contradicts it: the miss bounds nothing
    iv = load_stats.capacity_interval(
        [lv(1, "meets", 300), lv(2, "misses", 9000), lv(3, "unresolved", 1900)], grid
    )
    assert (
        iv["non_monotonic"]
        and iv["open_above"]
        and (iv["low"], iv["answer"]) == (1.0, 3.0)
    )
    # a borderline miss from one run bounds nothing: the interval stays open above
    iv = load_stats.capacity_interval(
        [lv(1, "meets", 300), lv(2, "misses", 2400)], grid
    )
    assert iv["open_above"] and (iv["low"], iv["high"], iv["answer"]) == (1.0, 3.0, 1.0)


def test_the_budget_ends_the_search_with_an_honest_wider_interval():
    """With the budget at 0.3 of the sweep (288 requests), after the climb, the bound above and the
    bisection (240 requests) one more full level would pass it: the search stops before tightening
    the upper end, says where, and answers with the interval it has - wider, still honest (it holds
    the sweep's)."""
    table = {6: [("meets", 1800.0)], 7: [("misses", 2500.0)]}

    def judge(i: int, visit: int) -> tuple[str, float]:
        return table[i][visit - 1] if i in table else knee(6)(i, visit)

    search, cost, steps = run(judge, budget=0.3 * len(GRID) * N)
    assert [w for _, w in steps] == ["climb"] * 4 + ["bound above", "bisect", "bisect"]
    assert search.budget_stop == {"level": GRID[11], "why": "tighten", "sent": 240}
    assert cost == search.sent() == 240
    iv = search.interval()
    assert (iv["low"], iv["high"]) == (GRID[5], GRID[14])
    assert iv["undecided_levels"] == [GRID[6], GRID[7]]
    sw = sweep(judge)
    assert iv["low"] <= sw["low"] and sw["high"] <= iv["high"]


def test_a_meet_while_the_queue_still_grew_bounds_nothing():
    """A level that met the SLOs while saturated (its queue grew over the level) saw a queue short of its
    steady state: its meet bounds nothing; a saturated miss stands (the steady state is worse)."""
    grid = [1.0, 2.0, 3.0]
    sat_meet = {**summary(2, "meets", 900, 1, N), "saturated": True}
    sat_miss = {**summary(3, "misses", 9000, 1, N), "saturated": True}
    iv = load_stats.capacity_interval(
        [summary(1, "meets", 300, 1, N), sat_meet, sat_miss], grid
    )
    assert (iv["low"], iv["answer"], iv["high"]) == (1.0, 2.0, 2.0)
    assert iv["saturated_meets"] == [2.0] and iv["undecided_levels"] == [2.0]
