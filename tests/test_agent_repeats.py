"""Agent sessions and repeats (issue 31, items 2 and 5) without a model: the streamed tool-call pieces
joined, the session's history after each turn, repeats pooled with their seeds, each repeat's cold or
warm verdict, the page's lines; end to end against our fault server on loopback (real HTTP: it has a
word tokenizer, so prompt lengths are exact, and no /slots, so an erase says it cannot). The real
llama-server with the embedded model is in test_agent_sessions_model.py."""

from __future__ import annotations

from typing import Any

import pytest

from core.kinds import load_stats
from pipelines.site import traffic as site_traffic
from runtime.backends.openai_http import client as http
from runtime.load import agent, repeats
from tests.test_traffic import _level


def _chunk(calls):
    return {"choices": [{"delta": {"tool_calls": calls}}]}


def test_streamed_tool_call_pieces_are_joined_and_bounded():
    acc: dict = {}
    http.tool_call_pieces(
        _chunk(
            [
                {
                    "index": 0,
                    "id": "c1",
                    "function": {"name": "read_", "arguments": '{"pa'},
                }
            ]
        ),
        acc,
    )
    http.tool_call_pieces(
        _chunk([{"index": 0, "function": {"name": "file", "arguments": 'th": "a"}'}}]),
        acc,
    )
    http.tool_call_pieces(
        _chunk([{"id": "c2", "function": {"name": "run_tests"}}]), acc
    )  # no index: a new call
    http.tool_call_pieces(
        _chunk([{"function": {"arguments": "{}"}}]), acc
    )  # no index, no id: the last call
    assert acc["tool_calls"] == [
        {"id": "c1", "name": "read_file", "arguments": '{"path": "a"}'},
        {"id": "c2", "name": "run_tests", "arguments": "{}"},
    ]
    # hostile shapes are skipped, never raised; an index beyond the bound is dropped
    for bad in (
        {"choices": "x"},
        _chunk("x"),
        _chunk([1, {"index": True}, {"index": 10**9}]),
    ):
        http.tool_call_pieces(bad, acc)
    assert len(acc["tool_calls"]) == 2
    http.tool_call_pieces(
        _chunk([{"index": 0, "function": {"arguments": "x" * 10_000}}]), acc
    )
    assert len(acc["tool_calls"][0]["arguments"]) == http.MAX_TOOL_TEXT


def test_a_session_turn_carries_the_model_s_call_or_a_scripted_one():
    sent = agent.first_messages("fix the bug")
    hist, source = agent.next_history(
        [], sent, {"finish_reason": "length"}, "I will look.", "0.1", 0
    )
    assert source == "scripted"
    call = hist[-1]["tool_calls"][0]
    assert hist[-1]["content"] == "I will look." and call["id"] == "call_0.1_0"
    assert call["function"]["name"] == "search_code"
    # the next turn's tool result answers that call
    nxt = agent.with_call_id(agent.tool_result("3 matches"), hist)
    assert nxt == [
        {"role": "tool", "tool_call_id": "call_0.1_0", "content": "3 matches"}
    ]
    own = {
        "finish_reason": "tool_calls",
        "tool_calls": [{"id": "m1", "name": "run_tests", "arguments": "{}"}],
    }
    hist2, source = agent.next_history(hist, nxt, own, "", "0.1", 1)
    assert source == "model" and hist2[-1]["tool_calls"][0]["id"] == "m1"
    assert [m["role"] for m in hist2] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_repeats_are_pooled_with_their_seeds_and_times_shifted():
    parts = [
        {
            "requests": [{"start_ms": 0.0, "end_ms": 10.0}],
            "wall_s": 1.0,
            "planned": 1,
            "stop_reason": "all_sent",
        },
        {
            "requests": [{"start_ms": 5.0, "end_ms": 15.0}],
            "wall_s": 2.0,
            "planned": 1,
            "stop_reason": "all_sent",
        },
    ]
    infos = [{"workload_seed": 0}, {"workload_seed": 1}]
    lv = repeats.join(parts, infos)
    assert [r["start_ms"] for r in lv["requests"]] == [0.0, 1005.0]
    assert [r["repeat"] for r in lv["requests"]] == [0, 1]
    assert lv["wall_s"] == 3.0 and lv["planned"] == 2
    assert [r["workload_seed"] for r in lv["repeats"]] == [0, 1]
    # one repeat without a reset is the level as it always was: nothing added
    assert repeats.join(parts[:1], infos[:1]) is parts[0]


def _recs(rep, cached, n=3, **extra):
    return [
        {
            "ok": True,
            "repeat": rep,
            "prompt_tokens": 100,
            "cached_tokens": cached,
            "cached_tokens_source": "usage",
        }
        | extra
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    ("second", "intended", "flagged", "cold"),
    [(90, False, True, False), (90, True, False, False), (5, False, False, True)],
)
def test_a_warm_repeat_is_flagged_unless_the_test_is_about_the_cache(
    second, intended, flagged, cold
):
    level = {
        "requests": _recs(0, 4) + _recs(1, second),
        "repeats": [
            {"repeat": 0, "workload_seed": 0, "warm_intended": intended},
            {
                "repeat": 1,
                "workload_seed": 0,
                "same_workload": True,
                "warm_intended": intended,
            },
        ],
    }
    first, again = load_stats.repeat_stats(level) or []
    assert first["cold"] is True and first["flagged"] is False
    assert again["hit_rate"] == pytest.approx(second / 100)
    assert again["flagged"] is flagged and again["cold"] is cold
    # a workload about the cache (conversations) is never flagged
    conv = {**level, "requests": [r | {"turn": 1} for r in level["requests"]]}
    assert (load_stats.repeat_stats(conv) or [])[1]["flagged"] is False


def test_the_page_states_each_repeat_and_the_agent_turns():
    reps: list[dict[str, Any]] = [
        {
            "repeat": 0,
            "requests": 3,
            "workload_seed": 0,
            "arrival_seed": 0,
            "hit_rate": 0.02,
            "cold": True,
        },
        {
            "repeat": 1,
            "requests": 3,
            "same_workload": True,
            "cache_reset": {
                "action": "erase",
                "ok": True,
                "slots": 4,
                "erased_tokens": 210,
            },
            "hit_rate": 0.62,
            "cold": False,
            "flagged": True,
        },
        {
            "repeat": 2,
            "requests": 3,
            "cache_reset": {"action": "restart", "ok": True, "startup_ms": 812.0},
            "workload_seed": 2,
            "arrival_seed": 2,
            "hit_rate": 0.0,
            "cold": True,
        },
    ]
    lines = site_traffic.repeat_lines(reps)
    assert (
        lines[0].startswith("Repeat 1: 3 requests, workload seed 0")
        and "2.0% (cold)" in lines[0]
    )
    assert (
        lines[1].startswith("**Unintended warm repeat**")
        and "4 slots, 210 cached tokens dropped" in lines[1]
    )
    assert "the first repeat" in lines[1] and "requests again" in lines[1]
    assert "server restarted before it (healthy after 812 ms)" in lines[2]
    table = site_traffic.turns_table(
        {
            "agent": True,
            "per_turn": [
                {
                    "turn": 0,
                    "n": 2,
                    "prompt_tokens_median": 80,
                    "ttft_ms_median": 90.0,
                    "cache_hit_rate": 0.1,
                    "tool_calls_model": 0,
                    "tool_calls_scripted": 2,
                },
            ],
        }
    )
    assert "model call" in table and "model's / scripted" in table and "0 / 2" in table


@pytest.mark.integration  # the fault server, a subprocess on loopback
def test_agent_sessions_grow_by_an_answer_and_a_tool_result_a_turn():
    res, lv, recs = _level(
        {
            "kind": "load",
            "profile": "concurrent",
            "levels": [2],
            "requests": 12,
            "workload": {
                "kind": "agent",
                "turns": 3,
                "think_time_s": 0.02,
                "prompt_tokens": 20,
                "tool_result_tokens": 10,
                "output_tokens": 5,
            },
        }
    )
    turns = lv["turns"]
    assert turns["agent"] is True and turns["conversations"] == 4
    per = turns["per_turn"]
    assert [t["tool_calls_scripted"] for t in per] == [
        4,
        4,
        4,
    ]  # the fault server never calls a tool
    # every turn adds the answer (5 words) and a tool result (10 words) to the context
    ctx = [t["prompt_tokens_median"] for t in per]
    assert ctx[1] - ctx[0] == ctx[2] - ctx[1] == 15
    # system + task; then an assistant turn and a tool result per earlier turn
    assert {r["context_messages"] for r in recs if r["turn"] == 2} == {6}
    assert all(r["tool_call"] == "scripted" for r in recs)
    assert res.details["workload"]["tools"] == ["search_code", "read_file", "run_tests"]


@pytest.mark.integration  # the fault server, a subprocess on loopback
def test_repeats_vary_their_seeds_and_a_reset_is_recorded():
    res, lv, recs = _level(
        {
            "kind": "load",
            "profile": "poisson",
            "levels": [20],
            "requests": 6,
            "repeats": 3,
            "workload": {"prompt_tokens": 12, "output_tokens": 3, "seed": 5},
        }
    )
    assert [r["workload_seed"] for r in lv["repeats"]] == [5, 6, 7]
    assert [r["arrival_seed"] for r in lv["repeats"]] == [0, 1, 2]
    assert [sum(1 for r in recs if r["repeat"] == k) for k in range(3)] == [6, 6, 6]
    stored = res.samples["levels"][0]["repeats"]
    assert [r["repeat"] for r in stored] == [0, 1, 2]

    # the fault server has no /slots: an erase says so, the run goes on; a restart works on any managed server
    _, lv, recs = _level(
        {
            "kind": "load",
            "profile": "synchronous",
            "levels": [1],
            "requests": 2,
            "repeats": 2,
            "repeat_workload": "same",
            "cache_reset": "erase",
            "workload": {"prompt_tokens": 12, "output_tokens": 3},
        }
    )
    reset = lv["repeats"][1]["cache_reset"]
    assert (
        reset["ok"] is False
        and "GET /slots" in reset["error"]
        and all(r["ok"] for r in recs)
    )
    res, lv, recs = _level(
        {
            "kind": "load",
            "profile": "synchronous",
            "levels": [1],
            "requests": 2,
            "repeats": 2,
            "repeat_workload": "same",
            "cache_reset": "restart",
            "workload": {"prompt_tokens": 12, "output_tokens": 3},
        }
    )
    assert all(
        r["cache_reset"]["ok"] and r["cache_reset"]["action"] == "restart"
        for r in lv["repeats"]
    )
    assert all(r["ok"] for r in recs) and len(recs) == 4
    assert res.details["cache_state"]["starts"] == 3
