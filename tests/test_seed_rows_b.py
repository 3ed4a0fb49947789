"""Issue 33, rows set B: the best K per target size (draft model and prompt lookup swept over K) and the
quality-vs-speed configurations, from the committed artifacts, and the rule for a K the context has no
room for (one line naming the matrix and the setting, nothing measured, the sweep goes on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core.kinds.generate import GenerateTest
from runtime.backends.llama_cpp.backend import LlamaCppBackend
from runtime.backends.llama_cpp.config import LlamaCppSettings
from tests.conftest import ROOT, tree_snapshot, write_matrix


def test_a_k_beyond_the_context_cannot_be_honoured():
    test = GenerateTest(workload="edit", max_tokens=32)
    s = lambda k, n_ctx=64: LlamaCppSettings(  # noqa: E731
        speculative="prompt_lookup", draft_max=k, n_ctx=n_ctx
    )
    assert (
        LlamaCppBackend.cannot_honour(s(31), None, test) is None
    )  # 32 + 31 + 1 = 64 fits
    setting, why = LlamaCppBackend.cannot_honour(s(32), None, test)
    assert setting == "draft_max=32"
    assert why == (
        "n_ctx 64 has no room for 32 generated tokens plus 32 drafted ones verified in one batch "
        "(65 tokens before the prompt)"
    )
    # plain decoding drafts nothing: never refused for K
    plain = LlamaCppSettings(speculative="none", draft_max=64, n_ctx=64)
    assert LlamaCppBackend.cannot_honour(plain, None, test) is None


def test_bench_skips_a_k_it_cannot_honour(data_env):
    """The real runner and task: every K of the sweep overflows the context: one line per point naming
    the matrix and the setting, nothing measured, exit 0."""
    write_matrix(
        data_env,
        "k-room",
        "schema_version: 1\nname: k-room\nbackend: llama_cpp\nmodels: [gemma3-270m-q4_k_m]\n"
        "settings: {n_ctx: 40}\n"
        "sweeps:\n  - name: k\n    sweep: {speculative: [prompt_lookup], draft_max: [8, 16]}\n"
        "    tests:\n      - {kind: generate, workload: edit, max_tokens: 32}\n",
    )
    before = tree_snapshot(data_env)
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "k-room"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "cannot be honoured" in ln]
    assert [ln.split(" cannot be honoured")[0] for ln in lines] == [
        "matrix k-room: setting draft_max=8 (edit)",
        "matrix k-room: setting draft_max=16 (edit)",
    ], proc.stderr
    assert all(ln.endswith("not measured, the sweep goes on") for ln in lines)
    after = {
        k: v for k, v in tree_snapshot(data_env).items() if not k.endswith(".run.lock")
    }
    assert after == before  # no artifact written


# -- the rows, from the committed artifacts -------------------------------------------------------
HOST = "vm-d4bbc016"  # the 2-core host these rows were measured on (issue 33)


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


# -- split host: a server started in a network namespace -------------------------------------------
def test_server_netns_settings_and_command():
    from core.errors import ConfigError  # noqa: F401 (the settings raise pydantic's error)
    from runtime.backends.openai_http.config import OpenAIHttpSettings

    with pytest.raises(ValueError, match="host must be the namespace's address"):
        OpenAIHttpSettings(server="llama-server", server_netns="almanac-model")
    with pytest.raises(ValueError, match="without base_url"):
        OpenAIHttpSettings(
            base_url="http://10.0.0.2:8080/v1", server_netns="x", host="10.0.0.2"
        )
    with pytest.raises(ValueError):
        OpenAIHttpSettings(server_netns="bad name;rm", host="10.0.0.2")
    s = OpenAIHttpSettings(server_netns="almanac-model", host="10.231.0.2")
    assert s.recorded()["server_netns"] == "almanac-model"
    # left at its default, it is not recorded: configurations measured before keep their key
    assert "server_netns" not in OpenAIHttpSettings().recorded()


NETNS = "almanac-test-b"


@pytest.fixture
def netns_host():
    """A second host: a network namespace over a veth link (root and iproute2 needed; skipped otherwise)."""
    env = dict(
        os.environ, NETNS=NETNS, NET="10.232.0", HERE_IF="alm-tb0", THERE_IF="alm-tb1"
    )
    script = str(ROOT / "benchmarks" / "split_host_netns.sh")
    up = subprocess.run(["bash", script, "up"], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        pytest.skip(f"no network namespace here: {up.stderr.strip()[:200]}")
    try:
        yield "10.232.0.2"
    finally:
        subprocess.run(
            ["bash", script, "down"], env=env, capture_output=True, text=True
        )


def test_a_managed_server_runs_on_the_other_host(netns_host, tmp_path):
    """The real backend starts its server inside the namespace (ip netns exec), reaches it over the veth
    link, and stops it: nothing listens on this host's loopback at that port."""
    import httpx

    from runtime.backends.openai_http.backend import OpenAIHttpBackend
    from runtime.backends.openai_http.config import OpenAIHttpSettings

    s = OpenAIHttpSettings(
        server_netns=NETNS,
        host=netns_host,
        server_command=[
            sys.executable,
            "-m",
            "http.server",
            "{port}",
            "--bind",
            "{host}",
        ],
        health_path="/",
        startup_timeout_s=20,
    )
    b = OpenAIHttpBackend(None, s)  # no model: the command names none
    try:
        b._start()
        assert b.command[:4] == ["ip", "netns", "exec", NETNS]
        assert b.base_url == f"http://{netns_host}:{b.port}/v1"
        assert httpx.get(f"http://{netns_host}:{b.port}/", timeout=5).status_code == 200
        with pytest.raises(httpx.HTTPError):  # not on this host's loopback
            httpx.get(f"http://127.0.0.1:{b.port}/", timeout=2)
    finally:
        b._stop()
    assert not b.server.alive()


# -- the uncertainty gate ------------------------------------------------------------------------------
def test_uncertainty_gate_settings_and_confidence():
    import math

    from core.kinds import agent as agent_kind
    from runtime.agents import loop
    from runtime.backends.openai_http import client

    off = agent_kind.AgentLoopTest(id="a")
    assert (
        "uncertainty_threshold" not in off.to_dict()
    )  # runs measured before the gate keep their key
    assert (
        agent_kind.AgentLoopTest(id="a", uncertainty_threshold=0.2).to_dict()[
            "uncertainty_threshold"
        ]
        == 0.2
    )
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError):
            agent_kind.AgentLoopTest(id="a", uncertainty_threshold=bad)
    assert loop.confidence([-0.1, -2.0, -0.5]) == pytest.approx(math.exp(-2.0))
    assert loop.confidence([]) is None and loop.confidence(None) is None
    # llama-server's shape; anything else in its place is skipped, never trusted
    acc = {"logprobs": []}
    chunk = {
        "choices": [
            {
                "delta": {"content": "x"},
                "logprobs": {
                    "content": [
                        {"logprob": -1.5},
                        {"logprob": True},
                        {"logprob": 3.0},
                        {"logprob": "-1"},
                        "junk",
                        {"logprob": -0.25},
                    ]
                },
            }
        ]
    }
    client.take_logprobs(chunk, acc)
    client.take_logprobs({"choices": [{"logprobs": {"content": "not a list"}}]}, acc)
    client.take_logprobs({"choices": []}, acc)
    assert acc["logprobs"] == [-1.5, -0.25]


def test_an_unsure_turn_is_escalated_once_per_step():
    """The controller's gate with scripted model turns (a stub in place of the server: a real model's
    confidence cannot be chosen): an unsure answer is asked again once, told it was unsure; a sure one is taken."""
    import asyncio

    from core.kinds import agent as agent_kind
    from core.kinds import agent_protocol as protocol
    from runtime.agents import loop, tools

    task = protocol.task("lookup", 0, 0)
    script = [
        ('{"answer": "wrong"}', [-0.01, -3.0]),  # unsure (p = 0.05 < 0.2): escalated
        (
            '{"answer": "wrong"}',
            [-3.0],
        ),  # unsure again at the same step: taken (once per step)
    ]
    bodies = []

    async def stream_chat(client, url, body, policy, *, origin_ns, server_alive):
        bodies.append(
            {**body, "messages": list(body["messages"])}
        )  # as sent (the list grows later)
        text, lps = script[min(len(bodies) - 1, len(script) - 1)]
        return {
            "ok": True,
            "e2e_ms": 1.0,
            "ttft_ms": 0.5,
            "output_tokens": 3,
            "finish_reason": "stop",
            "text": text,
            "error": None,
            "logprobs": lps,
        }

    ep = loop.Endpoint(
        "http://stub", "m", lambda: None, stream_chat, None, lambda: True, 0
    )
    test = agent_kind.AgentLoopTest(id="a", uncertainty_threshold=0.2, max_steps=3)
    out = asyncio.run(
        loop.episode(
            ep,
            None,
            loop.InternalTools(tools.ToolService(0)),
            task,
            test=test,
            profile=agent_kind.FaultProfile(name="p"),
            stream="s",
            origin_ns=0,
        )
    )
    assert all(b["logprobs"] is True for b in bodies)
    assert (
        out["escalations"] == 1 and out["steps"] == 2 and out["end_reason"] == "answer"
    )
    assert [t["escalated"] for t in out["turns"]] == [True, False]
    assert out["turns"][0]["confidence"] == pytest.approx(0.0498, abs=1e-3)
    assert bodies[1]["messages"][-1]["content"] == protocol.ESCALATE
    # the gate off: no log-probabilities asked for, the first answer taken
    bodies.clear()
    out = asyncio.run(
        loop.episode(
            ep,
            None,
            loop.InternalTools(tools.ToolService(0)),
            task,
            test=agent_kind.AgentLoopTest(id="a", max_steps=3),
            profile=agent_kind.FaultProfile(name="p"),
            stream="s",
            origin_ns=0,
        )
    )
    assert "logprobs" not in bodies[0] and out["escalations"] == 0 and out["steps"] == 1


# -- the rows, from the committed artifacts (measured on HOST) ----------------------------------------
def test_best_k_per_target_size(runs):
    from pipelines import optimization as opt
    from pipelines import speculation
    from pipelines.site import spec_k

    sweeps = [
        s for s in opt.sweeps(runs) if s.host_id == HOST and s.matrix == "speculative-k"
    ]
    assert sorted(s.name for s in sweeps) == [
        "k-sweep-gemma3-270m",
        "k-sweep-synthetic-148m",
        "k-sweep-synthetic-27m",
    ]
    assert all(speculation.is_k_sweep(s) for s in sweeps)
    sizes = {}
    for s in sweeps:
        choices = speculation.k_choices(s)
        assert [c.mode for c in choices] == ["prompt_lookup", "draft_model"]
        for c in choices:
            assert sorted(c.by_k) == [1, 2, 4, 8, 16]
            k, p = c.best
            ratio = p.comparison["ratio"]
            # the best K is the fastest K: no other K's speed-up is larger
            assert all(q.comparison["ratio"] <= ratio for q in c.by_k.values())
            assert p.comparison["ci95_low"] <= ratio <= p.comparison["ci95_high"]
        sizes[s.name] = choices[0].n_params
    assert (
        sizes["k-sweep-synthetic-27m"]
        < sizes["k-sweep-synthetic-148m"]
        < sizes["k-sweep-gemma3-270m"]
    )
    # the embedded model's speculation is lossless at every K: the same greedy text as plain decoding
    gemma = next(s for s in sweeps if s.name == "k-sweep-gemma3-270m")
    for c in speculation.k_choices(gemma):
        assert all(p.lossless and p.lossless["identical"] for p in c.by_k.values())
    md = "\n".join(spec_k.k_section(sweeps))
    assert (
        md.count("runs/run.md?id=") >= 2 * 5
    )  # baseline and best point of each row link their runs
    assert "K=16" in md and "identical to plain decoding" in md
    assert "random weights: text not judged" in md
    # a sweep that also varies the n-gram size is not one K per point: not a K sweep
    other = next(
        s
        for s in opt.sweeps(runs)
        if s.matrix == "optimization" and s.name == "prompt-lookup"
    )
    assert not speculation.is_k_sweep(other)


def test_split_host(runs):
    from pipelines import agents, split_host
    from pipelines.site.agent_pages import split_host_section

    pairs = [
        p
        for p in split_host.split_pairs(agents.agent_runs(runs))
        if p.host == HOST and p.split.record.matrix_name == "split-host"
    ]
    assert len(pairs) == 1
    p = pairs[0]
    assert split_host.netns(p.split) == "almanac-model" and p.colocated is not None
    assert p.split.record.requested["host"] == "10.231.0.2"
    hop = p.hop()
    assert hop is not None and hop["ci95_low"] <= hop["ratio"] <= hop["ci95_high"]
    md = "\n".join(split_host_section(pairs))
    assert (
        "Split-host matrix" in md
        and "ext tool retries" in md
        and "model hop mean" in md
    )


def test_quality_vs_speed(runs):
    from pipelines import tradeoffs as tr
    from pipelines.quality import load_quality
    from pipelines.site.tradeoffs import tradeoffs_table

    rows = tr.tradeoffs(runs, load_quality())[HOST]
    assert [t.sweep for t in rows] == ["max-quality", "balanced", "max-speed"]
    conf = [t.configuration() for t in rows]
    assert [c["quantization"] for c in conf] == ["Q4_K_M", "Q3_K_M", "Q2_K"]
    assert [c["kv"] for c in conf] == ["f16/f16", "f16/f16", "q8_0/q8_0"]
    assert conf[1]["adapters"] == ["gemma3-270m-lora-r16-qvo-0"]
    assert conf[2]["speculation"] == "prompt_lookup (K = 4)"
    for t in rows:
        assert set(t.runs) == {"edit", "free"} and t.peak_rss
        assert (
            t.quality is not None and t.quality.rate.n == 80
        )  # basic_facts, every item
    for t in rows[1:]:
        assert t.quality_vs_first is not None and t.quality_vs_first.n == 80
        for c in t.speed_vs_first.values():
            assert c["ci95_low"] <= c["ratio"] <= c["ci95_high"]
    md = tradeoffs_table(rows)
    assert md.count("quality-runs/run.md?id=") == 3 and "vs max quality" in md


def test_uncertainty_ablation(runs):
    from pipelines import agents, uncertainty
    from pipelines.site.agent_pages import uncertainty_section

    abls = [
        a
        for a in uncertainty.ablations(agents.agent_runs(runs))
        if a.on.record.host_id == HOST
        and a.on.record.matrix_name == "uncertainty-ablation"
    ]
    assert len(abls) == 1
    a = abls[0]
    assert uncertainty.threshold(a.on) == 0.35 and uncertainty.threshold(a.off) is None
    assert a.profiles == ["baseline", "stress"]
    for prof in a.profiles:
        for pl in ("internal", "external"):
            d = a.delta(prof, pl)
            assert d.n == 9  # 3 scenarios x 3 episodes, paired
    assert all(
        t.confidence is not None
        for e in a.on.episodes
        for t in e.turns
        if t.model and t.model.ok
    )
    md = "\n".join(uncertainty_section(abls))
    assert "baseline internal delta" in md and "stress external delta" in md
