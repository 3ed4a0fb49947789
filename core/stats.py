"""Honest statistics: mean, sample stddev, CI95 (Student t), percentiles, comparisons.

Pure functions over lists of floats; used when an artifact is written (its summary) and
when pipelines compare configurations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np
from scipy import (
    special as _sp,
)  # light; scipy.stats (seconds to import) is imported where it is needed

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
    return ci95_half_width_rel_of(moments(values))


def ci95_half_width_rel_of(s: Summary | dict) -> float | None:
    """:func:`ci95_half_width_rel` from a summary (n, mean, stddev) instead of raw samples."""
    n, mean, sd = _n_mean_sd(s)
    if n < 2 or not mean or sd is None:
        return None
    return float(t_critical(n - 1) * sd / math.sqrt(n) / abs(mean))


def moments(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and sample stddev (n-1) of the finite values: what :func:`compare_summaries` and
    :func:`ci95_half_width_rel_of` need, kept where the samples themselves are not (mean and stddev
    None without samples; stddev None below two)."""
    arr = _clean(values)
    n = int(arr.size)
    return {
        "n": n,
        "mean": float(arr.mean()) if n else None,
        "stddev": float(arr.std(ddof=1)) if n > 1 else None,
    }


@lru_cache(maxsize=4096)
def _median_rank(n: int, confidence: float) -> int | None:
    """The largest k (1-based) whose order-statistic pair x_(k), x_(n-k+1) covers the median with at
    least ``confidence``: coverage is 1 - 2 P(B <= k-1), B ~ Bin(n, 1/2), decreasing in k."""
    ks = np.arange(1, n // 2 + 1)
    coverage = 1.0 - 2.0 * _sp.bdtr(ks - 1, n, 0.5)
    ok = (
        int(np.argmin(coverage >= confidence))
        if not bool((coverage >= confidence).all())
        else len(ks)
    )
    return ok or None


def median_ci(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Distribution-free interval of the median from order statistics (binomial(n, 1/2)):
    the narrowest symmetric pair x_(k), x_(n-k+1) covering at least ``confidence``; (None, None)
    when n is too small for any pair to reach it (n < 6 at 95%)."""
    return _median_ci_sorted(np.sort(_clean(values)), confidence)


def _median_ci_sorted(
    arr: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None]:
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


@cache
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
        blk = arr[start : start + _BLOCK]
        if seen.size:
            con += int(
                np.searchsorted(seen, blk, side="left").sum()
            )  # earlier samples below
            dis += int(
                (seen.size - np.searchsorted(seen, blk, side="right")).sum()
            )  # earlier samples above
        d = np.sign(blk[None, :] - blk[:, None])[
            _upper_pairs(int(blk.size))
        ]  # sign(y_j - y_i), i < j
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
    return {
        "tau": tau,
        "p_value": p,
        "monotonic": p < 0.05,
        "first_sample_outlier": first,
        "warmup_suspect": bool(p < 0.05 or first),
    }


def summarize(values: Sequence[float]) -> dict:
    """Summary of samples. stddev is the sample stddev (n-1), as llama-bench reports;
    the CI95 of the mean is :func:`mean_interval` (Student's t; on the log scale for samples that
    are never negative, so it stays positive) and is null below ``MIN_INTERVAL_N`` samples. Beside it:
    the median's distribution-free CI95, the indices of robust outliers (flagged, never
    dropped) and the drift test across repetitions (:func:`trend`)."""
    arr = _clean(values)
    n = int(arr.size)
    if n == 0:
        return {
            "n": 0,
            "mean": None,
            "stddev": None,
            "ci95_low": None,
            "ci95_high": None,
            "median": None,
            "min": None,
            "max": None,
            "p95": None,
            "p99": None,
            "median_ci95_low": None,
            "median_ci95_high": None,
            "outliers": [],
            "trend": None,
        }
    mean = float(arr.mean())
    sd = float(arr.std(ddof=1)) if n > 1 else None
    lo, hi, _ = mean_interval(n, mean, sd, positive=bool((arr >= 0).all()))
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
    n_baseline: (
        int  # samples (compare, compare_summaries) or runs (compare_runs) on each side
    )
    n_candidate: int
    method: str = "repetitions"  # what the interval rests on: "repetitions", "runs", "runs + host noise"
    note: str = ""  # why there is no interval, or what the interval assumed
    p_value: float | None = (
        None  # two-sided, of "the ratio is 1" (the t test the interval inverts)
    )
    q_value: float | None = (
        None  # the p-value adjusted over a family of comparisons (fleet_fdr)
    )
    tested: int | None = None  # how many comparisons that family held

    def to_dict(self) -> dict:
        return asdict(self)


def two_sided_p(log_ratio: float, se: float, df: float) -> float:
    """Two-sided p of a t statistic log_ratio / se at ``df`` degrees of freedom (the test a CI inverts)."""
    if se <= 0:
        return 0.0 if log_ratio != 0 else 1.0
    return float(min(1.0, 2.0 * _sp.stdtr(df, -abs(log_ratio) / se)))


def compare(
    baseline: Sequence[float], candidate: Sequence[float], higher_is_better: bool
) -> Comparison:
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
        return Comparison(
            float(b.mean()) / float(a.mean()), None, None, "insufficient data", na, nb
        )
    return _ratio_comparison(
        na,
        float(a.mean()),
        float(a.var(ddof=1)),
        nb,
        float(b.mean()),
        float(b.var(ddof=1)),
        higher_is_better,
    )


def _ratio_comparison(
    na: int, ma: float, va: float, nb: int, mb: float, vb: float, higher_is_better: bool
) -> Comparison:
    """Ratio mb/ma with a Welch-Satterthwaite CI95 on the log scale, and its verdict (n >= 2 each, means > 0)."""
    ratio = mb / ma
    ra, rb = va / na / ma**2, vb / nb / mb**2  # relative variances
    se_log = math.sqrt(ra + rb)
    df = float(na + nb - 2)
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
    return Comparison(
        ratio, lo, hi, verdict, na, nb, p_value=two_sided_p(math.log(ratio), se_log, df)
    )


# -- many comparisons at once: the false discovery rate ---------------------------------------
#: The false discovery rate every family of comparisons is held to (a Regressions view, one
#: `invoke compare`, one CI gate): of the changes called, at most this share expected false.
FDR_Q = 0.01
FDR_PROCEDURE = "by"  # Benjamini–Yekutieli: see FDR_METHOD
FDR_NAME = {"bh": "Benjamini–Hochberg", "by": "Benjamini–Yekutieli"}[FDR_PROCEDURE]
FDR_METHOD = (
    f"Every comparison's interval gives a two-sided p-value (the t test the interval inverts). Where many "
    f"comparisons are read at once (every boundary of the Regressions page, the Build-to-build table, every "
    f"configuration of one invoke compare and its CI gate) a win or a loss stands only if its "
    f"Benjamini–Yekutieli q-value is at most {FDR_Q:g}: of the changes called, at most {FDR_Q:.0%} are expected "
    f"false, however many were tested and however their tests depend on each other. Benjamini–Hochberg would "
    f"hold for independent or positively dependent tests with exact p-values; ours are neither quite: the "
    f"boundaries of one host share its noise estimate, and real run-to-run noise has a heavy slow tail (a run "
    f"that started while something else ran on the host), so an A/A's p-values fall far below their nominal "
    f"rate in the small values a fleet-wide correction looks at. The fleet A/A (benchmarks/fleet_aa.py: 200 "
    f"hosts × 10 configurations a night, the measured A/A noise resampled per host, known drops of 2–20% "
    f"injected; its tables in benchmarks/results/fleet_aa.md) chose the procedure and the level: "
    f"Benjamini–Hochberg at 5% let through several false regressions a night, Benjamini–Yekutieli at "
    f"{FDR_Q:.0%} about one or fewer once runs started under interference are measured again, while still "
    f"finding most 10% drops at 5 runs a side. Its price is a level divided by about ln(m) + 0.58 (≈ 8 for "
    f"2,000 boundaries): small changes need more runs to be called."
)


def fdr_qvalues(
    p_values: Sequence[float | None], method: str = FDR_PROCEDURE
) -> list[float | None]:
    """Benjamini–Hochberg q-values (``method="by"``: Benjamini–Yekutieli, for arbitrary dependence) of
    a family of p-values; None (no test) stays None and does not count in the family's size."""
    idx = [i for i, p in enumerate(p_values) if p is not None and math.isfinite(p)]
    m = len(idx)
    out: list[float | None] = [None] * len(p_values)
    if not m:
        return out
    c = sum(1.0 / i for i in range(1, m + 1)) if method == "by" else 1.0
    order = sorted(idx, key=lambda i: p_values[i])  # type: ignore[arg-type,return-value]
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, float(p_values[i]) * m * c / rank)  # type: ignore[arg-type]
        out[i] = running
    return out


def fleet_fdr(
    comparisons: Sequence[Comparison], level: float = FDR_Q, method: str = FDR_PROCEDURE
) -> list[Comparison]:
    """The family's comparisons with their q-values and the family size (``tested``); a win or loss whose
    q-value exceeds ``level`` becomes "within noise" (its note says why). Comparisons without a p-value
    (insufficient data) are returned unchanged and not counted."""
    from dataclasses import replace

    qs = fdr_qvalues([c.p_value for c in comparisons], method)
    m = sum(q is not None for q in qs)
    out = []
    for c, q in zip(comparisons, qs):
        if q is None:
            out.append(c)
            continue
        verdict, note = c.verdict, c.note
        if verdict in ("win", "loss") and q > level:
            verdict = "within noise"
            note = (note + "; " if note else "") + (
                f"its interval excludes 1 alone, but not among {m} comparisons at a false discovery rate of "
                f"{level:g} (q = {q:.3g})"
            )
        out.append(replace(c, verdict=verdict, note=note, q_value=q, tested=m))
    return out


def compare_summaries(
    baseline: Summary | dict, candidate: Summary | dict, higher_is_better: bool
) -> Comparison:
    """:func:`compare` from two summaries (n, mean, stddev) instead of raw samples: the same
    log-scale ratio, Welch-Satterthwaite CI95 and verdict (the sample variance is all it needs)."""
    (na, ma, sa), (nb, mb, sb) = _n_mean_sd(baseline), _n_mean_sd(candidate)
    if not na or not nb or ma is None or mb is None or ma <= 0 or mb <= 0:
        ratio = float(mb / ma) if ma and mb is not None else None
        return Comparison(ratio, None, None, "insufficient data", na, nb)
    ratio = float(mb) / float(ma)
    if na < 2 or nb < 2 or sa is None or sb is None:
        return Comparison(ratio, None, None, "insufficient data", na, nb)
    return _ratio_comparison(
        na, float(ma), float(sa) ** 2, nb, float(mb), float(sb) ** 2, higher_is_better
    )


def pool_summaries(summaries: Sequence[Summary | dict]) -> Summary:
    """One summary (n, mean, sample stddev) of the samples behind several summaries, exactly
    (the pooled sum of squares), as if all samples had been summarised together."""
    parts = [_n_mean_sd(s) for s in summaries]
    parts = [
        (n, float(m), float(sd or 0.0)) for n, m, sd in parts if n and m is not None
    ]
    n = sum(p[0] for p in parts)
    if n == 0:
        return Summary()
    mean = sum(k * m for k, m, _ in parts) / n
    ss = sum((k - 1) * sd * sd + k * (m - mean) ** 2 for k, m, sd in parts)
    sd = math.sqrt(ss / (n - 1)) if n > 1 else None
    return Summary(n=n, mean=mean, stddev=sd)


def wilson_interval(
    passed: int, n: int, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Wilson score interval of a pass rate (passed of n): sound at small n and at 0% or 100%,
    where the normal approximation collapses to a zero-width interval. None, None when there is no
    rate to bound (no trials, or counts that cannot be: more passed than tried, or fewer than none)."""
    if n <= 0 or not 0 <= passed <= n:
        return None, None
    z = float(
        _sp.ndtri(0.5 + confidence / 2)
    )  # the normal quantile (scipy.stats.norm.ppf), without importing scipy.stats
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# -- intervals that stay in their domain ------------------------------------------------------
#: Below this many samples no interval is given: with two, Student's t(0.975, 1) is 12.7 and
#: the "interval" of a positive time reaches far below zero (a statement about nothing).
MIN_INTERVAL_N = 3
NO_INTERVAL_WHY = "fewer than 3 samples: no interval (with 2, Student's t is 12.7)"


def mean_interval(
    n: int | None,
    mean: float | None,
    sd: float | None,
    *,
    positive: bool = True,
    upper: float | None = None,
    confidence: float = 0.95,
) -> tuple[float | None, float | None, str | None]:
    """Confidence interval of a mean that stays in the quantity's domain: ``(low, high, why)``.

    A quantity that is never negative (a time, a rate, a byte count) gets Student's t interval
    on the log scale by the delta method: ``mean · exp(±t(n−1) · (sd/√n) / mean)``, positive and
    asymmetric as the uncertainty of a positive quantity is (for a small relative standard error
    it is the ordinary ``mean ± t·sd/√n``). ``upper`` caps a bounded quantity (a share: 1).
    ``positive=False`` gives the ordinary symmetric interval. Below ``MIN_INTERVAL_N`` samples
    (or without a spread) there is none, and ``why`` says so."""
    if not n or n < MIN_INTERVAL_N:
        return None, None, NO_INTERVAL_WHY
    if (
        mean is None
        or sd is None
        or not math.isfinite(float(mean))
        or not math.isfinite(float(sd))
    ):
        return None, None, "no spread recorded"
    mean, sd = float(mean), float(sd)
    half = t_critical(n - 1, confidence) * sd / math.sqrt(n)
    if not positive:
        return mean - half, mean + half, None
    if mean <= 0:  # every sample of a non-negative quantity was 0
        return 0.0, 0.0, None
    rel = half / mean
    try:
        lo, hi = mean * math.exp(-rel), mean * math.exp(rel)
    except OverflowError:
        lo = hi = math.inf
    if not (
        math.isfinite(lo) and math.isfinite(hi)
    ):  # a spread no float can carry: no interval, and why
        return (
            None,
            None,
            "the interval lies beyond the range of the numbers (a spread far larger than the mean)",
        )
    if upper is not None:
        hi = min(hi, upper)
    return lo, hi, None


def in_domain(summary: dict, *, upper: float | None = None) -> dict:
    """A stored summary with its CI95 of the mean recomputed by :func:`mean_interval` from its
    n, mean and stddev (a summary written before intervals stayed in their domain may hold a
    negative bound for a time). ``ci95_why`` says why there is no interval. A summary of a
    quantity with a negative sample keeps the symmetric interval."""
    out = dict(summary)
    n = int(summary.get("n") or 0)
    lo_min = summary.get("min")
    positive = lo_min is None or lo_min >= 0
    lo, hi, why = mean_interval(
        n, summary.get("mean"), summary.get("stddev"), positive=positive, upper=upper
    )
    out["ci95_low"], out["ci95_high"] = lo, hi
    if why is not None and n:
        out["ci95_why"] = why
    return out


# -- quantiles: distribution-free bounds ------------------------------------------------------
@dataclass(frozen=True)
class QuantileBound:
    """A sample quantile with distribution-free bounds from order statistics.

    ``low``/``high`` are order statistics x_(r), x_(s) of the sorted samples such that the
    interval covers the true q-quantile with probability at least ``confidence`` whatever the
    distribution (the number of samples below it is Binomial(n, q)); a bound that would need
    more samples than there are is None and ``why`` says how many it needs. ``upper`` is the
    one-sided bound (the true quantile lies below it with at least ``confidence``): the figure a
    latency SLO is checked against."""

    q: float
    n: int
    estimate: float | None  # numpy's linear interpolation, as summarize()'s p95/p99
    low: float | None
    high: float | None
    upper: float | None
    confidence: float
    why: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p) (0 below 0, 1 from n on)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(_sp.bdtr(k, n, p))


def quantile_samples_needed(
    q: float, confidence: float = 0.95, two_sided: bool = True
) -> int:
    """The fewest samples whose largest one bounds the q-quantile from above with ``confidence``
    (two-sided: with half the miss probability on that side): n >= log(alpha) / log(q)."""
    alpha = (1.0 - confidence) / (2.0 if two_sided else 1.0)
    return int(math.ceil(math.log(alpha) / math.log(q)))


def quantile_interval(
    values: Sequence[float], q: float, confidence: float = 0.95
) -> QuantileBound:
    """Distribution-free bounds of the ``q``-quantile (0 < q < 1; 0.95 for p95).

    Two-sided, equal tails: ``low`` = x_(r) with the largest r such that P(B <= r−1) <= α/2,
    ``high`` = x_(s) with the smallest s such that P(B <= s−1) >= 1 − α/2, B ~ Bin(n, q); then
    P(x_(r) <= ξ_q <= x_(s)) >= 1 − α for any continuous distribution. ``upper`` is the one-sided
    bound x_(u), the smallest u with P(B <= u−1) >= confidence. This is the reuse point for
    percentile figures (p95/p99 of TTFT, E2E, ITL): a bound that would need more samples than
    there are is None, with how many it needs."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie strictly between 0 and 1, got {q!r}")
    arr = np.sort(_clean(values))
    n = int(arr.size)
    est = float(np.percentile(arr, 100.0 * q)) if n else None
    if n == 0:
        return QuantileBound(q, 0, None, None, None, None, confidence, "no samples")
    # the order-statistic ranks of the project's one bound (quantile_lower_rank / quantile_upper_rank, which
    # percentile_interval uses too): each side of the two-sided interval at 1 - alpha/2, the one-sided at c
    alpha = 1.0 - confidence
    pct = 100.0 * q
    r = quantile_lower_rank(n, pct, 1.0 - alpha / 2)
    s = quantile_upper_rank(n, pct, 1.0 - alpha / 2)
    u = quantile_upper_rank(n, pct, confidence)
    cdf = {k: _binom_cdf(k - 1, n, q) for k in (r, s) if k is not None}  # P(B <= k-1)
    achieved = (cdf[s] if s is not None else 1.0) - (cdf[r] if r is not None else 0.0)
    why = None
    if s is None or u is None:
        why = (
            f"{n} samples cannot bound p{_qname(q)} from above at {confidence:.0%}: it needs at least "
            f"{quantile_samples_needed(q, confidence, two_sided=s is None and u is not None)} "
            + ("(two-sided)" if u is not None else "(one-sided)")
        )
    elif r is None:
        why = f"{n} samples cannot bound p{_qname(q)} from below at {confidence:.0%}"
    return QuantileBound(
        q,
        n,
        est,
        float(arr[r - 1]) if r else None,
        float(arr[s - 1]) if s else None,
        float(arr[u - 1]) if u else None,
        float(achieved),
        why,
    )


def _qname(q: float) -> str:
    return f"{100 * q:g}"


# -- the run as the unit: run-to-run noise -----------------------------------------------------
@dataclass(frozen=True)
class RunNoise:
    """Run-to-run noise of one kind of test on one host: the standard deviation of the log of a
    run's mean between runs of the same configuration and build (0.03: runs scatter by about 3%),
    with its degrees of freedom and where it was measured. ``too_noisy``: a single run widened by
    it gets a CI95 wider than core.noise.USEFUL_FACTOR each way (the host is too noisy to rank a
    single run), ``why`` says so with the figures (None otherwise)."""

    sigma: float
    df: int
    source: str
    too_noisy: bool = False
    why: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def pooled_log_spread(groups: Sequence[Sequence[float]]) -> tuple[float | None, int]:
    """(sd, degrees of freedom) of log run means pooled over groups of runs of one configuration
    and build: every group of k >= 2 positive means contributes its sum of squares about its own
    log mean and k − 1 degrees of freedom. (None, 0) without any such group."""
    ss, df = 0.0, 0
    for g in groups:
        logs = np.log(
            np.asarray([v for v in g if v is not None and v > 0], dtype=float)
        )
        if logs.size < 2:
            continue
        ss += float(((logs - logs.mean()) ** 2).sum())
        df += int(logs.size) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def _side(
    means: np.ndarray, rel_se: float | None, noise: RunNoise | None
) -> tuple[float, float, str] | str:
    """(variance of the side's mean log, its degrees of freedom, method) or why it has none."""
    k = int(means.size)
    if k >= 2:
        return float(np.log(means).var(ddof=1)) / k, float(k - 1), "runs"
    if noise is None:
        return "one run, and no run-to-run noise measured for this host and kind of test (invoke noise measures it)"
    var = max(noise.sigma**2, (rel_se or 0.0) ** 2)
    return var, float(max(noise.df, 1)), "runs + host noise"


NO_POSITIVE_RUNS = "no positive run means on a side"


@dataclass(frozen=True)
class SideEstimate:
    """One side of a run-unit comparison, on the log scale: the log of the geometric mean of its run
    means (``log_mean``), the variance of that log mean (``var``) and its degrees of freedom (``df``),
    ``runs`` run means, and what the variance rests on (``method``: "runs", the spread between two
    or more runs; "runs + host noise", one run widened by the host's run-to-run noise or its own
    relative standard error when larger). ``why`` says why a side has no variance (and then ``var``
    and ``df`` are None) or, with ``log_mean`` None too, no estimate at all."""

    log_mean: float | None
    var: float | None
    df: float | None
    runs: int
    method: str = "runs"
    why: str | None = None

    @property
    def centre(self) -> float | None:
        """The geometric mean of the run means."""
        return None if self.log_mean is None else math.exp(self.log_mean)

    def interval(self, confidence: float = 0.95) -> tuple[float | None, float | None]:
        """The centre's CI on the log scale (Student's t at ``df``), (None, None) without a variance."""
        if self.log_mean is None or self.var is None or self.df is None:
            return None, None
        centre = math.exp(self.log_mean)
        half = t_critical(self.df, confidence) * math.sqrt(self.var)
        return centre * math.exp(-half), centre * math.exp(half)

    def to_dict(self) -> dict:
        return asdict(self)


def side_estimate(
    means: Sequence[float],
    *,
    rel_se: float | None = None,
    noise: RunNoise | None = None,
) -> SideEstimate:
    """One side's run means as a :class:`SideEstimate`. Two or more runs: the sample variance of their
    log means over k, k − 1 degrees of freedom (repetitions inside a run never stand in for runs). One
    run: the host's run-to-run noise for that kind of test (sigma² and its degrees of freedom), or the
    run's own relative standard error ``rel_se`` when that is larger; without a noise estimate no
    variance (``why`` says so). A non-positive mean on the side: no estimate (the log scale needs
    positive values). Missing and non-finite values are left out."""
    arr = np.asarray(
        [v for v in means if v is not None and math.isfinite(v)], dtype=float
    )
    k = int(arr.size)
    if not k or (arr <= 0).any():
        return SideEstimate(None, None, None, k, "runs", NO_POSITIVE_RUNS)
    log_mean = float(np.log(arr).mean())
    side = _side(arr, rel_se, noise)
    if isinstance(side, str):
        return SideEstimate(log_mean, None, None, k, "runs", side)
    var, df, method = side
    return SideEstimate(log_mean, var, df, k, method)


def pooled_side(
    means: Sequence[float],
    *,
    noise: RunNoise | None = None,
    fallback: RunNoise | None = None,
    rel_se: float | None = None,
) -> SideEstimate:
    """One configuration's runs as a side, the way every figure of the site is estimated (the fact layer).

    The variance of the log of the geometric mean of ``k`` run means is sigma² / k with sigma the
    run-to-run noise of the host for that kind of test (``noise``: pooled over every configuration of
    the host measured more than once, this one included, and the host's noise A/A), at that estimate's
    degrees of freedom: two runs alone say little about their spread (one degree of freedom, a t of
    12.7), the host's pooled estimate says more. Without a host estimate: the spread between the
    ``k`` >= 2 runs themselves (k − 1 df); a single run is widened by ``fallback`` (the fleet's
    pooled noise for that kind of test) and is otherwise without interval. One run's own relative
    standard error counts where it is larger than the noise. ``method`` says which: "host noise",
    "runs", "fleet noise"."""
    arr = np.asarray(
        [v for v in means if v is not None and math.isfinite(v)], dtype=float
    )
    k = int(arr.size)
    if not k or (arr <= 0).any():
        return SideEstimate(None, None, None, k, "runs", NO_POSITIVE_RUNS)
    log_mean = float(np.log(arr).mean())
    own = (rel_se or 0.0) ** 2 if k == 1 else 0.0
    if noise is not None and noise.df > 0:
        return SideEstimate(
            log_mean, max(noise.sigma**2, own) / k, float(noise.df), k, "host noise"
        )
    if k >= 2:
        return SideEstimate(
            log_mean, float(np.log(arr).var(ddof=1)) / k, float(k - 1), k, "runs"
        )
    if fallback is not None and fallback.df > 0:
        return SideEstimate(
            log_mean, max(fallback.sigma**2, own), float(fallback.df), k, "fleet noise"
        )
    return SideEstimate(
        log_mean,
        None,
        None,
        k,
        "runs",
        "one run, and no run-to-run noise measured for this host or any host for this kind of test "
        "(invoke noise measures it)",
    )


def combined_method(a: str, b: str) -> str:
    """What a comparison's interval rests on, from its two sides' (the same word when they agree)."""
    return a if a == b else f"{a} / {b}"


def combine_sides(
    baseline: SideEstimate,
    candidate: SideEstimate,
    higher_is_better: bool,
    confidence: float = 0.95,
) -> Comparison:
    """candidate / baseline from two side estimates: the ratio of the geometric means, its CI on the
    log scale with the two variances added and Welch-Satterthwaite degrees of freedom, and the
    verdict (win or loss when the interval excludes 1, else within noise; "insufficient data" when a
    side has no estimate or no variance, ``note`` says why)."""
    na, nb = baseline.runs, candidate.runs
    if baseline.log_mean is None or candidate.log_mean is None:
        return Comparison(
            None, None, None, "insufficient data", na, nb, "runs", NO_POSITIVE_RUNS
        )
    ratio = float(math.exp(candidate.log_mean - baseline.log_mean))
    for side in (baseline, candidate):
        if side.var is None or side.df is None:
            return Comparison(
                ratio, None, None, "insufficient data", na, nb, "runs", side.why or ""
            )
    va, dfa, vb, dfb = baseline.var, baseline.df, candidate.var, candidate.df
    method = combined_method(baseline.method, candidate.method)
    se = math.sqrt(va + vb)
    df = dfa + dfb
    if se == 0:
        lo = hi = ratio
    else:
        den = va * va / dfa + vb * vb / dfb
        df = (va + vb) ** 2 / den if den > 0 else dfa + dfb
        t = t_critical(df, confidence)
        lo, hi = ratio * math.exp(-t * se), ratio * math.exp(t * se)
    if lo > 1.0:
        verdict = "win" if higher_is_better else "loss"
    elif hi < 1.0:
        verdict = "loss" if higher_is_better else "win"
    else:
        verdict = "within noise"
    return Comparison(
        ratio,
        lo,
        hi,
        verdict,
        na,
        nb,
        method,
        p_value=two_sided_p(math.log(ratio), se, df),
    )


def compare_runs(
    baseline: Sequence[float],
    candidate: Sequence[float],
    higher_is_better: bool,
    *,
    noise_a: RunNoise | None = None,
    noise_b: RunNoise | None = None,
    rel_se_a: float | None = None,
    rel_se_b: float | None = None,
    confidence: float = 0.95,
) -> Comparison:
    """Two sets of runs compared with the run as the unit: the ratio of the geometric means of the
    run means (candidate / baseline), with a CI on the log scale.

    Each side is a :func:`side_estimate`: a side with two or more runs contributes the spread between
    its runs (the sample variance of its log run means over k, k − 1 degrees of freedom): repetitions
    inside a run never stand in for runs. A side with one run contributes the host's run-to-run noise
    for that kind of test (``noise_a``/``noise_b``: sigma² and its degrees of freedom), or that run's
    own relative standard error ``rel_se`` when that is larger; without a noise estimate it has no
    interval (verdict "insufficient data", ``note`` says why). The two sides are combined by
    :func:`combine_sides` (Welch-Satterthwaite). Verdict: win or loss when the interval excludes 1,
    else within noise."""
    return combine_sides(
        side_estimate(baseline, rel_se=rel_se_a, noise=noise_a),
        side_estimate(candidate, rel_se=rel_se_b, noise=noise_b),
        higher_is_better,
        confidence,
    )


def run_interval(
    means: Sequence[float],
    *,
    rel_se: float | None = None,
    noise: RunNoise | None = None,
    confidence: float = 0.95,
) -> tuple[float | None, float | None, float | None, str]:
    """(centre, low, high, note) of one configuration's value with the run as the unit: the
    geometric mean of its run means with a t interval on the log scale from the spread between
    runs (two or more), or one run widened by the host's run-to-run noise; no interval without
    either (``note`` says why). Non-positive run means are left out."""
    m = [v for v in means if v is not None and math.isfinite(v) and v > 0]
    if not m:
        return None, None, None, "no positive run mean"
    side = side_estimate(m, rel_se=rel_se, noise=noise)
    centre = side.centre
    if side.var is None:
        return centre, None, None, side.why or ""
    lo, hi = side.interval(confidence)
    return centre, lo, hi, side_note(side, noise)


def side_note(side: SideEstimate, noise: RunNoise | None) -> str:
    """What a side's interval rests on ("3 runs", "one run, widened by the host's run-to-run noise
    (2.1%, history: ...)"), or why it has none; ``noise``: the one :func:`side_estimate` was given."""
    if side.var is None:
        return side.why or ""
    if side.method == "runs":
        return f"{side.runs} runs"
    return f"one run, widened by the host's run-to-run noise ({100 * noise.sigma:.1f}%, {noise.source})"


# -- paired pass/fail comparisons (quality on shared items) ------------------------------------
def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: the discordant items (passed by one side only) against
    Binomial(a_only + b_only, 1/2)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts must be >= 0")
    d = a_only + b_only
    if d == 0:
        return 1.0
    k = min(a_only, b_only)
    return min(1.0, 2.0 * _binom_cdf(k, d, 0.5))


#: The fewest discordant items, all one way, that the exact McNemar test can call significant at
#: 5% (2 · 0.5^6 = 0.031): no difference smaller than this many items is ever detected.
MCNEMAR_MIN_DISCORDANT = 6


def mcnemar_mdd(
    n: int,
    discordant_share: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float | None:
    """The minimum detectable difference in pass rate for n paired items: the smallest |p_B − p_A|
    the McNemar test finds with ``power`` at level ``alpha`` (Connor's normal approximation,
    n = (z_α √ψ + z_β √(ψ − δ²))² / δ², ψ the share of discordant items, taken as the observed
    share or, when smaller, δ itself), never below 6 items in n (the exact test's floor)."""
    if n <= 0:
        return None
    za, zb = float(_sp.ndtri(1 - alpha / 2)), float(_sp.ndtri(power))

    def needed(delta: float) -> float:
        psi = max(discordant_share or 0.0, delta)
        return (
            za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))
        ) ** 2 / (delta * delta)

    if needed(1.0) > n:
        return None
    lo, hi = 1e-6, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if needed(mid) <= n:
            hi = mid
        else:
            lo = mid
    return max(hi, MCNEMAR_MIN_DISCORDANT / n)


@dataclass(frozen=True)
class PairedComparison:
    """Candidate B against baseline A scored on the same items (pass/fail)."""

    n: int  # shared items
    a_passed: int
    b_passed: int
    a_only: int  # passed by A, failed by B
    b_only: int  # passed by B, failed by A
    diff: float | None  # p_B − p_A
    ci95_low: (
        float | None
    )  # Agresti-Min's paired interval of the difference (paired_difference_ci)
    ci95_high: float | None
    p_value: float | None  # exact McNemar
    verdict: str  # "win", "loss", "within noise", "insufficient data" (from B's point of view)
    mdd: float | None  # minimum detectable difference at this item count

    def to_dict(self) -> dict:
        return asdict(self)


def paired_rates(
    a: Sequence[bool], b: Sequence[bool], alpha: float = 0.05
) -> PairedComparison:
    """Pass/fail of two configurations on the same items, in the same order: the exact McNemar
    test decides (win/loss at p < alpha), :func:`paired_difference_ci` (Agresti-Min, the project's one
    paired-difference interval, also parity's and the agent kind's) gives the difference's CI95, and
    :func:`mcnemar_mdd` the smallest difference this many items could show."""
    if len(a) != len(b):
        raise ValueError("paired outcomes need the same items on both sides")
    n = len(a)
    if n == 0:
        return PairedComparison(
            0, 0, 0, 0, 0, None, None, None, None, "insufficient data", None
        )
    both = sum(1 for x, y in zip(a, b) if x and y)
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    pa, pb = (both + a_only) / n, (both + b_only) / n
    d = pb - pa
    lo, hi = paired_difference_ci(
        a_only, b_only, n
    )  # the project's one paired-difference CI
    p = mcnemar_exact(a_only, b_only)
    verdict = "within noise" if p >= alpha else ("win" if d > 0 else "loss")
    return PairedComparison(
        n,
        both + a_only,
        both + b_only,
        a_only,
        b_only,
        d,
        lo,
        hi,
        p,
        verdict,
        mcnemar_mdd(n, (a_only + b_only) / n),
    )


# -- interleaved A/B: a sequential decision on blocks ------------------------------------------
@dataclass(frozen=True)
class ABDecision:
    """Where an interleaved A/B stands: B/A with its interval and the verdict at a threshold."""

    verdict: str  # "win", "loss", "equivalent", "undecided"
    ratio: float | None
    low: float | None
    high: float | None
    blocks: int
    confidence: float  # of this look's interval (Bonferroni over the planned looks)
    threshold: float
    mde: (
        float | None
    )  # the smallest change beyond the threshold detectable (80% power) at the planned blocks

    def to_dict(self) -> dict:
        return asdict(self)


def ab_decide(
    block_diffs: Sequence[float],
    threshold: float,
    higher_is_better: bool,
    *,
    looks: int,
    planned_blocks: int,
    confidence: float = 0.95,
    power: float = 0.8,
) -> ABDecision:
    """Decide an interleaved A/B from its blocks. Each block (A B B A, fresh processes) gives
    d = mean log B − mean log A of its runs, so a drift that is linear over the block cancels.
    The ratio is exp(mean d) with a t interval over blocks at confidence 1 − (1 − confidence) /
    looks (Bonferroni over the looks taken, so stopping as soon as it decides keeps the overall
    error at most 1 − confidence). Verdict: win or loss when the whole interval lies beyond
    1 ± threshold on one side, equivalent when it lies within 1 ± threshold, else undecided.
    ``mde``: the smallest true change that would be called win or loss with ``power`` after
    ``planned_blocks`` blocks, from the spread between blocks so far."""
    d = np.asarray(
        [x for x in block_diffs if x is not None and math.isfinite(x)], dtype=float
    )
    k = int(d.size)
    conf = 1.0 - (1.0 - confidence) / max(looks, 1)
    if k < 2:
        ratio = float(math.exp(d.mean())) if k else None
        return ABDecision("undecided", ratio, None, None, k, conf, threshold, None)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    t = t_critical(k - 1, conf)
    se = sd / math.sqrt(k)
    ratio, lo, hi = math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se)
    band_lo, band_hi = 1.0 - threshold, 1.0 + threshold
    if lo > band_hi:
        verdict = "win" if higher_is_better else "loss"
    elif hi < band_lo:
        verdict = "loss" if higher_is_better else "win"
    elif band_lo <= lo and hi <= band_hi:
        verdict = "equivalent"
    else:
        verdict = "undecided"
    kp = max(planned_blocks, k)
    mde = None
    if sd > 0:
        tp = t_critical(kp - 1, conf) + float(_sp.stdtrit(kp - 1, power))
        mde = math.exp(math.log(1.0 + threshold) + tp * sd / math.sqrt(kp)) - 1.0
    return ABDecision(verdict, ratio, lo, hi, k, conf, threshold, mde)


# -- paired pass/fail outcomes (quality parity between backends; the exact test: mcnemar_exact) ---
def paired_difference_ci(
    b: int, c: int, n: int, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """CI of the difference of two paired pass rates, (c - b) / n (B's rate minus A's), by
    Agresti & Min (2005): the Wald interval after adding 1/2 to each of the four cells of the
    paired table, which keeps its coverage near nominal at small n and at 0 discordant items."""
    if n <= 0:
        return None, None
    z = float(_sp.ndtri(0.5 + confidence / 2))
    bb, cc, nn = b + 0.5, c + 0.5, n + 2.0
    d = (cc - bb) / nn
    var = ((bb + cc) - (cc - bb) ** 2 / nn) / nn**2
    half = z * math.sqrt(max(var, 0.0))
    return max(-1.0, d - half), min(1.0, d + half)


def paired_verdict(b: int, c: int, alpha: float = 0.05) -> str:
    """B against A on paired pass/fail items: "win" (B passes significantly more, exact McNemar
    p < alpha), "loss", "within noise", or "identical verdicts" when no item is discordant."""
    if b + c == 0:
        return "identical verdicts"
    p = mcnemar_exact(b, c)
    if p >= alpha:
        return "within noise"
    return "win" if c > b else "loss"


# -- order-statistic bounds of a percentile, in percent, for SLO verdicts (distribution-free) --
# (quantile_interval above gives the same bounds of a quantile in (0, 1) as a QuantileBound)
# For n independent samples of a continuous distribution, the k-th smallest x_(k) lies at or above
# the q-quantile exactly when at most k-1 samples fall below it: P(x_(k) >= xi_q) = P(B <= k-1),
# B ~ Binomial(n, q). No assumption about the shape of the distribution (MLPerf LoadGen bounds its
# latency percentiles the same way). Percentiles are given in percent (95 = p95).
QUANTILE_SETTLE_CAP = 1_000_000  # the most samples "needs N more" will ever name


def _q(percentile: float) -> float:
    if not 0.0 < float(percentile) < 100.0:
        raise ValueError(
            f"a percentile lies strictly between 0 and 100 (got {percentile!r})"
        )
    return float(percentile) / 100.0


@lru_cache(maxsize=8192)
def quantile_upper_rank(
    n: int, percentile: float, confidence: float = 0.95
) -> int | None:
    """Smallest 1-based rank u with P(x_(u) >= the percentile) >= ``confidence`` (x_(u) is then an
    upper confidence bound of it); None when even x_(n) is not enough (n too small)."""
    q = _q(percentile)
    if n < 1:
        return None
    ks = np.arange(0, n)  # u - 1
    cover = _sp.bdtr(ks, n, q)
    ok = np.nonzero(cover >= confidence)[0]
    return int(ok[0]) + 1 if ok.size else None


@lru_cache(maxsize=8192)
def quantile_lower_rank(
    n: int, percentile: float, confidence: float = 0.95
) -> int | None:
    """Largest 1-based rank l with P(x_(l) <= the percentile) >= ``confidence`` (a lower confidence
    bound); None when even x_(1) is not enough."""
    q = _q(percentile)
    if n < 1:
        return None
    ls = np.arange(1, n + 1)
    cover = 1.0 - _sp.bdtr(ls - 1, n, q)  # P(B >= l)
    ok = np.nonzero(cover >= confidence)[0]
    return int(ok[-1]) + 1 if ok.size else None


def quantile_min_samples(
    percentile: float, confidence: float = 0.95, side: str = "both"
) -> int:
    """Fewest samples for which an order-statistic bound of the percentile exists at all: the upper
    bound needs 1 - q^n >= c, the lower one 1 - (1 - q)^n >= c; ``both`` (a two-sided interval at
    ``confidence``) needs each side at (1 + c) / 2."""
    q = _q(percentile)
    if side == "both":
        c = (1.0 + confidence) / 2.0
        return max(
            quantile_min_samples(percentile, c, "upper"),
            quantile_min_samples(percentile, c, "lower"),
        )
    base = q if side == "upper" else 1.0 - q
    return max(1, math.ceil(math.log(1.0 - confidence) / math.log(base) - 1e-12))


def percentile_interval(
    values: Sequence[float], percentile: float, confidence: float = 0.95
) -> dict:
    """A percentile with its distribution-free two-sided interval (each side at (1 + c) / 2).

    ``value`` is the sample percentile (numpy's linear interpolation, as everywhere else here);
    ``low``/``high`` are order statistics (None where the sample is too small for that side);
    ``needs`` is how many more samples the interval needs to exist at all (0 when it does).
    Infinite values (a failed request counted as never answering) stay in the ranks."""
    arr = np.sort(
        np.asarray(
            [float(v) for v in values if v is not None and not math.isnan(float(v))],
            dtype=float,
        )
    )
    n = int(arr.size)
    side = (1.0 + confidence) / 2.0
    need = quantile_min_samples(percentile, confidence, "both")
    out = {
        "percentile": float(percentile),
        "confidence": confidence,
        "n": n,
        "value": None,
        "low": None,
        "high": None,
        "needs": max(0, need - n),
    }
    if n == 0:
        return out
    finite = arr[np.isfinite(arr)]
    out["value"] = (
        float(np.percentile(arr, percentile))
        if finite.size == n
        else _rank_value(arr, percentile)
    )
    lo, hi = (
        quantile_lower_rank(n, float(percentile), side),
        quantile_upper_rank(n, float(percentile), side),
    )
    out["low"] = float(arr[lo - 1]) if lo is not None else None
    out["high"] = float(arr[hi - 1]) if hi is not None else None
    return out


def _rank_value(arr: np.ndarray, percentile: float) -> float:
    """The percentile of a sorted sample that holds infinities: the nearest-rank value (interpolating
    towards infinity would say nothing)."""
    k = max(1, math.ceil(float(percentile) / 100.0 * arr.size))
    return float(arr[k - 1])


def quantile_vs_limit(
    values: Sequence[float], percentile: float, limit: float, confidence: float = 0.95
) -> dict:
    """Whether the ``percentile`` of the population lies at or below ``limit``, decided from order
    statistics at ``confidence``:

    * ``meets`` when the upper bound x_(u) is within the limit;
    * ``misses`` when the lower bound x_(l) is above it;
    * ``unresolved`` otherwise, with ``needs``: about how many more samples, drawn as these were,
      would settle it (None when the observed share within the limit sits on the percentile itself,
      or more than QUANTILE_SETTLE_CAP would be needed).

    ``values`` may hold +inf (a failed request never met the limit)."""
    arr = np.sort(
        np.asarray(
            [float(v) for v in values if v is not None and not math.isnan(float(v))],
            dtype=float,
        )
    )
    n = int(arr.size)
    within = int(np.searchsorted(arr, limit, side="right"))  # samples <= limit
    out = {
        "percentile": float(percentile),
        "limit": float(limit),
        "confidence": confidence,
        "n": n,
        "within": within,
        "value": None,
        "upper": None,
        "lower": None,
        "verdict": "unresolved",
        "needs": None,
    }
    if n == 0:
        out["needs"] = quantile_min_samples(percentile, confidence, "upper")
        return out
    finite = arr[np.isfinite(arr)]
    out["value"] = (
        float(np.percentile(arr, percentile))
        if finite.size == n
        else _rank_value(arr, percentile)
    )
    u = quantile_upper_rank(n, float(percentile), confidence)
    lo = quantile_lower_rank(n, float(percentile), confidence)
    out["upper"] = float(arr[u - 1]) if u is not None else None
    out["lower"] = float(arr[lo - 1]) if lo is not None else None
    if u is not None and u <= within:
        out["verdict"] = "meets"
    elif lo is not None and lo > within:
        out["verdict"] = "misses"
    else:
        out["needs"] = samples_to_settle(n, within, percentile, confidence)
    return out


def _settles(n: int, within: int, percentile: float, confidence: float) -> bool:
    u = quantile_upper_rank(n, float(percentile), confidence)
    lo = quantile_lower_rank(n, float(percentile), confidence)
    return (u is not None and u <= within) or (lo is not None and lo > within)


def samples_to_settle(
    n: int, within: int, percentile: float, confidence: float = 0.95
) -> int | None:
    """More samples that would settle :func:`quantile_vs_limit` if the share within the limit stays
    what it is (``within`` of ``n``); None when that share equals the percentile or the answer passes
    QUANTILE_SETTLE_CAP. Exponential search, then bisection on the total count."""
    q = _q(percentile)
    share = within / n if n else 1.0
    if n and abs(share - q) < 1e-12:
        return None
    if n == 0:
        return quantile_min_samples(percentile, confidence, "upper")

    def ok(total: int) -> bool:
        return _settles(
            total,
            min(total, int(math.floor(share * total + 1e-9))),
            percentile,
            confidence,
        )

    lo_n, hi_n = n, max(n + 1, 2 * n)
    while not ok(hi_n):
        if hi_n - n > QUANTILE_SETTLE_CAP:
            return None
        lo_n, hi_n = hi_n, hi_n * 2
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        if ok(mid):
            hi_n = mid
        else:
            lo_n = mid
    return hi_n - n


def linear_fit(
    x: Sequence[float], y: Sequence[float], confidence: float = 0.95
) -> dict | None:
    """Ordinary least squares y = a + b x with the CI of the slope and of the intercept (Student's
    t, n - 2 degrees of freedom). None with fewer than two distinct x; no interval with n = 2."""
    xs, ys = (
        np.asarray([float(v) for v in x], dtype=float),
        np.asarray([float(v) for v in y], dtype=float),
    )
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    n = int(xs.size)
    if n < 2 or np.unique(xs).size < 2:
        return None
    mx, my = xs.mean(), ys.mean()
    sxx = float(((xs - mx) ** 2).sum())
    b = float(((xs - mx) * (ys - my)).sum() / sxx)
    a = float(my - b * mx)
    out = {
        "n": n,
        "slope": b,
        "intercept": a,
        "slope_ci95": (None, None),
        "intercept_ci95": (None, None),
        "residual_sd": None,
    }
    if n > 2:
        sse = float(((ys - (a + b * xs)) ** 2).sum())
        s = math.sqrt(sse / (n - 2))
        t = t_critical(n - 2, confidence)
        se_b = s / math.sqrt(sxx)
        se_a = s * math.sqrt(1.0 / n + mx * mx / sxx)
        out.update(
            slope_ci95=(b - t * se_b, b + t * se_b),
            intercept_ci95=(a - t * se_a, a + t * se_a),
            residual_sd=s,
        )
    return out
