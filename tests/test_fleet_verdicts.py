"""Issue 32: verdicts at fleet scale (the false discovery rate over a family, findings grouped by build
change, the build-to-build table) and `invoke bisect` (planted regression found, bad input in one line)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import stats
from core.metrics import METRICS
from pipelines import history

ROOT = Path(__file__).resolve().parents[1]


# -- the false discovery rate -------------------------------------------------------------------
def test_fdr_qvalues_are_benjamini_hochberg_and_yekutieli():
    p = [0.01, 0.04, 0.03, None, 0.5]
    bh = stats.fdr_qvalues(p, "bh")
    # BH by hand: sorted 0.01, 0.03, 0.04, 0.5 (m = 4): 0.04, 0.0533, 0.0533, 0.5 (monotone from the top)
    assert bh[3] is None
    assert bh[0] == pytest.approx(0.04)
    assert bh[1] == pytest.approx(0.04 * 4 / 3) and bh[2] == pytest.approx(0.04 * 4 / 3)
    assert bh[4] == pytest.approx(0.5)
    by = stats.fdr_qvalues(p, "by")
    c = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert by[0] == pytest.approx(min(1.0, 0.04 * c))
    assert by[4] == pytest.approx(1.0)  # capped at 1


def test_a_p_value_inverts_the_interval():
    c = stats.compare_runs([100, 101, 99, 100, 102], [97, 98, 99, 96, 97], True)
    assert c.verdict == "loss" and c.p_value < 0.05
    c2 = stats.compare_runs([100, 101, 99, 100, 102], [100, 99, 101, 100, 101], True)
    assert c2.verdict == "within noise" and c2.p_value > 0.05


def test_a_fleet_wide_a_a_calls_nothing_and_a_real_drop_survives():
    rng = np.random.default_rng(7)
    family = [
        stats.compare_runs(
            100 * np.exp(rng.normal(0, 0.03, 5)),
            100 * np.exp(rng.normal(0, 0.03, 5)),
            True,
        )
        for _ in range(2000)
    ]
    alone = sum(c.verdict in ("win", "loss") for c in family)
    assert alone > 50  # about 5% of 2,000 boundaries judged alone
    judged = stats.fleet_fdr(family)
    assert [c.verdict for c in judged].count("loss") == 0
    assert [c.verdict for c in judged].count("win") == 0
    assert all(c.tested == 2000 for c in judged)
    downgraded = next(c for c, a in zip(judged, family) if a.verdict in ("win", "loss"))
    assert (
        downgraded.verdict == "within noise"
        and "among 2000 comparisons" in downgraded.note
    )
    real = stats.compare_runs([100, 101, 99, 100, 102], [80, 81, 79, 80, 81], True)
    assert stats.fleet_fdr(family + [real])[-1].verdict == "loss"


# -- findings: the same build change on many hosts is one finding --------------------------------
def _step(host: str, ratio: float, half: float, change: dict, metric) -> history.Step:
    ser = history.Series(f"k-{host}", host, "m", "tg128", "llama_cpp", {}, metric)
    c = stats.Comparison(
        ratio,
        ratio * math.exp(-half),
        ratio * math.exp(half),
        "loss",
        3,
        3,
        p_value=1e-6,
    )
    st = history.Step(ser, [], [], {}, {}, ratio, c.ci95_low, c.ci95_high, "regression", change, {}, "runs",
                      None, None, c)  # fmt: skip
    ser.boundaries = [st]
    ser.steps = [st] if ratio < 0.97 else []
    return st


def test_a_drop_on_many_hosts_at_one_build_change_is_one_finding():
    metric = METRICS["tokens_per_second"]
    change = {
        "llama_cpp_commit": ("e3546c794", "4df29be4f"),
        "llama_cpp_python": ("0.3.34", "0.3.35"),
    }
    ratios = [0.92] * 37 + [0.99] * 3
    sers = [
        _step(f"h{i:02d}", r, 0.02, change, metric).series for i, r in enumerate(ratios)
    ]
    other = _step(
        "h99", 0.90, 0.02, {"llama_cpp_python": ("0.3.35", "0.3.36")}, metric
    ).series
    found = history.findings(sers + [other])
    assert len(found) == 2
    f = found[0]
    assert (f.hosts_flagged, f.hosts_tested) == (37, 40)
    assert f.verdict == "regression"
    gm = math.exp((37 * math.log(0.92) + 3 * math.log(0.99)) / 40)
    assert f.ratio == pytest.approx(gm)
    assert f.ci95_low < gm < f.ci95_high
    assert "llama_cpp_python: 0.3.34 → 0.3.35" in history.change_text(f.change)
    assert history.pct_interval(0.92, 0.90, 0.94) == "−8.0% [−10.0, −6.0]"


def test_steps_rank_by_the_smallest_change_their_interval_allows():
    metric = METRICS["tokens_per_second"]
    big_vague = _step(
        "a", 0.80, 0.20, {"x": (1, 2)}, metric
    )  # 0.80 [0.655, 0.977]: at least 2.3%
    small_sure = _step(
        "b", 0.90, 0.01, {"x": (1, 2)}, metric
    )  # 0.90 [0.891, 0.909]: at least 9.1%
    for st in (big_vague, small_sure):
        st.after = [
            history.Point("p", "2026-01-01", {}, "", "", 1, 1.0, None, None, None, {})
        ]
    ranked = history.all_steps([big_vague.series, small_sure.series])
    assert ranked[0] is small_sure


# -- invoke bisect ------------------------------------------------------------------------------
def _invoke(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "builds, msg",
    [
        ("0.3.36", "give at least two builds"),
        ("current,current", "listed twice"),
        ("current,not a build", "is not a version"),
        ("current,variant:nope", "no variant 'nope'"),
        (
            "current,lib:/nonexistent/dir",
            "is not a folder of llama.cpp shared libraries",
        ),
    ],
)
def test_invoke_bisect_refuses_bad_builds_in_one_line(builds, msg, tmp_path):
    r = _invoke(
        "bisect",
        "--builds",
        builds,
        "--state",
        str(tmp_path / "s.json"),
        "--runs",
        str(tmp_path / "r"),
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0], r.stderr
    assert not (tmp_path / "r").exists()  # nothing measured


@pytest.mark.integration
def test_a_build_that_fails_to_load_stops_the_search_saying_how_to_resume(tmp_path):
    fake = tmp_path / "broken-venv"
    (fake / "bin").mkdir(parents=True)
    py = fake / "bin" / "python"  # a build whose Python cannot load llama_cpp
    py.write_text(
        "#!/bin/sh\necho 'ImportError: libllama.so: cannot open shared object file' >&2\nexit 1\n"
    )
    py.chmod(0o755)
    state = tmp_path / "s.json"
    r = _invoke(
        "bisect",
        "--builds",
        f"current,{fake}",
        "--state",
        str(state),
        "--runs",
        str(tmp_path / "r"),
    )
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()
    assert len(line) == 1
    assert (
        "fails to load" in line[0]
        and "stopped at build" in line[0]
        and "run the same command again" in line[0]
    )
    assert json.loads(state.read_text())["runs"] == []  # nothing measured


@pytest.mark.integration
def test_a_version_that_does_not_exist_is_one_line(tmp_path):
    r = _invoke(
        "bisect", "--builds", "current,0.0.999", "--venvs", str(tmp_path / "venvs"),
        "--state", str(tmp_path / "s.json"), "--runs", str(tmp_path / "r"),
    )  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert "does not exist" in lines[-1] and "0.0.999" in lines[-1], r.stderr
    assert not (
        tmp_path / "venvs" / "lcp-0.0.999"
    ).exists()  # nothing half-installed left


SMALL = """schema_version: 1
name: bisect-small
description: pp64 of the embedded model, 3 fixed repetitions (a bisection test).
backend: llama_cpp
models: [gemma3-270m-q4_k_m]
warmup: false
timeout_s: 300
settings: {}
precision: null
repetitions: 3
tests: [pp64]
"""


@pytest.mark.model
@pytest.mark.timing
def test_bisect_finds_a_planted_regression(tmp_path):
    """Three builds: the installed one, the same libraries loaded again through LLAMA_CPP_LIB_PATH (good: it
    changes nothing), and a planted regression (prompt processing a token at a time: variant batch-of-one;
    threads halved is no regression on an oversubscribed host, where one thread can beat two that wait for
    each other): the search names the third, and resumes without measuring anything again."""
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    matrix = tmp_path / "small.yaml"
    matrix.write_text(SMALL)
    builds = f"current,lib:{lib},variant:batch-of-one"
    args = ["bisect", "--builds", builds, "--matrix", str(matrix), "--blocks", "2",
            "--state", str(tmp_path / "s.json"), "--runs", str(tmp_path / "runs")]  # fmt: skip
    r = _invoke(*args, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "First bad build: **variant:batch-of-one** (last good: lib:" in r.stdout
    st = json.loads((tmp_path / "s.json").read_text())
    assert st["result"]["order"] == ["variant:batch-of-one", f"lib:{lib}"]
    assert st["verdicts"][f"lib:{lib}"]["call"] == "good"
    n = len(st["runs"])
    assert n == 2 * 2 * 4  # two builds against good, 2 ABBA blocks of 4 runs
    assert (
        len(list((tmp_path / "runs").rglob("*.json"))) == n
    )  # every measurement an artifact
    again = _invoke(
        *args, timeout=300
    )  # resumes: everything is in the state, nothing measured again
    assert (
        again.returncode == 0
        and len(json.loads((tmp_path / "s.json").read_text())["runs"]) == n
    )
