"""Issue 33: the seed rows measured here (error-retry per rate, flash attention against depth, acceptance
against temperature, parallel slots per role), from the committed artifacts, and the rule for a setting a
backend cannot honour (one line naming the matrix and the setting, nothing measured, the sweep goes on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core.kinds.generate import GenerateTest
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.backends.openai_http.config import OpenAIHttpSettings
from tests.conftest import ROOT, tree_snapshot, write_matrix


def test_generate_temperature_keeps_greedy_identity():
    """A greedy generate test stores no temperature or seed (the tests measured before keep their key);
    a sampled one stores both."""
    greedy = GenerateTest(workload="edit").to_dict()
    assert "temperature" not in greedy and "seed" not in greedy
    hot = GenerateTest(workload="edit", id="t", temperature=0.7, seed=3).to_dict()
    assert hot["temperature"] == 0.7 and hot["seed"] == 3
    with pytest.raises(ValueError):
        GenerateTest(workload="edit", temperature=2.5)


def _chat(chars: int, max_tokens: int):
    from core.kinds.concurrency import ConcurrencyTest

    return ConcurrencyTest(
        id="c",
        messages=[{"role": "user", "content": "x" * chars}],
        max_tokens=max_tokens,
        levels=[1, 2],
    )


def test_slots_beyond_the_context_cannot_be_honoured():
    s = lambda np_: OpenAIHttpSettings(server="llama-server", parallel=np_, n_ctx=4096)  # noqa: E731
    # 3,600 characters at 3 per token + 16 = 1,216 tokens a request: 2 slots fit 4,096, 4 do not
    assert OpenAIHttpBackend.cannot_honour(s(2), None, _chat(3600, 16)) is None
    setting, why = OpenAIHttpBackend.cannot_honour(s(4), None, _chat(3600, 16))
    assert setting == "parallel=4"
    assert "4 slots × about 1,216 tokens" in why and "4,864" in why and "4,096" in why
    assert (
        OpenAIHttpBackend.cannot_honour(s(1), None, _chat(30000, 16)) is None
    )  # one slot: never refused here
    other = OpenAIHttpSettings(
        parallel=8, n_ctx=512
    )  # llama_cpp.server: no slots to fill
    assert OpenAIHttpBackend.cannot_honour(other, None, _chat(3600, 16)) is None


def test_bench_skips_a_point_it_cannot_honour(data_env):
    """The real runner and task: a sweep whose every point needs more slots than the context has room
    for prints one line per point naming the matrix and the setting, measures nothing, exits 0."""
    write_matrix(
        data_env,
        "np-room",
        "schema_version: 1\nname: np-room\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\n"
        "settings: {server: llama-server, n_ctx: 1024}\n"
        "sweeps:\n  - name: slots\n    sweep: {parallel: [4, 8]}\n    baseline: {parallel: 4}\n"
        "    tests:\n      - kind: concurrency\n        id: long\n        messages:\n"
        f"          - {{role: user, content: '{'word ' * 200}'}}\n"
        "        max_tokens: 16\n        levels: [1, 2]\n",
    )
    before = tree_snapshot(data_env)
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "np-room"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "cannot be honoured" in ln]
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(
        "matrix np-room: setting parallel=4 (long) cannot be honoured: 4 slots"
    )
    assert lines[1].startswith(
        "matrix np-room: setting parallel=8 (long) cannot be honoured: 8 slots"
    )
    assert all(ln.endswith("not measured, the sweep goes on") for ln in lines)
    after = {
        k: v for k, v in tree_snapshot(data_env).items() if not k.endswith(".run.lock")
    }  # the host's run lock
    assert after == before  # no artifact written
