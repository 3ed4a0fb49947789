"""A time series as the site draws it: at most ``POINTS_MAX`` points a series (issue 30, "no HTML page
over 1 MB"). The raw samples stay in the artifacts and the open data; a chart draws a bounded subset
and its caption says how many of how many (``drawn_note``).

The method is min/max bucketing (the M4 family of Jugel et al., "M4: A Visualization-Oriented Time
Series Data Aggregation", VLDB 2014, without the per-bucket first/last): the first and the last sample
are kept, the samples between them are split in x order into equal-count buckets, and each bucket's
lowest and highest sample are kept. The series' extremes and its endpoints are therefore always drawn,
a spike is never averaged away, and a series under the cap is drawn whole, unchanged."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

POINTS_MAX = 100  # points drawn per series of a time-series chart

T = TypeVar("T")


def _number(v: Any) -> float | None:
    return (
        float(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
        else None
    )


def downsample(
    rows: Sequence[T], y: Callable[[T], Any], cap: int = POINTS_MAX
) -> list[T]:
    """At most ``cap`` of ``rows`` (in x order already), in their order: ``rows`` itself when it has
    ``cap`` or fewer; else the first and the last row and, of the rows between them split into
    ``(cap - 2) // 2`` equal-count buckets, each bucket's row of lowest and of highest ``y`` (the
    first of equals). A bucket without a numeric ``y`` keeps its first row."""
    if cap < 4:
        raise ValueError(
            f"downsample: cap {cap} is under 4 (first, last, a low, a high)"
        )
    n = len(rows)
    if n <= cap:
        return list(rows)
    inner = n - 2
    buckets = (cap - 2) // 2
    keep = {0, n - 1}
    for b in range(buckets):
        lo_i = 1 + (b * inner) // buckets
        hi_i = 1 + ((b + 1) * inner) // buckets
        if lo_i >= hi_i:
            continue
        scored = [(i, _number(y(rows[i]))) for i in range(lo_i, hi_i)]
        numeric = [(i, v) for i, v in scored if v is not None]
        if not numeric:
            keep.add(lo_i)
            continue
        keep.add(min(numeric, key=lambda p: (p[1], p[0]))[0])
        keep.add(max(numeric, key=lambda p: (p[1], -p[0]))[0])
    return [rows[i] for i in sorted(keep)]


def per_series(
    rows: Iterable[T],
    series: Callable[[T], Hashable],
    x: Callable[[T], Any],
    y: Callable[[T], Any],
    cap: int = POINTS_MAX,
) -> tuple[list[T], int, int]:
    """(the rows drawn, how many, of how many): ``rows`` grouped by ``series`` (in order of first
    appearance), each group sorted by ``x`` and downsampled to ``cap``."""
    groups: dict[Hashable, list[T]] = {}
    for r in rows:
        groups.setdefault(series(r), []).append(r)
    out: list[T] = []
    total = 0
    for g in groups.values():
        total += len(g)
        out += downsample(sorted(g, key=x), y, cap)
    return out, len(out), total


def rounded(
    rows: Iterable[dict[str, Any]], digits: dict[str, int]
) -> list[dict[str, Any]]:
    """Copies of ``rows`` with each field of ``digits`` rounded to that many decimals (the precision a
    chart shows: its tooltips' format and finer), so a drawn sample carries no bytes no reader sees."""
    out = []
    for r in rows:
        c = dict(r)
        for k, d in digits.items():
            v = c.get(k)
            if isinstance(v, float):
                c[k] = round(v, d)
        out.append(c)
    return out


def evenly(items: Sequence[T], cap: int) -> list[T]:
    """At most ``cap`` of ``items``, in their order: all of them up to ``cap``, else ``cap`` spread
    evenly over the order, the first and the last included (a ranking's top, bottom and between)."""
    n = len(items)
    if n <= cap:
        return list(items)
    if cap < 2:
        raise ValueError(f"evenly: cap {cap} is under 2 (the first and the last)")
    return [
        items[i] for i in sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)})
    ]


def drawn_note(
    drawn: int, total: int, what: str = "samples", cap: int = POINTS_MAX
) -> str:
    """The caption's words for a bounded chart ("" when every sample is drawn)."""
    if drawn >= total:
        return ""
    return (
        f"{drawn:,} of {total:,} {what} drawn (at most {cap} a series: the first, the last and the "
        "lowest and highest of each stretch between); every one is in the run's artifact."
    )
