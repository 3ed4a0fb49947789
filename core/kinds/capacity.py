"""The ``capacity`` kind: the highest rate (or number of users) whose latency percentiles meet
the SLOs, found by a search that is cheaper than sweeping every level.

The levels form a grid (``levels``, lowest first). The search (``runtime.load.capacity_search``)
climbs it by doubling steps (levels 1, 2, 4, 8 ... of the grid) until a level fails to meet the
SLOs or the server saturates (throughput no longer grows with offered load, or queueing grows
without bound); a level that misses nothing decisively bounds nothing, so the climb goes on until
one does. Then it bisects between the last level that met them and the first that did not, and
between the lowest decisive miss and the level measured below it (the interval's upper end).
Each level it visits sends requests in looks of ``check_every`` and stops as soon as the SLO
verdict is settled at the stated confidence (every look at a Bonferroni share of the error), up
to ``max_requests``: an overloaded level is refused after a few dozen requests, a comfortable one
confirmed after enough to bound its percentile, and only the levels near the answer take the full
count.

One run's verdict treats its requests as independent; in a queue a burst slows the requests around
it together, so near a limit a verdict flips from one run to the next. A verdict whose observed
percentile lies within ``load_stats.BORDER`` (1.5x) of its limit therefore bounds the interval only
once the level was measured in two runs, pooled (``recheck``: the search measures such a level
again with new prompts and seeds, the one nearest each end of the interval, and narrows again
around what that shows); an unresolved level bounds nothing either. The answer and its interval
are read from every level measured by the exhaustive sweep's own rule
(``core.kinds.load_stats.capacity_interval``): the lowest value the capacity can have (the highest
level decisively meeting the SLOs) and the highest (the level just below the lowest decisive miss):
"4 users [3, 5] at p95 TTFT ≤ 500 ms, p95 TPOT ≤ 50 ms". The artifact records every request of
every level visited, what the exhaustive sweep of the same grid would have cost (levels ×
max_requests), and why the search stopped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from core.kinds import register
from core.kinds.base import Kind, Shape
from core.kinds.load import LoadDetails, LoadSamples, LoadSpec


class CapacityTest(LoadSpec):
    """Capacity search: the highest level meeting the SLOs with a stated confidence, and its interval."""

    kind: Literal["capacity"] = "capacity"
    id: str = Field("capacity", description="Name of this test, used in tables.")
    levels: list[float] = Field(
        default_factory=lambda: [float(x) for x in range(1, 9)],
        description="The grid searched, lowest first: users (concurrent) or requests per "
        "second (constant, poisson).",
    )
    recheck: bool = Field(
        True,
        description="Before answering, measure again the levels inside the interval that decide nothing yet "
        "(unresolved, or borderline: an observed percentile within 1.5x of a limit, from one run), the one "
        "nearest each end, with new prompts and seeds, and judge each on both visits pooled: an answer "
        "that survives its own repeat.",
    )
    budget: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="The most requests the search sends, as a share of the exhaustive sweep's (levels x "
        "max_requests): past the climb, a level is measured only while one more full level stays within it; "
        "then the search answers with the interval it has (honest whatever was measured, only wider).",
    )
    max_requests: int = Field(
        120,
        ge=10,
        le=100000,
        description="Most requests at one level (the exhaustive "
        "sweep would send this many at every level).",
    )
    check_every: int = Field(
        30, ge=5, le=100000, description="Requests between two looks at the verdict."
    )
    min_requests: int = Field(
        20, ge=1, description="Fewest requests before the first look."
    )

    @model_validator(mode="after")
    def _counts(self) -> CapacityTest:
        if self.profile == "synchronous":
            raise ValueError(
                "a capacity search needs a profile with levels: concurrent, constant or poisson"
            )
        if self.min_requests > self.max_requests:
            raise ValueError(
                f"min_requests ({self.min_requests}) is above max_requests ({self.max_requests})"
            )
        if self.check_every > self.max_requests:
            raise ValueError(
                f"check_every ({self.check_every}) is above max_requests ({self.max_requests})"
            )
        return self

    def looks(self) -> int:
        """How many times a level's verdict may be looked at (the Bonferroni divisor)."""
        first = max(self.min_requests, self.check_every)
        return 1 + max(0, -(-(self.max_requests - first) // self.check_every))

    def look_confidence(self) -> float:
        """The confidence each look uses, so that the level's verdict holds at ``slo.confidence``."""
        return 1.0 - (1.0 - self.slo.confidence) / self.looks()


class SearchVisit(Shape):
    """One level the search measured, in the order it did."""

    level: float
    index: int | None = None
    why: str | None = Field(
        None, description="climb, bound above, bisect, tighten or re-check."
    )
    verdict: str | None = Field(None, description="meets, misses or unresolved.")
    decisive: str | None = Field(
        None,
        description="The verdict as the interval reads it: meets or misses when it bounds the interval, "
        "null when it does not (unresolved, client-bound, or borderline from one run).",
    )
    boundary: str | None = Field(
        None,
        description="Why this level ends the climb (a miss, saturation), if it does.",
    )
    requests: int | None = None
    stop_reason: str | None = None
    seconds: float | None = None


class SearchRecord(Shape):
    """What the search did and what it cost against the exhaustive sweep of the same grid."""

    grid: list[float] | None = None
    visits: list[SearchVisit] | None = None
    stopped: str | None = Field(None, description="Why the search stopped.")
    requests_sent: int | None = None
    exhaustive_requests: int | None = Field(
        None, description="Levels x max_requests: the exhaustive sweep's cost."
    )
    cost_ratio: float | None = None
    looks: int | None = None
    rechecked: list[float] | None = Field(
        None, description="Levels measured again and judged on both visits pooled."
    )
    budget: float | None = Field(
        None,
        description="The most requests the search may send, as a share of the sweep's.",
    )
    budget_stop: dict[str, Any] | None = Field(
        None,
        description="The visit the budget left out (level, why, requests sent by then), if one was.",
    )
    look_confidence: float | None = None
    confidence: float | None = None


class CapacityDetails(LoadDetails):
    search: SearchRecord | None = None


KIND = register(
    Kind(
        "capacity",
        CapacityTest,
        "Capacity search: the highest rate or number of users meeting percentile SLOs with a "
        "stated confidence, with its interval, by a search cheaper than the exhaustive sweep that stops at saturation.",
        headline="capacity",
        columns=("capacity", "requests_sent", "failed_requests"),
        metrics=(
            "capacity",
            "capacity_low",
            "capacity_high",
            "requests_sent",
            "failed_requests",
            "startup_ms",
        ),
        details=CapacityDetails,
        samples=LoadSamples,
    )
)
