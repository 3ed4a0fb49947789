"""Where OpenAI-compatible servers answer differently, read once.

Each rule here is checked against a recorded response of the server it is for
(tests/fixtures/dialects/, every file naming its source):

* error bodies: OpenAI, llama-server and vLLM >= 0.16 send ``{"error": {"message", "type", "code"}}``;
  vLLM before that a flat ``{"object": "error", "message", "type", "code"}``; TGI and Ollama
  ``{"error": "text"}`` (TGI adds ``error_type``); FastAPI-based servers (llama_cpp.server) may
  answer ``{"detail": ...}``;
* prefix-cache reuse: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field; vLLM and
  llama-server fill it, TGI sends ``prompt_tokens_details: null``), or llama-server's
  ``timings.cache_n``;
* tool calls in a whole (not streamed) answer: ``message.tool_calls[].function.{name, arguments}``
  with ``arguments`` a JSON string (OpenAI, vLLM, TGI, llama-server) or an object (some Ollama
  versions); TGI ends such an answer with ``finish_reason: stop``, not ``tool_calls``.

Usage in the stream (a last chunk with ``choices: []`` or ``choices: null``), ``reasoning_content``
vs ``reasoning`` deltas and ``usage: null`` on every other chunk are read by
``client.parse_chunk``.
"""

from __future__ import annotations

import json
from typing import Any


def error_message(body: Any) -> str | None:
    """The server's own error message from an error body (text or parsed JSON) of any known shape;
    None when the body is not one of them."""
    obj = body
    if isinstance(body, (str, bytes)):
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return None
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(
        err, dict
    ):  # OpenAI, llama-server, vLLM >= 0.16 (and vLLM's streamed error events)
        msg = err.get("message")
        if isinstance(msg, (dict, list)):
            msg = json.dumps(msg)
        kind = err.get("type") or err.get("code")
        return (
            f"{msg}" + (f" ({kind})" if kind and msg else "")
            if msg is not None
            else json.dumps(err)[:300]
        )
    if isinstance(err, str):  # TGI ({"error", "error_type"}), Ollama
        kind = obj.get("error_type")
        return err + (f" ({kind})" if kind else "")
    if (
        obj.get("object") == "error" and obj.get("message") is not None
    ):  # vLLM before 0.16, SGLang
        msg = obj["message"]
        msg = json.dumps(msg) if isinstance(msg, (dict, list)) else str(msg)
        kind = obj.get("type")
        return msg + (f" ({kind})" if kind else "")
    if "detail" in obj:  # FastAPI validation errors
        d = obj["detail"]
        return d if isinstance(d, str) else json.dumps(d)[:300]
    return None


def cached_tokens(
    usage: dict[str, Any] | None, timings: dict[str, Any] | None
) -> tuple[int | None, str | None]:
    """(prompt tokens served from the prefix cache, where the figure came from), or (None, None)
    when the server did not say."""
    details = (usage or {}).get("prompt_tokens_details")
    if isinstance(details, dict):
        v = details.get("cached_tokens")
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v, "usage.prompt_tokens_details.cached_tokens"
    if isinstance(timings, dict):
        v = timings.get("cache_n")
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v, "timings.cache_n"
    return None, None


def tool_calls(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    """[{name, arguments (parsed JSON or None), raw_arguments, parse_error}] of a whole answer's message."""
    out = []
    for call in (message or {}).get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") or {}
        if not isinstance(fn, dict):
            continue
        raw = fn.get("arguments")
        parsed, err = None, None
        if isinstance(raw, dict):
            parsed = raw
        elif isinstance(raw, str):
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                err = f"arguments are not JSON: {exc}"
        else:
            err = f"arguments are a {type(raw).__name__}"
        out.append(
            {
                "name": fn.get("name"),
                "arguments": parsed,
                "raw_arguments": raw if isinstance(raw, str) else None,
                "parse_error": err,
                "id": call.get("id"),
            }
        )
    return out
