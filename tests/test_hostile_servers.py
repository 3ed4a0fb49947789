"""Servers that lie, flood and drip (issue 34, the server half): a real hostile server on loopback
(tests/hostile/liar_server.py) against the real HTTP backend, client, transport and identification.

What a server reports is checked against what was asked and seen before it becomes a measurement
(core.plausibility): an implausible answer is a failed request with the reason, and the run counts
them; every read from a server has a size and a time bound; NaN from a server never loses a run."""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import plausibility
from core.kinds import parse_test
from runtime.backends.openai_http import client as http
from runtime.backends.openai_http import detect
from runtime.backends.openai_http.backend import (
    OpenAIHttpBackend,
    ServingFailed,
    _model_ids,
)
from runtime.backends.openai_http.config import OpenAIHttpSettings
from runtime.backends.openai_http.server import free_port
from tests.conftest import ROOT

LIAR = str(ROOT / "tests" / "hostile" / "liar_server.py")


def start_liar(*args: str) -> tuple[subprocess.Popen, str]:
    """The hostile server on a free loopback port with ``args``; (process, base URL)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, LIAR, "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("liar server did not start")


@pytest.fixture(scope="module")
def liar():
    proc, url = start_liar("--flood", "200000")
    yield url
    proc.kill()
    proc.wait()


def _chat(url: str, mode: str, requests: int = 3):
    """(records, details, error message or None) of a chat test of ``requests`` against ``mode``."""
    b = OpenAIHttpBackend(
        None,
        OpenAIHttpSettings(
            base_url=url, api_model=mode, retries=0, request_timeout_s=60
        ),
    )
    t = parse_test(
        {
            "kind": "chat",
            "id": "c",
            "messages": [{"role": "user", "content": "hi there"}],
            "max_tokens": 4,
            "requests": requests,
            "warmup_requests": 0,
        }
    )
    try:
        b.load(t)
        try:
            res = b.run(t)
            return res.samples["requests"], res.details, None, res
        except ServingFailed as exc:
            return (
                exc.partial.samples["requests"],
                exc.partial.details,
                str(exc),
                exc.partial,
            )
    finally:
        b.close()


@pytest.mark.integration
def test_an_honest_answer_is_a_measurement(liar):
    recs, details, err, _ = _chat(liar, "honest")
    assert err is None and all(r["ok"] for r in recs)
    assert [r["output_tokens"] for r in recs] == [4, 4, 4]
    assert details["implausible_requests"] == 0


@pytest.mark.integration
@pytest.mark.parametrize(
    "mode, said",
    [
        ("usage-1e15", "reports about 10^15 output tokens"),
        ("usage-1e400", "about 10^400 output tokens"),
        ("cached-1e6", "1,000,000 cached tokens of a 5-token prompt"),
        ("prompt-1e12", "1,000,000,000,000 prompt tokens"),
    ],
)
def test_a_lying_count_is_a_failed_request_with_the_reason(liar, mode, said):
    recs, details, err, partial = _chat(liar, mode)
    assert err is not None and "none of the 3 requests succeeded (implausible)" in err
    assert {r["error"]["reason"] for r in recs} == {"implausible"}
    assert said in recs[0]["error"]["message"], recs[0]["error"]["message"]
    assert details["implausible_requests"] == 3
    # nothing of the lie is kept as a measurement; the record stores as JSON
    assert all(r["output_tokens"] is None and "cached_tokens" not in r for r in recs)
    assert partial.metrics == {} or not partial.metrics.get("output_tokens")
    json.dumps(recs, allow_nan=False)


@pytest.mark.integration
def test_a_chunk_flood_stops_at_the_bound_and_is_refused(liar):
    t0 = time.monotonic()
    recs, _details, _err, _ = _chat(liar, "chunk-flood", requests=1)
    assert time.monotonic() - t0 < 20
    r = recs[0]
    assert (
        r["error"]["reason"] == "implausible"
        and "content chunks for max_tokens 4" in r["error"]["message"]
    )
    assert len(r["chunk_ms"]) <= plausibility.chunk_limit(
        4
    )  # the per-request list stays bounded
    assert len(json.dumps(recs)) < 20_000


@pytest.mark.integration
def test_timings_beyond_the_clients_clock_are_left_out(liar):
    recs, _details, err, _ = _chat(liar, "timings-future")
    assert err is None and all(r["ok"] for r in recs)
    assert "server_timings" not in recs[0]
    assert (
        "the server's timings add up to 1,000,000,001.0 ms"
        in recs[0]["server_timings_refused"]
    )


@pytest.mark.integration
def test_nan_in_the_servers_timings_does_not_lose_the_run(liar):
    recs, _details, err, _ = _chat(liar, "timings-nan")
    assert err is None and all(r["ok"] for r in recs)
    assert recs[0]["server_timings"] == {"cache_n": 0, "prompt_n": 5, "predicted_n": 4}
    json.dumps(recs, allow_nan=False)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _transport(url: str):
    b = OpenAIHttpBackend(
        None, OpenAIHttpSettings(base_url=url, api_model="honest", retries=0)
    )
    return b.transport()


@pytest.mark.integration
def test_metrics_nan_and_infinity_are_left_out():
    proc, url = start_liar("--metrics", "nan")
    try:
        tr = _transport(url)

        async def go():
            async with tr.client(1) as c:
                return await tr.metrics(c)

        got = asyncio.run(go())
        assert got == {"llamacpp:ok": 2.0}
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.integration
def test_endless_metrics_tokenize_and_whole_answers_are_read_within_bounds():
    proc, url = start_liar("--metrics", "endless", "--tokenize", "endless")
    try:
        tr = _transport(url)
        before = _peak_mib()

        async def go():
            async with tr.client(1) as c:
                m = await tr.metrics(c)
                toks = await tr.tokenize(c, "hello world")
                rec, answer = await tr.request(
                    c,
                    {
                        "model": "huge-answer",
                        "messages": [{"role": "user", "content": "x"}],
                        "max_tokens": 4,
                    },
                )
                return m, toks, rec, answer

        t0 = time.monotonic()
        m, toks, rec, answer = asyncio.run(go())
        assert time.monotonic() - t0 < 30
        assert m is None and toks is None and answer is None
        assert rec["error"]["reason"] == "too_large"
        assert (
            _peak_mib() - before < 200
        )  # bounded: 16 MiB for an answer, 4 MiB for the others
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.integration
def test_a_whole_answer_that_lies_is_refused(liar):
    tr = _transport(liar)

    async def go():
        async with tr.client(1) as c:
            return await http.post_json(
                c,
                f"{liar}/chat/completions",
                {
                    "model": "usage-1e15",
                    "stream": False,
                    "messages": [],
                    "max_tokens": 4,
                },
                tr.policy,
                origin_ns=time.perf_counter_ns(),
            )

    rec, answer = asyncio.run(go())
    assert rec["error"]["reason"] == "implausible" and answer is None


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["endless", "many"])
def test_the_health_checks_listing_is_bounded(mode):
    proc, url = start_liar("--models", mode)
    try:
        b = OpenAIHttpBackend(
            None, OpenAIHttpSettings(base_url=url, api_model="honest")
        )
        t0 = time.monotonic()
        b._probe()
        assert time.monotonic() - t0 < 20
        assert b.served_models is None or len(b.served_models) <= 50
        assert len(json.dumps(b._details(None))) < 50_000
    finally:
        proc.kill()
        proc.wait()


def test_model_ids_of_a_deep_or_odd_listing():
    assert _model_ids(b"[" * 100_000 + b"]" * 100_000) is None
    assert _model_ids(b'{"data": "x"}') is None
    assert _model_ids(None) is None


@pytest.mark.integration
def test_identification_keeps_its_timeout_against_a_dripping_server():
    proc, url = start_liar("--models", "drip")
    try:
        t0 = time.monotonic()
        with pytest.raises(detect.Unreachable, match="still arriving"):
            detect.probe(url, "liar", timeout_s=3)
        assert time.monotonic() - t0 < 6
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    "mode, outcome",
    [
        ("nested", "nested too deeply"),
        ("big", "larger than 2 MiB"),
        ("superscript", None),
        ("digits", None),
        ("markup", "does not serve 'liar'"),
    ],
)
def test_malformed_model_listings_end_in_a_clear_outcome(mode, outcome):
    proc, url = start_liar("--models", mode)
    try:
        if outcome is None:
            served = detect.probe(url, "liar", timeout_s=5)
            assert served.size_bytes is None and served.n_params is None
            assert served.context_length is None
            json.dumps(served.to_dict(), allow_nan=False)
        else:
            with pytest.raises((detect.Unreachable, detect.NotServed), match=outcome):
                detect.probe(url, "liar", timeout_s=5)
    finally:
        proc.kill()
        proc.wait()


def test_stored_lies_fail_validation():
    ok = {
        "artifact": "run",
        "test": {"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
        "samples": {
            "requests": [
                {"ok": True, "output_tokens": 4, "chunks": 4, "prompt_tokens": 5}
            ]
        },
        "summary": {"decode_tps": {"mean": 30.0}},
    }
    assert plausibility.artifact_problems(ok) == []
    lie = json.loads(json.dumps(ok))
    lie["samples"]["requests"][0]["output_tokens"] = 10**15
    assert plausibility.artifact_problems(lie) == [
        (
            "samples.requests[0]",
            "the server reports about 10^15 output tokens (no request holds more than 1e+09)",
        )
    ]
    lie = json.loads(json.dumps(ok))
    lie["samples"]["requests"][0]["cached_tokens"] = 10**6
    assert (
        "cached tokens of a 5-token prompt" in plausibility.artifact_problems(lie)[0][1]
    )
    lie = json.loads(json.dumps(ok))
    lie["summary"]["decode_tps"]["mean"] = 2.5e16
    assert plausibility.artifact_problems(lie)[0][0] == "summary.decode_tps.mean"


def test_an_implausible_record_stays_a_json_record():
    rec = http.refuse_implausible(
        {
            "ok": True,
            "output_tokens": 10**400,
            "chunks": 4,
            "e2e_ms": 1.0,
            "ttft_ms": 0.5,
            "itl_ms": [0.1],
        },
        {"max_tokens": 4},
    )
    assert rec["ok"] is False and rec["output_tokens"] is None and rec["itl_ms"] == []
    json.dumps(rec, allow_nan=False)


def test_a_decode_rate_far_above_the_hosts_bandwidth_bound_fails_validation(
    session_data, tmp_path
):
    """A forged rate (x100) on a host whose memory bandwidth was measured: invoke validate names it;
    the committed runs (at most 0.7 of their bound) pass."""
    import shutil

    from pipelines import roofline, runs
    from pipelines.plausible_rates import beyond_bound

    data = tmp_path / "data"
    shutil.copytree(session_data, data)
    assert beyond_bound(data) == []
    rows = [
        r
        for r in roofline.roofline_rows(runs.load_runs(data), roofline.load_hosts(data))
        if r.get("efficiency") and r["metric"] == "tokens_per_second"
    ]
    row = rows[0]
    path = next(r.path for r in runs.load_runs(data) if r.id == row["id"])
    p = Path(path) if Path(path).is_absolute() else ROOT / path
    doc = json.loads(p.read_text())
    for k in ("mean", "median", "min", "max", "ci95_low", "ci95_high"):
        if isinstance(doc["summary"]["tokens_per_second"].get(k), (int, float)):
            doc["summary"]["tokens_per_second"][k] *= 100
    p.write_text(json.dumps(doc, indent=1, sort_keys=True))
    (line,) = beyond_bound(data)
    assert p.name in line and "summary.tokens_per_second.mean: implausible" in line
    assert "times the decode bound of host" in line


@pytest.mark.integration
@pytest.mark.parametrize(
    "mode, said",
    [
        ("usage-1e15", "implausible: the server reports about 10^15 output tokens"),
        ("huge-answer", "the answer grew past"),
        ("drip", "still arriving"),
        ("honest", None),
    ],
)
def test_a_completion_is_bounded_and_checked(liar, mode, said):
    from runtime.backends.openai_http import completions

    def go():
        return completions.complete(
            liar,
            mode,
            "Once upon a time",
            max_tokens=4,
            stop=[],
            temperature=0.0,
            seed=0,
            connect_timeout_s=5,
            request_timeout_s=3,
        )

    t0 = time.monotonic()
    if said is None:
        assert go()["output_tokens"] == 2
        return
    with pytest.raises(completions.CompletionError, match=said.replace("^", r"\^")):
        go()
    assert time.monotonic() - t0 < 10
