"""One configuration cannot take down a matrix: crashes, hangs and errors become failed artifacts."""

from __future__ import annotations

import json

import pytest

from core import artifacts
from runtime.execution import runner
from tests.conftest import write_matrix
from tests.support.crash_backend import REGISTRATION


@pytest.fixture
def crashy(data_env, monkeypatch):
    monkeypatch.setenv("ALMANAC_BACKENDS", json.dumps(REGISTRATION))
    return data_env


def test_each_failure_is_an_artifact_and_the_matrix_goes_on(crashy):
    write_matrix(
        crashy,
        "c",
        "schema_version: 1\nname: c\nbackend: crashy\nmodels: [gemma3-270m-q4_k_m]\n"
        "timeout_s: 3\nsweep: {mode: [abort, segv, raise, hang, oom, ok]}\ntests: [pp8]\n",
    )
    report = runner.run_matrix("c")
    assert len(report.failed) == 5 and len(report.measured) == 1
    by_mode = {}
    for p in report.failed + report.measured:
        d = artifacts.load(p)
        by_mode[d["settings"]["requested"]["mode"]] = d
    assert (
        by_mode["abort"]["error"]["kind"] == "crash"
        and by_mode["abort"]["error"]["signal"] == "SIGABRT"
    )
    assert by_mode["segv"]["error"]["signal"] == "SIGSEGV"
    assert (
        by_mode["oom"]["error"]["signal"] == "SIGKILL"
        and "out of memory" in by_mode["oom"]["error"]["message"]
    )
    assert by_mode["hang"]["error"]["kind"] == "timeout"
    assert (
        by_mode["raise"]["error"]["kind"] == "error"
        and "deliberate failure" in by_mode["raise"]["error"]["message"]
    )
    assert "crashy backend about to abort" in by_mode["abort"]["log_tail"]
    ok = by_mode["ok"]
    assert ok["status"] == "ok" and ok["summary"]["tokens_per_second"][
        "mean"
    ] == pytest.approx(11.0)
    assert ok["resources"]["peak_rss_bytes"] > 10 * 2**20


def test_resume_skips_finished_and_force_reruns(crashy):
    write_matrix(
        crashy,
        "r",
        "schema_version: 1\nname: r\nbackend: crashy\nmodels: [gemma3-270m-q4_k_m]\n"
        "sweep: {mode: [ok, raise]}\ntests: [pp8, tg4]\n",
    )
    first = runner.run_matrix("r")
    assert len(first.measured) == 2 and len(first.failed) == 2
    again = runner.run_matrix("r")
    assert again.measured == [] and again.failed == [] and len(again.skipped) == 4
    retry = runner.run_matrix("r", retry_failed=True)
    assert len(retry.failed) == 2 and len(retry.skipped) == 2
    forced = runner.run_matrix("r", force=True)
    assert len(forced.measured) == 2 and len(forced.failed) == 2
    assert len(list((crashy / "runs").rglob("*.json"))) == 4 + 2 + 4  # history is kept
