"""Ranking with uncertainty.

A result's rank is 1 + the number of results that are *significantly* better: whose whole
CI95 lies on the better side of this result's whole CI95. Results whose intervals overlap
therefore share a rank (a tie, marked), and a result with no interval (fewer than two
samples) is not ranked at all: its position could be anything. O(n log n): one sort of the
interval bounds and a binary search per row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


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
