"""Speculative decoding on the embedded model for real: one small matrix run once per module
(prompt lookup, the model as its own draft, an incompatible draft), asserted on its artifacts.
The expert-count override on the synthetic MoE fixture runs in test_optimization.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from core import artifacts
from pipelines import optimization as opt
from pipelines.runs import load_runs
from pipelines.site import optimization as page
from runtime.execution import runner

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
ECHO = "Repeat this sentence twice: the quick brown fox jumps over the lazy dog."
MATRIX = f"""\
schema_version: 1
name: opt-run
models: [gemma3-270m-q4_k_m]
repetitions: 2
settings: {{n_threads: 1}}  # one thread: robust to a busy host (a spinning second thread stalls under load)
tests: [tg8]
sweeps:
  - name: lookup
    settings: {{speculative: prompt_lookup, n_ctx: 256}}
    sweep: {{draft_max: [4], lookup_ngram_max: [2]}}
    baseline: {{speculative: none}}
    tests:
      - {{kind: generate, id: echo, prompts: ["{ECHO}"], max_tokens: 12}}
      - {{kind: chat, id: echo-chat, messages: [{{role: user, content: "{ECHO}"}}], max_tokens: 8, requests: 2,
         warmup_requests: 0, temperature: 0.0}}
  - name: draft
    settings: {{speculative: draft_model, n_ctx: 256}}
    sweep: {{draft_model: [gemma3-270m-q4_k_m, synthetic-tiny-llama-q8_0], draft_max: [3]}}
    baseline: {{speculative: none}}
    tests: [{{kind: generate, id: echo, prompts: ["{ECHO}"], max_tokens: 12}}]
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("opt-run")
    (d / "matrices").mkdir()
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    (d / "matrices" / "opt-run.yaml").write_text(MATRIX)
    old = os.environ.get("ALMANAC_DATA")
    os.environ["ALMANAC_DATA"] = str(d)
    try:
        report = runner.run_matrix("opt-run")
    finally:
        if old is None:
            os.environ.pop("ALMANAC_DATA", None)
        else:
            os.environ["ALMANAC_DATA"] = old
    docs = load_runs(d / "runs")
    return {"dir": d, "report": report, "docs": docs}


def _find(docs, sweep, **swept):
    out = [
        d
        for d in docs
        if d["matrix"].get("sweep") == sweep
        and all(d["settings"]["swept"].get(k) == v for k, v in swept.items())
    ]
    assert out, (sweep, swept)
    return out


def _baseline(docs, doc):
    return next(d for d in docs if d["key"] == doc["matrix"]["baseline_key"])


def test_every_artifact_validates(run):
    count, problems = artifacts.validate_tree(run["dir"])
    assert problems == [] and count == len(run["docs"]) == 6
    # the draft sweep's baseline is the lookup sweep's (same settings): measured once
    assert len(run["report"].skipped) == 1


def test_prompt_lookup_gives_the_baseline_greedy_text(run):
    docs = run["docs"]
    (point,) = [
        d for d in _find(docs, "lookup", draft_max=4) if d["test"]["kind"] == "generate"
    ]
    base = _baseline(docs, point)
    assert (
        base["settings"]["requested"]["speculative"] == "none"
        and point["status"] == base["status"] == "ok"
    )
    assert (
        point["settings"]["effective"]["speculative"] == "prompt_lookup"
        and point["settings"]["effective"]["logits_all"]
    )
    ids = [o["token_ids"] for o in point["details"]["outputs"]]
    assert (
        ids == [o["token_ids"] for o in base["details"]["outputs"]]
        and len(ids[0]) == 12
    )
    assert (
        point["details"]["outputs"][0]["text"] == base["details"]["outputs"][0]["text"]
    )
    spec = point["details"]["speculative"]
    assert 0 < spec["accepted"] <= spec["proposed"] and spec["rounds"] >= 1
    assert point["summary"]["draft_acceptance"]["mean"] == pytest.approx(
        sum(r["draft_accepted"] for r in point["samples"]["repetitions"])
        * 100
        / sum(r["draft_proposed"] for r in point["samples"]["repetitions"])
    )
    assert point["details"]["outputs_repeatable"] is True


def test_chat_under_prompt_lookup_records_acceptance(run):
    docs = run["docs"]
    (point,) = [
        d for d in _find(docs, "lookup", draft_max=4) if d["test"]["kind"] == "chat"
    ]
    base = _baseline(docs, point)
    assert point["status"] == base["status"] == "ok"
    assert [r["text"] for r in point["samples"]["requests"]] == [
        r["text"] for r in base["samples"]["requests"]
    ]
    spec = point["details"]["speculative"]
    assert spec["rounds"] >= 1 and 0 <= spec["accepted"] <= spec["proposed"]
    assert "speculative" not in base["details"]


def test_the_model_as_its_own_draft(run):
    docs = run["docs"]
    (point,) = _find(docs, "draft", draft_model="gemma3-270m-q4_k_m")
    base = _baseline(docs, point)
    assert (
        point["status"] == "ok"
        and point["settings"]["effective"]["draft_model"] == "gemma3-270m-q4_k_m"
    )
    assert [o["token_ids"] for o in point["details"]["outputs"]] == [
        o["token_ids"] for o in base["details"]["outputs"]
    ]
    spec = point["details"]["speculative"]
    assert (
        spec["proposed"] > 0 and spec["accepted"] / spec["proposed"] > 0.8
    )  # same model, greedy: nearly every draft


def test_draft_of_another_vocabulary_is_a_failed_incompatible_point(run):
    (point,) = _find(run["docs"], "draft", draft_model="synthetic-tiny-llama-q8_0")
    assert point["status"] == "failed" and point["error"]["kind"] == "incompatible"
    assert (
        "cannot draft for the target" in point["error"]["message"]
        and "synthetic-tiny-llama-q8_0" in point["error"]["message"]
    )
    assert "generation_tps" not in point["summary"]


def test_points_compare_with_their_baseline(run):
    sweeps = {sw.name: sw for sw in opt.sweeps(run["docs"])}
    assert {n: sweeps[n].track for n in sweeps} == {
        "lookup": "speculative",
        "draft": "speculative",
    }
    for sw in sweeps.values():
        for p in sw.points:
            if p.is_baseline or not p.ok:
                continue
            c = p.comparison
            assert c["ratio"] == pytest.approx(
                p.mean / p.baseline["summary"][p.metric]["mean"]
            )
            assert c["n_baseline"] == c["n_candidate"] == 2 and c["verdict"] in (
                "win",
                "loss",
                "within noise",
            )
            assert c["ci95_low"] <= c["ratio"] <= c["ci95_high"]
    lookup = next(p for p in sweeps["lookup"].points if not p.is_baseline)
    assert lookup.lossless["identical"] is True and lookup.acceptance > 0


def test_page_renders_the_run(run):
    md = page.optimization_page(run["docs"])
    assert (
        "## Speculative decoding" in md
        and "## Failed approaches" in md
        and "**incompatible**" in md
    )
    assert "## MoE expert reduction" not in md
