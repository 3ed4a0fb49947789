"""Server dialects of the OpenAI API, from recorded responses (tests/fixtures/dialects/, each file
citing where it was recorded): every one is replayed by a real HTTP server on loopback
(tests/fault_server.py --replay) and read by the real client, streamed or whole."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from runtime.backends.openai_http import client as http
from runtime.backends.openai_http import dialects
from runtime.backends.openai_http.server import free_port

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "dialects"
FILES = sorted(p.stem for p in FIXTURES.glob("*.json"))


@pytest.fixture(scope="module")
def replay_url():
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "fault_server.py"),
            "--port",
            str(port),
            "--replay",
            str(FIXTURES),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                if (
                    httpx.get(
                        f"http://127.0.0.1:{port}/v1/models", timeout=1
                    ).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.kill()
        proc.wait()


def _load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def test_every_fixture_names_its_source():
    assert len(FILES) >= 9
    for name in FILES:
        doc = _load(name)
        assert doc["source"] and doc["server"] and doc["expect"], name
        assert sum(k in doc for k in ("raw", "events", "body")) == 1, name
        assert name in (FIXTURES / "README.md").read_text(), (
            f"{name} is not listed in the README"
        )


async def _send(url: str, name: str, stream: bool):
    policy = http.RequestPolicy(request_timeout_s=10, retries=0, retry_backoff_s=0)
    async with http.make_client(
        connect_timeout_s=5, read_timeout_s=5, max_connections=1
    ) as c:
        body = {
            "model": f"replay:{name}",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
        }
        if stream:
            return await http.stream_chat(
                c,
                f"{url}/chat/completions",
                body,
                policy,
                origin_ns=time.perf_counter_ns(),
            ), None
        return await http.post_json(
            c, f"{url}/chat/completions", body, policy, origin_ns=time.perf_counter_ns()
        )


@pytest.mark.parametrize("name", FILES)
def test_recorded_response_is_read_as_its_server_meant(replay_url, name):
    doc = _load(name)
    exp = doc["expect"]
    whole = "body" in doc and doc.get("status", 200) < 400
    rec, answer = asyncio.run(_send(replay_url, name, stream=not whole))
    assert rec["ok"] is exp["ok"], rec.get("error")
    if not exp["ok"]:
        assert rec["error"]["reason"] == exp["reason"]
        assert exp["message_contains"] in rec["error"]["message"]
        assert (int(exp["reason"].split("_")[1]) in http.RETRYABLE_STATUS) is exp[
            "retryable"
        ]
        return
    if whole:
        msg = answer["choices"][0]["message"]
        calls = dialects.tool_calls(msg)
        assert [{"name": c["name"], "arguments": c["arguments"]} for c in calls] == exp[
            "tool_calls"
        ]
        assert answer["choices"][0]["finish_reason"] == exp["finish_reason"]
        return
    for key in (
        "text",
        "output_tokens",
        "output_tokens_source",
        "finish_reason",
        "chunks",
        "prompt_tokens",
    ):
        if key in exp:
            assert rec[key] == exp[key], key
    assert rec.get("cached_tokens") == exp.get("cached_tokens")
    if exp.get("cached_tokens_source"):
        assert rec["cached_tokens_source"] == exp["cached_tokens_source"]
    if "server_timings_refused" in rec:
        # a replay answers in milliseconds what the recorded server took seconds for: its own timings
        # then exceed the client's clock and are left out (core.plausibility.timings_problem)
        assert "of a request the client saw take" in rec["server_timings_refused"]
    else:
        for k, v in (exp.get("server_timings") or {}).items():
            assert rec["server_timings"][k] == v
    assert len(rec["chunk_ms"]) == rec["chunks"] and rec["ttft_ms"] == pytest.approx(
        rec["chunk_ms"][0], abs=0.001
    )


def test_error_message_of_every_shape():
    assert (
        dialects.error_message(
            '{"error": "Model is overloaded", "error_type": "overloaded"}'
        )
        == "Model is overloaded (overloaded)"
    )
    assert (
        dialects.error_message(
            {"object": "error", "message": {"detail": 1}, "type": "x"}
        )
        == '{"detail": 1} (x)'
    )
    assert dialects.error_message(
        '{"detail": [{"loc": ["body"], "msg": "field required"}]}'
    ).startswith('[{"loc"')
    assert (
        dialects.error_message("not json") is None
        and dialects.error_message("[1, 2]") is None
    )
    # tool-call arguments as an object (not a JSON string) and as broken JSON
    calls = dialects.tool_calls(
        {
            "tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}},
                {"function": {"name": "g", "arguments": "{oops"}},
            ]
        }
    )
    assert calls[0]["arguments"] == {"x": 1} and calls[0]["parse_error"] is None
    assert calls[1]["arguments"] is None and "not JSON" in calls[1]["parse_error"]
