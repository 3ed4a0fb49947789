"""The endpoint probe (kind ``probe``): each case sent ``repeats`` times, one at a time.

Every try is a record: success, latency (E2E), the failure reason in words (the server's own
error message, or what was wrong with its answer), the finish reason. The tool follow-up continues
the conversation with the first turn's own tool call when there was one, else with a fixed
assistant turn (said so in its record), so a server that cannot call tools is still asked whether
it accepts a tool result.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from core.kinds.probe import CASE_HELP, ProbeTest

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TOOL_QUESTION = "What is the weather in Paris right now? Use the get_weather tool."
TOOL_RESULT = {"city": "Paris", "temperature_c": 18, "sky": "cloudy"}
PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _quote(text: Any, n: int = 80) -> str:
    s = " ".join(str(text).split())
    return repr(s if len(s) <= n else s[: n - 1] + "\u2026")


def _message(answer: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(choices[0].message, finish_reason) of a whole answer, or (None, None) for another shape."""
    if not isinstance(answer, dict):
        return None, None
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    msg = choices[0].get("message")
    return (msg if isinstance(msg, dict) else None), choices[0].get("finish_reason")


def judge(
    case: str, rec: dict[str, Any], answer: Any, transport: Any
) -> tuple[bool, str | None, dict[str, Any]]:
    """(success, failure reason, detail) of one try of a non-streamed case."""
    if not rec.get("ok"):
        err = rec.get("error") or {}
        return False, err.get("message") or err.get("reason") or "failed", {}
    msg, finish = _message(answer)
    if msg is None:
        return False, "the answer has no choices[0].message", {}
    detail: dict[str, Any] = {"finish_reason": finish}
    content = msg.get("content")
    if case == "tool_call":
        calls = transport.tool_calls(msg)
        detail["tool_calls"] = [
            {"name": c["name"], "arguments": c["arguments"]} for c in calls
        ]
        if not calls:
            return (
                False,
                f"answered with text, no tool_calls: {_quote(content)}",
                detail,
            )
        call = next((c for c in calls if c["name"] == "get_weather"), None)
        if call is None:
            return False, f"called {calls[0]['name']!r}, not get_weather", detail
        if call["parse_error"] or not isinstance(call["arguments"], dict):
            return False, call["parse_error"] or "arguments are not an object", detail
        return True, None, detail
    if not isinstance(content, str) or not content.strip():
        return False, f"empty answer (finish_reason {finish})", detail
    if case == "tool_followup":
        return True, None, detail
    try:
        obj = json.loads(content)
    except ValueError:
        return (
            False,
            f"content is not JSON (finish_reason {finish}): {_quote(content)}",
            detail,
        )
    if not isinstance(obj, dict):
        return False, f"JSON, but a {type(obj).__name__}, not an object", detail
    if case == "json_schema":
        import jsonschema

        try:
            jsonschema.validate(obj, PERSON_SCHEMA)
        except jsonschema.ValidationError as exc:
            return False, f"JSON does not match the schema: {exc.message[:120]}", detail
    detail["json_keys"] = sorted(obj)[:10]
    return True, None, detail


def bodies(
    case: str, test: ProbeTest, first_call: dict[str, Any] | None
) -> dict[str, Any]:
    base: dict[str, Any] = {"max_tokens": test.max_tokens, "temperature": 0.0}
    if case in ("chat", "stream_usage"):
        body = {
            **base,
            "messages": [
                {"role": "user", "content": "Write one sentence about the sea."}
            ],
            "stream": True,
        }
        if case == "stream_usage":
            body["stream_options"] = {"include_usage": True}
        return body
    if case == "tool_call":
        return {
            **base,
            "stream": False,
            "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": TOOL_QUESTION}],
        }
    if case == "tool_followup":
        call = first_call or {
            "id": "call_0",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
        return {
            **base,
            "stream": False,
            "tools": [WEATHER_TOOL],
            "messages": [
                {"role": "user", "content": TOOL_QUESTION},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call.get("id") or "call_0",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": json.dumps(
                                    call.get("arguments") or {"city": "Paris"}
                                ),
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": call.get("id") or "call_0",
                    "content": json.dumps(TOOL_RESULT),
                },
            ],
        }
    if case == "json_mode":
        return {
            **base,
            "stream": False,
            "response_format": {"type": "json_object"},
            "messages": [
                {
                    "role": "user",
                    "content": "Describe a cat as a JSON object with the keys name and age. Reply with JSON only.",
                }
            ],
        }
    return {
        **base,
        "stream": False,
        "messages": [
            {
                "role": "user",
                "content": "Invent a person. Reply with JSON only: their name and age.",
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "person", "strict": True, "schema": PERSON_SCHEMA},
        },
    }


async def _probe(transport: Any, test: ProbeTest) -> dict[str, Any]:
    results: dict[str, Any] = {}
    first_call: dict[str, Any] | None = None
    async with transport.client(1) as client:
        origin = time.perf_counter_ns()
        for case in test.cases:
            tries: list[dict[str, Any]] = []
            for k in range(test.repeats):
                if not transport.alive():
                    tries.append(
                        {
                            "ok": False,
                            "latency_ms": None,
                            "reason": "not sent: the server is gone",
                        }
                    )
                    continue
                body = {
                    **transport.base_body(),
                    **bodies(case, test, first_call),
                    "seed": 4242 + k,
                }
                if case in ("chat", "stream_usage"):
                    if case == "chat":
                        body.pop("stream_options", None)
                    rec = await transport.send(client, body, origin)
                    ok = bool(rec.get("ok") and (rec.get("text") or "").strip())
                    reason = (
                        None
                        if ok
                        else ((rec.get("error") or {}).get("message") or "empty answer")
                    )
                    if (
                        case == "stream_usage"
                        and ok
                        and rec.get("output_tokens_source") != "usage"
                    ):
                        ok, reason = (
                            False,
                            "no usage in the stream (output tokens counted by chunks)",
                        )
                    tries.append(
                        {
                            "ok": ok,
                            "latency_ms": rec.get("e2e_ms") or rec.get("elapsed_ms"),
                            "reason": reason,
                            "ttft_ms": rec.get("ttft_ms"),
                            "finish_reason": rec.get("finish_reason"),
                            "status": rec.get("status"),
                            "output_tokens_source": rec.get("output_tokens_source"),
                        }
                    )
                    continue
                rec, answer = await transport.request(client, body)
                ok, reason, detail = judge(case, rec, answer, transport)
                if case == "tool_call" and ok and first_call is None:
                    msg, _ = _message(answer)
                    call = next(
                        c
                        for c in transport.tool_calls(msg)
                        if c["name"] == "get_weather"
                    )
                    first_call = {
                        "id": call.get("id"),
                        "name": call["name"],
                        "arguments": call["arguments"],
                    }
                if case == "tool_followup":
                    detail["first_turn"] = (
                        "the server's own tool call"
                        if first_call
                        else "a fixed assistant turn (the first turn made no tool call)"
                    )
                tries.append(
                    {
                        "ok": ok,
                        "latency_ms": rec.get("e2e_ms") or rec.get("elapsed_ms"),
                        "reason": reason,
                        "status": rec.get("status"),
                        **detail,
                    }
                )
            oks = [t for t in tries if t["ok"]]
            lat = sorted(
                t["latency_ms"] for t in tries if t.get("latency_ms") is not None
            )
            reasons = sorted({t["reason"] for t in tries if t.get("reason")})
            results[case] = {
                "case": case,
                "description": CASE_HELP[case],
                "tries": tries,
                "n": len(tries),
                "succeeded": len(oks),
                "success_rate": len(oks) / len(tries) if tries else None,
                "latency_ms_median": lat[len(lat) // 2] if lat else None,
                "reasons": reasons,
            }
    return results


def run(transport: Any, test: ProbeTest) -> dict[str, Any]:
    return asyncio.run(_probe(transport, test))
