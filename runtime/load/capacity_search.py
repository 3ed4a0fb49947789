"""The capacity search's decisions, apart from measuring them: which level of the grid to measure
next, and why, given what the levels measured so far showed (kind ``capacity``; the method is
described in ``core/kinds/capacity.py``, the measuring in ``runtime/load/capacity.py``).

    search = Search(grid, closed=False)
    while (step := search.next()) is not None:
        i, why = step
        search.record(i, summary_of_level_i)  # core.kinds.load_stats.level_summary, pooled on a re-visit

The plan: climb the grid by doubling steps (indices 0, 1, 3, 7, ...) while levels meet the SLOs;
a level that does not meet them decisively (``core.kinds.load_stats.decisive``: unresolved, or a
borderline verdict of one run) bounds nothing, so the search goes on upwards until a level misses
decisively (or the server saturates); bisect between the last level that met the SLOs and the
first that did not; measure the level just below the lowest decisive miss (the interval's upper
end). Then the re-check: a level inside the interval that decides nothing yet (the one nearest
each end) is measured once more with new prompts and seeds and judged on both runs pooled, and the
search narrows again around what that shows. Monotonicity is assumed by the climb and the
bisection, never by the answer: the answer and its interval are read by the sweep's own rule
(``core.kinds.load_stats.capacity_interval``) from every level measured.

Pure: no I/O and no clock, so the algorithm is tested against a deterministic fake judge
(tests/test_capacity_search.py).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from core.kinds import load_stats

Step = tuple[int, str]


def boundary(
    s: dict[str, Any], below: dict[str, Any] | None, closed: bool
) -> str | None:
    """Why a level ends the climb (None: it met the SLOs and, closed loop, throughput still grew with the
    users). Open loop, a level meeting the SLOs goes on: its queue-growth flag is a single-run statistic
    (measured here: it fired at 1.8 req/s with p90 TTFT 1.2 s, and not at 2.0 req/s with 0.35 s)."""
    if (s.get("schedule") or {}).get("client_bound"):
        return "client_bound"
    if s["slo"]["verdict"] != "meets":
        return str(s["slo"]["verdict"])
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


class Search:
    """One capacity search over ``grid`` (lowest first): ``next()`` says what to measure, ``record()``
    takes what it showed. ``summaries`` holds each level's latest (pooled) summary, ``visits`` how many
    times each was measured, ``stopped`` why the climb ended, ``rechecked`` the levels measured again."""

    def __init__(
        self,
        grid: Sequence[float],
        closed: bool,
        recheck: bool = True,
        budget: float | None = None,
        level_cost: int | None = None,
    ) -> None:
        self.grid = [float(g) for g in grid]
        self.budget = budget  # the most requests past the climb may bring the search to (None: no limit)
        self.level_cost = level_cost or 0  # the most one more visit can send
        self.closed = closed
        self.recheck = recheck
        self.summaries: dict[int, dict[str, Any]] = {}
        self.visits: dict[int, int] = {}
        self.boundaries: dict[int, str | None] = {}
        self.stopped: str | None = None
        self.rechecked: list[float] = []
        self.budget_stop: dict[str, Any] | None = (
            None  # the visit the budget left out, if one was
        )
        self._plan = self._steps()
        self._started = False

    # -- the driver's side ------------------------------------------------------------------------
    def next(self) -> Step | None:
        """The next level to measure (its grid index) and why, or None when the search is done."""
        if self.budget_stop is not None:
            return None
        try:
            step = next(self._plan) if not self._started else self._plan.send(None)
        except StopIteration:
            return None
        self._started = True
        i, why = step
        if (
            why != "climb"
            and self.budget is not None
            and self.sent() + self.level_cost > self.budget
        ):  # one more full level would pass the budget: answer with what was measured
            self.budget_stop = {"level": self.grid[i], "why": why, "sent": self.sent()}
            self._plan.close()
            return None
        return step

    def record(self, i: int, summary: dict[str, Any]) -> str | None:
        """What level ``i`` showed (pooled over every visit so far); returns its boundary."""
        self.summaries[i] = summary
        self.visits[i] = self.visits.get(i, 0) + 1
        below = max((j for j in self.summaries if j < i), default=None)
        b = boundary(
            summary,
            self.summaries.get(below) if below is not None else None,
            self.closed,
        )
        self.boundaries[i] = b
        return b

    def sent(self) -> int:
        """Requests sent so far (each level's summary counts every visit, pooled)."""
        return sum(int(s.get("requests") or 0) for s in self.summaries.values())

    def interval(self) -> dict[str, Any]:
        """The answer and its interval now, by the sweep's rule."""
        return load_stats.capacity_interval(list(self.summaries.values()), self.grid)

    # -- the plan ---------------------------------------------------------------------------------
    def _look(self, i: int, why: str) -> Generator[Step, None, str | None]:
        yield (i, why)
        return self.boundaries.get(i)

    def _confirmed_miss(self, i: int) -> bool:
        s = self.summaries.get(i)
        if s is None:
            return False
        return load_stats.decisive(s) == "misses"

    def _narrow(self) -> Generator[Step, None, None]:
        """Bisect between the highest level meeting the SLOs and the lowest one that does not, then between
        the lowest confirmed miss and the highest level measured below it (the interval's upper end)."""
        n = len(self.grid)
        while True:
            bad = [k for k in self.summaries if self.boundaries.get(k) is not None]
            if not bad:
                break
            first_bad = min(bad)
            last_ok = max(
                (k for k in self.summaries if k < first_bad), default=-1
            )  # every measured level below first_bad met the SLOs
            gap = [k for k in range(last_ok + 1, first_bad) if k not in self.summaries]
            if not gap:
                break
            yield from self._look((last_ok + first_bad) // 2, "bisect")
        for _ in range(
            n
        ):  # the upper end: bisect between the lowest confirmed miss and the level below it measured
            misses = [k for k in self.summaries if self._confirmed_miss(k)]
            if not misses:
                break
            hi = min(misses)
            lo = max((k for k in self.summaries if k < hi), default=-1)
            if lo < 0 or hi - lo <= 1:
                break
            yield from self._look((lo + hi) // 2, "tighten")

    def _recheck_targets(self) -> list[int]:
        """Measured once, deciding nothing yet (unresolved, or borderline from one run), inside the
        interval's span: the one nearest its lower end and the one nearest its upper end."""
        iv = self.interval()
        top = iv["lowest_miss"] if iv["lowest_miss"] is not None else float("inf")
        cands = sorted(
            k
            for k, s in self.summaries.items()
            if self.visits.get(k, 0) < 2
            and not (s.get("schedule") or {}).get("client_bound")
            and load_stats.decisive(s) is None
            and iv["low"] < self.grid[k] < top
        )
        return sorted({cands[0], cands[-1]}) if cands else []

    def _steps(self) -> Generator[Step, None, None]:
        grid, n = self.grid, len(self.grid)
        first_bad: int | None = None
        i, step = 0, 1
        while i < n:  # climb by doubling steps
            b = yield from self._look(i, "climb")
            if b is not None:
                first_bad = i
                self.stopped = f"{b} at {grid[i]:g}"
                break
            if i == n - 1:
                self.stopped = "top of the grid met the SLOs"
                break
            i, step = min(n - 1, i + step), step * 2
        # a level that misses nothing decisively bounds nothing: go on upwards until one does (or
        # saturates), so the interval has an upper end
        j = first_bad
        while j is not None and not self._confirmed_miss(j) and j < n - 1:
            j, step = min(n - 1, j + step), step * 2
            yield from self._look(j, "bound above")
        yield from self._narrow()
        while self.recheck:
            targets = self._recheck_targets()
            if not targets:
                break
            for k in targets:
                yield from self._look(k, "re-check")
                self.rechecked.append(grid[k])
            yield from self._narrow()
