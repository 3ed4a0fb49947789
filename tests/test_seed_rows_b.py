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
