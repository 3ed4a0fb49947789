"""The transformers backend (an optional extra) and llama.cpp's in-process serve, on a tiny
synthetic GGUF; and the Comparisons page's in-process backend table from their real artifacts.

Tests that need torch, transformers and accelerate are skipped with the reason when those are
not installed (pip install -e '.[transformers]'); the refusal, the lazy imports and llama.cpp's
side run everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.errors import ConfigError
from core.records.run import RunRecord
from runtime.backends.transformers import backend as tf_backend
from runtime.execution import runner
from tests.conftest import ROOT

MISSING = tf_backend.missing_packages()
needs_torch = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the transformers backend is an optional extra "
    f"(pip install -e '.[transformers]'): {', '.join(MISSING)} not installed",
)
REQUEST = (
    "messages: [{role: user, content: Explain in three sentences why the sky is blue.}]\n"
    "    max_tokens: 8\n    ignore_eos: true\n"
)


def _matrix(data_dir, name: str, backend: str, tests: str, extra: str = "") -> None:
    (data_dir / "matrices" / f"{name}.yaml").write_text(
        f"schema_version: 1\nname: {name}\nbackend: {backend}\nmodels: [synthetic-tiny-llama-q8_0]\nrepetitions: 3\n"
        f"precision: null\nwarmup: true\ntimeout_s: 300\nsettings: {{n_threads: 1}}\n{extra}tests:\n{tests}"
    )


def serve(n: int) -> str:
    return (
        f"  - kind: serve\n    id: cold-{n}\n    {REQUEST}    cold_starts: 1\n    "
        "requests: 2\n    warmup_requests: 1\n"
    )


TESTS = "  - pp32\n  - tg8\n" + serve(1) + serve(2)


def test_settings_and_class_import_without_torch():
    code = (
        "import sys; from runtime import backends; backends.settings_class('transformers'); "
        "c = backends.backend_class('transformers'); assert c.in_process and 'serve' in c.test_kinds; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'imported eagerly'"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_matrix_refused_without_torch(data_env, monkeypatch):
    monkeypatch.setattr(tf_backend, "missing_packages", lambda: ["torch", "accelerate"])
    _matrix(data_env, "tf", "transformers", "  - pp32\n")
    with pytest.raises(ConfigError) as exc:
        runner.run_matrix("tf")
    msg = str(exc.value)
    assert (
        "tf.yaml" in msg
        and "backend transformers needs torch, transformers, accelerate, gguf" in msg
    )
    assert (
        "not installed here: torch, accelerate" in msg
        and "pip install -e '.[transformers]'" in msg
    )
    assert not (data_env / "runs").exists()


def test_llama_cpp_serves_in_process(data_env):
    """serve on the in-process llama.cpp backend: the load in the fresh worker is the startup,
    then one cold request, then warm ones; the Serving page reads it as an in-process run."""
    from pipelines import serving

    _matrix(data_env, "inproc", "llama_cpp", serve(1))
    report = runner.run_matrix("inproc")
    assert len(report.measured) == 1 and not report.failed
    doc = json.loads(report.measured[0].read_text())
    s, samples = doc["summary"], doc["samples"]
    assert doc["build"]["in_process"] is True and doc["details"]["cold_starts"] == 1
    assert (
        doc["details"]["cold_starts_requested"] == 1
        and doc["details"]["cold_is_fresh_server"] is True
    )
    assert s["startup_ms"]["mean"] == pytest.approx(
        doc["summary"]["load_time_s"]["mean"] * 1000.0
    )
    (cold,) = samples["cold"]
    assert cold["fresh_process"] and cold["ok"] and cold["output_tokens"] == 8
    assert s["cold_total_ms"]["mean"] == pytest.approx(
        s["startup_ms"]["mean"] + cold["e2e_ms"]
    )
    assert (
        len(samples["warm"]) == 2
        and s["ttft_ms"]["n"] == 2
        and all(r["output_tokens"] == 8 for r in samples["warm"])
    )
    (row,) = serving.cold_warm([RunRecord(doc)])
    assert row["endpoint"] == "in-process (llama_cpp)" and row["fresh_server"]


@needs_torch
def test_transformers_runs_rate_chat_and_serve(tmp_path):
    from runtime.execution.worker import run_job
    from runtime.models import synth
    from runtime.models.registry import resolve

    path = tmp_path / "tiny-llama-q8_0.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path)
    ref = resolve(str(path))
    settings = {"n_threads": 1}
    rate = run_job(
        {
            "backend": "transformers",
            "model": ref.to_dict(),
            "settings": settings,
            "test": {"kind": "rate", "n_prompt": 32, "repetitions": 3},
        }
    )
    assert rate["status"] == "ok", rate.get("error")
    eff = rate["load"]["effective_settings"]
    assert (
        eff["device"] == "cpu"
        and eff["dtype"] == "float32"
        and eff["weights"] == "dequantized from Q8_0 to float32"
    )
    assert len(rate["metrics"]["tokens_per_second"]) == 3 and all(
        v > 0 for v in rate["metrics"]["tokens_per_second"]
    )
    assert (
        rate["details"]["energy"]["available"] in (True, False)
        and rate["details"]["import_s"] >= 0
    )
    assert (
        rate["describe"]["model"]["n_params"]
        == synth.get_shape("tiny-llama").n_params()
    )
    assert rate["describe"]["build"]["libraries"].startswith("torch ")
    chat = run_job(
        {
            "backend": "transformers",
            "model": ref.to_dict(),
            "settings": settings,
            "test": {
                "kind": "chat",
                "max_tokens": 6,
                "ignore_eos": True,
                "requests": 2,
                "warmup_requests": 0,
            },
        }
    )
    assert chat["status"] == "ok", chat.get("error")
    for r in chat["samples"]["requests"]:
        assert (
            r["output_tokens"] == 6 and len(r["itl_ms"]) == 5 and r["prompt_tokens"] > 5
        )
        assert r["ttft_ms"] is None or 0 < r["ttft_ms"] <= r["e2e_ms"]


@needs_torch
def test_an_architecture_transformers_cannot_read_fails_with_the_reason(tmp_path):
    from runtime.execution.worker import run_job
    from runtime.models import synth
    from runtime.models.registry import resolve

    path = tmp_path / "tiny-olmoe-q8_0.gguf"
    synth.write_gguf("tiny-olmoe", "Q8_0", path)
    res = run_job(
        {
            "backend": "transformers",
            "model": resolve(str(path)).to_dict(),
            "settings": {},
            "test": "pp8",
        }
    )
    assert res["status"] == "failed" and res["error"]["kind"] == "unsupported"
    assert "cannot load GGUF architecture 'olmoe'" in res["error"]["message"]


@needs_torch
def test_both_backends_on_one_file_side_by_side(data_env):
    """Both backends through the runner on the same file, then the Comparisons page's table."""
    from pipelines import backends as cmp
    from pipelines.runs import load_runs
    from pipelines.site import serving as serving_pages

    _matrix(data_env, "inproc", "llama_cpp", TESTS)
    _matrix(data_env, "inproc-tf", "transformers", TESTS)
    for name in ("inproc", "inproc-tf"):
        report = runner.run_matrix(name)
        assert len(report.measured) == 4 and not report.failed, [
            p.name for p in report.failed
        ]
    docs = load_runs(data_env / "runs")
    (group,) = cmp.backend_comparisons(docs)
    assert group["baseline"] == "llama_cpp" and group["candidate"] == "transformers"
    rows = {r["what"]: r for r in group["rows"]}
    assert {
        "Load time",
        "Peak RSS",
        "Cold TTFT",
        "Cold total (load + first request)",
        "Warm TTFT",
        "TPOT",
        "Prefill rate (pp32)",
        "Decode rate (tg8)",
    } <= set(rows)
    load = rows["Load time"]
    assert (
        load["n_baseline"] == load["n_candidate"] == 4
    )  # one fresh process per configuration
    cold = rows["Cold TTFT"]
    assert (
        cold["n_baseline"] == cold["n_candidate"] == 2
    )  # two serve runs each, one cold request each
    for r in group["rows"]:
        assert r["ratio"] == pytest.approx(r["candidate_mean"] / r["baseline_mean"])
        if r["ci95_low"] is not None:
            assert r["ci95_low"] <= r["ratio"] <= r["ci95_high"]
            expect = (
                "within noise"
                if r["ci95_low"] <= 1.0 <= r["ci95_high"]
                else "win"
                if (r["ci95_low"] > 1.0) == r["higher_is_better"]
                else "loss"
            )
            assert r["verdict"] == expect
    page = serving_pages.comparisons_page(docs)
    assert (
        "## In-process backends on the same file" in page
        and "<code>transformers</code> vs <code>llama_cpp</code>" in page
    )
    assert "| Cold TTFT |" in page and "dequantized from Q8\\_0 to float32" in page
