"""Repeat to a precision, not a count.

A test (a rate test's repetitions, a chat test's requests, a generate test's passes over its
prompts, a concurrency level's rounds) repeats until the CI95 half-width of its mean is within
``target`` of the mean, or a ceiling is hit (a count or a wall time), whichever comes first,
never before ``min_repetitions``. What was asked and why it stopped is recorded beside the
samples (:meth:`Repeater.record`), so a reader sees which figures reached their precision.

``precision: null`` in a matrix (or a test) falls back to a fixed count: ``repetitions``.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core import stats

# Why a repetition loop stopped.
STOP_TARGET = "target_met"
STOP_COUNT = "max_repetitions"
STOP_TIME = "max_time_s"
STOP_FIXED = "fixed_count"


class Precision(BaseModel):
    """When to stop repeating: a CI95 half-width relative to the mean, with a floor and ceilings."""

    model_config = ConfigDict(extra="forbid")

    target: float = Field(
        0.02,
        gt=0.0,
        lt=1.0,
        description="Stop when the CI95 half-width of the mean is at most this fraction of the mean (0.02: ±2%).",
    )
    min_repetitions: int = Field(
        3, ge=2, le=1000, description="Never stop before this many samples."
    )
    max_repetitions: int = Field(
        30,
        ge=2,
        le=10000,
        description="Stop at this many samples even if the target is not met.",
    )
    max_time_s: float = Field(
        120.0,
        gt=0.0,
        description="Stop once the repetitions (untimed preparation included) have taken this long, "
        "target met or not (the minimum count still runs).",
    )
    metric: str | None = Field(
        None,
        description="Metric whose interval is judged (default: the test kind's primary metric).",
    )
    percentile: float | None = Field(
        None,
        gt=0.0,
        lt=100.0,
        description="Judge this percentile of the metric (e.g. 95: p95) instead of its mean: "
        "the half-width of its distribution-free order-statistic CI95 relative to the "
        "percentile (a p95 needs at least 73 samples before it has an interval at all).",
    )

    @model_validator(mode="after")
    def _order(self) -> Precision:
        if self.max_repetitions < self.min_repetitions:
            raise ValueError(
                f"max_repetitions ({self.max_repetitions}) is below min_repetitions ({self.min_repetitions})"
            )
        return self


class Repeater:
    """Decides whether one more sample is needed and records why it stopped.

    ``precision`` None: exactly ``fixed`` samples. Otherwise samples are added with
    :meth:`add` until :meth:`more` says no.
    """

    def __init__(
        self, precision: Precision | dict[str, Any] | None, fixed: int, metric: str
    ):
        if isinstance(precision, dict):
            precision = Precision.model_validate(precision)
        self.precision = precision
        self.fixed = max(int(fixed or 1), 1)
        self.metric = (
            precision.metric if precision is not None and precision.metric else metric
        )
        self.values: list[float] = []
        self.count = 0
        self.t0 = time.perf_counter()
        self.stop_reason: str | None = None

    def add(self, value: float | None) -> None:
        """One more sample of the judged metric (None: the sample carried no value; it still counts)."""
        self.count += 1
        if value is not None:
            self.values.append(float(value))

    def half_width_rel(self) -> float | None:
        p = self.precision
        if p is not None and p.percentile is not None:
            return percentile_half_width_rel(self.values, p.percentile)
        return stats.ci95_half_width_rel(self.values)

    def more(self) -> bool:
        p = self.precision
        if p is None:
            if self.count >= self.fixed:
                self.stop_reason = STOP_FIXED
                return False
            return True
        if self.count < p.min_repetitions:
            return True
        hw = self.half_width_rel()
        if hw is not None and hw <= p.target:
            self.stop_reason = STOP_TARGET
            return False
        if self.count >= p.max_repetitions:
            self.stop_reason = STOP_COUNT
            return False
        if time.perf_counter() - self.t0 >= p.max_time_s:
            self.stop_reason = STOP_TIME
            return False
        return True

    def record(self) -> dict[str, Any]:
        """What the artifact keeps: the target, whether it was met, why repetition stopped."""
        p = self.precision
        hw = self.half_width_rel()
        out = {
            "metric": self.metric,
            "target_rel": p.target if p is not None else None,
            "min_repetitions": p.min_repetitions if p is not None else None,
            "max_repetitions": p.max_repetitions if p is not None else self.fixed,
            "max_time_s": p.max_time_s if p is not None else None,
            "n": self.count,
            "half_width_rel": hw,
            "met": (hw is not None and hw <= p.target) if p is not None else None,
            "stop_reason": self.stop_reason or (STOP_FIXED if p is None else None),
            "elapsed_s": round(time.perf_counter() - self.t0, 3),
        }
        if p is not None and p.percentile is not None:
            out["percentile"] = p.percentile
        return out


def percentile_half_width_rel(values: list[float], percentile: float) -> float | None:
    """Half the width of a percentile's order-statistic CI95 relative to the percentile; None while
    the sample is too small for that interval to exist (or the percentile is 0)."""
    iv = stats.percentile_interval(values, percentile, 0.95)
    if iv["low"] is None or iv["high"] is None or not iv["value"]:
        return None
    return (iv["high"] - iv["low"]) / 2.0 / abs(iv["value"])


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record for several loops (a concurrency sweep's levels): met only if every one was."""
    if not records:
        return {}
    mets = [r["met"] for r in records]
    first = records[0]
    return {
        **{
            k: first[k]
            for k in (
                "metric",
                "target_rel",
                "min_repetitions",
                "max_repetitions",
                "max_time_s",
            )
        },
        "n": sum(r["n"] for r in records),
        "half_width_rel": max(
            (r["half_width_rel"] for r in records if r["half_width_rel"] is not None),
            default=None,
        ),
        "met": None if any(m is None for m in mets) else all(mets),
        "stop_reason": "; ".join(
            sorted({r["stop_reason"] for r in records if r["stop_reason"]})
        ),
        "elapsed_s": round(sum(r["elapsed_s"] for r in records), 3),
        "levels": records,
    }
