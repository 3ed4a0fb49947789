"""Ranking with uncertainty, from the same comparisons as the verdicts.

A result's rank is 1 + the number of results that are *significantly better* than it: whose
comparison with it (core.stats.combine_sides, the run-unit ratio with its CI95 that every
verdict on the site uses) is a win. Results that share a rank are marked as tied (=N). Because
rank and verdict rest on one comparison, a result ranked =1 is never a loss against another
result of the same board, and a loss against a result is always a rank below it. A result
without an interval (one run and no noise estimate anywhere) is not ranked (—): its position
could be anything.

Pairwise on purpose: n results make n² comparisons, vectorised (one array operation per board);
at 200 hosts that is 40,000 ratios, a few milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from core.stats import SideEstimate

RULE = (
    "rank = 1 + the number of results significantly better than this one, by the same comparison as every "
    "verdict on the site: the ratio of the two run-unit values with its CI95 (the two sides' variances of the log "
    "mean added, Welch-Satterthwaite degrees of freedom) lying wholly on the better side of 1. Results with the "
    "same rank are marked =N; so a result ranked =1 is never a loss against another on its board. A result without "
    "an interval is not ranked (—)."
)

SHORT_RULE = (
    "rank = 1 + the results significantly better than this one (the ratio's CI95 excludes 1, the same test "
    "as every verdict); the same rank is marked =N; no interval, no rank (—)"
)


@dataclass(frozen=True)
class Ranked:
    rank: int | None  # None: no interval, not ranked
    tied: bool  # another ranked result shares this rank


def better_matrix(
    sides: Sequence[SideEstimate], higher_is_better: bool, confidence: float = 0.95
) -> np.ndarray:
    """``B[i, j]`` True where result j is significantly better than result i (combine_sides(i, j) is a
    win for j). Results without a variance compare with nothing (their rows and columns are False)."""
    n = len(sides)
    ok = np.array(
        [
            s.log_mean is not None and s.var is not None and s.df is not None
            for s in sides
        ],
        dtype=bool,
    )
    mu = np.array(
        [s.log_mean if s.log_mean is not None else 0.0 for s in sides], dtype=float
    )
    var = np.array([s.var if s.var is not None else 0.0 for s in sides], dtype=float)
    df = np.array([s.df if s.df is not None else 1.0 for s in sides], dtype=float)
    if n == 0:
        return np.zeros((0, 0), dtype=bool)
    diff = mu[None, :] - mu[:, None]  # log(j / i)
    vsum = var[:, None] + var[None, :]
    se = np.sqrt(vsum)
    with np.errstate(divide="ignore", invalid="ignore"):
        den = var[:, None] ** 2 / df[:, None] + var[None, :] ** 2 / df[None, :]
        ws = np.where(
            den > 0, vsum**2 / np.where(den > 0, den, 1.0), df[:, None] + df[None, :]
        )
    # scipy.special.stdtrit is what scipy.stats.t.ppf computes, value for value (inf and nan alike),
    # without importing scipy.stats: a second of every site build, the warm one included
    t = _sp.stdtrit(ws, 0.5 + confidence / 2)
    lo, hi = diff - t * se, diff + t * se
    better = lo > 0 if higher_is_better else hi < 0
    better &= ok[:, None] & ok[None, :]
    np.fill_diagonal(better, False)
    return better


def rank_sides(sides: Sequence[SideEstimate], higher_is_better: bool) -> list[Ranked]:
    """Each result's rank: 1 + how many results are significantly better (see RULE)."""
    b = better_matrix(sides, higher_is_better)
    ok = [s.log_mean is not None and s.var is not None for s in sides]
    ranks = [int(b[i].sum()) + 1 if ok[i] else None for i in range(len(sides))]
    counts: dict[int, int] = {}
    for r in ranks:
        if r is not None:
            counts[r] = counts.get(r, 0) + 1
    return [Ranked(r, r is not None and counts[r] > 1) for r in ranks]


def rank_label(r: Ranked) -> str:
    if r.rank is None:
        return "—"
    return f"={r.rank}" if r.tied else str(r.rank)


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)
