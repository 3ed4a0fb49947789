"""Honest statistics: mean, sample stddev, CI95 (Student t), percentiles, comparisons.

Pure functions over lists of floats; used when an artifact is written (its summary) and
when pipelines compare configurations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
from scipy import special as _sp  # light; scipy.stats (seconds to import) is imported where it is needed

from core.summary import Summary


def _clean(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray([float(v) for v in values if v is not None], dtype=float)
    return arr[np.isfinite(arr)]


@lru_cache(maxsize=4096)
def t_critical(df: float, confidence: float = 0.95) -> float:
    """Student's t quantile (scipy.special.stdtrit: the same value as t.ppf, ~100x faster)."""
    return float(_sp.stdtrit(df, 0.5 + confidence / 2.0))


# Robust outlier rule: a sample whose modified z-score |x - median| / (1.4826 MAD) exceeds
# this is flagged (Iglewicz and Hoaglin's 3.5). Flagged samples stay in every statistic.
OUTLIER_K = 3.5


def ci95_half_width_rel(values: Sequence[float]) -> float | None:
    """Half-width of the mean's CI95 as a fraction of the mean (None below two samples or at mean 0)."""
    arr = _clean(values)
    n = int(arr.size)
    if n < 2 or arr.mean() == 0:
        return None
    return float(t_critical(n - 1) * arr.std(ddof=1) / math.sqrt(n) / abs(arr.mean()))


@lru_cache(maxsize=4096)
def _median_rank(n: int, confidence: float) -> int | None:
    """The largest k (1-based) whose order-statistic pair x_(k), x_(n-k+1) covers the median with at
    least ``confidence``: coverage is 1 - 2 P(B <= k-1), B ~ Bin(n, 1/2), decreasing in k."""
    ks = np.arange(1, n // 2 + 1)
    coverage = 1.0 - 2.0 * _sp.bdtr(ks - 1, n, 0.5)
    ok = int(np.argmin(coverage >= confidence)) if not bool((coverage >= confidence).all()) else len(ks)
    return ok or None


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Distribution-free interval of the median from order statistics (binomial(n, 1/2)):
    the narrowest symmetric pair x_(k), x_(n-k+1) covering at least ``confidence``; (None, None)
    when n is too small for any pair to reach it (n < 6 at 95%)."""
    return _median_ci_sorted(np.sort(_clean(values)), confidence)


def _median_ci_sorted(arr: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    n = int(arr.size)
    if n < 2:
        return None, None
    best = _median_rank(n, float(confidence))
    if best is None:
        return None, None
    return float(arr[best - 1]), float(arr[n - best])


def outliers(values: Sequence[float], k: float = OUTLIER_K) -> list[int]:
    """Indices (into the finite, non-null samples, in order) that lie more than k robust
    standard deviations (1.4826 x MAD) from the median. With MAD 0 nothing is flagged unless
    it differs from a median that most samples equal exactly."""
    return _outliers(_clean(values), k)


def _outliers(arr: np.ndarray, k: float = OUTLIER_K) -> list[int]:
    if arr.size < 3:
        return []
    med = float(np.median(arr))
    mad = float(np.median(np.abs(arr - med))) * 1.4826
    if mad == 0:
        return []
    return [i for i, x in enumerate(arr) if abs(x - med) / mad > k]


@lru_cache(maxsize=None)
def _inversions_cdf(n: int) -> tuple[float, ...]:
    """P(at most k inversions) over the n! orderings of n distinct values, k = 0..n(n-1)/2: the
    exact null distribution of Kendall's statistic (Mahonian numbers, integer arithmetic)."""
    counts = [1]
    for j in range(2, n + 1):  # insert the j-th element: it adds 0..j-1 inversions
        nxt = [0] * (len(counts) + j - 1)
        run = 0
        for k in range(len(nxt)):
            run += counts[k] if k < len(counts) else 0
            if k - j >= 0:
                run -= counts[k - j]
            nxt[k] = run
        counts = nxt
    total = math.factorial(n)
    cdf, acc = [], 0
    for c in counts:
        acc += c
        cdf.append(acc / total)
    return tuple(cdf)


@lru_cache(maxsize=256)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


_BLOCK = 128


def _pair_signs(arr: np.ndarray) -> tuple[int, int]:
    """(pairs i < j with y_i < y_j, pairs with y_i > y_j), in blocks of ``_BLOCK`` samples: pairs
    inside a block from their sign matrix, pairs with earlier samples by binary search in those
    samples sorted, so memory stays O(n) and time about O(n^2 / _BLOCK) numpy work."""
    con = dis = 0
    seen = np.empty(0)
    for start in range(0, int(arr.size), _BLOCK):
        blk = arr[start:start + _BLOCK]
        if seen.size:
            con += int(np.searchsorted(seen, blk, side="left").sum())  # earlier samples below
            dis += int((seen.size - np.searchsorted(seen, blk, side="right")).sum())  # earlier samples above
        d = np.sign(blk[None, :] - blk[:, None])[_upper_pairs(int(blk.size))]  # sign(y_j - y_i), i < j
        con += int((d > 0).sum())
        dis += int((d < 0).sum())
        seen = np.sort(np.concatenate([seen, blk]))
    return con, dis


def _mann_kendall(arr: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b of the samples against their order and its two-sided p-value, as
    scipy.stats.kendalltau(range(n), samples) computes them (exact null distribution without
    ties for n <= 33, else the normal approximation with the tie correction), in numpy, without
    scipy's per-call overhead (and without importing scipy.stats, a second of a site build)."""
    n = int(arr.size)
    tot = n * (n - 1) // 2
    con, dis = _pair_signs(arr)
    _, cnt = np.unique(arr, return_counts=True)
    cnt = cnt[cnt > 1].astype(np.int64)
    ytie = int((cnt * (cnt - 1) // 2).sum())
    if ytie == tot:
        return float("nan"), float("nan")
    s = con - dis
    tau = max(-1.0, min(1.0, s / math.sqrt(tot) / math.sqrt(tot - ytie)))
    if ytie == 0 and (n <= 33 or min(dis, tot - dis) <= 1):
        c = min(con, tot - con)
        p = 1.0 if 4 * c == n * (n - 1) else min(1.0, 2.0 * _inversions_cdf(n)[c])
    else:
        y1 = int((cnt * (cnt - 1) * (2 * cnt + 5)).sum())
        var = (n * (n - 1.0) * (2 * n + 5) - y1) / 18
        p = math.erfc(abs(s / math.sqrt(var)) / math.sqrt(2))
    return tau, p


def trend(values: Sequence[float]) -> dict | None:
    """A warm-up that was not enough shows as a drift across repetitions: Kendall's tau of the
    samples against their order (Mann-Kendall test) with its p-value, and whether the first
    sample alone is an outlier. None below four samples (no test has power there)."""
    return _trend(_clean(values))


def _trend(arr: np.ndarray, outlier_idx: list[int] | None = None) -> dict | None:
    n = int(arr.size)
    if n < 4:
        return None
    if n <= 20_000:
        tau, p = _mann_kendall(arr)
    else:
        from scipy import stats as _st

        res = _st.kendalltau(np.arange(n), arr)
        tau, p = float(res.statistic), float(res.pvalue)
    tau = tau if math.isfinite(tau) else 0.0
    p = p if math.isfinite(p) else 1.0
    first = 0 in (_outliers(arr) if outlier_idx is None else outlier_idx)
    return {"tau": tau, "p_value": p, "monotonic": p < 0.05, "first_sample_outlier": first,
            "warmup_suspect": bool(p < 0.05 or first)}


def summarize(values: Sequence[float]) -> dict:
    """Summary of samples. stddev is the sample stddev (n-1), as llama-bench reports;
    the CI95 of the mean uses Student's t and is null for fewer than two samples. Beside it:
    the median's distribution-free CI95, the indices of robust outliers (flagged, never
    dropped) and the drift test across repetitions (:func:`trend`)."""
    arr = _clean(values)
    n = int(arr.size)
    if n == 0:
        return {"n": 0, "mean": None, "stddev": None, "ci95_low": None, "ci95_high": None,
                "median": None, "min": None, "max": None, "p95": None, "p99": None,
                "median_ci95_low": None, "median_ci95_high": None, "outliers": [], "trend": None}
    mean = float(arr.mean())
    sd = float(arr.std(ddof=1)) if n > 1 else None
    if n > 1:
        half = t_critical(n - 1) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
    else:
        lo = hi = None
    srt = np.sort(arr)
    p50, p95, p99 = (float(v) for v in np.percentile(srt, [50, 95, 99]))
    flagged = _outliers(arr)
    return {
        "n": n,
        "mean": mean,
        "stddev": sd,
        "ci95_low": lo,
        "ci95_high": hi,
        "median": p50,
        "min": float(srt[0]),
        "max": float(srt[-1]),
        "p95": p95,
        "p99": p99,
        **dict(zip(("median_ci95_low", "median_ci95_high"), _median_ci_sorted(srt))),
        "outliers": flagged,
        "trend": _trend(arr, flagged),
    }


def summary(values: Sequence[float]) -> Summary:
    """:func:`summarize` as the frozen statistic readers get (core.summary.Summary)."""
    return Summary.from_dict(summarize(values))


def _n_mean_sd(s: Summary | dict) -> tuple[int, float | None, float | None]:
    if isinstance(s, Summary):
        return s.n, s.mean, s.stddev
    return int(s.get("n") or 0), s.get("mean"), s.get("stddev")


def percentile(values: Sequence[float], q: float) -> float | None:
    arr = _clean(values)
    return float(np.percentile(arr, q)) if arr.size else None


@dataclass(frozen=True)
class Comparison:
    """``candidate`` against ``baseline`` on one metric."""

    ratio: float | None  # candidate mean / baseline mean
    ci95_low: float | None
    ci95_high: float | None
    verdict: str  # "win", "loss", "within noise", "insufficient data"
    n_baseline: int
    n_candidate: int

    def to_dict(self) -> dict:
        return asdict(self)


def compare(baseline: Sequence[float], candidate: Sequence[float], higher_is_better: bool) -> Comparison:
    """Ratio of means with a CI95, computed on the log scale (delta method for
    log(mean_b / mean_a), Welch-Satterthwaite degrees of freedom), so the interval is never
    negative and is asymmetric around the ratio as ratios are.

    The verdict is a win (loss) when the whole interval lies on the better (worse) side of
    1.0, and "within noise" when the interval contains 1.0.
    """
    a, b = _clean(baseline), _clean(candidate)
    na, nb = int(a.size), int(b.size)
    if na == 0 or nb == 0 or a.mean() <= 0 or b.mean() <= 0:
        ratio = float(b.mean() / a.mean()) if na and nb and a.mean() != 0 else None
        return Comparison(ratio, None, None, "insufficient data", na, nb)
    if na < 2 or nb < 2:
        return Comparison(float(b.mean()) / float(a.mean()), None, None, "insufficient data", na, nb)
    return _ratio_comparison(na, float(a.mean()), float(a.var(ddof=1)), nb, float(b.mean()), float(b.var(ddof=1)),
                             higher_is_better)


def _ratio_comparison(na: int, ma: float, va: float, nb: int, mb: float, vb: float, higher_is_better: bool) -> Comparison:
    """Ratio mb/ma with a Welch-Satterthwaite CI95 on the log scale, and its verdict (n >= 2 each, means > 0)."""
    ratio = mb / ma
    ra, rb = va / na / ma**2, vb / nb / mb**2  # relative variances
    se_log = math.sqrt(ra + rb)
    if se_log == 0:
        lo = hi = ratio
    else:
        den = ra**2 / (na - 1) + rb**2 / (nb - 1)
        df = (ra + rb) ** 2 / den if den > 0 else na + nb - 2
        t = t_critical(df)
        lo, hi = ratio * math.exp(-t * se_log), ratio * math.exp(t * se_log)
    if lo > 1.0:
        verdict = "win" if higher_is_better else "loss"
    elif hi < 1.0:
        verdict = "loss" if higher_is_better else "win"
    else:
        verdict = "within noise"
    return Comparison(ratio, lo, hi, verdict, na, nb)


def compare_summaries(baseline: Summary | dict, candidate: Summary | dict, higher_is_better: bool) -> Comparison:
    """:func:`compare` from two summaries (n, mean, stddev) instead of raw samples: the same
    log-scale ratio, Welch-Satterthwaite CI95 and verdict (the sample variance is all it needs)."""
    (na, ma, sa), (nb, mb, sb) = _n_mean_sd(baseline), _n_mean_sd(candidate)
    if not na or not nb or ma is None or mb is None or ma <= 0 or mb <= 0:
        ratio = float(mb / ma) if ma and mb is not None else None
        return Comparison(ratio, None, None, "insufficient data", na, nb)
    ratio = float(mb) / float(ma)
    if na < 2 or nb < 2 or sa is None or sb is None:
        return Comparison(ratio, None, None, "insufficient data", na, nb)
    return _ratio_comparison(na, float(ma), float(sa) ** 2, nb, float(mb), float(sb) ** 2, higher_is_better)


def pool_summaries(summaries: Sequence[Summary | dict]) -> Summary:
    """One summary (n, mean, sample stddev) of the samples behind several summaries, exactly
    (the pooled sum of squares), as if all samples had been summarised together."""
    parts = [_n_mean_sd(s) for s in summaries]
    parts = [(n, float(m), float(sd or 0.0)) for n, m, sd in parts if n and m is not None]
    n = sum(p[0] for p in parts)
    if n == 0:
        return Summary()
    mean = sum(k * m for k, m, _ in parts) / n
    ss = sum((k - 1) * sd * sd + k * (m - mean) ** 2 for k, m, sd in parts)
    sd = math.sqrt(ss / (n - 1)) if n > 1 else None
    return Summary(n=n, mean=mean, stddev=sd)


def wilson_interval(passed: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval of a pass rate (passed of n): sound at small n and at 0% or 100%,
    where the normal approximation collapses to a zero-width interval. None, None when there is no
    rate to bound (no trials, or counts that cannot be: more passed than tried, or fewer than none)."""
    if n <= 0 or not 0 <= passed <= n:
        return None, None
    z = float(_sp.ndtri(0.5 + confidence / 2))  # the normal quantile (scipy.stats.norm.ppf), without importing scipy.stats
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def linear_fit(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> dict | None:
    """Ordinary least squares y = a + b x with the CI of the slope and of the intercept (Student's
    t, n - 2 degrees of freedom). None with fewer than two distinct x; no interval with n = 2."""
    xs, ys = np.asarray([float(v) for v in x], dtype=float), np.asarray([float(v) for v in y], dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    n = int(xs.size)
    if n < 2 or np.unique(xs).size < 2:
        return None
    mx, my = xs.mean(), ys.mean()
    sxx = float(((xs - mx) ** 2).sum())
    b = float(((xs - mx) * (ys - my)).sum() / sxx)
    a = float(my - b * mx)
    out = {"n": n, "slope": b, "intercept": a, "slope_ci95": (None, None), "intercept_ci95": (None, None),
           "residual_sd": None}
    if n > 2:
        sse = float(((ys - (a + b * xs)) ** 2).sum())
        s = math.sqrt(sse / (n - 2))
        t = t_critical(n - 2, confidence)
        se_b = s / math.sqrt(sxx)
        se_a = s * math.sqrt(1.0 / n + mx * mx / sxx)
        out.update(slope_ci95=(b - t * se_b, b + t * se_b), intercept_ci95=(a - t * se_a, a + t * se_a), residual_sd=s)
    return out
