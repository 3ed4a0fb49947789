"""A real quality run on the embedded model: a child process generates, the parent scores,
the artifact validates, a rerun resumes, and a child killed by its timeout leaves an
incomplete artifact rather than nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core import artifacts
from core.records.quality import QualityRecord
from pipelines.quality import scores_frame
from runtime.quality import suite_runner as runner

ROOT = Path(__file__).resolve().parents[1]

SUITE = """schema_version: 1
name: tiny
version: 1
category: general
description: Two quick items for the end-to-end test.
generation: {max_tokens: 8}
items:
  - {id: capital, scorer: exact, prompt: "What is the capital of France? Answer with one word.", check: {answer: Paris}}
  - {id: digit, scorer: format, prompt: "How many days are in a week? Reply with the digit only.",
     check: {fullmatch: "7"}}
  - {id: loop, scorer: exact, prompt: "Say hi.", check: {answer: hi}}
"""

MATRIX = """schema_version: 1
kind: quality
name: tiny-quality
backend: llama_cpp
models: [gemma3-270m-q4_k_m]
settings: {{n_ctx: 512, n_threads: 1}}
seed: 7
timeout_s: {timeout}
suites:
  - {{suite: tiny, sample: 2}}
"""


@pytest.fixture
def tiny_data(tmp_path, monkeypatch):
    d = tmp_path / "data"
    (d / "suites").mkdir(parents=True)
    (d / "matrices").mkdir()
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    (d / "suites" / "tiny.yaml").write_text(SUITE)
    (d / "matrices" / "tiny-quality.yaml").write_text(MATRIX.format(timeout=300))
    (d / "matrices" / "tiny-timeout.yaml").write_text(
        MATRIX.format(timeout=0.3).replace("tiny-quality", "tiny-timeout")
    )
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    return d


@pytest.mark.model
def test_real_quality_run_on_the_embedded_model(tiny_data, embedded_model):
    report = runner.run_quality_matrix("tiny-quality")
    assert len(report.measured) == 1 and not report.failed
    doc = artifacts.load(report.measured[0])  # validates against quality.v1
    assert doc["status"] == "ok" and doc["model"]["sha256"] == embedded_model.sha256
    assert (
        doc["suite"]["sample"]["ids"] == [it["id"] for it in doc["items"]]
        and len(doc["items"]) == 2
    )
    assert (
        doc["settings"]["requested"]["chat_format"] == "gemma"
    )  # the registry's default applied
    for it in doc["items"]:
        assert isinstance(it["output"], str) and it["error"] is None
        assert (
            1 <= it["timing"]["output_tokens"] <= 8
            and it["timing"]["prompt_tokens"] > 5
        )
        assert it["timing"]["e2e_ms"] > 0 and set(it["degeneration"]) >= {
            "degenerate",
            "flags",
            "reasons",
        }
        assert it["passed"] is (it["score"] == 1.0)
    s = doc["summary"]
    assert s["n"] == 2 and s["passed"] == sum(it["passed"] for it in doc["items"])
    assert 0.0 <= s["ci95_low"] <= s["ci95_high"] <= 1.0
    assert set(doc["build"]["scorers"]) == {it["scorer"] for it in doc["items"]}
    frame = scores_frame([QualityRecord(doc)])
    assert frame.iloc[0]["n"] == 2 and frame.iloc[0]["suite"] == "tiny"
    again = runner.run_quality_matrix(
        "tiny-quality"
    )  # same key: resumed, nothing regenerated
    assert again.skipped == report.measured and not again.measured


@pytest.mark.model
def test_a_child_killed_by_its_timeout_leaves_an_incomplete_artifact(
    tiny_data, embedded_model
):
    report = runner.run_quality_matrix("tiny-timeout")
    assert len(report.failed) == 1
    doc = artifacts.load(report.failed[0])
    assert doc["status"] == "failed" and doc["error"]["kind"] == "timeout"
    assert len(doc["items"]) < 2 and doc["summary"]["n"] == len(doc["items"])
