"""Issue 27 (item 5): the noise A/A drops its warm-up run and runs until its estimate is useful, or
says the host is too noisy to rank.

The stopping rule on synthetic sequences of run means (runtime.execution.noise.run_until_useful with a
fake round and a fake clock), the artifact's round trip and verdict per kind of test, older (version 1)
noise artifacts still loading, the pooled estimate's flag in pipelines.noise.host_noise, and `invoke all`
probing the host's bandwidth only when it has none (almanac_tasks.workflow._ensure_bandwidth). The real model's A/A is
in test_verdicts.py (marked ``model``)."""

from __future__ import annotations

import json
import math
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import artifacts, stats
from core import noise as core_noise
from core.errors import ConfigError
from core.records.noise import NoiseRecord, new_noise
from pipelines import noise as pipe_noise
from runtime.execution import noise as aa
from tests.support.committed import committed_paths

ROOT = Path(__file__).resolve().parents[1]
HOST = {
    "id": "aa-box-0000cccc",
    "name": "aa-box",
    "cpu": {
        "model": "Fixture CPU",
        "physical_cores": 2,
        "logical_cores": 2,
        "flags": [],
    },
    "memory_bytes": 1 << 34,
    "numa_nodes": 1,
    "os": {},
    "gpus": [],
}
MATRIX = {"name": "noise", "file": "data/matrices/noise.yaml"}
LN = math.log(core_noise.USEFUL_FACTOR)


class Clock:
    """A fake clock that moves only when a fake round runs."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def rounds(
    pp: list[float], tg: list[float], clock: Clock | None = None, round_s: float = 6.0
):
    """A fake matrix run: round i gives one pp64 and one tg16 run mean and takes ``round_s`` on ``clock``."""

    def run_round(i: int) -> list[dict]:
        if clock is not None:
            clock.t += round_s
        return [
            {
                "id": f"pp-{i}",
                "created": "2026-03-01T00:00:00+00:00",
                "test": "pp64",
                "class": "rate:pp",
                "metric": "tokens_per_second",
                "n": 5,
                "mean": pp[i],
                "stddev": 1.0,
                "group": "pp64",
                "wall_s": 2.0,
            },
            {
                "id": f"tg-{i}",
                "created": "2026-03-01T00:00:00+00:00",
                "test": "tg16",
                "class": "rate:tg",
                "metric": "tokens_per_second",
                "n": 5,
                "mean": tg[i],
                "stddev": 0.1,
                "group": "tg16",
                "wall_s": 3.0,
            },
        ]

    return run_round


def run(pp, tg, **kw):
    clock = Clock()
    return aa.run_until_useful(rounds(pp, tg, clock), clock=clock, **kw)


def counted(rows: list[dict], cls: str) -> list[float]:
    return [r["mean"] for r in rows if r["class"] == cls and not r["warmup"]]


# the first run 47% faster than the runs after it (issue 27), then a quiet host: about 1% apart
QUIET_PP = [735.0, 500.0, 505.0, 496.0, 502.0] + [500.0] * 30
QUIET_TG = [70.0, 50.0, 50.4, 49.7, 50.2] + [50.0] * 30
# a host whose runs scatter by ~25%: no count of runs makes a single run's interval useful
NOISY_PP = [
    500.0 * math.exp(0.25 * z)
    for z in [
        0.0,
        1.1,
        -0.9,
        0.4,
        -1.6,
        1.3,
        0.2,
        -0.7,
        1.8,
        -1.2,
        0.6,
        -0.3,
        0.9,
        -1.4,
        1.5,
        -0.1,
        0.7,
        -1.0,
        1.2,
        -0.5,
        0.3,
        -0.8,
        1.0,
        -1.3,
        0.5,
    ]
]


def test_the_rule_is_a_single_runs_ci95_within_a_factor():
    # t(0.975, 3) * sigma <= ln 1.25: at 3 df the largest useful sigma is ln(1.25) / 3.182 = 7.0%
    edge = LN / stats.t_critical(3)
    assert edge == pytest.approx(0.0701, abs=1e-4)
    assert core_noise.useful(edge * 0.999, 3) and not core_noise.useful(edge * 1.001, 3)
    assert core_noise.ci95_factor(edge, 3) == pytest.approx(1.25)
    assert not core_noise.useful(
        0.001, 2
    )  # never on fewer than MIN_DF degrees of freedom
    # issue 27's newcomer: 22% noise on 2 df spans x2.6 each way
    why = core_noise.too_noisy(0.22, 2)
    assert core_noise.ci95_factor(0.22, 2) == pytest.approx(
        math.exp(stats.t_critical(2) * 0.22)
    )
    assert why == (
        "run-to-run noise 22.0% with 2 df: a single run widened by it gets a CI95 "
        "of ×2.58 each way, wider than ×1.25"
    )
    assert core_noise.too_noisy(0.05, 3) is None


def test_a_quiet_host_stops_at_the_minimum_with_its_warm_up_dropped():
    seen = []
    rows, stop = run(
        QUIET_PP,
        QUIET_TG,
        max_runs=20,
        budget_s=150,
        on_run=lambda i, s, est: seen.append(i),
    )
    assert (
        stop["reason"] == "useful"
        and stop["counted_runs"] == aa.MIN_COUNTED == 4
        and stop["warmup_runs"] == 1
    )
    assert seen == [0, 1, 2, 3, 4]  # the warm-up, then four counted runs
    assert [r["round"] for r in rows] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [r["mean"] for r in rows if r["warmup"]] == [
        735.0,
        70.0,
    ]  # the warm-up round, kept and flagged
    assert counted(rows, "rate:pp") == QUIET_PP[1:5]
    doc = new_noise(
        host=HOST,
        matrix=MATRIX,
        runs=rows,
        conditions={},
        stopping=stop,
        created=datetime(2026, 3, 1, tzinfo=UTC),
    )
    artifacts.validate(doc)
    pp = doc["estimates"]["rate:pp"]
    sigma, df = stats.pooled_log_spread([QUIET_PP[1:5]])
    assert (pp["df"], pp["runs"], pp["warmup_dropped"], pp["too_noisy"], pp["why"]) == (
        3,
        4,
        1,
        False,
        None,
    )
    assert pp["sigma"] == pytest.approx(sigma) and sigma < 0.01
    assert (
        pp["ci95_factor"] == pytest.approx(math.exp(stats.t_critical(3) * sigma))
        and pp["ci95_factor"] < 1.25
    )
    # the warm-up counted would have made the same host look too noisy to rank
    assert core_noise.too_noisy(*stats.pooled_log_spread([QUIET_PP[:5]])) is not None
    assert aa.too_noisy_line(doc) is None


def test_a_noisy_host_ends_too_noisy_at_its_budget_and_says_why():
    rows, stop = run(NOISY_PP, QUIET_TG, max_runs=20, budget_s=60)
    # 60 s of 6-s rounds: the warm-up and 9 counted runs (a 10th would end at 66 s, past the budget)
    assert (
        stop["reason"] == "budget"
        and stop["counted_runs"] == 9
        and stop["budget_s"] == 60.0
    )
    doc = new_noise(
        host=HOST,
        matrix=MATRIX,
        runs=rows,
        conditions={},
        stopping=stop,
        created=datetime(2026, 3, 1, tzinfo=UTC),
    )
    artifacts.validate(doc)
    pp, tg = doc["estimates"]["rate:pp"], doc["estimates"]["rate:tg"]
    sigma, df = stats.pooled_log_spread([NOISY_PP[1:10]])
    factor = math.exp(stats.t_critical(8) * sigma)
    assert pp["too_noisy"] is True and (pp["df"], pp["runs"], pp["warmup_dropped"]) == (
        8,
        9,
        1,
    )
    assert (
        pp["sigma"] == pytest.approx(sigma)
        and pp["ci95_factor"] == pytest.approx(factor)
        and factor > 1.25
    )
    assert pp["why"] == (
        f"run-to-run noise {100 * sigma:.1f}% with 8 df: a single run widened by it gets a CI95 of "
        f"×{factor:.2f} each way, wider than ×1.25 after 9 counted runs (its time budget ended)"
    )
    assert (
        tg["too_noisy"] is False and tg["why"] is None
    )  # the quiet kind of test is useful on its own
    line = aa.too_noisy_line(doc)
    assert (
        line is not None
        and "\n" not in line
        and line.startswith("this host is too noisy to rank single runs (rate:pp: ")
    )
    assert "rate:tg" not in line


def test_a_noisy_host_ends_at_its_largest_number_of_runs():
    rows, stop = run(NOISY_PP, QUIET_TG, max_runs=6, budget_s=1e9)
    assert (
        stop["reason"] == "max_runs"
        and stop["counted_runs"] == 6
        and len(rows) == 2 * 7
    )
    rec = NoiseRecord(
        new_noise(host=HOST, matrix=MATRIX, runs=rows, conditions={}, stopping=stop)
    )
    assert (
        set(rec.too_noisy) == {"rate:pp"}
        and "largest number of runs" in rec.too_noisy["rate:pp"]
    )


def test_a_host_that_becomes_useful_later_stops_then():
    # noisy for a while, then quiet: sigma falls as the quiet runs pile up; it stops at the first run where both hold
    pp = [700.0, 500.0, 600.0, 430.0] + [505.0, 500.0, 498.0] * 10
    rows, stop = run(pp, QUIET_TG, max_runs=30, budget_s=1e9)
    k = stop["counted_runs"]
    assert (
        stop["reason"] == "useful" and k == 8
    )  # sigma 13.6% at 4 runs (x1.54), 8.9% at 8 (x1.24)
    assert core_noise.useful(*stats.pooled_log_spread([pp[1 : 1 + k]]))
    assert not core_noise.useful(*stats.pooled_log_spread([pp[1:k]]))


def test_the_minimum_runs_whatever_the_budget_and_too_few_runs_are_refused():
    rows, stop = run(NOISY_PP, QUIET_TG, max_runs=20, budget_s=0)
    assert stop["reason"] == "budget" and stop["counted_runs"] == 4 and len(rows) == 10
    with pytest.raises(ConfigError, match="at least 4 runs after the warm-up"):
        aa.run_until_useful(rounds(QUIET_PP, QUIET_TG), max_runs=3)
    rows, stop = aa.run_until_useful(
        lambda i: [], max_runs=20, budget_s=1e9, clock=Clock()
    )
    assert stop["reason"] == "no_runs" and rows == []


def test_the_artifact_round_trips_and_the_record_says_everything(tmp_path):
    rows, stop = run(NOISY_PP, QUIET_TG, max_runs=20, budget_s=60)
    doc = new_noise(
        host=HOST,
        matrix=MATRIX,
        runs=rows,
        conditions={"matrix_runs": 10},
        stopping=stop,
        created=datetime(2026, 3, 1, 12, tzinfo=UTC),
    )
    path = artifacts.write(aa.artifact_path(doc, tmp_path), doc)
    assert path == tmp_path / HOST["id"] / "noise-20260301T120000Z.json"
    back = artifacts.load(path)
    assert back == json.loads(artifacts.dumps(doc)) and back["schema_version"] == 2
    rec = NoiseRecord(back)
    pp = rec.classes["rate:pp"]
    assert (pp.df, pp.runs, pp.warmup_dropped, pp.too_noisy) == (
        8,
        9,
        1,
        True,
    ) and pp.why == back["estimates"]["rate:pp"]["why"]
    assert rec.estimates["rate:pp"].too_noisy and rec.estimates["rate:pp"].why == pp.why
    assert rec.estimates["rate:pp"].source == f"invoke noise {doc['id']}"
    assert (
        not rec.estimates["rate:tg"].too_noisy and rec.estimates["rate:tg"].why is None
    )
    assert rec.stopping["reason"] == "budget" and rec.stopping["useful_factor"] == 1.25
    assert sum(r["warmup"] for r in rec.runs) == 2
    # a file claiming a wrong shape is refused: the per-kind verdict is required
    bad = json.loads(artifacts.dumps(doc))
    del bad["estimates"]["rate:pp"]["too_noisy"]
    with pytest.raises(Exception, match="too_noisy"):
        artifacts.validate(bad)


def v1_doc(means_pp: list[float], means_tg: list[float]) -> dict:
    """A noise artifact as version 1 wrote it: a fixed count of runs, the first counted."""
    rows = [
        {
            "id": f"{c}-{i}",
            "created": "2026-03-01T00:00:00+00:00",
            "test": t,
            "class": c,
            "metric": "tokens_per_second",
            "n": 5,
            "mean": m,
            "stddev": 1.0,
            "group": t,
            "loadavg_1m_before": 1.0,
            "wall_s": 2.0,
        }
        for c, t, ms in (("rate:pp", "pp64", means_pp), ("rate:tg", "tg16", means_tg))
        for i, m in enumerate(ms)
    ]
    est = {}
    for c, ms in (("rate:pp", means_pp), ("rate:tg", means_tg)):
        sigma, df = stats.pooled_log_spread([ms])
        est[c] = {"sigma": sigma, "df": df, "runs": len(ms), "groups": 1}
    return {
        "artifact": "noise",
        "schema_version": 1,
        "id": f"{HOST['id']}-noise-20260301T000000Z",
        "created": "2026-03-01T00:00:00+00:00",
        "host": HOST,
        "matrix": MATRIX,
        "method": "v1",
        "runs": rows,
        "conditions": {"matrix_runs": len(means_pp), "wall_s": 16.0},
        "estimates": est,
    }


def test_older_noise_artifacts_still_load(tmp_path):
    # issue 27's first A/A: three runs, the first 47% faster: 22%-ish noise on 2 df
    old = v1_doc([735.0, 500.0, 505.0], [70.0, 50.0, 50.4])
    path = tmp_path / HOST["id"] / "noise-20260301T000000Z.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    doc = artifacts.load(
        path
    )  # checked against version 1's schema, migrated, checked against version 2's
    assert (
        doc["schema_version"] == 2
        and doc["stopping"]["reason"] == "fixed"
        and doc["stopping"]["counted_runs"] == 3
    )
    assert doc["stopping"]["warmup_runs"] == 0 and not any(
        r["warmup"] for r in doc["runs"]
    )
    pp = doc["estimates"]["rate:pp"]
    assert (
        pp["sigma"] == old["estimates"]["rate:pp"]["sigma"]
        and pp["df"] == 2
        and pp["warmup_dropped"] == 0
    )
    assert pp["too_noisy"] is True and pp["why"].endswith(
        "(a version 1 A/A of 3 runs, its first run counted)"
    )
    assert pp["ci95_factor"] == pytest.approx(
        math.exp(stats.t_critical(2) * pp["sigma"])
    )
    # a raw version-1 document (a fixture, never migrated) reads the same through the record
    raw = NoiseRecord(old)
    assert (
        raw.classes["rate:pp"].too_noisy and raw.classes["rate:pp"].warmup_dropped == 0
    )
    assert (
        raw.estimates["rate:pp"].sigma == pp["sigma"]
        and raw.stopping["reason"] == "fixed"
    )
    # the committed version-1 artifact of the quiet VM: 10 runs, useful
    (committed,) = [p for p in committed_paths("hosts") if p.name.startswith("noise-")]
    assert json.loads(committed.read_text())["schema_version"] == 1
    rec = NoiseRecord(artifacts.load(committed))
    assert (
        rec.too_noisy == {}
        and rec.classes["rate:pp"].df == 9
        and rec.stopping["counted_runs"] == 10
    )
    assert rec.estimates["rate:pp"].too_noisy is False


def test_host_noise_flags_a_host_too_noisy_to_rank():
    old = v1_doc([735.0, 500.0, 505.0], [70.0, 50.0, 50.4])
    table = pipe_noise.host_noise([], [NoiseRecord(artifacts.upgrade(old))])
    pp = table[(HOST["id"], "rate:pp")]
    assert pp.too_noisy and pp.why.startswith(
        "this host is too noisy to rank a single rate:pp run: run-to-run noise "
    )
    assert pp.why.endswith(f"(invoke noise {old['id']})")
    assert pipe_noise.too_noisy(table) == {
        (HOST["id"], "rate:pp"): pp.why,
        (HOST["id"], "rate:tg"): table[(HOST["id"], "rate:tg")].why,
    }
    rows, stop = run(QUIET_PP, QUIET_TG, max_runs=20, budget_s=150)
    quiet = new_noise(
        host=HOST,
        matrix=MATRIX,
        runs=rows,
        conditions={},
        stopping=stop,
        created=datetime(2026, 3, 2, tzinfo=UTC),
    )
    table = pipe_noise.host_noise(
        [], [NoiseRecord(old), NoiseRecord(quiet)]
    )  # the newest artifact of the host counts
    assert (
        not table[(HOST["id"], "rate:pp")].too_noisy
        and table[(HOST["id"], "rate:pp")].why is None
    )
    assert table[(HOST["id"], "rate:pp")].df == 3 and pipe_noise.too_noisy(table) == {}


def test_invoke_all_probes_the_bandwidth_only_when_the_host_has_none(
    tmp_path, monkeypatch
):
    from almanac_tasks import workflow
    from runtime.hosts import fingerprint

    monkeypatch.setenv("ALMANAC_DATA", str(tmp_path))
    monkeypatch.setattr(fingerprint, "fingerprint", lambda: HOST)
    calls = []
    monkeypatch.setattr(workflow.host_probe, "body", lambda c: calls.append(c))
    hosts = tmp_path / "hosts" / fingerprint.host_id(HOST)
    assert workflow._ensure_bandwidth("ctx") is True and calls == [
        "ctx"
    ]  # nothing measured: probe
    hosts.mkdir(parents=True)
    (hosts / "gpu-bandwidth-20260301T000000Z.json").write_text(
        "{}"
    )  # a GPU's device memory is not the host's
    (hosts / "noise-20260301T000000Z.json").write_text("{}")
    assert workflow._ensure_bandwidth("ctx") is True and calls == ["ctx", "ctx"]
    shutil.copy(
        next(p for p in committed_paths("hosts") if p.name.startswith("bandwidth-")),
        hosts / "bandwidth-20260301T000000Z.json",
    )
    assert workflow._ensure_bandwidth("ctx") is False and calls == [
        "ctx",
        "ctx",
    ]  # measured once: skipped
