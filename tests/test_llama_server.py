"""llama.cpp's own llama-server as a managed server kind of the OpenAI-compatible backend:
settings, command line, binary lookup and version, log facts, the serving matrices that send
the same requests to all three backends, and the real binary on loopback with the
embedded model (skipped, with the reason, only where llama-server is not built)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from core import artifacts
from core.errors import BackendError
from runtime.backends.openai_http import llama_server
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.backends.openai_http.config import OpenAIHttpSettings
from runtime.execution import matrix, runner
from runtime.models.registry import ModelRef
from tests.conftest import write_matrix

ROOT = Path(__file__).resolve().parents[1]
MODEL = ModelRef(
    name="m",
    path="/models/m.gguf",
    sha256="0" * 64,
    size_bytes=1,
    source="path",
    facts={},
)


def _fake_server(tmp_path: Path, text: str) -> Path:
    """An executable that answers --version as a llama.cpp tool does (on stderr)."""
    p = tmp_path / "llama-server"
    p.write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}' >&2\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def test_settings_llama_server_is_a_started_kind():
    assert OpenAIHttpSettings().server == "llama_cpp.server"
    with pytest.raises(ValueError, match="kind the run starts"):
        OpenAIHttpSettings(server="llama-server", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="kind the run starts"):
        OpenAIHttpSettings(server="llama-server", server_command=["x"])
    with pytest.raises(ValueError, match="server_binary is for server 'llama-server'"):
        OpenAIHttpSettings(server_binary="/usr/bin/llama-server")
    with pytest.raises(ValueError):
        OpenAIHttpSettings(server="vllm")


def test_llama_server_command_mirrors_the_other_backends(tmp_path):
    b = OpenAIHttpBackend(
        MODEL,
        OpenAIHttpSettings(
            server="llama-server",
            chat_format="gemma",
            n_threads=3,
            parallel=2,
            n_ctx=1024,
            server_args=["--seed", "1"],
        ),
    )
    b._server_binary = tmp_path / "llama-server"
    b.port = 4242
    cmd = b.build_command()

    def arg(flag):
        return cmd[cmd.index(flag) + 1]

    assert cmd[0] == str(tmp_path / "llama-server") and b.label() == "llama-server"
    assert (arg("--model"), arg("--alias"), arg("--host"), arg("--port")) == (
        "/models/m.gguf",
        "m",
        "127.0.0.1",
        "4242",
    )
    assert (
        arg("--threads"),
        arg("--threads-batch"),
        arg("--ctx-size"),
        arg("--batch-size"),
    ) == ("3", "3", "1024", "2048")
    assert (arg("--n-gpu-layers"), arg("--parallel"), arg("--flash-attn")) == (
        "-1",
        "2",
        "auto",
    )
    assert (
        "--kv-unified" in cmd
        and arg("--chat-template") == "gemma"
        and cmd[-2:] == ["--seed", "1"]
    )
    # a built-in template name is read only with Jinja off (on, it is template text: the prompt "gemma")
    assert cmd[cmd.index("--chat-template") - 1] == "--no-jinja"
    # the llama_cpp.server command passes the same GPU layers
    b2 = OpenAIHttpBackend(MODEL, OpenAIHttpSettings())
    b2.port = 1
    c2 = b2.build_command()
    assert (
        c2[c2.index("--n_gpu_layers") + 1] == "-1" and b2.label() == "llama_cpp.server"
    )
    with pytest.raises(BackendError, match="chat_format 'nonesuch'"):
        OpenAIHttpBackend(
            MODEL, OpenAIHttpSettings(server="llama-server", chat_format="nonesuch")
        ).build_command()


def test_binary_lookup_and_version(tmp_path, monkeypatch):
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(llama_server.ENV, raising=False)
    with pytest.raises(
        BackendError,
        match="llama-server is not built: run `python benchmarks/llama_bench_build.py`",
    ):
        llama_server.find_binary()
    fake = _fake_server(tmp_path, "version: 0.5.0-dev (build 0, commit 0c1e57098)")
    monkeypatch.setenv(llama_server.ENV, str(fake))
    assert llama_server.find_binary() == fake
    assert llama_server.find_binary(str(fake)) == fake
    with pytest.raises(BackendError, match="is not an executable file"):
        llama_server.find_binary(str(tmp_path / "missing"))
    v = llama_server.version(fake)
    assert (v["version"], v["build_number"], v["commit"]) == (
        "0.5.0-dev",
        "0",
        "0c1e57098",
    )
    assert (
        llama_server.version(_fake_server(tmp_path, "version: 6400 (4df29be4f)"))[
            "commit"
        ]
        == "4df29be4f"
    )
    # a build record of benchmarks/llama_bench_build.py in the cache is found without the variable
    monkeypatch.delenv(llama_server.ENV)
    bindir = tmp_path / "cache" / "llama-bench" / "0c1e57098" / "build" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "llama-server").write_bytes(fake.read_bytes())
    (bindir / "llama-server").chmod(0o755)
    (bindir.parent.parent / "build.json").write_text(
        json.dumps({"lib_dir": str(bindir), "commit": "0c1e57098"})
    )
    assert llama_server.find_binary() == bindir / "llama-server"


def test_log_facts_from_a_real_llama_server_log():
    # lines as llama-server printed them on the lent H100 (benchmarks/results/gpu-h100/reference-20261126)
    log = (
        "0.00.504.947 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 4096, kv_unified = 'true'\n"
        "llama_context: flash_attn    = auto\nload_tensors: offloaded 17/17 layers to GPU\n"
        "0.00.759.529 I slot print_timing: id  3 | task 0 | prompt eval time =      13.14 ms /    32 tokens (x)\n"
        "0.00.825.765 I slot print_timing: id  3 | task 33 | prompt eval time =       1.25 ms /     1 tokens (x)\n"
    )
    facts = llama_server.log_facts(log)
    assert facts == {
        "flash_attn": "auto",
        "n_gpu_layers": 17,
        "n_layers_total": 17,
        "n_slots": 4,
        "prompt_tokens_evaluated": [32, 1],
    }
    # generations and prompt-cache reuse, in the shape the Comparisons page reads for llama_cpp.server
    reuse = (
        "0.00.709.909 I slot get_availabl: id  3 | task -1 | selected slot by LRU, t_last = -1\n"
        "0.00.759.533 I slot print_timing: id  3 | task 0 |       total time =      49.48 ms /    64 tokens\n"
        "0.00.793.111 I slot get_availabl: id  3 | task -1 | selected slot by LCP similarity, f_sim_best = 1.000\n"
        "0.00.825.769 I slot print_timing: id  3 | task 33 |       total time =      32.51 ms /    33 tokens\n"
    )
    assert llama_server.prefix_facts(reuse) == {
        "generate_calls": 2,
        "prefix_match_hits": 1,
    }
    assert llama_server.prefix_facts("no requests") == {}


def test_serving_matrices_send_the_same_requests_to_all_three_backends():
    from core.kinds.request import workload_fingerprint

    for prefix in ("serving", "serving-reference"):
        names = {
            "inprocess": f"{prefix}-inprocess",
            "llama_cpp.server": prefix,
            "llama-server": f"{prefix}-llama-server",
        }
        loaded = {
            k: matrix.load(ROOT / "data" / "matrices" / f"{v}.yaml")
            for k, v in names.items()
        }
        models = {k: m.spec.models for k, m in loaded.items()}
        assert len({tuple(v) for v in models.values()}) == 1, models
        tests = {
            k: {c.test.name: c.test for c in m.configurations()}
            for k, m in loaded.items()
        }
        base = workload_fingerprint(tests["inprocess"]["chat-serving"].to_dict())
        for kind in ("llama_cpp.server", "llama-server"):
            assert workload_fingerprint(tests[kind]["chat-serving"].to_dict()) == base
            assert tests[kind].keys() == tests["llama_cpp.server"].keys()
            for name, t in tests[kind].items():
                assert t.to_dict() == tests["llama_cpp.server"][name].to_dict()
        servers = {
            k: m.configurations()[0].settings.server
            for k, m in loaded.items()
            if k != "inprocess"
        }
        assert servers == {
            "llama_cpp.server": "llama_cpp.server",
            "llama-server": "llama-server",
        }


def _built() -> bool:
    return bool(os.environ.get(llama_server.ENV) or llama_server.cached_builds())


@pytest.mark.model
@pytest.mark.skipif(
    not _built(),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` "
    "(or set ALMANAC_LLAMA_SERVER)",
)
def test_real_llama_server_end_to_end(data_env):
    """Starts llama.cpp's llama-server on loopback with the embedded model through the runner:
    a chat test and a 1-2 concurrency sweep, valid artifacts, its build recorded, stopped."""
    from importlib import metadata

    from runtime.backends.llama_cpp.backend import VENDORED_LLAMA_CPP

    req = "    messages: [{role: user, content: Say hello.}]\n    max_tokens: 4\n    ignore_eos: true\n"
    write_matrix(
        data_env,
        "ls",
        "schema_version: 1\nname: ls\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\n"
        "timeout_s: 600\nsettings: {server: llama-server, n_threads: 1, n_ctx: 512, parallel: 2}\ntests:\n"
        "  - kind: chat\n    id: hello-chat\n"
        + req
        + "    requests: 2\n    warmup_requests: 0\n"
        "  - kind: concurrency\n    id: hello-conc\n"
        + req
        + "    levels: [1, 2]\n    rounds: 1\n    warmup_requests: 0\n",
    )
    report = runner.run_matrix("ls")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    count, problems = artifacts.validate_tree(data_env)
    assert count == 2 and not problems
    docs = {d["test"]["kind"]: d for d in (artifacts.load(p) for p in report.measured)}
    chat = docs["chat"]
    build = chat["build"]
    assert build["server"] == "llama-server" and build["endpoint"] == "llama-server"
    assert (
        build["llama_cpp_commit"]
        == VENDORED_LLAMA_CPP[metadata.version("llama-cpp-python")]
    )
    assert Path(build["server_binary"]).name == "llama-server"
    eff = chat["settings"]["effective"]
    assert (
        eff["server"] == "llama-server" and eff["n_slots"] == 2 and eff["parallel"] == 2
    )
    cmd = eff["server_command"]
    assert (
        cmd[cmd.index("--port") + 1] == "{port}"
        and cmd[cmd.index("--chat-template") + 1] == "gemma"
    )
    # the in-process AMX policy (runtime.backends.llama_cpp.lib_policy) applies to llama-server too: --no-repack
    # exactly where its libraries have AMX compiled in (their matmul crashes in this llama.cpp)
    amx = "AMX_INT8 = 1" in llama_server.system_info(build["server_binary"])
    assert ("--no-repack" in cmd) == amx and eff["use_extra_bufts"] is (not amx)
    recs = chat["samples"]["requests"]
    assert len(recs) == 2 and all(
        r["ok"] and r["output_tokens"] == 4 and 0 < r["ttft_ms"] < r["e2e_ms"]
        for r in recs
    )
    assert (
        chat["details"]["server"]["llama_log_facts"]["prompt_tokens_evaluated"][0] > 1
    )
    assert "---- server log (llama-server" in chat["log_tail"]
    for doc in docs.values():
        for start in doc["details"]["server"]["starts"]:
            assert start["stop"]["exit"] in ("exit code 0", "SIGTERM", "exit code 143")
    sweep = docs["concurrency"]["details"]["sweep"]
    assert [lv["ok"] for lv in sweep["levels"]] == [1, 2]
