"""The statistic of one metric, as an artifact stores it: a frozen value, read through fields.

A run's ``summary`` holds one per metric (``core.stats.summarize`` computes the dict that is
written, ``core.stats.summary`` the same as a Summary); a host probe's bandwidth entries hold one
per thread count. Readers get a
:class:`Summary` (``RunRecord.stat``, ``RunRecord.summary``), never the dict: ``s.mean``,
``s.ci95``, ``s.n``. A field an older artifact did not record (the median's interval, the
outlier flags, the drift test) reads as None (or no outliers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class Trend:
    """Drift across repetitions (core.stats.trend): Kendall's tau against sample order and its p-value."""

    tau: float | None = None
    p_value: float | None = None
    monotonic: bool | None = None
    first_sample_outlier: bool | None = None
    warmup_suspect: bool | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Trend | None:
        if not d:
            return None
        return cls(
            d.get("tau"),
            d.get("p_value"),
            d.get("monotonic"),
            d.get("first_sample_outlier"),
            d.get("warmup_suspect"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) is not None
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """n, mean, sample stddev, CI95 of the mean (Student t), median with its distribution-free
    CI95, min, max, p95, p99, robust outliers (indices, flagged never dropped) and the drift test."""

    n: int = 0
    mean: float | None = None
    stddev: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    p95: float | None = None
    p99: float | None = None
    median_ci95_low: float | None = None
    median_ci95_high: float | None = None
    outliers: tuple[int, ...] = ()
    trend: Trend | None = None
    ci95_why: str | None = (
        None  # why there is no CI95 of the mean (fewer than 3 samples, ...)
    )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | Summary | None) -> Summary:
        """The statistic of a stored summary object (a Summary is returned as it is)."""
        if isinstance(d, Summary):
            return d
        if not d:
            return EMPTY
        g = d.get
        return cls(
            int(g("n") or 0),
            g("mean"),
            g("stddev"),
            g("ci95_low"),
            g("ci95_high"),
            g("median"),
            g("min"),
            g("max"),
            g("p95"),
            g("p99"),
            g("median_ci95_low"),
            g("median_ci95_high"),
            tuple(g("outliers") or ()),
            Trend.from_dict(g("trend")),
            g("ci95_why"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the keys core.stats.summarize writes)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["outliers"] = list(self.outliers)
        out["trend"] = self.trend.to_dict() if self.trend is not None else None
        if self.ci95_why is None:
            del out["ci95_why"]
        return out

    @property
    def has_mean(self) -> bool:
        return self.n > 0 and self.mean is not None

    @property
    def ci95(self) -> tuple[float | None, float | None]:
        return self.ci95_low, self.ci95_high

    @property
    def median_ci95(self) -> tuple[float | None, float | None]:
        return self.median_ci95_low, self.median_ci95_high


EMPTY = Summary()


def as_summary(s: Summary | Mapping[str, Any] | None) -> Summary:
    """A Summary for a stored summary dict, a Summary, or nothing (n = 0)."""
    return Summary.from_dict(s)
