"""Optimization tracks without running a model: sweeps and baselines in matrices, the checks
made before a run, the lossless check, draft acceptance counting, the degeneration detector
on the outputs these tracks produce, reproducing settings, and the page rendered from the
committed fixture artifacts (tests/fixtures/optimization, made by make_optimization_fixtures.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core import degeneration
from core.errors import ConfigError
from core.records.run import RunRecord
from pipelines import optimization as opt
from pipelines.runs import load_runs
from pipelines.site import optimization as page
from runtime.backends.llama_cpp import experts
from runtime.backends.llama_cpp.config import LlamaCppSettings
from runtime.backends.llama_cpp.speculative import DraftStats
from runtime.execution import matrix, runner
from runtime.models import registry as models

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "optimization"


def _matrix(data_dir: Path, name: str, body: str) -> Path:
    p = data_dir / "matrices" / f"{name}.yaml"
    p.write_text(body)
    return p


# -- the lossless check ----------------------------------------------------------------------
def test_identical_outputs_are_lossless():
    out = [
        {"prompt_index": 0, "token_ids": [5, 6, 7]},
        {"prompt_index": 1, "token_ids": [9, 9]},
    ]
    r = opt.compare_outputs(out, json.loads(json.dumps(out)))
    assert r["identical"] is True and r["first_diff"] is None and r["agreement"] == 1.0
    assert [p["identical"] for p in r["prompts"]] == [True, True]


def test_divergent_outputs_report_first_token_and_agreement():
    base = [
        {"prompt_index": 0, "token_ids": [1, 2, 3, 4]},
        {"prompt_index": 1, "token_ids": [7, 8, 9]},
    ]
    cand = [
        {"prompt_index": 0, "token_ids": [1, 2, 30, 4]},
        {"prompt_index": 1, "token_ids": [7, 8]},
    ]
    r = opt.compare_outputs(base, cand)
    assert r["identical"] is False
    assert [p["first_diff"] for p in r["prompts"]] == [
        2,
        2,
    ]  # a substitution, and a shorter prefix
    assert r["first_diff"] == 2
    assert r["prompts"][0]["agreement"] == pytest.approx(3 / 4)
    assert r["prompts"][1]["agreement"] == pytest.approx(2 / 3)
    assert r["agreement"] == pytest.approx((3 + 2) / (4 + 3))
    early = opt.compare_outputs(base, [{"prompt_index": 0, "token_ids": [0, 2, 3, 4]}])
    assert early["first_diff"] == 0 and early["agreement"] == pytest.approx(3 / 4)


# -- draft acceptance counting ----------------------------------------------------------------
def test_draft_stats_count_proposed_and_accepted():
    s = DraftStats()
    s.begin()
    prompt = [1, 2, 3]
    # round 1: context ends with the first sampled token 10; proposes 11 12 13, target keeps 11 12 then samples 99
    s.on_draft(np.array(prompt + [10]), np.array([11, 12, 13]))
    # round 2: context = prompt 10 11 12 99; proposes 5 6; both accepted, bonus token 7
    s.on_draft(np.array(prompt + [10, 11, 12, 99]), np.array([5, 6]))
    # round 3: nothing found to propose
    s.on_draft(
        np.array(prompt + [10, 11, 12, 99, 5, 6, 7]), np.array([], dtype=np.intc)
    )
    # round 4: proposes 8 8 8 but the request ends after one more token (8): only one position reached
    s.on_draft(np.array(prompt + [10, 11, 12, 99, 5, 6, 7, 20]), np.array([8, 8, 8]))
    s.finish(prompt + [10, 11, 12, 99, 5, 6, 7, 20, 8])
    assert (s.proposed, s.accepted, s.rounds, s.empty_rounds) == (
        3 + 2 + 1,
        2 + 2 + 1,
        4,
        1,
    )


def test_draft_stats_reject_all_and_new_request():
    s = DraftStats()
    s.on_draft(np.array([1, 2]), np.array([3, 4, 5]))
    s.on_draft(
        np.array([1, 2, 9]), np.array([4])
    )  # first drafted token rejected: 0 of 3
    assert (s.proposed, s.accepted) == (3, 0)
    s.begin()  # another request: the pending proposal was never verified
    s.on_draft(np.array([7, 7]), np.array([1]))
    s.finish([7, 7, 1, 2])
    assert (s.proposed, s.accepted) == (4, 1)


# -- the degeneration detector on the outputs of these tracks ---------------------------------
@pytest.mark.parametrize(
    "text,flag",
    [
        ("", "empty"),
        ("   \n ", "empty"),
        (
            " tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp tp",
            "repetition_loop",
        ),  # a synthetic MoE's noise
        ("The sea is a beautiful place. staan\n" * 6, "repetition_loop"),
        ("\ufffd\ufffd\x00\x01 ok \ufffd\ufffd\ufffd\x02\x03", "non_text"),
    ],
)
def test_degeneration_flags(text, flag):
    r = degeneration.detect(text)
    assert r["degenerate"] is True and flag in r["flags"] and r["reasons"]


def test_degeneration_passes_normal_text():
    text = (
        "The lighthouse at Gull Point was built in 1871 to guide ships past the rocks. Its keepers climbed "
        "the steps every evening to light the lamp; the last one left in 1987, when the light was automated."
    )
    r = degeneration.detect(text)
    assert r == {**r, "degenerate": False, "flags": [], "reasons": []}


def test_point_degeneration_reads_stored_outputs():
    doc = {
        "test": {"kind": "generate"},
        "details": {
            "outputs": [
                {"text": "Fine text with several different words."},
                {"text": ""},
            ]
        },
    }
    d = opt.degeneration_of(RunRecord(doc))
    assert (
        d["degenerate"] is True
        and d["flags"] == ["empty"]
        and d["degenerate_outputs"] == 1
    )
    assert d["reasons"] == ["output 2: empty output"]


# -- settings refused as a combination --------------------------------------------------------
@pytest.mark.parametrize(
    "sweep,settings,needle,field",
    [
        (
            "{type_v: [f16, q8_0]}",
            "{flash_attn: 'off'}",
            "quantized V cache requires flash_attn",
            "sweep",
        ),
        (
            "{draft_max: [2]}",
            "{speculative: draft_model}",
            "needs draft_model",
            "settings",
        ),
        ("{n_expert_used: [0]}", "{}", "greater than or equal to 1", "sweep"),
    ],
)
def test_invalid_combinations_refused_at_load(data_env, sweep, settings, needle, field):
    _matrix(
        data_env,
        "bad",
        f"schema_version: 1\nname: bad\nmodels: [gemma3-270m-q4_k_m]\nsettings: {settings}\n"
        f"sweep: {sweep}\ntests: [tg8]\n",
    )
    with pytest.raises(ConfigError) as exc:
        matrix.load("bad")
    assert needle in str(exc.value)
    assert exc.value.field == field and exc.value.file.endswith("bad.yaml")


def test_kv_cache_types_and_flash_attention_sweep_expand(data_env):
    _matrix(
        data_env,
        "kv",
        "schema_version: 1\nname: kv\nmodels: [gemma3-270m-q4_k_m]\n"
        "sweep: {flash_attn: ['on', 'off'], type_k: [f16, q8_0, q4_0], n_batch: [512], n_ubatch: [128, 512]}\n"
        "tests: [tg128@d0, tg128@d512, tg128@d2048]\n",
    )
    cfgs = matrix.load("kv").configurations()
    assert len(cfgs) == 2 * 3 * 2 * 3
    assert {c.test.n_depth for c in cfgs} == {0, 512, 2048}
    assert {(c.settings.flash_attn, c.settings.type_k) for c in cfgs} == {
        (f, k) for f in ("on", "off") for k in ("f16", "q8_0", "q4_0")
    }


# -- sweeps and baselines in a matrix --------------------------------------------------------
SWEEPS = """\
schema_version: 1
name: opt
models: [gemma3-270m-q4_k_m]
tests: [tg8]
sweeps:
  - name: threads
    sweep: {n_threads: [1, 2]}
    baseline: {n_threads: 1}
  - name: lookup
    settings: {speculative: prompt_lookup}
    sweep: {draft_max: [2, 4], lookup_ngram_max: [1, 3]}
    baseline: {speculative: none}
    repetitions: 2
    tests: [{kind: generate, workload: edit, max_tokens: 8}]
"""


def test_sweeps_expand_with_their_baselines(data_env):
    _matrix(data_env, "opt", SWEEPS)
    cfgs = matrix.load("opt").configurations()
    threads = [c for c in cfgs if c.sweep == "threads"]
    lookup = [c for c in cfgs if c.sweep == "lookup"]
    # the baseline equal to a sweep point is that point, not a second one; it comes first
    assert [c.settings.n_threads for c in threads] == [1, 2]
    assert all(c.baseline.n_threads == 1 for c in threads)
    assert len(lookup) == 1 + 4
    assert (
        lookup[0].settings.speculative == "none"
        and lookup[0].settings == lookup[0].baseline
    )
    assert {
        (c.settings.draft_max, c.settings.lookup_ngram_max) for c in lookup[1:]
    } == {(2, 1), (2, 3), (4, 1), (4, 3)}
    assert all(
        c.test.kind == "generate" and c.test.repetitions == 2 and c.test.prompts
        for c in lookup
    )


@pytest.mark.parametrize(
    "body,needle",
    [
        (
            "schema_version: 1\nname: x\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg8]\nsweep: {n_threads: [1]}\n"
            "sweeps: [{name: a, sweep: {n_threads: [2]}}]\n",
            "either a top-level sweep",
        ),
        (
            "schema_version: 1\nname: x\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg8]\n"
            "sweeps: [{name: a}, {name: a}]\n",
            "two sweeps are named 'a'",
        ),
        (
            "schema_version: 1\nname: x\ntests: [tg8]\nsweeps: [{name: a, models: [gemma3-270m-q4_k_m]}, {name: b}]\n",
            "models: required field is missing",
        ),
        (
            "schema_version: 1\nname: x\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg8]\n"
            "sweeps: [{name: a, sweep: {n_threads: [0]}}]\n",
            "sweeps[0].sweep",
        ),
        (
            "schema_version: 1\nname: x\nmodels: [gemma3-270m-q4_k_m]\ntests: [tg8]\n"
            "sweeps: [{name: a, baseline: {n_thread: 1}}]\n",
            "sweeps[0].baseline: n_thread: unknown setting 'n_thread' (did you mean 'n_threads'?)",
        ),
    ],
)
def test_bad_sweeps_refused(data_env, body, needle):
    _matrix(data_env, "x", body)
    with pytest.raises(ConfigError) as exc:
        matrix.load("x")
    assert needle in str(exc.value)


# -- expert-count overrides checked against the model before a run ----------------------------
MOE_FACTS = {"architecture": "qwen3moe", "expert_count": 8, "expert_used_count": 2}


def test_expert_override_resolves_to_the_architecture_key():
    s = LlamaCppSettings(n_expert_used=4, kv_overrides={"general.name": "x"})
    assert experts.kv_overrides(s, MOE_FACTS) == {
        "general.name": "x",
        "qwen3moe.expert_used_count": 4,
    }
    assert experts.requested_experts(s, MOE_FACTS) == 4
    experts.check(s, MOE_FACTS, "m")  # within 1..8: fine


@pytest.mark.parametrize(
    "settings,field,needle",
    [
        ({"n_expert_used": 9}, "n_expert_used", "9 experts per token is outside 1..8"),
        (
            {"kv_overrides": {"qwen3moe.expert_used_count": 0}},
            "kv_overrides.qwen3moe.expert_used_count",
            "outside 1..8",
        ),
        (
            {"kv_overrides": {"olmoe.expert_used_count": 2}},
            "kv_overrides.olmoe.expert_used_count",
            "its key is qwen3moe.expert_used_count",
        ),
        (
            {"kv_overrides": {"qwen3moe.expert_used_count": "4"}},
            "kv_overrides.qwen3moe.expert_used_count",
            "must be an integer",
        ),
    ],
)
def test_bad_expert_overrides_refused(settings, field, needle):
    with pytest.raises(ConfigError) as exc:
        experts.check(LlamaCppSettings(**settings), MOE_FACTS, "tiny")
    assert exc.value.field == field and needle in str(exc.value)


def test_expert_override_on_a_dense_model_refused():
    with pytest.raises(ConfigError, match="not a mixture-of-experts model"):
        experts.check(
            LlamaCppSettings(n_expert_used=2),
            {"architecture": "gemma3", "expert_count": None},
            "gemma",
        )


@pytest.fixture(scope="module")
def moe_registry(tmp_path_factory):
    """A data dir whose registry has the synthetic MoE fixture (generated on demand)."""
    d = tmp_path_factory.mktemp("moe-data")
    (d / "matrices").mkdir()
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    return d


@pytest.mark.parametrize(
    "line,field",
    [
        ("sweep: {n_expert_used: [2, 9]}", "sweep.n_expert_used"),
        (
            "settings: {kv_overrides: {qwen3moe.expert_used_count: 0}}",
            "settings.kv_overrides.qwen3moe.expert_used_count",
        ),
    ],
)
def test_override_refused_before_any_run_and_no_artifact(
    moe_registry, monkeypatch, line, field
):
    monkeypatch.setenv("ALMANAC_DATA", str(moe_registry))
    _matrix(
        moe_registry,
        "moe-bad",
        f"schema_version: 1\nname: moe-bad\nmodels: [synthetic-tiny-qwen3moe-q8_0]\n{line}\ntests: [tg8]\n",
    )
    with pytest.raises(ConfigError) as exc:
        runner.run_matrix("moe-bad")
    assert exc.value.file.endswith("moe-bad.yaml") and exc.value.field == field
    assert "synthetic-tiny-qwen3moe-q8_0" in str(exc.value) and "\n" not in str(
        exc.value
    )
    assert not (moe_registry / "runs").exists()


def test_override_refusal_through_the_task_is_one_line(moe_registry):
    _matrix(
        moe_registry,
        "moe-bad-task",
        "schema_version: 1\nname: moe-bad-task\nmodels: [synthetic-tiny-qwen3moe-q8_0]\n"
        "sweep: {n_expert_used: [16]}\ntests: [tg8]\n",
    )
    env = {**os.environ, "ALMANAC_DATA": str(moe_registry)}
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "moe-bad-task"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert re.search(
        r"moe-bad-task\.yaml: sweep\.n_expert_used: 16 experts per token is outside 1\.\.8",
        err,
    )
    assert not (moe_registry / "runs").exists()


def test_speculation_on_a_rate_test_refused(data_env):
    _matrix(
        data_env,
        "spec-rate",
        "schema_version: 1\nname: spec-rate\nmodels: [gemma3-270m-q4_k_m]\n"
        "settings: {speculative: prompt_lookup}\ntests: [tg8]\n",
    )
    with pytest.raises(
        ConfigError,
        match=r"settings\.speculative: prompt_lookup speculative decoding applies to generate",
    ):
        runner.run_matrix("spec-rate")
    assert not (data_env / "runs").exists()


def test_context_too_small_for_the_depth_refused(data_env):
    _matrix(
        data_env,
        "depth",
        "schema_version: 1\nname: depth\nmodels: [synthetic-tiny-llama-q8_0]\n"
        "settings: {n_ctx: 512}\ntests: [tg64@d512]\n",
    )
    with pytest.raises(
        ConfigError,
        match=r"depth\.yaml: settings\.n_ctx: n_ctx 512 is smaller than the 576 tokens",
    ):
        runner.run_matrix("depth")
    assert not (data_env / "runs").exists()


def test_unknown_draft_model_refused(data_env):
    _matrix(
        data_env,
        "draft",
        "schema_version: 1\nname: draft\nmodels: [gemma3-270m-q4_k_m]\n"
        "settings: {speculative: draft_model, draft_model: gemma-tiny}\n"
        "tests: [{kind: generate, max_tokens: 4}]\n",
    )
    with pytest.raises(
        ConfigError, match=r"settings\.draft_model: .*unknown model 'gemma-tiny'"
    ):
        runner.run_matrix("draft")
    assert not (data_env / "runs").exists()


# -- synthetic models from the registry and the task ------------------------------------------
def test_registry_synth_entry_generates_on_demand(tmp_path, monkeypatch):
    d = tmp_path / "data"
    d.mkdir()
    (d / "models.yaml").write_text(
        "schema_version: 1\nmodels:\n  moe:\n    synth: {shape: tiny-qwen3moe, quant: q8_0, seed: 3}\n"
        "  bad:\n    synth: {shape: tiny-qwen3mo}\n"
    )
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        ConfigError,
        match=r"models\.bad\.synth: .*unknown shape 'tiny-qwen3mo'; did you mean tiny-qwen3moe",
    ):
        models.load_registry()
    (d / "models.yaml").write_text(
        "schema_version: 1\nmodels:\n  moe:\n    synth: {shape: tiny-qwen3moe, quant: q8_0, seed: 3}\n"
    )
    with pytest.raises(models.ModelError, match="not generated yet"):
        models.resolve("moe", fetch=False)
    ref = models.resolve("moe")
    assert Path(ref.path).parent == tmp_path / "cache" / "synthetic"
    assert ref.source == "synth:tiny-qwen3moe/Q8_0/seed3"
    assert (
        ref.facts["synthetic"] is True
        and ref.facts["expert_count"] == 8
        and ref.facts["expert_used_count"] == 2
    )
    mtime = Path(ref.path).stat().st_mtime_ns
    assert (
        models.resolve("moe").sha256 == ref.sha256
        and Path(ref.path).stat().st_mtime_ns == mtime
    )  # cached


def test_synth_task_writes_and_refuses(tmp_path):
    env = {**os.environ, "ALMANAC_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "m.gguf"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "model.synth",
            "--shape",
            "tiny-llama",
            "--quant",
            "Q4_0",
            "--override",
            "n_layer=2",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    facts = models.gguf_facts(out)
    assert (
        facts["synthetic"] is True
        and facts["block_count"] == 2
        and facts["quantization"] == "Q4_0"
    )
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "model.synth", "--shape", "tiny-lama"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(
        "error: shape: unknown shape 'tiny-lama'; did you mean tiny-llama"
    )


def test_metric_values_per_kind():
    assert opt.metric_values(
        RunRecord({"test": {"kind": "rate"}, "samples": {"ts": [1.0, 2.0]}}),
        "tokens_per_second",
    ) == [1.0, 2.0]
    gen = {
        "test": {"kind": "generate"},
        "samples": {
            "repetitions": [
                {"generation_tps": 5.0, "draft_acceptance": None},
                {"generation_tps": 7.0, "draft_acceptance": 50.0},
            ],
            "requests": [{"ttft_ms": 3.0}],
        },
    }
    assert opt.metric_values(RunRecord(gen), "generation_tps") == [5.0, 7.0]
    assert opt.metric_values(RunRecord(gen), "draft_acceptance") == [50.0]
    assert opt.metric_values(RunRecord(gen), "ttft_ms") == [3.0]
    chat = {
        "test": {"kind": "chat"},
        "samples": {"requests": [{"tpot_ms": 20.0}, {"tpot_ms": None}]},
    }
    assert opt.metric_values(RunRecord(chat), "decode_tps") == [50.0]


# -- the page from the committed fixture artifacts --------------------------------------------
@pytest.fixture(scope="module")
def fixture_docs():
    if not FIXTURES.exists():
        pytest.skip("run tests/fixtures/make_optimization_fixtures.py")
    return load_runs(FIXTURES / "runs")


def test_fixture_sweeps_and_tracks(fixture_docs):
    sweeps = {sw.name: sw for sw in opt.sweeps(fixture_docs)}
    assert {
        "prompt-lookup",
        "draft-model",
        "threads",
        "context-depth",
        "moe-experts",
    } <= set(sweeps)
    assert {
        n: sweeps[n].track
        for n in (
            "prompt-lookup",
            "draft-model",
            "threads",
            "context-depth",
            "moe-experts",
        )
    } == {
        "prompt-lookup": "speculative",
        "draft-model": "speculative",
        "threads": "threads",
        "context-depth": "depth",
        "moe-experts": "experts",
    }
    for sw in sweeps.values():
        for p in sw.points:
            assert p.is_baseline or p.comparison is not None or not p.ok
            if p.comparison and not p.is_baseline:
                base = p.baseline
                assert p.comparison["ratio"] == pytest.approx(
                    p.mean / base["summary"][p.metric]["mean"]
                )
                assert p.comparison["verdict"] in (
                    "win",
                    "loss",
                    "within noise",
                    "insufficient data",
                )
    lookup = [p for p in sweeps["prompt-lookup"].points if not p.is_baseline]
    assert lookup and all(
        p.acceptance is not None and 0 <= p.acceptance <= 100 for p in lookup
    )
    assert all(p.lossless is not None for p in lookup)
    bad = [p for p in sweeps["draft-model"].points if not p.ok]
    assert [p.doc["error"]["kind"] for p in bad] == ["incompatible"]
    moe = [p for p in sweeps["moe-experts"].points if p.doc["test"]["kind"] == "rate"]
    # the count llama.cpp used, from its log, is the one asked for (the model's 2 for the baseline)
    assert sorted(
        (
            p.doc["settings"]["swept"].get("n_expert_used") or 2,
            p.doc["settings"]["effective"]["n_expert_used"],
        )
        for p in moe
    ) == [(1, 1), (2, 2), (4, 4), (8, 8)]


def test_optimization_page_renders_from_fixtures(fixture_docs):
    md = page.optimization_page(fixture_docs)
    for title in (
        "## Best configuration per model",
        "## Speculative decoding",
        "## MoE expert reduction",
        "## Threads",
        "## Context depth",
        "## Failed approaches",
    ):
        assert title in md
    assert md.count('class="almanac-chart"') >= 6
    assert "synthetic weights, speed only" in md
    assert "**incompatible**" in md and "cannot draft for the target" in md
    assert "acceptance (%)" in md and "experts (llama.cpp log)" in md
    # every run linked from the page exists among the fixtures
    ids = {d["id"] for d in fixture_docs}
    linked = set(re.findall(r"\(runs/run\.md\?id=([^)]+)\)", md))
    assert linked and linked <= ids
    # hostile strings from an artifact are escaped
    assert "<script>" not in md and "&lt;script&gt;" in md
    specs = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', md)
    assert specs and all("<" not in s for s in specs)


def test_page_without_sweeps_says_how_to_get_them():
    assert "invoke bench --matrix optimization" in page.optimization_page([])


# -- speculation on a recurrent model: a failed point of kind "incompatible" ------------------
def test_speculation_on_a_recurrent_model_is_incompatible(tmp_path, monkeypatch):
    from core import artifacts
    from tests.support.tiny_mamba import write_tiny_mamba

    d = tmp_path / "data"
    (d / "matrices").mkdir(parents=True)
    mamba = write_tiny_mamba(tmp_path / "tiny-mamba.gguf")
    (d / "models.yaml").write_text(
        f"schema_version: 1\nmodels:\n  tiny-mamba:\n    path: {mamba}\n"
    )
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    _matrix(
        d,
        "rec",
        "schema_version: 1\nname: rec\nmodels: [tiny-mamba]\nrepetitions: 1\n"
        "settings: {speculative: prompt_lookup, n_threads: 1}\nsweep: {draft_max: [4]}\nbaseline: {speculative: none}\n"
        "tests: [{kind: generate, workload: free, max_tokens: 4, ignore_eos: true}]\n",
    )
    report = runner.run_matrix("rec")
    assert len(report.measured) == 1 and len(report.failed) == 1
    base, point = artifacts.load(report.measured[0]), artifacts.load(report.failed[0])
    assert (
        base["settings"]["requested"]["speculative"] == "none"
        and len(base["details"]["outputs"][0]["token_ids"]) == 4
    )
    assert point["error"]["kind"] == "incompatible"
    assert (
        "mamba is a recurrent model whose state cannot be rolled back"
        in point["error"]["message"]
    )
    assert (
        point["model"]["synthetic"] is True
        and point["matrix"]["baseline_key"] == base["key"]
    )
    fails = opt.failures(opt.sweeps(load_runs(d / "runs")))
    assert [(f["kind"], f["track"]) for f in fails] == [("incompatible", "speculative")]


# -- the expert-count override reaches llama.cpp (a real run on the synthetic MoE fixture) -----
def test_expert_override_reaches_llama_cpp(moe_registry, monkeypatch):
    from core import artifacts

    monkeypatch.setenv("ALMANAC_DATA", str(moe_registry))
    _matrix(
        moe_registry,
        "moe-run",
        "schema_version: 1\nname: moe-run\nmodels: [synthetic-tiny-qwen3moe-q8_0]\n"
        "repetitions: 2\nsettings: {n_threads: 1}\nsweep: {n_expert_used: [1, 4]}\nbaseline: {n_expert_used: null}\n"
        "tests: [tg8, {kind: generate, workload: free, max_tokens: 16, ignore_eos: true}]\n",
    )
    report = runner.run_matrix("moe-run", root=moe_registry / "moe-runs")
    assert len(report.measured) == 6 and not report.failed
    docs = [artifacts.load(p) for p in report.measured]
    seen: dict[str, set] = {}
    for d in docs:
        assert d["model"]["synthetic"] is True and d["matrix"]["sweep"] == "moe-run"
        asked = d["settings"]["requested"]["n_expert_used"]
        used = d["settings"]["effective"][
            "n_expert_used"
        ]  # parsed from llama.cpp's log: "n_expert_used = N"
        seen.setdefault(d["test"]["kind"], set()).add((asked, used))
        assert d["settings"]["effective"]["kv_overrides"] == (
            {"qwen3moe.expert_used_count": asked} if asked else {}
        )
    assert (
        seen["rate"] == seen["generate"] == {(None, 2), (1, 1), (4, 4)}
    )  # the baseline: the file's own 2
    sweep = opt.sweeps(load_runs(moe_registry / "moe-runs"))[0]
    assert sweep.track == "experts"
    for p in sweep.points:
        if p.is_baseline:
            continue
        assert p.comparison["ratio"] == pytest.approx(
            p.mean / p.baseline["summary"][p.metric]["mean"]
        )
        if p.doc["test"]["kind"] == "generate":
            assert p.lossless is not None and 0 <= p.lossless["agreement"] <= 1
            assert len(p.doc["details"]["outputs"]) == 2 and all(
                len(o["token_ids"]) == 16 for o in p.doc["details"]["outputs"]
            )


def test_an_override_llama_cpp_did_not_apply_is_a_failure(fixture_docs):
    import copy

    docs = copy.deepcopy(fixture_docs)
    d = next(
        d
        for d in docs
        if d["matrix"].get("sweep") == "moe-experts"
        and d["settings"]["swept"].get("n_expert_used") == 4
        and d["test"]["kind"] == "rate"
    )
    assert opt.experts_requested(d) == 4
    assert not [
        f for f in opt.failures(opt.sweeps(docs)) if f["kind"] == "override not applied"
    ]
    d["settings"]["effective"]["n_expert_used"] = (
        2  # as if llama.cpp had ignored the override
    )
    (f,) = [
        f for f in opt.failures(opt.sweeps(docs)) if f["kind"] == "override not applied"
    ]
    assert (
        f["point"].id == d["id"]
        and f["reason"]
        == "asked for 4 experts per token, llama.cpp's log says it used 2"
    )


def test_the_optimization_matrix_expands():
    m = matrix.load(ROOT / "data" / "matrices" / "optimization.yaml")
    cfgs = m.configurations()
    by = {}
    for c in cfgs:
        by.setdefault(c.sweep, []).append(c)
    assert set(by) == {
        "prompt-lookup",
        "draft-model",
        "threads",
        "flash-attention",
        "ubatch",
        "context-depth",
        "moe-experts",
        "moe-speculation",
        "draft-ladder",
    }
    moe = by["moe-speculation"]
    assert {(c.settings.n_expert_used, c.settings.speculative) for c in moe} == {
        (n, s) for n in (2, 4, 8) for s in ("none", "prompt_lookup", "draft_model")
    }
    assert all(
        c.baseline.n_expert_used == 8 and c.baseline.speculative == "none" for c in moe
    )
    assert {
        c.settings.draft_model
        for c in by["draft-ladder"]
        if c.settings.speculative == "draft_model"
    } == {"gemma3-270m-q4_k_m", "gemma3-270m-q3_k_m", "gemma3-270m-q2_k"}
    assert {c.settings.flash_attn for c in by["flash-attention"]} == {"off", "on"}
    assert {c.settings.n_ubatch for c in by["ubatch"]} == {128, 256, 512}
    lookup = by["prompt-lookup"]
    assert {
        (c.settings.draft_max, c.settings.lookup_ngram_max)
        for c in lookup
        if c.settings.speculative != "none"
    } == {(k, n) for k in (2, 4, 8) for n in (1, 3)}
    assert {c.test.workload for c in lookup} == {"edit", "free"}
    assert {c.model for c in by["moe-experts"]} == {"synthetic-tiny-qwen3moe-q8_0"}
    assert {c.settings.n_expert_used for c in by["moe-experts"]} == {None, 1, 4, 8}
    assert {c.settings.n_threads for c in by["threads"]} == {1, 2}
    assert {c.test.n_depth for c in by["context-depth"]} == {0, 512, 2048}
    assert all(c.baseline is not None for c in cfgs)


def test_gguf_facts_are_cached_by_hash_and_code(tmp_path, monkeypatch):
    from runtime.models import synth

    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    sha = synth.write_gguf("tiny-llama", "Q4_0", path)["sha256"]
    facts = models.cached_gguf_facts(path, sha)
    (side,) = (tmp_path / "cache" / "facts").glob("*.json")
    assert side.name.startswith(sha[:32]) and json.loads(
        side.read_text()
    ) == facts == models.gguf_facts(path)
    side.write_text(
        json.dumps({**facts, "block_count": 99})
    )  # what is cached is what is returned ...
    assert models.cached_gguf_facts(path, sha)["block_count"] == 99
    side.write_text("{not json")  # ... and a broken cache entry is recomputed
    assert models.cached_gguf_facts(path, sha) == facts
