"""Ranking with uncertainty.

A result's rank is 1 + the number of results that are *significantly* better: whose whole
CI95 lies on the better side of this result's whole CI95 (the rule Chatbot Arena ranks by).
Results that share a rank are marked as tied. Overlap is not transitive, and the rule says
what it says: two results whose intervals overlap never count against each other, yet they
can still get different ranks through a third (B overlapping A and C, both ranked =1, ranks 2
when a fourth result D, also =1, lies wholly above B). A result with no interval is not
ranked at all: its position could be anything. O(n log n): one sort of the interval bounds
and a binary search per row. ``RULE`` is the sentence every page states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


RULE = ("rank = 1 + the number of results whose whole CI95 lies on the better side of this result's whole CI95 "
        "(significantly better); results with the same rank are marked =N. Two results whose intervals overlap never "
        "count against each other, but overlap is not transitive: a result can overlap two results ranked =1 and still "
        "rank 2, when a third result ranked =1 is wholly better than it. A result without an interval is not ranked (—).")


SHORT_RULE = ("rank = 1 + the results whose whole CI95 lies on the better side of this one's (the same rank is marked "
              "=N); overlapping intervals never count against each other, but overlap is not transitive; no interval, "
              "no rank (—)")


@dataclass(frozen=True)
class Ranked:
    rank: int | None  # None: no CI95 (n < 2), not ranked
    tied: bool  # another ranked result shares this rank


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def rank_with_ci(lows: list[float | None], highs: list[float | None], higher_is_better: bool) -> list[Ranked]:
    ok = [i for i, (lo, hi) in enumerate(zip(lows, highs)) if _finite(lo) and _finite(hi)]
    lo = np.array([lows[i] for i in ok], dtype=float)
    hi = np.array([highs[i] for i in ok], dtype=float)
    ranks: dict[int, int] = {}
    if ok:
        if higher_is_better:  # better: its low bound above my high bound
            s = np.sort(lo)
            better = len(s) - np.searchsorted(s, hi, side="right")
        else:  # better: its high bound below my low bound
            s = np.sort(hi)
            better = np.searchsorted(s, lo, side="left")
        for j, i in enumerate(ok):
            ranks[i] = int(better[j]) + 1
    counts: dict[int, int] = {}
    for r in ranks.values():
        counts[r] = counts.get(r, 0) + 1
    return [Ranked(ranks.get(i), ranks.get(i) is not None and counts[ranks[i]] > 1) for i in range(len(lows))]


def rank_label(r: Ranked) -> str:
    if r.rank is None:
        return "—"
    return f"={r.rank}" if r.tied else str(r.rank)
