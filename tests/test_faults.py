"""Injected transient errors (runtime.backends.openai_http.faults) and what the what-if page makes
of them: a real loopback proxy in front of a real (scripted) server, the real client with retries."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from core.kinds import parse_test
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.backends.openai_http.config import OpenAIHttpSettings
from runtime.backends.openai_http.faults import FaultProxy
from runtime.backends.openai_http.server import free_port
from tests.test_serving import FAULT, _wait_healthy

CHAT = {
    "kind": "chat",
    "id": "c",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 4,
    "requests": 6,
    "warmup_requests": 0,
}


@pytest.fixture(scope="module")
def upstream():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, FAULT, "--port", str(port), "--mode", "ok", "--delay-ms", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.kill()
        proc.wait()


def _run(upstream: str, **settings):
    b = OpenAIHttpBackend(
        None, OpenAIHttpSettings(base_url=upstream, api_model="ok", **settings)
    )
    t = parse_test(CHAT)
    try:
        b.load(t)
        return b.run(t)
    finally:
        b.close()


def test_proxy_fails_every_kth_attempt_and_streams_the_rest(upstream):
    with FaultProxy(upstream, every=2) as p:
        body = {
            "model": "ok",
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 3,
            "stream": True,
        }
        codes = []
        texts = []
        for _ in range(4):
            r = httpx.post(f"{p.base_url}/chat/completions", json=body, timeout=10)
            codes.append(r.status_code)
            texts.append(r.text)
        assert codes == [200, 503, 200, 503]
        assert "[DONE]" in texts[0] and "injected fault" in texts[1]
        assert p.facts()["injected"] == 2 and p.facts()["forwarded"] == 2
        assert (
            httpx.get(f"{p.base_url}/models", timeout=5).status_code == 200
        )  # other paths pass through


def test_without_retry_every_third_request_fails(upstream):
    res = _run(upstream, fault_every=3, retries=0)
    reqs = res.samples["requests"]
    assert [r["ok"] for r in reqs] == [True, True, False, True, True, False]
    assert all(
        (r["error"] or {}).get("reason") == "http_503" for r in reqs if not r["ok"]
    )
    assert res.details["faults"]["injected"] == 2


def test_with_one_retry_every_request_succeeds_and_records_its_retry(upstream):
    res = _run(upstream, fault_every=3, retries=1, retry_backoff_s=0.05)
    reqs = res.samples["requests"]
    assert all(r["ok"] for r in reqs)
    retried = [r for r in reqs if r["attempts"] > 1]
    assert len(retried) == 2 and all(
        r["retries"][0]["reason"] == "http_503" for r in retried
    )
    assert res.details["faults"] == {
        **res.details["faults"],
        "attempts": 8,
        "injected": 2,
    }


def test_fault_settings_stay_out_of_other_runs_keys():
    s = OpenAIHttpSettings()
    assert "fault_every" not in s.recorded() and "fault_status" not in s.recorded()
    assert OpenAIHttpSettings(fault_every=4).recorded()["fault_every"] == 4
