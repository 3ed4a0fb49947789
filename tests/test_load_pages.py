"""The Serving page's capacity section, the probe table and the Roles page's serving requirement,
from artifacts written through the real path (runner.build_artifact): figures recomputed from the
raw records, answers with their intervals, SLO lines on the chart, artifact text escaped."""

from __future__ import annotations

import pytest

from core.kinds import load_stats
from core.kinds.workload import Slo
from tests.test_serving import _artifact

SLO = {"percentile": 90, "ttft_ms": 500, "tpot_ms": 50, "confidence": 0.95}


def _records(n, ttft, tpot=20.0, fail_every=0, rate=None):
    out = []
    for i in range(n):
        ok = not (fail_every and i % fail_every == 0)
        t = i * (1000.0 / rate) if rate else i * 10.0
        out.append(
            {
                "ok": ok,
                "error": None
                if ok
                else {"reason": "http_503", "message": "HTTP 503: busy"},
                "ttft_ms": ttft + (i % 7) if ok else None,
                "tpot_ms": tpot if ok else None,
                "e2e_ms": ttft + 31 * tpot if ok else None,
                "output_tokens": 32 if ok else None,
                "itl_ms": [],
                "prompt_tokens": 140,
                "scheduled_ms": t,
                "start_ms": t,
                "end_ms": t + 900,
                "queue_ms": 0.0,
                "dispatch_lag_ms": 0.5,
                "attempts": 1,
                "cached_tokens": 4 if ok else None,
                "client_parse_ms": 0.3,
                "elapsed_ms": 10.0,
            }
        )
    return out


@pytest.fixture
def load_runs(tmp_path):
    return write_load_runs(tmp_path / "runs")


def write_load_runs(root):
    """A swept load test, a capacity search and a probe, written through the real path into ``root``."""
    label = "srv <b>x</b>"
    levels = [
        {
            "level": 1.0,
            "wall_s": 40.0,
            "requests": _records(40, 100.0, rate=1.0),
            "client": {"cpu_s": 2.0},
        },
        {"level": 2.0, "wall_s": 20.0, "requests": _records(40, 200.0, rate=2.0)},
        {"level": 3.0, "wall_s": 14.0, "requests": _records(40, 900.0, rate=3.0)},
    ]
    test = {
        "kind": "load",
        "id": "sweep-x",
        "profile": "poisson",
        "levels": [1.0, 2.0, 3.0],
        "requests": 40,
        "slo": SLO,
    }
    _artifact(
        root,
        backend="openai_http",
        test=test,
        settings={"server_label": label},
        samples={"levels": levels},
        metrics={"slo_max_level": [2.0]},
        details={"endpoint": label},
    )
    # a p90 bound at the look confidence (0.975) needs 35 requests: 30 would leave these unresolved
    cap_levels = [
        {
            "level": 1.0,
            "wall_s": 30.0,
            "requests": _records(60, 100.0),
            "stop_reason": "verdict_meets",
        },
        {
            "level": 2.0,
            "wall_s": 20.0,
            "requests": _records(60, 150.0),
            "stop_reason": "verdict_meets",
        },
        {
            "level": 4.0,
            "wall_s": 10.0,
            "requests": _records(30, 100.0, fail_every=3),
            "stop_reason": "verdict_misses",
        },
        {
            "level": 3.0,
            "wall_s": 12.0,
            "requests": _records(30, 800.0),
            "stop_reason": "verdict_misses",
        },
    ]
    ctest = {
        "kind": "capacity",
        "id": "cap-x",
        "profile": "concurrent",
        "levels": [1, 2, 3, 4, 5, 6],
        "max_requests": 60,
        "check_every": 30,
        "min_requests": 30,
        "slo": SLO,
    }
    search = {
        "grid": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "visits": [
            {
                "level": lv["level"],
                "index": i,
                "why": "climb",
                "verdict": "?",
                "boundary": None,
                "requests": 30,
                "stop_reason": lv["stop_reason"],
                "seconds": 1.0,
            }
            for i, lv in enumerate(cap_levels)
        ],
        "stopped": "misses at 4",
        "requests_sent": 180,
        "exhaustive_requests": 360,
        "cost_ratio": 1 / 3,
        "looks": 2,
        "look_confidence": 0.975,
        "confidence": 0.95,
    }
    _artifact(
        root,
        backend="openai_http",
        test=ctest,
        samples={"levels": cap_levels},
        metrics={"capacity": [2.0]},
        details={"endpoint": "llama-server", "search": search},
        key_salt="cap",
    )
    cases = {
        "chat": {
            "case": "chat",
            "description": "plain streamed chat",
            "tries": [],
            "n": 3,
            "succeeded": 3,
            "success_rate": 1.0,
            "latency_ms_median": 420.0,
            "reasons": [],
        },
        "tool_call": {
            "case": "tool_call",
            "description": "tool call, first turn",
            "tries": [],
            "n": 3,
            "succeeded": 0,
            "success_rate": 0.0,
            "latency_ms_median": 30.0,
            "reasons": [
                "HTTP 500: tools param requires --jinja flag (server_error) <i>"
            ],
        },
    }
    _artifact(
        root,
        backend="openai_http",
        test={"kind": "probe", "id": "probe"},
        samples={"cases": cases},
        metrics={"probe_success_rate": [1.0, 0.0]},
        details={"endpoint": "llama-server"},
        key_salt="probe",
    )
    from pipelines.runs import load_runs as load

    return load(root)


def test_capacity_results_recomputed_from_records(load_runs):
    from pipelines import serving

    rows = {r["kind"]: r for r in serving.load_results(load_runs)}
    sweep = rows["load"]
    assert [lv["slo"]["verdict"] for lv in sweep["stats"]["levels"]] == [
        "meets",
        "meets",
        "misses",
    ]
    assert {k: sweep["answer"][k] for k in ("answer", "low", "high")} == pytest.approx(
        {"answer": 2.0, "low": 2.0, "high": 2.0}
    )
    assert (
        sweep["answer_text"] == "2 req/s [2, 2] at p90 TTFT ≤ 500 ms, p90 TPOT ≤ 50 ms"
    )
    cap = rows["capacity"]
    # level 4 misses (a third failed), level 3 misses clearly (TTFT 800+, beyond 1.5x the limit: a
    # verdict one run decides): the interval ends below 3
    assert (cap["answer"]["low"], cap["answer"]["high"], cap["answer"]["answer"]) == (
        2.0,
        2.0,
        2.0,
    )
    assert cap["stats"]["levels"][-1]["error_reasons"] == {"http_503": 10}
    chart = serving.throughput_latency_rows([sweep])
    assert {r["metric"] for r in chart} == {"TTFT", "TPOT"} and sum(
        r["answer"] for r in chart
    ) == 2
    assert all(r["limit"] in (500, 50) for r in chart)


def test_serving_page_puts_the_answer_first(load_runs):
    from pipelines.site.serving import serving_page

    md = serving_page(load_runs)
    assert (
        md.index("## Capacity at SLO")
        < md.index("## Endpoint probe")
        < md.index("## Cold vs warm")
    )
    assert (
        "**2 users \\[2, 2\\] at p90 TTFT ≤ 500 ms, p90 TPOT ≤ 50 ms**" in md
    )  # (brackets escaped for Markdown)
    assert "| 180 | 360 |" in md  # the search's requests beside the exhaustive sweep's
    assert md.count("almanac-chart") == 2  # TTFT and TPOT against throughput
    assert (
        "SLO p90 TTFT \\u2264 500 ms" in md
    )  # the limit drawn on the chart (JSON-escaped)
    assert (
        "✓ 3/3, 420 ms" in md
        and "✗ 0/3" in md
        and "tools param requires --jinja flag" in md
    )
    assert "<b>x</b>" not in md and "<i>" not in md  # artifact text escaped
    assert (
        "http\\_503: 10" in md
        and "| **misses** | ∞ (failed requests) [∞, —] vs 500 |" in md
    )


def test_roles_check_users_at_slo_against_the_capacity_interval(load_runs):
    from pipelines import roles
    from pipelines.serving import serving_index

    idx = serving_index(load_runs)
    (key,) = {k for k in idx if idx[k]["capacity"]}
    host, sha = key
    (cfg,) = [
        c for c in roles.join([], load_runs).values() if c.model_sha256 == sha
    ]  # the server's own configuration

    def ev(**kw):
        return roles._serving_evidence(roles.ServingReq(**kw), cfg, host, idx)

    assert ev(users=2)[0].ok is True
    too_many = ev(users=3)[0]
    assert (
        too_many.ok is False
        and too_many.reason == "too slow"
        and "needs 3" in too_many.message
    )
    (chat, tool) = ev(probes=["chat", "tool_call"])
    assert chat.ok is True and tool.ok is False and tool.reason == "missing capability"
    assert ev(rate=1)[0].reason in ("no data", None) or ev(rate=1)[0].ok is not None
    with pytest.raises(ValueError, match="unknown probe case"):
        roles.ServingReq(probes=["tools"])


def test_stored_summary_is_used_only_when_current():
    slo = Slo(ttft_ms=500)
    s = load_stats.sweep_summary(
        [{"level": 1.0, "wall_s": 1.0, "requests": _records(10, 10.0)}],
        slo,
        "concurrent",
    )
    assert load_stats.stored_summary(s) is s
    assert (
        load_stats.stored_summary({**s, "version": 0}) is None
        and load_stats.stored_summary(None) is None
    )
