"""Agent sessions and repeats against a real llama-server with the embedded Gemma 3 270M on loopback,
through the runner (issue 31, items 2 and 5).

Agent sessions: each turn after the first carries the model's answer with a tool call and the tool's
result; the context grows turn by turn and the server takes the earlier turns from its prompt cache.
Repeats: a repeat that resends the first repeat's requests to the same server, without a reset and
in a test not about the cache, finds them in the cache and is flagged; the same repeat after
a restart of the server starts cold (the server reports about no cached prompt tokens), while
llama-server's slot erase does not (its host-memory prompt cache gives the prompts back: flagged); a
repeat of the default kind draws other prompts. Skipped, with the reason, where llama-server is not built.
Short answers: the verdicts are about what is recorded, never how fast."""

from __future__ import annotations

import os

import pytest

from core import artifacts
from runtime.backends.openai_http import llama_server
from runtime.execution import runner
from tests.conftest import write_matrix

pytestmark = [pytest.mark.model]
needs_server = pytest.mark.skipif(
    not (os.environ.get(llama_server.ENV) or llama_server.cached_builds()),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` (or set ALMANAC_LLAMA_SERVER)",
)

# chat_format null: the GGUF's own template under Jinja (llama-server's default chatml here); the
# registry's built-in gemma template runs without Jinja, and such a server refuses tools;
# --slot-save-path: llama-server refuses every slot action without it, erase included
MATRIX = """schema_version: 1
name: agentsmall
backend: openai_http
models: [gemma3-270m-q4_k_m]
precision: null
timeout_s: 900
settings: {server: llama-server, parallel: 4, n_ctx: 4096, n_threads: 1, retries: 0,
  chat_format: null, read_timeout_s: 120, request_timeout_s: 300,
  server_args: [--slot-save-path, /tmp]}
tests:
  - kind: load
    id: agent
    profile: concurrent
    levels: [1]
    requests: 6
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {kind: agent, turns: 3, think_time_s: 0.05, prompt_tokens: 24, tool_result_tokens: 24,
      output_tokens: 4, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
  - kind: load
    id: warm-repeat
    profile: concurrent
    levels: [1]
    requests: 3
    repeats: 2
    repeat_workload: same
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {prompt_tokens: 48, output_tokens: 2, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
  - kind: load
    id: erased-repeat
    profile: concurrent
    levels: [1]
    requests: 3
    repeats: 2
    repeat_workload: same
    cache_reset: erase
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {prompt_tokens: 48, output_tokens: 2, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
  - kind: load
    id: restarted-repeat
    profile: concurrent
    levels: [1]
    requests: 3
    repeats: 2
    repeat_workload: same
    cache_reset: restart
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {prompt_tokens: 48, output_tokens: 2, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
  - kind: load
    id: varied-repeat
    profile: concurrent
    levels: [1]
    requests: 3
    repeats: 2
    warmup_requests: 0
    telemetry_interval_s: null
    workload: {prompt_tokens: 48, output_tokens: 2, seed: 0}
    slo: {percentile: 50, ttft_ms: 60000, tpot_ms: null}
"""


@needs_server
def test_agent_sessions_and_repeats_against_llama_server(data_env):
    write_matrix(data_env, "agentsmall", MATRIX)
    report = runner.run_matrix("agentsmall")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    count, problems = artifacts.validate_tree(data_env)
    assert count == 5 and not problems
    docs = {d["test"]["id"]: d for d in (artifacts.load(p) for p in report.measured)}

    ag = docs["agent"]
    recs = ag["samples"]["levels"][0]["requests"]
    assert all(r["ok"] for r in recs) and len(recs) == 6
    # every answer is followed by a tool call (the model's own or scripted), said per record
    assert all(r["tool_call"] in ("model", "scripted") for r in recs)
    turns = ag["details"]["summary"]["levels"][0]["turns"]
    per = turns["per_turn"]
    assert turns["agent"] is True and turns["conversations"] == 2
    assert [t["turn"] for t in per] == [0, 1, 2]
    assert all(t["tool_calls_model"] + t["tool_calls_scripted"] == 2 for t in per)
    ctx = [t["prompt_tokens_median"] for t in per]
    assert ctx[0] < ctx[1] < ctx[2]  # the tool results grow the context
    # the later turns come mostly from the server's prompt cache: the session's prefix is reused
    assert per[0]["cache_hit_rate"] is not None and per[2]["cache_hit_rate"] > 0.5
    assert ag["details"]["workload"]["tools"] == [
        "search_code",
        "read_file",
        "run_tests",
    ]

    def repeats(test_id):
        lv = docs[test_id]["details"]["summary"]["levels"][0]
        return lv["repeats"], docs[test_id]

    warm, doc = repeats("warm-repeat")
    assert [r["repeat"] for r in warm] == [0, 1]
    assert warm[0]["workload_seed"] == warm[1]["workload_seed"] == 0
    assert warm[1]["hit_rate"] > 0.5 and warm[1]["flagged"] is True
    assert not warm[0]["flagged"]
    assert doc["details"]["summary"]["warm_reuse_levels"] == [1.0]

    # llama-server's slot erase empties the slots, but its host-memory prompt cache (--cache-ram, on
    # by default) gives the prompts back: the erased repeat still runs warm, and is flagged
    erased, _ = repeats("erased-repeat")
    assert all(r["cache_reset"]["ok"] for r in erased), erased
    assert erased[0]["cache_reset"]["slots"] == 4
    assert (
        erased[1]["cache_reset"]["erased_tokens"] > 0
    )  # the first repeat's prompts were there
    assert erased[1]["hit_rate"] > 0.5 and erased[1]["flagged"] is True

    # a restart empties every cache: the same requests again run cold
    restarted, doc = repeats("restarted-repeat")
    assert all(r["cache_reset"]["action"] == "restart" for r in restarted)
    assert all(
        r["cache_reset"]["ok"] and r["cache_reset"]["startup_ms"] > 0 for r in restarted
    )
    assert restarted[1]["hit_rate"] <= 0.1 and restarted[1]["cold"] is True
    assert not restarted[1]["flagged"]
    assert (
        doc["details"]["cache_state"]["starts"] == 3
    )  # the test's start and one per repeat

    varied, doc = repeats("varied-repeat")
    assert [r["workload_seed"] for r in varied] == [0, 1]
    assert [r["arrival_seed"] for r in varied] == [0, 1]
    assert not varied[1]["flagged"] and varied[1]["hit_rate"] < 0.5
    prompts = [
        [
            r["prompt_tokens_counted"]
            for r in doc["samples"]["levels"][0]["requests"]
            if r["repeat"] == k
        ]
        for k in (0, 1)
    ]
    assert all(len(p) == 3 for p in prompts)
