"""Statistics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from core import stats


def test_summarize_known_values():
    s = stats.summarize([10.0, 12.0, 14.0])
    assert s["n"] == 3 and s["mean"] == pytest.approx(12.0)
    assert s["stddev"] == pytest.approx(2.0)  # sample stddev (n-1)
    half = 4.302652729911275 * 2.0 / math.sqrt(3)  # t(0.975, 2)
    # a positive quantity: Student's t half-width on the log scale (delta method), never below zero
    assert s["ci95_low"] == pytest.approx(12.0 * math.exp(-half / 12)) and s[
        "ci95_high"
    ] == pytest.approx(12.0 * math.exp(half / 12))
    assert s["median"] == 12.0 and s["min"] == 10.0 and s["max"] == 14.0
    s = stats.summarize(
        [-1.0, 1.0, 3.0]
    )  # a quantity that can be negative keeps the symmetric interval
    assert s["ci95_low"] == pytest.approx(1.0 - half) and s[
        "ci95_high"
    ] == pytest.approx(1.0 + half)


def test_single_sample_has_no_interval():
    s = stats.summarize([5.0])
    assert (
        s["n"] == 1
        and s["mean"] == 5.0
        and s["stddev"] is None
        and s["ci95_low"] is None
    )


def test_empty_and_nan_are_dropped():
    assert stats.summarize([])["n"] == 0
    assert stats.summarize([1.0, float("nan"), 3.0])["n"] == 2


@pytest.mark.parametrize(
    "base,cand,hib,verdict",
    [
        ([100, 101, 99, 100], [120, 121, 119, 120], True, "win"),
        ([100, 101, 99, 100], [80, 81, 79, 80], True, "loss"),
        ([100, 110, 90, 100], [101, 111, 91, 99], True, "within noise"),
        ([10, 11, 9, 10], [5, 6, 4, 5], False, "win"),  # latency: lower is better
        ([10], [12, 13], True, "insufficient data"),
    ],
)
def test_compare_verdicts(base, cand, hib, verdict):
    c = stats.compare(base, cand, hib)
    assert c.verdict == verdict
    if verdict != "insufficient data":
        assert c.ci95_low <= c.ratio <= c.ci95_high
        assert c.ratio == pytest.approx(sum(cand) / len(cand) / (sum(base) / len(base)))


def test_linear_fit_matches_scipy_and_a_hand_fit():
    """The adapter cost fit (time per token against adapter count): slope, intercept and the slope's
    CI95 as scipy's linregress gives them, with Student's t on n - 2 degrees of freedom."""
    from scipy import stats as sst

    x = [0, 1, 2, 4, 8]
    y = [20.0, 20.9, 22.1, 23.8, 28.2]
    fit = stats.linear_fit(x, y)
    ref = sst.linregress(x, y)
    t = sst.t.ppf(0.975, len(x) - 2)
    assert fit["n"] == 5
    assert fit["slope"] == pytest.approx(ref.slope) and fit[
        "intercept"
    ] == pytest.approx(ref.intercept)
    assert fit["slope_ci95"] == pytest.approx(
        (ref.slope - t * ref.stderr, ref.slope + t * ref.stderr)
    )
    assert fit["intercept_ci95"] == pytest.approx(
        (
            ref.intercept - t * ref.intercept_stderr,
            ref.intercept + t * ref.intercept_stderr,
        )
    )
    # exactly on a line: zero residuals, a zero-width interval
    exact = stats.linear_fit([0, 1, 2], [1.0, 3.0, 5.0])
    assert exact["slope"] == pytest.approx(2.0) and exact[
        "slope_ci95"
    ] == pytest.approx((2.0, 2.0))
    # two points: a line but no interval; one distinct x: no line
    assert stats.linear_fit([0, 1], [1.0, 2.0])["slope_ci95"] == (None, None)
    assert stats.linear_fit([1, 1, 1], [1.0, 2.0, 3.0]) is None
    assert stats.linear_fit([0, 1, float("nan")], [1.0, 2.0, 3.0])["n"] == 2
