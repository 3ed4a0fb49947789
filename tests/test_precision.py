"""Repeat to a precision: the stopping rule, its record, the matrix settings; robust flags."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from scipy import stats as st

from core import stats
from core.errors import ConfigError
from core.precision import Precision, Repeater, combine
from runtime.execution import matrix


def _drain(rep: Repeater, values) -> int:
    it = iter(values)
    while rep.more():
        rep.add(next(it))
    return rep.count


def test_stops_when_target_met_not_before_minimum():
    rep = Repeater(
        Precision(target=0.02, min_repetitions=4, max_repetitions=50),
        5,
        "tokens_per_second",
    )
    n = _drain(rep, [100.0, 100.5, 99.5, 100.2, 99.8] + [100.0] * 100)
    rec = rep.record()
    assert n == 4  # CI95 half-width of the first four is ~0.7% < 2%, the floor is 4
    assert rec["met"] is True and rec["stop_reason"] == "target_met" and rec["n"] == 4
    assert rec["half_width_rel"] == pytest.approx(
        stats.ci95_half_width_rel([100.0, 100.5, 99.5, 100.2])
    )
    assert rec["target_rel"] == 0.02


def test_noisy_samples_hit_the_count_ceiling_and_say_so():
    rng = np.random.default_rng(1)
    rep = Repeater(
        Precision(target=0.01, min_repetitions=3, max_repetitions=7), 5, "e2e_ms"
    )
    n = _drain(rep, rng.normal(100, 30, 100))
    rec = rep.record()
    assert n == 7 and rec["met"] is False and rec["stop_reason"] == "max_repetitions"
    assert rec["half_width_rel"] > 0.01


def test_time_ceiling(monkeypatch):
    clock = iter(range(0, 10_000, 10))  # every call 10 s later
    monkeypatch.setattr("core.precision.time.perf_counter", lambda: float(next(clock)))
    rep = Repeater(
        Precision(target=0.001, min_repetitions=2, max_repetitions=100, max_time_s=35),
        5,
        "x",
    )
    n = _drain(rep, [1.0, 2.0] * 100)
    assert rep.record()["stop_reason"] == "max_time_s" and 2 <= n < 100


def test_fixed_count_when_precision_is_null():
    rep = Repeater(None, 5, "tokens_per_second")
    assert _drain(rep, range(1, 100)) == 5
    rec = rep.record()
    assert (
        rec["stop_reason"] == "fixed_count"
        and rec["met"] is None
        and rec["target_rel"] is None
    )


def test_missing_values_count_but_do_not_meet_the_target():
    rep = Repeater(Precision(min_repetitions=2, max_repetitions=4), 5, "e2e_ms")
    assert _drain(rep, [None] * 10) == 4
    assert rep.record()["met"] is False and rep.record()["half_width_rel"] is None


def test_combine_levels():
    a = {
        "metric": "e2e_ms",
        "target_rel": 0.02,
        "min_repetitions": 3,
        "max_repetitions": 30,
        "max_time_s": 60.0,
        "n": 6,
        "half_width_rel": 0.01,
        "met": True,
        "stop_reason": "target_met",
        "elapsed_s": 1.0,
    }
    b = {
        **a,
        "n": 30,
        "half_width_rel": 0.05,
        "met": False,
        "stop_reason": "max_repetitions",
        "elapsed_s": 2.0,
    }
    c = combine([a, b])
    assert (
        c["met"] is False
        and c["n"] == 36
        and c["half_width_rel"] == 0.05
        and len(c["levels"]) == 2
    )
    assert c["stop_reason"] == "max_repetitions; target_met"
    assert combine([a, a])["met"] is True


def test_precision_validation():
    with pytest.raises(ValueError, match="max_repetitions"):
        Precision(min_repetitions=10, max_repetitions=5)


def _write(tmp_path, body: str):
    p = tmp_path / "m.yaml"
    p.write_text(textwrap.dedent(body))
    return p


def test_matrix_precision_default_override_and_null(tmp_path):
    p = _write(
        tmp_path,
        """
        schema_version: 1
        name: m
        models: [gemma3-270m-q4_k_m]
        precision: {target: 0.05, max_repetitions: 12}
        tests:
          - tg16
          - {kind: rate, n_gen: 8, precision: null, repetitions: 4}
        sweeps:
          - name: a
            sweep: {n_threads: [1]}
          - name: b
            sweep: {n_threads: [1]}
            precision: {target: 0.01}
          - name: c
            sweep: {n_threads: [1]}
            precision: null
            repetitions: 3
        """,
    )
    m = matrix.load(p)
    by = {(c.sweep, c.test.name): c.test for c in m.configurations()}
    assert (
        by[("a", "tg16")].precision.target == 0.05
        and by[("a", "tg16")].precision.max_repetitions == 12
    )
    assert by[("a", "tg8")].precision is None and by[("a", "tg8")].repetitions == 4
    assert by[("b", "tg16")].precision.target == 0.01
    assert by[("c", "tg16")].precision is None and by[("c", "tg16")].repetitions == 3
    # the target is part of what a test is (its key): a different target is a different measurement
    assert by[("a", "tg16")].to_dict()["precision"]["target"] == 0.05


def test_matrix_default_precision_is_two_percent(tmp_path):
    p = _write(
        tmp_path,
        "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg16]\n",
    )
    t = matrix.load(p).tests[0]
    assert t.precision == Precision() and t.precision.target == 0.02


def test_matrix_bad_precision_names_file_and_field(tmp_path):
    p = _write(
        tmp_path,
        "schema_version: 1\nname: m\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg16]\n"
        "precision: {target: 2}\n",
    )
    with pytest.raises(ConfigError) as exc:
        matrix.load(p)
    assert (
        "m.yaml" in str(exc.value)
        and "precision" in str(exc.value)
        and "target" in str(exc.value)
    )


# -- robust statistics ------------------------------------------------------------------------


def test_outlier_flags_the_cold_first_sample():
    h100 = [
        34621.0,
        52565.0,
        53427.0,
        53206.0,
        52976.0,
    ]  # pp512 samples quoted in issue 13
    s = stats.summarize(h100)
    assert s["outliers"] == [0] and s["n"] == 5  # flagged, not dropped
    assert s["mean"] == pytest.approx(np.mean(h100))
    assert (
        s["trend"]["first_sample_outlier"] is True
        and s["trend"]["warmup_suspect"] is True
    )


def test_no_outliers_in_tight_samples():
    assert stats.outliers([10.0, 10.1, 9.9, 10.05, 9.95]) == []
    assert stats.outliers([5.0, 5.0, 5.0, 5.0]) == []


def test_trend_detects_a_monotonic_drift_and_matches_scipy():
    drift = [100.0 + i for i in range(10)]
    t = stats.trend(drift)
    ref = st.kendalltau(range(10), drift)
    assert (
        t["monotonic"] is True
        and t["tau"] == pytest.approx(ref.statistic)
        and t["p_value"] == pytest.approx(ref.pvalue)
    )
    flat = stats.trend([100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1])
    assert flat["monotonic"] is False and flat["warmup_suspect"] is False
    assert stats.trend([1.0, 2.0, 3.0]) is None


def test_median_ci_is_the_order_statistic_interval():
    # n = 6: [x(1), x(6)] covers 1 - 2/64 = 96.9% >= 95%; [x(2), x(5)] only 78%
    assert stats.median_ci([6, 1, 5, 2, 4, 3]) == (1.0, 6.0)
    assert stats.median_ci([1, 2, 3, 4, 5]) == (
        None,
        None,
    )  # 5 samples cannot reach 95%
    x = list(range(1, 21))  # n = 20: k = 6 (coverage 95.9%)
    lo, hi = stats.median_ci(x)
    assert (lo, hi) == (6.0, 15.0)
    cov = 1 - 2 * st.binom.cdf(5 - 1 + 1 - 1, 20, 0.5)
    assert cov >= 0.95


def test_ci95_half_width_rel():
    v = [10.0, 12.0, 14.0]
    expect = st.t.ppf(0.975, 2) * np.std(v, ddof=1) / math.sqrt(3) / 12.0
    assert stats.ci95_half_width_rel(v) == pytest.approx(expect)
    assert stats.ci95_half_width_rel([1.0]) is None


def test_a_count_given_without_precision_stays_a_fixed_count(tmp_path):
    p = _write(
        tmp_path,
        """
        schema_version: 1
        name: m
        models: [gemma3-270m-q4_k_m]
        repetitions: 2
        tests:
          - tg16
          - {kind: chat, id: c, requests: 2}
          - {kind: concurrency, id: k, levels: [1, 2], rounds: 1}
          - {kind: rate, n_gen: 8, precision: {target: 0.05}}
        """,
    )
    by = {t.name: t for t in matrix.load(p).tests}
    assert by["tg16"].precision is None and by["tg16"].repetitions == 2
    assert by["c"].precision is None and by["k"].precision is None
    assert by["tg8"].precision.target == 0.05
    q = _write(
        tmp_path,
        """
        schema_version: 1
        name: m
        models: [gemma3-270m-q4_k_m]
        repetitions: 2
        precision: {target: 0.03}
        tests: [tg16, {kind: chat, id: c}]
        """,
    )
    by = {t.name: t for t in matrix.load(q).tests}
    assert (
        by["tg16"].precision.target == 0.03 and by["c"].precision.target == 0.03
    )  # explicit precision wins


def test_committed_matrices_repeat_to_a_precision():
    for name in ("default", "optimization", "projections"):
        m = matrix.load(name)
        assert all(c.test.precision is not None for c in m.configurations()), name
    conc = next(t for t in matrix.load("serving").tests if t.kind == "concurrency")
    assert conc.precision is not None


def test_mann_kendall_equals_scipy_kendalltau_with_and_without_ties():
    """stats computes the drift test itself (scipy's per-call overhead dominated a 10k-artifact
    build); it must give scipy's tau-b and p-value: exact null without ties up to n = 33, the
    tie-corrected normal approximation otherwise, both sides of the n = 33 switch."""
    import numpy as np
    from scipy import stats as st

    rng = np.random.default_rng(11)
    cases = [
        rng.normal(size=n) for n in (4, 5, 9, 20, 33, 34, 60, 127, 128, 129, 300, 1300)
    ]  # across blocks of 128
    cases += [
        rng.integers(0, 4, size=n).astype(float) for n in (4, 12, 40, 200, 700)
    ]  # ties
    cases += [
        np.arange(10.0),
        np.arange(10.0)[::-1],
        np.array([1.0, 1.0, 1.0, 2.0]),
        np.ones(6),
    ]
    for y in cases:
        ref = st.kendalltau(np.arange(y.size), y)
        t = stats.trend(y)
        exp_tau = float(ref.statistic) if np.isfinite(ref.statistic) else 0.0
        exp_p = float(ref.pvalue) if np.isfinite(ref.pvalue) else 1.0
        assert t["tau"] == pytest.approx(exp_tau, abs=1e-12), y
        assert t["p_value"] == pytest.approx(exp_p, abs=1e-12), y
