"""Serving: the OpenAI-compatible HTTP backend, its fault paths (against our own
fault-injecting server on loopback), the serving statistics on known numbers, the pages,
and the happy path against the real llama_cpp.server with the embedded model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from core import artifacts
from core.errors import ConfigError
from core.kinds import parse_test
from core.kinds import request_stats as servingstats
from core.kinds.request_stats import Slo
from core.records import run as record
from runtime.backends.openai_http.backend import OpenAIHttpBackend, ServingFailed
from runtime.backends.openai_http.config import OpenAIHttpSettings
from runtime.backends.openai_http.server import free_port
from runtime.execution import runner
from tests.conftest import write_matrix

ROOT = Path(__file__).resolve().parents[1]
FAULT = str(ROOT / "tests" / "fault_server.py")


def _wait_healthy(port: int, timeout: float = 15.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if (
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1.0).status_code
                == 200
            ):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("fault server did not start")


@pytest.fixture(scope="module")
def fault_url():
    """One fault server for the request-level faults (each request picks its fault by model name)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            FAULT,
            "--port",
            str(port),
            "--stall-s",
            "20",
            "--delay-ms",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    """A tiny synthetic GGUF: runs against the fault server need a model file, not its contents
    (the embedded model's GGUF facts take long to read)."""
    from runtime.models import synth

    path = tmp_path_factory.mktemp("tiny") / "tiny-llama.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _run(settings: dict, test: dict):
    """Load and run one test in this process; (result, error) with the backend closed."""
    b = OpenAIHttpBackend(None, OpenAIHttpSettings(**settings))
    t = parse_test(test)
    try:
        b.load(t)
        return b.run(t), None
    except ServingFailed as exc:
        return None, exc
    finally:
        b.close()


def _fault_cmd(*extra: str) -> list[str]:
    return ["{python}", FAULT, "--port", "{port}", *extra]


# -- statistics on known numbers ------------------------------------------------------------
def _rec(ttft, tpot, tokens=10, ok=True, first=None, last=None, reason=None):
    return {
        "ok": ok,
        "error": None if ok else {"reason": reason, "message": reason},
        "ttft_ms": ttft if ok else None,
        "tpot_ms": tpot if ok else None,
        "e2e_ms": (ttft + tpot * (tokens - 1)) if ok else None,
        "itl_ms": [tpot] * (tokens - 1) if ok else [],
        "output_tokens": tokens if ok else None,
        "first_token_ms": first,
        "last_token_ms": last,
        "attempts": 1,
    }


def test_effective_parallelism_known_intervals():
    ep = servingstats.effective_parallelism
    assert ep([(0, 10), (10, 20)]) == pytest.approx(1.0)
    assert ep([(0, 10), (0, 10)]) == pytest.approx(2.0)
    assert ep([(0, 10), (5, 15)]) == pytest.approx(20 / 15)
    assert ep([(0, 10), (20, 30), (20, 30), (20, 30)]) == pytest.approx(40 / 20)
    assert ep([(5, 5)]) is None and ep([]) is None


def test_level_stats_goodput_and_errors():
    slo = Slo(ttft_ms=500, tpot_ms=30, attainment=0.9)
    recs = [
        _rec(100, 10),
        _rec(200, 40),
        _rec(600, 10),
        _rec(300, 10),
        _rec(0, 0, ok=False, reason="timeout_read"),
    ]
    s = servingstats.level_stats(recs, wall_s=2.0, slo=slo, level=4)
    assert s["requests"] == 5 and s["ok"] == 4 and s["errors"] == 1
    assert s["error_reasons"] == {"timeout_read": 1}
    assert s["output_tokens"] == 40 and s["aggregate_tps"] == pytest.approx(20.0)
    assert s["slo_met"] == 2  # 200 ms breaks TPOT, 600 ms breaks TTFT, the error misses
    assert s["slo_attainment"] == pytest.approx(0.4) and s[
        "goodput_rps"
    ] == pytest.approx(1.0)
    assert s["meets_slo"] is False
    assert s["ttft_ms"]["mean"] == pytest.approx(300.0) and s["ttft_ms"]["n"] == 4
    assert s["itl_ms"]["n"] == 36
    # a one-token answer has no TPOT and meets that limit by definition
    assert servingstats.meets_slo({"ok": True, "ttft_ms": 100, "tpot_ms": None}, slo)
    assert not servingstats.meets_slo(
        {"ok": True, "ttft_ms": 100, "tpot_ms": None}, Slo(50, 30, 0.9)
    )


def test_sweep_stats_multipliers_and_highest_level():
    slo = Slo(ttft_ms=500, tpot_ms=30, attainment=0.9)
    lv1 = [_rec(100, 10, first=0, last=90), _rec(100, 10, first=100, last=190)]
    lv2 = [
        _rec(100, 10, first=0, last=90),
        _rec(600, 10, first=100, last=190),
    ] * 2  # half miss TTFT
    lv4 = [_rec(100, 10, first=0, last=90)] * 4  # meets again, but level 2 did not
    sw = servingstats.sweep_stats(
        [
            {"level": 4, "wall_s": 1.0, "requests": lv4},
            {"level": 1, "wall_s": 2.0, "requests": lv1},
            {"level": 2, "wall_s": 2.0, "requests": lv2},
        ],
        slo,
    )
    rows = {r["level"]: r for r in sw["levels"]}
    assert [r["level"] for r in sw["levels"]] == [1, 2, 4]
    assert rows[1]["aggregate_tps"] == pytest.approx(10.0)
    assert rows[2]["aggregate_tps"] == pytest.approx(20.0) and rows[2][
        "speedup"
    ] == pytest.approx(2.0)
    assert rows[2]["scaling_efficiency"] == pytest.approx(1.0)
    assert rows[4]["speedup"] == pytest.approx(4.0)
    assert rows[2]["p95_multiplier"] == pytest.approx(
        rows[2]["e2e_ms"]["p95"] / rows[1]["e2e_ms"]["p95"]
    )
    assert rows[2]["p95_multiplier"] > 1.5
    assert rows[1]["meets_slo"] and not rows[2]["meets_slo"] and rows[4]["meets_slo"]
    assert sw["max_level_meeting_slo"] == 1  # every level up to L must meet
    assert sw["peak_aggregate_tps"] == pytest.approx(40.0) and sw["peak_level"] == 4
    assert rows[4]["effective_parallelism"] == pytest.approx(4.0)
    assert sw["serialised"] is False


def test_serialised_flag():
    rows = [
        {"level": 1, "effective_parallelism": 1.0},
        {"level": 2, "effective_parallelism": 1.02},
        {"level": 4, "effective_parallelism": 1.1},
    ]
    assert servingstats.serialised(rows) is True
    assert servingstats.serialised(rows[:1]) is None
    assert (
        servingstats.serialised(rows + [{"level": 8, "effective_parallelism": 3.0}])
        is False
    )


# -- settings -------------------------------------------------------------------------------
def test_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAIHttpSettings(base_url="localhost:8080")
    with pytest.raises(ValueError, match="unknown placeholder"):
        OpenAIHttpSettings(server_command=["{python}", "-m", "srv", "--port", "{prot}"])
    with pytest.raises(ValueError, match="either base_url"):
        OpenAIHttpSettings(base_url="http://127.0.0.1:1/v1", server_args=["--x"])
    with pytest.raises(ValueError):
        OpenAIHttpSettings(retries=99)


def test_matrix_with_bad_serving_test_names_file_and_field(data_env):
    write_matrix(
        data_env,
        "bad",
        "schema_version: 1\nname: bad\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\n"
        "tests:\n  - kind: concurrency\n    levels: [4, 2]\n",
    )
    with pytest.raises(ConfigError) as e:
        runner.run_matrix("bad")
    assert (
        "bad.yaml" in str(e.value)
        and "tests[0]" in str(e.value)
        and "increasing" in str(e.value)
    )
    assert not (data_env / "runs").exists()


def test_default_command_is_llama_cpp_server_without_interrupts():
    from runtime.models.registry import ModelRef

    model = ModelRef(
        name="m",
        path="/models/m.gguf",
        sha256="0" * 64,
        size_bytes=1,
        source="path",
        facts={},
    )
    b = OpenAIHttpBackend(
        model,
        OpenAIHttpSettings(
            chat_format="gemma", n_threads=3, server_args=["--verbose", "False"]
        ),
    )
    b.port = 12345
    cmd = b.build_command()
    # llama_cpp.server, started through runtime.backends.openai_http.llama_cpp_server
    # (the library policy of runtime/backends/llama_cpp/lib_policy.py first)
    assert cmd[:3] == [
        sys.executable,
        "-m",
        "runtime.backends.openai_http.llama_cpp_server",
    ]
    assert cmd[cmd.index("--interrupt_requests") + 1] == "False"
    assert (
        cmd[cmd.index("--model") + 1] == "/models/m.gguf"
        and cmd[cmd.index("--model_alias") + 1] == "m"
    )
    assert (
        cmd[cmd.index("--port") + 1] == "12345"
        and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    )
    assert (
        cmd[cmd.index("--n_threads") + 1] == "3"
        and cmd[cmd.index("--chat_format") + 1] == "gemma"
    )
    assert cmd[cmd.index("--logits_all") + 1] == "False" and cmd[-2:] == [
        "--verbose",
        "False",
    ]
    assert b.label() == "llama_cpp.server"


# -- request faults (one fault server, the fault chosen by the model name) ------------------
CHAT = {"kind": "chat", "requests": 2, "warmup_requests": 0, "max_tokens": 4}


def test_ok_stream_counts_usage_or_chunks(fault_url):
    res, err = _run({"base_url": fault_url, "api_model": "ok"}, CHAT)
    assert err is None
    recs = res.samples["requests"]
    assert all(
        r["ok"] and r["output_tokens"] == 4 and r["output_tokens_source"] == "usage"
        for r in recs
    )
    r = recs[0]
    assert r["ttft_ms"] > 0 and r["e2e_ms"] >= r["ttft_ms"] and len(r["itl_ms"]) == 3
    assert r["tpot_ms"] == pytest.approx((r["e2e_ms"] - r["ttft_ms"]) / 3)
    assert res.metrics["failed_requests"] == [0] and len(res.metrics["ttft_ms"]) == 2
    res2, _ = _run({"base_url": fault_url, "api_model": "ok-nousage"}, CHAT)
    assert all(
        r["output_tokens_source"] == "chunks" and r["output_tokens"] == 4
        for r in res2.samples["requests"]
    )


@pytest.mark.parametrize(
    "mode,reason,attempts",
    [
        ("http500", "http_500", 2),  # retried once (5xx before content), then given up
        ("drop", "dropped", 1),  # content had started: never retried
        ("truncate", "incomplete", 1),
        ("error-event", "server_error_event", 1),
        ("bad-json", "bad_payload", 1),
        ("stall", "timeout_read", 1),
        (
            "wrong-shape",
            "bad_payload",
            1,
        ),  # choices is a string: a typed error, never a crashed run
        ("number-content", "bad_payload", 1),  # a number where text belongs
        (
            "list-line",
            "bad_payload",
            1,
        ),  # a JSON list is not a chunk (it used to count as ok)
        (
            "endless-line",
            "too_large",
            1,
        ),  # bytes without a newline: bounded, not gigabytes
    ],
)
def test_request_faults_are_accounted_and_bounded(fault_url, mode, reason, attempts):
    t0 = time.perf_counter()
    res, err = _run(
        {
            "base_url": fault_url,
            "api_model": mode,
            "read_timeout_s": 0.5,
            "request_timeout_s": 3,
            "retries": 1,
            "retry_backoff_s": 0.01,
        },
        CHAT,
    )
    elapsed = time.perf_counter() - t0
    assert res is None and "none of the 2 requests succeeded" in str(err)
    recs = err.partial.samples["requests"]
    assert len(recs) == 2 and not any(r["ok"] for r in recs)
    assert {r["error"]["reason"] for r in recs} == {reason}
    assert all(
        r["attempts"] == attempts and len(r["retries"]) == attempts - 1 for r in recs
    )
    assert elapsed < 2 * 3 + 3  # each request within its own limit


def test_retry_after_5xx_succeeds_and_is_recorded(fault_url):
    res, err = _run(
        {
            "base_url": fault_url,
            "api_model": "flaky",
            "retries": 2,
            "retry_backoff_s": 0.01,
        },
        CHAT,
    )
    assert err is None
    for r in res.samples["requests"]:
        assert r["ok"] and r["attempts"] == 2
        assert (
            r["retries"][0]["reason"] == "http_503" and r["retries"][0]["after_ms"] >= 0
        )
    assert res.metrics["failed_requests"] == [0]


@pytest.mark.parametrize("mode", ["trickle", "slow-headers"])
def test_nothing_hangs_past_the_request_timeout(fault_url, mode):
    t0 = time.perf_counter()
    _, err = _run(
        {
            "base_url": fault_url,
            "api_model": mode,
            "request_timeout_s": 1.0,
            "read_timeout_s": 5,
            "retries": 3,
        },
        {**CHAT, "requests": 1},
    )
    elapsed = time.perf_counter() - t0
    rec = err.partial.samples["requests"][0]
    assert rec["error"]["reason"] == "timeout_total" and 950 <= rec["elapsed_ms"] < 2000
    assert elapsed < 4.0


def test_unreachable_endpoint_fails_with_the_url():
    port = free_port()
    _, err = _run(
        {"base_url": f"http://127.0.0.1:{port}/v1", "startup_timeout_s": 0.5}, CHAT
    )
    assert (
        err is not None
        and f"127.0.0.1:{port}" in str(err)
        and "unreachable" in str(err)
    )


# -- server lifecycle faults (managed fault server) -------------------------------------------
def test_startup_failure_is_reported_with_the_server_log():
    _, err = _run(
        {"server_command": _fault_cmd("--die-on-start"), "startup_timeout_s": 10}, CHAT
    )
    assert "exited during startup (exit code 1)" in str(
        err
    ) and "model file missing" in str(err)
    start = err.partial.details["server"]["starts"][0]
    assert start["startup_ms"] is None and start["pid"] > 0


def test_server_log_facts_count_generations_and_prefix_reuse():
    from runtime.backends.openai_http.server import condensed_log, server_log_facts

    log = "\n".join(
        [
            "llama_perf_context_print:       total time =  10.0 ms /  5 tokens",
            "Llama.generate: 18 prefix-match hit, remaining 1 prompt tokens to eval",
            "llama_perf_context_print:       total time =  11.0 ms /  5 tokens",
        ]
    )
    assert server_log_facts(log) == {"generate_calls": 2, "prefix_match_hits": 1}
    assert server_log_facts("INFO: started") == {}
    long = (
        "\n".join(f"line {i}" for i in range(200))
        + "\nllama_graph_n_input_tensors: noise"
    )
    short = condensed_log(long, head=3, tail=2)
    assert short.splitlines() == [
        "line 0",
        "line 1",
        "line 2",
        "[... 195 lines omitted ...]",
        "line 198",
        "line 199",
    ]


def test_never_healthy_server_times_out_and_is_stopped():
    b = OpenAIHttpBackend(
        None,
        OpenAIHttpSettings(
            server_command=_fault_cmd("--unhealthy"), startup_timeout_s=1.0
        ),
    )
    t0 = time.perf_counter()
    with pytest.raises(ServingFailed, match="not healthy within 1 s"):
        b.load(parse_test(CHAT))
    assert time.perf_counter() - t0 < 6
    pid = b.server.pid
    b.close()
    assert not _pid_alive(pid)


def test_concurrency_sweep_shows_serialisation_and_parallel_slots():
    # 40 ms a chunk: a request is mostly the server's wait, so a loaded host's CPU (the client's parsing,
    # the server's threads) moves the speedups little (at 15 ms, nice 19 and load 5 gave 1.92 against 4 slots)
    test = {
        "kind": "concurrency",
        "levels": [1, 2, 4],
        "rounds": 2,
        "max_tokens": 8,
        "warmup_requests": 0,
    }
    serial, err = _run(
        {
            "server_command": _fault_cmd("--slots", "1", "--delay-ms", "40"),
            "api_model": "ok",
        },
        test,
    )
    assert err is None
    sw = serial.details["sweep"]
    assert [lv["requests"] for lv in sw["levels"]] == [2, 4, 8]
    assert sw["serialised"] is True and sw["levels"][-1]["effective_parallelism"] < 1.25
    assert (
        sw["levels"][-1]["speedup"] < 2.0
    )  # 4 clients, not 4x: the server queues them
    assert sw["levels"][-1]["p95_multiplier"] > 2.0
    parallel, err = _run(
        {
            "server_command": _fault_cmd("--slots", "4", "--delay-ms", "40"),
            "api_model": "ok",
        },
        test,
    )
    assert err is None
    psw = parallel.details["sweep"]
    assert (
        psw["serialised"] is False and psw["levels"][-1]["effective_parallelism"] > 2.0
    )
    assert psw["levels"][-1]["speedup"] > 2.0
    assert parallel.metrics["peak_aggregate_tps"][0] == pytest.approx(
        psw["peak_aggregate_tps"]
    )
    # the artifact's figures are the ones the pipelines recompute from the raw records
    again = servingstats.sweep_stats(
        parallel.samples["levels"], Slo.from_dict(parallel.details["slo"])
    )
    assert again["levels"][-1]["aggregate_tps"] == pytest.approx(
        psw["levels"][-1]["aggregate_tps"]
    )


def test_concurrency_levels_repeat_to_their_precision():
    """Each level sends batches of level x rounds requests until its E2E CI95 meets the target or a ceiling."""
    test = {
        "kind": "concurrency",
        "levels": [1, 2],
        "rounds": 1,
        "max_tokens": 8,
        "warmup_requests": 0,
        "precision": {
            "target": 0.5,
            "min_repetitions": 3,
            "max_repetitions": 6,
            "max_time_s": 30,
        },
    }
    res, err = _run(
        {
            "server_command": _fault_cmd("--slots", "2", "--delay-ms", "5"),
            "api_model": "ok",
        },
        test,
    )
    assert err is None
    prec = res.details["precision"]
    assert [lv["level"] for lv in prec["levels"]] == [1, 2]
    for lv, samples in zip(prec["levels"], res.samples["levels"]):
        assert (
            lv["n"] == len(samples["requests"]) and 3 <= lv["n"] <= 6 + 1
        )  # a batch may cross the ceiling
        assert lv["stop_reason"] in ("target_met", "max_repetitions", "max_time_s")
        assert samples["batches"] * lv["level"] == lv["n"]
    assert prec["met"] == all(lv["met"] for lv in prec["levels"])
    fixed = dict(test, precision=None)
    res, err = _run(
        {
            "server_command": _fault_cmd("--slots", "2", "--delay-ms", "5"),
            "api_model": "ok",
        },
        fixed,
    )
    assert [len(lv["requests"]) for lv in res.samples["levels"]] == [1, 2]
    assert res.details["precision"]["stop_reason"] == "fixed_count"


def test_worker_killed_takes_its_server_with_it(tmp_path):
    """The server is a grandchild of the runner: SIGKILL of the worker alone must not orphan it."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from runtime.backends.openai_http.backend import OpenAIHttpBackend
        from runtime.backends.openai_http.config import OpenAIHttpSettings
        from core.kinds import parse_test
        b = OpenAIHttpBackend(None, OpenAIHttpSettings(server_command={_fault_cmd()!r}))
        b.load(parse_test({{"kind": "chat"}}))
        print(b.server.pid, flush=True)
        time.sleep(60)
    """)
    worker = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        server_pid = int(worker.stdout.readline())
        assert _pid_alive(server_pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait(5)
        deadline = time.time() + 5
        while _pid_alive(server_pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not _pid_alive(server_pid)
    finally:
        if worker.poll() is None:
            worker.kill()


def test_lost_server_ends_as_failed_artifact_with_log_and_every_request(
    data_env, tiny_gguf
):
    """Through the real runner and worker: the server dies at the 3rd request of a sweep."""
    write_matrix(
        data_env,
        "dies",
        textwrap.dedent(f"""\
        schema_version: 1
        name: dies
        backend: openai_http
        models: [{tiny_gguf}]
        timeout_s: 60
        settings:
          server_command: {json.dumps(_fault_cmd("--die-after", "3"))}
          api_model: ok
          retries: 1
          retry_backoff_s: 0.01
        tests:
          - {{kind: concurrency, levels: [1, 2, 4], rounds: 1, max_tokens: 4, warmup_requests: 0, precision: null}}
    """),
    )
    report = runner.run_matrix("dies")
    assert len(report.failed) == 1 and not report.measured
    doc = artifacts.load(report.failed[0])
    assert doc["status"] == "failed" and "server was lost" in doc["error"]["message"]
    assert "exit code 3" in doc["error"]["message"]
    levels = doc["samples"]["levels"]
    recs = [r for lv in levels for r in lv["requests"]]
    assert [len(lv["requests"]) for lv in levels] == [
        1,
        2,
        4,
    ]  # all 7 planned requests accounted for
    assert recs[0]["ok"] is True
    reasons = [r["error"]["reason"] for r in recs if not r["ok"]]
    assert len(reasons) == 6 and set(reasons) <= {
        "server_lost",
        "dropped",
        "connect_error",
    }
    assert [r["error"]["reason"] for r in levels[2]["requests"]] == ["server_lost"] * 4
    assert "fault-server: dying mid-stream as asked" in doc["log_tail"]
    assert "---- server log" in doc["log_tail"]
    assert doc["details"]["server"]["starts"][0]["stop"]["already_exited"] is True


# -- pages from fixture artifacts -------------------------------------------------------------
def _artifact(
    root: Path,
    *,
    backend: str,
    test: dict,
    samples: dict,
    metrics: dict,
    details: dict,
    settings: dict | None = None,
    status: str = "ok",
    error: dict | None = None,
    key_salt: str = "",
) -> Path:
    """A run artifact written through the real path (runner.build_artifact + artifacts.write)."""
    from runtime import backends
    from runtime.execution import matrix as matrix_mod
    from runtime.hosts import fingerprint as hostinfo
    from runtime.models.registry import ModelRef

    ref = ModelRef(
        name="fixture-model",
        path="/nonexistent/fixture.gguf",
        sha256="ab" * 32,
        size_bytes=1,
        source="path",
        facts={"architecture": "llama", "quantization": "Q4_0", "synthetic": False},
    )
    spec = parse_test(test)
    settings_obj = backends.settings_class(backend).model_validate(settings or {})
    cfg = matrix_mod.Configuration(
        "fixture",
        "data/matrices/fixture.yaml",
        backend,
        ref.name,
        settings_obj,
        {},
        spec,
        60.0,
    )
    host = hostinfo.fingerprint()
    key = runner.config_key(
        backend,
        ref.sha256,
        settings_obj.model_dump(mode="json"),
        spec.to_dict() | {"salt": key_salt},
        host["id"],
        "fixture",
    )
    result = {
        "status": status,
        "metrics": metrics,
        "samples": samples,
        "details": details,
        "load": {"load_time_s": 0.5, "effective_settings": {}},
        "describe": {"build": {"backend": backend}, "model": {}},
    }
    if error:
        result["error"] = error
    outcome = runner.ChildOutcome(
        result, 0 if status == "ok" else 3, None, False, 50 * 2**20, 1.0, "log line\n"
    )
    doc = runner.build_artifact(
        cfg=cfg,
        ref=ref,
        settings=settings_obj,
        host=host,
        key=key,
        backend_version="fixture",
        outcome=outcome,
    )
    return record.write(doc, root)


WORKLOAD = {
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 8,
    "ignore_eos": True,
}


def _chat_records(ttfts, tpot=10.0):
    return [
        {
            "ok": True,
            "ttft_ms": t,
            "tpot_ms": tpot,
            "e2e_ms": t + 7 * tpot,
            "output_tokens": 8,
            "itl_ms": [tpot] * 7,
        }
        for t in ttfts
    ]


@pytest.fixture
def fixture_runs(tmp_path):
    root = tmp_path / "runs"
    # each configuration measured twice (an earlier run first), so that its figure (the fact layer's: the run
    # as the unit) has the spread between its runs. In process: TTFT 101/111/91, then 100/110/90; the server:
    # 202/222/182, then 200/220/180 -> ratio of the figures 2.0, a clear loss
    label = "srv <script>alert(1)</script>"
    for shift in (1, 0):
        _artifact(
            root,
            backend="llama_cpp",
            test={"kind": "chat", "id": "chat-x", "requests": 3, **WORKLOAD},
            samples={"requests": _chat_records([100 + shift, 110 + shift, 90 + shift])},
            metrics={
                "ttft_ms": [100 + shift, 110 + shift, 90 + shift],
                "tpot_ms": [10.0, 10.0, 10.0],
                "e2e_ms": [170 + shift, 180 + shift, 160 + shift],
            },
            details={},
        )
        _artifact(
            root,
            backend="openai_http",
            test={"kind": "chat", "id": "chat-x", "requests": 3, **WORKLOAD},
            settings={"server_label": label},
            samples={
                "requests": _chat_records(
                    [200 + 2 * shift, 220 + 2 * shift, 180 + 2 * shift]
                )
            },
            metrics={
                "ttft_ms": [200 + 2 * shift, 220 + 2 * shift, 180 + 2 * shift],
                "tpot_ms": [10.0, 10.0, 10.0],
                "e2e_ms": [270 + 2 * shift, 290 + 2 * shift, 250 + 2 * shift],
            },
            details={
                "endpoint": label,
                "server": {"log_facts": {"generate_calls": 3, "prefix_match_hits": 2}},
            },
        )
        # serve: warm TTFT 101/113/89, then 100/112/88 -> the same figure as in process (ratio 1.0)
        _artifact(
            root,
            backend="openai_http",
            test={
                "kind": "serve",
                "id": "serve-x",
                "cold_starts": 2,
                "requests": 3,
                **WORKLOAD,
            },
            samples={
                "cold": [],
                "warm": _chat_records([100 + shift, 112 + shift, 88 + shift]),
            },
            metrics={
                "startup_ms": [1000.0, 1200.0],
                "cold_ttft_ms": [300.0, 340.0],
                "cold_e2e_ms": [400.0, 420.0],
                "cold_total_ms": [1400.0, 1620.0],
                "ttft_ms": [100 + shift, 112 + shift, 88 + shift],
                "e2e_ms": [170 + shift, 182 + shift, 158 + shift],
                "failed_requests": [0],
            },
            details={"endpoint": "llama_cpp.server", "cold_is_fresh_server": True},
        )
        time.sleep(
            0.01
        )  # the second measurement of each configuration is the newer one
    slo = Slo(500, 30, 0.9)
    # level 2: twice the clients, the same output rate, generation phases one after another (serialised)
    levels = [
        {
            "level": 1,
            "wall_s": 1.0,
            "requests": [
                _rec(100, 10, first=0, last=90),
                _rec(100, 10, first=100, last=190),
            ],
        },
        {
            "level": 2,
            "wall_s": 2.0,
            "requests": [
                _rec(100, 10, first=0, last=90),
                _rec(600, 10, first=100, last=190),
                _rec(100, 10, first=200, last=290),
                _rec(600, 10, first=300, last=390),
            ],
        },
    ]
    _artifact(
        root,
        backend="openai_http",
        test={
            "kind": "concurrency",
            "id": "conc-x",
            "levels": [1, 2],
            "rounds": 2,
            **WORKLOAD,
        },
        samples={"levels": levels},
        metrics={"peak_aggregate_tps": [20.0], "slo_max_concurrency": [1]},
        details={"endpoint": "llama_cpp.server", "slo": slo.to_dict()},
    )
    _artifact(
        root,
        backend="openai_http",
        test={"kind": "serve", "id": "serve-dead", **WORKLOAD},
        status="failed",
        error={
            "kind": "error",
            "message": "ServingFailed: the server was lost during the serve test (exit code 3)",
        },
        samples={},
        metrics={},
        details={"endpoint": "fault_server.py"},
        key_salt="dead",
    )
    from pipelines.runs import load_runs

    return load_runs(root)


def test_serving_page_renders_tables_chart_and_failures(fixture_runs):
    from pipelines import facts
    from pipelines.site.serving import serving_page

    md = serving_page(fixture_runs)
    assert (
        "## Cold vs warm" in md and "1,100.0 ± 141.4 (n=2)" in md
    )  # startup mean ± sd over the newest run's starts
    # the headline figures are the configuration's (the fact layer's: both runs of serve-x, the run as the unit)
    serve = max(
        (r for r in fixture_runs if r.test_kind == "serve" and r.ok),
        key=lambda r: r.created,
    )
    fx = facts.of(fixture_runs)
    cold, ttft, e2e = (
        fx.figure_of(serve, m) for m in ("cold_total_ms", "ttft_ms", "e2e_ms")
    )
    assert cold.runs == 2 and cold.mean == pytest.approx(
        1510.0
    )  # cold total first response: startup + cold full
    assert ttft.mean == pytest.approx(
        (100.0 * 101.0) ** 0.5
    ) and e2e.mean == pytest.approx((170.0 * 171.0) ** 0.5)
    for f in (cold, ttft, e2e):
        assert f'data-fact="{f.key}" data-v="{f.mean!r}"' in md
    assert "[1,510.0](" in md and "[100.5](" in md and "[170.5](" in md
    # per-request detail stays the newest run's: E2E p50/p95/p99, n; three requests bound no percentile (a 95%
    # bound of p95 needs 59)
    assert (
        "| 170.0 | 180.8<br><small>no bound: needs 59 requests</small> | "
        "181.8<br><small>no bound: needs 299 requests</small> | 3 | 0 |"
    ) in md
    assert "## Concurrency" in md and "almanac-chart" in md and md.count("<figure") == 2
    assert (
        "90% of requests within TTFT &lt;= 500 ms and TPOT &lt;= 30 ms\\): 1." in md
    )  # highest level meeting SLOs
    assert (
        "Serialised: at 2 concurrent clients" in md
    )  # the level-2 generation phases never overlapped
    # clients, requests, ok, errors, t/s, x level 1, effective parallelism, TTFT p50 / p95
    assert "| 2 | 4 | 4 | 0 | 20.00 | 1.00 | 1.00 | 350.0 / 600.0 |" in md
    assert "| 50% | no |" in md and "| 100% | yes |" in md
    assert "## Failed serving runs" in md and "server was lost" in md


def test_comparisons_page_ratio_ci_and_verdicts(fixture_runs):
    from pipelines import facts, serving
    from pipelines.site.serving import comparisons_page

    rows = serving.comparisons(fixture_runs)
    chat_ttft = next(
        r for r in rows if r["kind"] == "chat" and r["metric"] == "ttft_ms"
    )
    assert chat_ttft["ratio"] == pytest.approx(2.0) and chat_ttft["verdict"] == "loss"
    assert (
        chat_ttft["ci95_low"] > 1.0
        and chat_ttft["n_baseline"] == chat_ttft["n_candidate"] == 2
    )  # runs: the unit
    # each side is its configuration's figure, the ratio the fact layer's comparison of the two
    fx = facts.of(fixture_runs)
    fa, fb = (
        fx.figure_of(chat_ttft["baseline_id"], "ttft_ms"),
        fx.figure_of(chat_ttft["candidate_id"], "ttft_ms"),
    )
    assert fa.runs == fb.runs == 2 and chat_ttft[
        "baseline_mean"
    ] == fa.mean == pytest.approx((100.0 * 101.0) ** 0.5)
    assert (
        chat_ttft["candidate_mean"] == fb.mean
        and chat_ttft["ratio"] == fx.compare(fa, fb).ratio
    )
    assert chat_ttft["baseline_requests"] == chat_ttft["candidate_requests"] == 3
    serve_ttft = next(
        r for r in rows if r["kind"] == "serve" and r["metric"] == "ttft_ms"
    )
    assert (
        serve_ttft["ratio"] == pytest.approx(1.0)
        and serve_ttft["verdict"] == "within noise"
    )
    assert {r["metric"] for r in rows} == {"ttft_ms", "tpot_ms", "e2e_ms"}
    md = comparisons_page(fixture_runs)
    assert "2.000×" in md and "almanac-verdict-loss" in md and "within noise" in md
    assert (
        f'data-a="{fa.key}" data-b="{fb.key}" data-verdict="loss"' in md
    )  # marked for the consistency check
    assert f'data-fact="{fa.key}"' in md and f'data-fact="{fb.key}"' in md
    assert (
        "in 2 of its 3 generations" in md
    )  # the server's prefix reuse is said, not hidden
    assert (
        "<script>alert" not in md and "&lt;script&gt;" in md
    )  # artifact text is escaped
    assert "almanac-chart" in md


def test_finding_flags_superlinear_scaling_as_noise():
    from pipelines.serving import finding

    slo = Slo(500, 30, 0.9)
    levels = [
        {"level": 1, "wall_s": 10.0, "requests": [_rec(100, 10, first=0, last=90)]},
        {
            "level": 4,
            "wall_s": 1.0,
            "requests": [
                _rec(100, 10, first=i * 100, last=i * 100 + 90) for i in range(4)
            ],
        },
    ]
    lines = finding({"sweep": servingstats.sweep_stats(levels, slo)})
    assert lines[0].startswith("Serialised: at 4 concurrent clients")
    assert "40.00× that of 1 (linear scaling would be 4×)" in lines[1]
    assert lines[2].startswith("Caution: more than linear scaling")


def test_pages_without_data_say_what_to_run():
    from pipelines.site.serving import comparisons_page, serving_page

    assert "invoke serve.bench" in serving_page([])
    assert "invoke serve.bench" in comparisons_page([])


def test_serving_matrices_send_the_same_request():
    """The Comparisons page pairs runs by request: the two committed matrices must agree."""
    from core.kinds.request import workload_fingerprint
    from runtime.execution import matrix

    http = {
        c.test.name: c.test
        for c in matrix.load(ROOT / "data/matrices/serving.yaml").configurations()
    }
    inproc = {
        c.test.name: c.test
        for c in matrix.load(
            ROOT / "data/matrices/serving-inprocess.yaml"
        ).configurations()
    }
    base = workload_fingerprint(inproc["chat-serving"].to_dict())
    assert workload_fingerprint(http["chat-serving"].to_dict()) == base
    assert workload_fingerprint(http["serve-cold-warm"].to_dict()) == base
    kinds = {t.kind for t in http.values()}
    assert kinds == {"chat", "serve", "concurrency"}
    assert http["concurrency-1-4"].levels == [1, 2, 4]


# -- happy path: the real llama_cpp.server with the embedded model -----------------------------
@pytest.mark.model
def test_real_llama_cpp_server_end_to_end(data_env):
    """Starts python -m llama_cpp.server on loopback with the embedded model through the runner:
    cold/warm and a 1-2 sweep, valid artifacts, the server stopped, the Serving page."""
    req = "    messages: [{role: user, content: Say hello.}]\n    max_tokens: 4\n    ignore_eos: true\n"
    write_matrix(
        data_env,
        "srv",
        "schema_version: 1\nname: srv\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\n"
        "timeout_s: 600\nsettings: {n_threads: 1, n_ctx: 512}\ntests:\n"
        "  - kind: serve\n    id: hello-serve\n"
        + req
        + "    cold_starts: 1\n    requests: 2\n    warmup_requests: 0\n"
        "  - kind: concurrency\n    id: hello-conc\n"
        + req
        + "    levels: [1, 2]\n    rounds: 1\n    warmup_requests: 0\n",
    )
    report = runner.run_matrix("srv")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    count, problems = artifacts.validate_tree(data_env)
    assert count == 2 and not problems
    docs = {d["test"]["kind"]: d for d in (artifacts.load(p) for p in report.measured)}

    serve = docs["serve"]
    assert (
        serve["summary"]["startup_ms"]["n"] == 1
        and serve["summary"]["startup_ms"]["mean"] > 100
    )
    cold = serve["samples"]["cold"][0]
    assert cold["ok"] and 0 < cold["ttft_ms"] < cold["e2e_ms"]
    assert (
        cold["output_tokens"] == 4 and cold["output_tokens_source"] == "chunks"
    )  # llama_cpp.server ignores include_usage
    assert serve["summary"]["e2e_ms"]["n"] == 2
    assert (
        serve["summary"]["cold_total_ms"]["mean"]
        > serve["summary"]["startup_ms"]["mean"]
    )
    cmd = serve["settings"]["effective"]["server_command"]
    assert (
        "runtime.backends.openai_http.llama_cpp_server" in cmd
        and cmd[cmd.index("--interrupt_requests") + 1] == "False"
    )
    assert (
        cmd[cmd.index("--port") + 1] == "{port}"
    )  # a free port per start, recorded in details.server.starts
    assert (
        "---- server log (llama_cpp.server" in serve["log_tail"]
        and "Uvicorn running" in serve["log_tail"]
    )
    # cold + 2 warm generations; the warm ones reused the previous prompt's KV cache (llama_cpp.server)
    assert serve["details"]["server"]["log_facts"] == {
        "generate_calls": 3,
        "prefix_match_hits": 2,
    }
    for doc in docs.values():
        for start in doc["details"]["server"]["starts"]:
            assert start["stop"]["exit"] in (
                "exit code 0",
                "SIGTERM",
            ) and not _pid_alive(start["pid"])

    sweep = docs["concurrency"]["details"]["sweep"]
    assert [lv["ok"] for lv in sweep["levels"]] == [1, 2]
    # llama_cpp.server generates one stream at a time: the finding the page must show
    assert (
        sweep["levels"][1]["effective_parallelism"] < 1.25
        and sweep["serialised"] is True
    )

    from pipelines.runs import load_runs
    from pipelines.site.serving import serving_page

    md = serving_page(load_runs(data_env / "runs"))
    assert "Serialised: at 2 concurrent clients" in md and "## Cold vs warm" in md


def test_a_stored_sweep_of_today_s_shape_is_used_and_an_older_one_recomputed(
    fixture_runs,
):
    """pipelines.serving reads the sweep a run stored when it ran (details.sweep) instead of
    recomputing it from every request on every build, but only when it has every key sweep_stats
    writes today; an artifact from before a field existed is recomputed from its samples."""
    from core.kinds.request_stats import Slo, stored_sweep, sweep_stats
    from pipelines import serving

    (conc,) = [d for d in fixture_runs if d["test"]["kind"] == "concurrency"]
    doc = json.loads(json.dumps(conc.doc))
    fresh = sweep_stats(doc["samples"]["levels"], Slo.from_dict(doc["details"]["slo"]))
    assert stored_sweep(fresh) is fresh
    old = json.loads(json.dumps(fresh))
    for lv in old["levels"]:
        del lv["e2e_ms"]["trend"]  # an artifact measured before the drift test existed
    assert stored_sweep(old) is None
    assert stored_sweep(None) is None and stored_sweep({"levels": []}) is None

    # a loaded artifact is read-only (its record caches what it read): each variant is a document of its own
    (row,) = serving.sweeps(
        [
            record.RunRecord(
                {
                    **doc,
                    "details": {**doc["details"], "sweep": {**fresh, "peak_level": -1}},
                }
            )
        ]
    )
    assert row["sweep"]["peak_level"] == -1  # the stored one
    (row,) = serving.sweeps(
        [
            record.RunRecord(
                {
                    **doc,
                    "details": {**doc["details"], "sweep": {**old, "peak_level": -1}},
                }
            )
        ]
    )
    assert row["sweep"] == fresh  # recomputed from the samples


def test_parallelism_of_a_level_sent_in_batches_is_taken_per_batch():
    """Repeat-to-precision sends a level in batches one after another; each batch's request times
    start from its own origin. A serialised server (one stream at a time in every batch) must read
    1.0, not the overlap of batches laid on top of each other; a sweep stored with the older
    arithmetic is recomputed."""
    from core.kinds.request_stats import (
        SWEEP_STATS_VERSION,
        Slo,
        level_stats,
        stored_sweep,
        sweep_stats,
    )

    def rec(rnd, first, last):
        return {
            "ok": True,
            "round": rnd,
            "ttft_ms": 10.0,
            "tpot_ms": 2.0,
            "e2e_ms": last,
            "output_tokens": 8,
            "first_token_ms": first,
            "last_token_ms": last,
            "itl_ms": [2.0],
        }

    # 2 clients x 1 round per batch, 3 batches: within a batch the second stream starts when the first ends
    batch = lambda b: [rec(b, 0.0, 100.0), rec(b, 100.0, 200.0)]  # noqa: E731
    records = batch(0) + batch(1) + batch(2)
    assert level_stats(records, 0.6, Slo(), 2, batches=3)[
        "effective_parallelism"
    ] == pytest.approx(1.0)
    assert level_stats(records, 0.6, Slo(), 2)[
        "effective_parallelism"
    ] == pytest.approx(3.0)  # overlaid: the old bug
    # two overlapping streams per batch read 2.0 either way
    both = [rec(b, 0.0, 100.0) for b in range(3) for _ in range(2)]
    assert level_stats(both, 0.3, Slo(), 2, batches=3)[
        "effective_parallelism"
    ] == pytest.approx(2.0)
    sw = sweep_stats(
        [{"level": 2, "wall_s": 0.6, "batches": 3, "requests": records}], Slo()
    )
    assert (
        sw["levels"][0]["effective_parallelism"] == pytest.approx(1.0)
        and sw["version"] == SWEEP_STATS_VERSION
    )
    assert (
        stored_sweep({**sw, "version": SWEEP_STATS_VERSION - 1}) is None
        and stored_sweep(sw) is sw
    )


def test_comparisons_name_the_server_and_tell_alike_runs_apart():
    """On the committed measurements: each prefix-reuse note names the server its run recorded (the
    llama-server blocks said "llama_cpp.server's prefix match"), and no two blocks share a heading: runs
    that would (the same server, kind, model and host) are told apart by when they ran and what else differs."""
    import re

    from pipelines.site.markdown import cell, code
    from pipelines.site.serving import comparisons_page
    from tests.support.committed import committed_runs

    runs = committed_runs()
    server_of = {r.id: r.server for r in runs}
    md = comparisons_page(runs)
    blocks = [b for b in re.split(r"(?m)^## ", md)[1:] if "[server run](" in b]
    headings = [b.split("\n", 1)[0] for b in blocks]
    assert len(headings) == len(set(headings)), headings
    noted = {}
    for b in blocks:
        if "Not the same work per request" in b:
            sid = re.search(r"\[server run\]\(runs/run\.md\?id=([^)]+)\)", b).group(1)
            assert (
                f"{cell(server_of[sid])} reused a prompt prefix already in its KV cache"
                in b
            )
            noted[server_of[sid]] = noted.get(server_of[sid], 0) + 1
    assert noted.get("llama-server") and noted.get(
        "llama_cpp.server"
    )  # both servers' notes are checked
    assert "llama_cpp.server's prefix match" not in md

    # On vm-0372cd29 each server's chat and serve tests ran at 07:33, before those kinds gained
    # ``precision``, and again from 09:51 with nothing else changed: one configuration each, whose
    # rerun supersedes the morning's run (core.identity.configuration_key), so one block each, the
    # rerun's, and no heading needs a time to be told apart
    here = [b for b in blocks if f"{code('vm-0372cd29')}" in b.split("\n", 1)[0]]
    assert len(here) == 4 and not [b for b in here if " UTC" in b.split("\n", 1)[0]]
    for b in here:
        sid = re.search(r"\[server run\]\(runs/run\.md\?id=([^)]+)\)", b).group(1)
        assert re.search(r"-20261126T095[1-4]", sid), sid

    # two alike runs that are two configurations (the rerun with another n_ctx) are told apart by
    # when they ran and what else differs
    import copy

    rerun = next(r for r in runs if r.id == "542bfcba6522-20261126T095157.560Z")
    doc = copy.deepcopy(rerun.stored)
    doc["id"] = "542bfcba6522-20261126T110000.000Z"
    doc["created"] = "2026-11-26T11:00:00+00:00"
    doc["key"] = "f" * 64
    doc["settings"]["requested"]["n_ctx"] = 8192
    doc["settings"]["effective"]["n_ctx"] = 8192
    md2 = comparisons_page([*runs, record.RunRecord(doc)])
    pair = [
        b
        for b in re.split(r"(?m)^## ", md2)[1:]
        if b.startswith(
            f"llama\\_cpp.server ({code('chat')}) vs in-process · gemma3-270m-q4\\_k\\_m · "
            f"{code('vm-0372cd29')} · "
        )
    ]
    stamps = sorted(b.split("\n", 1)[0].rsplit(" · ", 1)[1] for b in pair)
    assert stamps == ["2026-11-26 09:51 UTC", "2026-11-26 11:00 UTC"], stamps
    assert all(
        f"Set apart from the other run under this heading by: setting {code('n_ctx')}"
        in b
        for b in pair
    )
    # ... while the serving-faults runs of the evening, on the VM without AMX, have no in-process run of their
    # own machine to be compared with (they were compared with the other VM's while both were one host)
    assert not [b for b in blocks if f"{code('vm-fafe2774')}" in b.split("\n", 1)[0]]


def test_set_apart_names_each_differing_facet():
    import copy

    from pipelines import serving
    from tests.support.committed import committed_runs

    run = next(
        r for r in committed_runs() if r.test_kind == "chat" and not r.in_process
    )
    doc = copy.deepcopy(run.stored)
    doc["id"] = "x" + doc["id"][1:]
    doc["settings"]["requested"]["n_ctx"] = 2 * (run.effective.get("n_ctx") or 1024)
    doc["settings"]["effective"]["n_ctx"] = doc["settings"]["requested"]["n_ctx"]
    doc["test"]["id"] = "another-id"
    other = record.RunRecord(doc)
    apart = serving.set_apart([run, other])
    assert apart[run.id] == [
        (("setting", "n_ctx"), run.effective.get("n_ctx"), [other.effective["n_ctx"]]),
        (("test", "id"), run.test["id"], ["another-id"]),
    ]
    assert apart[other.id][1] == (("test", "id"), "another-id", [run.test["id"]])
    assert serving.set_apart(
        [run, record.RunRecord({**run.stored, "id": "y" + run.id[1:]})]
    ) == {run.id: [], "y" + run.id[1:]: []}
