"""Real traffic against real servers with the embedded Gemma 3 270M on loopback, through the runner:
the committed trace replayed against llama-server at its arrival times, conversations whose context
grows (the server's own prompt_tokens and cached_tokens per turn), the server's Prometheus series
stored per level; and llama_cpp.server's prompts counted with its /extras/tokenize (it has no
/tokenize and reports no usage in the stream). Skipped, with the reason, where llama-server is not
built. Short answers: the verdicts here are about what is recorded, never how fast."""

from __future__ import annotations

import os

import pytest

from core import artifacts, traces
from runtime.backends.openai_http import llama_server
from runtime.execution import runner
from tests.conftest import ROOT, write_matrix

pytestmark = [pytest.mark.model]
needs_server = pytest.mark.skipif(
    not (os.environ.get(llama_server.ENV) or llama_server.cached_builds()),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` (or set ALMANAC_LLAMA_SERVER)",
)
TRACE = ROOT / "tests" / "fixtures" / "traces" / "small.jsonl"

MATRIX = f"""schema_version: 1
name: trafficsmall
backend: openai_http
models: [gemma3-270m-q4_k_m]
precision: null
timeout_s: 900
settings: {{server: llama-server, parallel: 2, n_ctx: 2048, n_threads: 1, retries: 0,
  read_timeout_s: 120, request_timeout_s: 300}}
tests:
  - kind: load
    id: trace-replay
    profile: trace
    levels: [2.0]
    requests: 8
    warmup_requests: 0
    telemetry_interval_s: 0.5
    workload: {{kind: trace, trace: {TRACE}, block_tokens: 32, seed: 0}}
    slo: {{percentile: 50, ttft_ms: 60000, tpot_ms: null}}
  - kind: load
    id: turns
    profile: concurrent
    levels: [1]
    requests: 6
    warmup_requests: 0
    telemetry_interval_s: 0.5
    workload: {{kind: multi_turn, turns: 3, think_time_s: 0.1, prompt_tokens: 32, output_tokens: 4, seed: 0}}
    slo: {{percentile: 50, ttft_ms: 60000, tpot_ms: null}}
"""


@needs_server
def test_trace_and_conversations_against_llama_server(data_env):
    write_matrix(data_env, "trafficsmall", MATRIX)
    report = runner.run_matrix("trafficsmall")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    count, problems = artifacts.validate_tree(data_env)
    assert count == 2 and not problems
    docs = {d["test"]["id"]: d for d in (artifacts.load(p) for p in report.measured)}

    tr = docs["trace-replay"]
    recs = tr["samples"]["levels"][0]["requests"]
    rows = traces.read(TRACE).rows[:8]
    assert [r["scheduled_ms"] for r in recs] == pytest.approx(
        [row.t_s * 1000 / 2 for row in rows], abs=0.01
    )
    assert [r["output_tokens_requested"] for r in recs] == [
        row.output_tokens for row in rows
    ]
    ok = [r for r in recs if r["ok"]]
    assert ok and all(r["output_tokens"] == r["output_tokens_requested"] for r in ok)
    # the prompt as synthesized, counted by the server's tokenizer: the recorded length give or take a
    # token at the seams (the chat template adds its own on top: usage.prompt_tokens)
    assert all(
        abs(r["prompt_tokens_counted"] - r["prompt_tokens_requested"]) <= 3
        for r in recs
    )
    assert all(r["prompt_tokens"] > r["prompt_tokens_counted"] for r in ok)
    lv = tr["details"]["summary"]["levels"][0]
    assert lv["schedule"]["dispatch_lag_ms_p95"] is not None and lv["itl_ms"]["n"] > 0
    tel = tr["samples"]["levels"][0]["telemetry"]
    assert (
        tel["engine"] == "llama-server"
        and tel["samples"]
        and "running" in tel["samples"][-1]["v"]
    )
    assert (
        "kv_usage" in tel["missing"]
    )  # this llama-server build no longer exports KV occupancy: said so
    assert tr["details"]["cache_state"]["cold"] is True
    # NVML at the same interval: this host has no NVIDIA driver, and the level says so (the H200's
    # real series: tests/test_gpu_engines.py)
    gpu = tr["samples"]["levels"][0]["gpu_telemetry"]
    assert gpu["available"] is False and "NVML" in gpu["reason"]
    assert lv["gpu_telemetry"] == {"available": False, "reason": gpu["reason"]}

    conv = docs["turns"]
    turns = conv["details"]["summary"]["levels"][0]["turns"]
    per = turns["per_turn"]
    assert [t["turn"] for t in per] == [0, 1, 2] and turns["conversations"] == 2
    # the context grows turn by turn, and the server takes the earlier turns from its prompt cache
    ctx = [t["prompt_tokens_median"] for t in per]
    assert ctx[0] < ctx[1] < ctx[2]
    assert (
        per[0]["cache_hit_rate"] is not None
        and per[2]["cache_hit_rate"] > per[0]["cache_hit_rate"]
    )


LCS_MATRIX = """schema_version: 1
name: lcscount
backend: openai_http
models: [gemma3-270m-q4_k_m]
precision: null
timeout_s: 600
settings: {server: llama_cpp.server, n_ctx: 2048, retries: 0, read_timeout_s: 120, request_timeout_s: 300}
tests:
  - kind: load
    id: counted
    profile: synchronous
    levels: [1]
    requests: 3
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {prompt_tokens: 64, output_tokens: 4, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
"""


def test_llama_cpp_server_prompts_are_counted_with_its_tokenizer(data_env):
    """llama_cpp.server has /extras/tokenize and /extras/detokenize: prompts are cut to 64 tokens with
    the model's own tokenizer and counted (before: about 55 tokens from 4 characters a token)."""
    pytest.importorskip("llama_cpp.server.app")
    write_matrix(data_env, "lcscount", LCS_MATRIX)
    report = runner.run_matrix("lcscount")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    doc = artifacts.load(report.measured[0])
    assert doc["details"]["workload"]["source"] == "tokenizer"
    recs = doc["samples"]["levels"][0]["requests"]
    assert all(abs(r["prompt_tokens_counted"] - 64) <= 2 for r in recs)
    lv = doc["details"]["summary"]["levels"][0]
    assert abs(lv["prompt_tokens_counted_mean"] - 64) <= 2 and lv["itl_ms"]["n"] > 0
