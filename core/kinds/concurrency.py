"""The ``concurrency`` kind: a closed-loop sweep of concurrency levels.

At each level (1, 2, 4, 8 ...) that many clients send requests back to back: aggregate output
tokens/s, per-request latency percentiles, the p95 multiplier against the lowest level,
goodput against SLOs, and the highest level that meets them (core.kinds.request_stats).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from core.kinds import register
from core.kinds.base import Kind, Samples, Shape
from core.kinds.request import (
    RequestDetails,
    RequestRecord,
    RequestRecordsRecord,
    RequestWorkload,
    SampledRecord,
)


class ConcurrencyTest(RequestWorkload):
    """Concurrency sweep: aggregate throughput, latency percentiles and SLO goodput per level."""

    kind: Literal["concurrency"] = "concurrency"
    id: str = Field("concurrency", description="Name of this workload, used in tables.")
    levels: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8],
        description="Concurrency levels: that many clients, each sending requests back to back.",
    )
    rounds: int = Field(
        2,
        ge=1,
        le=100,
        description="Requests each client sends at a level (a level sends level x rounds).",
    )

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("levels must name at least one concurrency level")
        if any(x < 1 for x in v):
            raise ValueError(f"concurrency levels must be >= 1 (got {v})")
        if sorted(set(v)) != v:
            raise ValueError(f"levels must be increasing and distinct (got {v})")
        if v[-1] > 256:
            raise ValueError(
                f"a level above 256 clients is not supported (got {v[-1]})"
            )
        return v


class LevelRecord(Shape):
    """One level of a sweep: its requests (every client's) and its wall time."""

    level: int
    wall_s: float | None = None
    requests: list[RequestRecord] = Field(default_factory=list)
    batches: int | None = Field(
        None,
        description="Batches of `rounds` per client sent one after another (repeat to a precision).",
    )
    sampled: SampledRecord | None = Field(
        None,
        description="Set when the level sent more requests than a level stores (the matrix's requests_kept): "
        "which were kept (core.request_records). Absent: every request is here.",
    )


class ConcurrencySamples(Samples):
    levels: list[LevelRecord] | None = None
    warmup: list[RequestRecord] | None = None


class ConcurrencyDetails(RequestDetails):
    sweep: dict[str, Any] | None = Field(
        None,
        description="The sweep's figures as the run computed them "
        "(core.kinds.request_stats.sweep_stats, versioned; recomputed from the "
        "samples where older).",
    )
    request_records: RequestRecordsRecord | None = Field(
        None,
        description="How many request records the artifact stores of those sent; absent: all of them.",
    )


# -- the kind's loop ---------------------------------------------------------------------------
def run_levels(
    test: ConcurrencyTest,
    batch: Callable[[int, int], dict[str, Any]],
    alive: Callable[[], bool],
    lost: Callable[[int], dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The concurrency kind's sweep over one backend primitive, ``batch(level, round_offset)``:
    ``level`` clients at once, each sending ``rounds`` requests back to back (rounds numbered
    from ``round_offset``), returning ``{level, wall_s, requests}``. Each level is one batch
    (precision null) or batches until the CI95 of its requests' metric (E2E latency by default)
    meets the test's precision or a ceiling; its wall time is the sum of its batches'. Once the
    server is gone (``alive()`` false) every later level is ``lost(level)``: records of requests
    not sent. Returns the levels and one precision record for the sweep."""
    from core import precision as precision_mod

    levels: list[dict[str, Any]] = []
    precisions: list[dict[str, Any]] = []
    gone = False
    for level in test.levels:
        if gone:
            levels.append(lost(level))
            continue
        levels.append(_level(test, level, batch, alive, precisions))
        gone = not alive()
    return levels, precision_mod.combine(precisions)


def _level(
    test: ConcurrencyTest,
    level: int,
    batch: Callable[[int, int], dict[str, Any]],
    alive: Callable[[], bool],
    precisions: list[dict[str, Any]],
) -> dict[str, Any]:
    from core import precision as precision_mod

    p = test.precision
    if p is None:
        out = batch(level, 0)
        precisions.append(
            {
                **precision_mod.Repeater(None, test.rounds * level, "e2e_ms").record(),
                "n": len(out["requests"]),
                "level": level,
                "stop_reason": precision_mod.STOP_FIXED,
            }
        )
        return out
    # the count floor and ceiling are in requests; a batch sends level x rounds of them
    rep = precision_mod.Repeater(p, test.rounds * level, "e2e_ms")
    merged: dict[str, Any] = {
        "level": level,
        "wall_s": 0.0,
        "requests": [],
        "batches": 0,
    }
    while rep.count == 0 or rep.more():
        one = batch(level, merged["batches"] * test.rounds)
        merged["batches"] += 1
        merged["wall_s"] += one["wall_s"]
        merged["requests"].extend(one["requests"])
        for r in one["requests"]:
            rep.add(r.get(rep.metric) if r["ok"] else None)
        if not alive() or not any(r["ok"] for r in one["requests"]):
            rep.stop_reason = "server_lost" if not alive() else "requests_failed"
            break
    precisions.append({**rep.record(), "level": level})
    return merged


KIND = register(
    Kind(
        "concurrency",
        ConcurrencyTest,
        "Concurrency sweep: aggregate throughput, latency percentiles and SLO goodput per level.",
        headline="peak_aggregate_tps",
        columns=("peak_aggregate_tps", "slo_max_concurrency"),
        metrics=(
            "peak_aggregate_tps",
            "slo_max_concurrency",
            "startup_ms",
            "failed_requests",
        ),
        details=ConcurrencyDetails,
        samples=ConcurrencySamples,
    )
)
