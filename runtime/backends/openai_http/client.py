"""One streamed chat completion over HTTP, timed per chunk, with bounded retries.

Every request ends as a record: ``ok`` with its timings, or an error with a reason
(``connect_error``, ``timeout_connect``, ``timeout_read``, ``timeout_total``, ``http_<status>``,
``dropped``, ``incomplete``, ``bad_payload`` (not JSON, or a chunk of the wrong shape),
``too_large`` (a line, the body or the text past its bound), ``implausible`` (a count or a timing
the server reports that cannot be true for what was asked and seen: core.plausibility),
``server_error_event``, ``server_lost``, ``client_error``, ``not_sent``). Nothing waits past
``request_timeout_s``: the whole request, retries and back-off included, runs under one asyncio deadline.

Timings (perf_counter, from the start of the first attempt, so a retried request carries
its retries as the client saw them):

* TTFT: to the first chunk whose delta carries content (or reasoning content);
* ITL: gaps between consecutive content chunks (a chunk may carry several tokens);
* E2E: to the last data chunk before ``[DONE]`` (vLLM's ``bench serve`` convention);
* TPOT: (E2E - TTFT) / (output tokens - 1);
* output tokens: the server's ``usage.completion_tokens`` when it reports it
  (stream_options.include_usage), else the number of content chunks;
* ``chunk_ms``: the arrival of every content chunk, from the request's start;
* ``cached_tokens``: prompt tokens the server took from its prefix cache, where it says
  (``usage.prompt_tokens_details.cached_tokens``, OpenAI's and vLLM's field; llama-server's
  ``timings.cache_n``);
* ``client_parse_ms``: the client's own time decoding and parsing the stream (its overhead);
* ``client_serialize_ms``: the client's own time serialising the request body (JSON, UTF-8).

Servers differ in their dialects of the OpenAI API (``dialects.py`` and the transcripts in
tests/fixtures/dialects/): usage in a last chunk with no choices (OpenAI, vLLM, TGI,
llama-server) or not at all (llama_cpp.server), ``reasoning_content`` (vLLM, SGLang, llama-server)
or ``reasoning`` (Ollama, newer vLLM) beside ``content``, ``choices: null`` in a usage chunk, and
error bodies of several shapes (``{"error": {"message": ...}}``, vLLM's older
``{"object": "error", "message": ...}``, TGI's and Ollama's ``{"error": "text"}``): the server's
own message is kept in the record whatever its shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import httpx

from core import plausibility
from runtime.backends.openai_http import dialects

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
TEXT_LIMIT = 2000
MAX_LINE_BYTES = 1 << 20  # one SSE line (a chunk's JSON); a longer one is too_large
MAX_BODY_BYTES = 256 << 20  # one streamed response
MAX_TEXT_CHARS = 4 << 20  # the answer's text
MAX_ANSWER_BYTES = 16 << 20  # a whole (non-streamed) answer
KEEPALIVE_EXPIRY_S = 2.0


class AttemptError(Exception):
    def __init__(
        self, reason: str, message: str, *, retryable: bool, status: int | None = None
    ):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retryable = retryable
        self.status = status


@dataclass(frozen=True)
class RequestPolicy:
    request_timeout_s: float
    retries: int
    retry_backoff_s: float


def make_client(
    *,
    connect_timeout_s: float,
    read_timeout_s: float,
    max_connections: int,
    api_key: str | None = None,
) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(
        connect=connect_timeout_s,
        read=read_timeout_s,
        write=connect_timeout_s,
        pool=None,
    )
    # an idle pooled connection is dropped by us before the server closes it (llama-server: Keep-Alive
    # timeout=5), so a request never goes out on a socket the server is closing
    limits = httpx.Limits(
        max_connections=max(1, max_connections),
        max_keepalive_connections=max(1, max_connections),
        keepalive_expiry=KEEPALIVE_EXPIRY_S,
    )
    return httpx.AsyncClient(
        timeout=timeout, limits=limits, headers=headers, trust_env=False
    )


def _ms(ns: int) -> float:
    return ns / 1e6


async def _attempt(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    t0: int,
    acc: dict[str, Any],
) -> None:
    """One HTTP attempt; fills ``acc`` with chunk timestamps; raises AttemptError on failure."""
    s0 = (
        time.perf_counter_ns()
    )  # the body serialised here (as httpx would), timed: the client's cost
    payload = json.dumps(
        body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")
    acc["serialize_ns"] += time.perf_counter_ns() - s0
    try:
        async with client.stream(
            "POST",
            url,
            content=payload,
            headers={"content-type": "application/json"},
        ) as resp:
            acc["status"] = resp.status_code
            if resp.status_code >= 400:
                head = b""
                async with body_chunks(resp) as parts:
                    async for part in parts:  # at most 400 bytes of an error body
                        head += part
                        if len(head) >= 400:
                            break
                raw = head[:400].decode(errors="replace")
                server_msg = dialects.error_message(raw)
                acc["retry_after"] = resp.headers.get("retry-after")
                text = server_msg if server_msg is not None else " ".join(raw.split())
                raise AttemptError(
                    f"http_{resp.status_code}",
                    f"HTTP {resp.status_code}: {text[:300]}",
                    retryable=resp.status_code in RETRYABLE_STATUS,
                    status=resp.status_code,
                )
            async with (
                body_chunks(resp) as chunks,
                contextlib.aclosing(bounded_lines(chunks, acc)) as lines,
            ):
                async for line in lines:
                    now = time.perf_counter_ns()
                    if not line or line.startswith(":") or not line.startswith("data:"):
                        continue  # blank separators, SSE comments and pings, event names
                    data = line[5:].strip()
                    if data == "[DONE]":
                        acc["done_ns"] = now
                        break
                    p0 = time.perf_counter_ns()
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        raise AttemptError(
                            "bad_payload",
                            f"a data line is not JSON: {quote(data)}",
                            retryable=not acc["chunks"],
                        ) from None
                    except RecursionError:
                        raise AttemptError(
                            "bad_payload",
                            "a data line is nested too deeply",
                            retryable=False,
                        ) from None
                    if isinstance(obj, dict) and obj.get("error"):
                        msg = dialects.error_message(obj) or str(obj["error"])
                        raise AttemptError(
                            "server_error_event",
                            f"the stream carried an error: {quote(msg, 300)}",
                            retryable=False,
                        )
                    content, finish, usage = parse_chunk(obj)
                    if body.get("logprobs"):
                        take_logprobs(obj, acc)
                    if isinstance(obj, dict) and isinstance(obj.get("timings"), dict):
                        acc["timings"] = obj["timings"]
                    acc["parse_ns"] += time.perf_counter_ns() - p0
                    acc["last_data_ns"] = now
                    if content:
                        if (
                            acc["chunk_limit"] is not None
                            and len(acc["chunks"]) >= acc["chunk_limit"]
                        ):
                            raise AttemptError(
                                plausibility.REASON,
                                f"more than {acc['chunk_limit']} content chunks for max_tokens "
                                f"{quote(body.get('max_tokens'), 40)} (each carries a token or part of one)",
                                retryable=False,
                            )
                        acc["chunks"].append(now)
                        acc["text"].append(content)
                        acc["text_chars"] += len(content)
                        if acc["text_chars"] > MAX_TEXT_CHARS:
                            raise AttemptError(
                                "too_large",
                                f"the answer grew past {MAX_TEXT_CHARS} characters",
                                retryable=False,
                            )
                    if finish:
                        acc["finish_reason"] = finish
                    if usage:
                        acc["usage"] = usage
                    tool_call_pieces(obj, acc)
    except httpx.ConnectTimeout as exc:
        raise AttemptError(
            "timeout_connect",
            f"no connection within the connect timeout ({exc})",
            retryable=True,
        ) from None
    except httpx.ConnectError as exc:
        raise AttemptError(
            "connect_error", f"connection failed: {exc}", retryable=True
        ) from None
    except httpx.ReadTimeout:
        raise AttemptError(
            "timeout_read",
            "no data within the read timeout"
            + (
                " after content had started"
                if acc["chunks"]
                else " (nothing received yet)"
            ),
            retryable=not acc["chunks"],
        ) from None
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise AttemptError(
            "dropped",
            f"connection dropped {'mid-stream' if acc['chunks'] else 'before any content'}: "
            f"{exc or type(exc).__name__}",
            retryable=not acc["chunks"],
        ) from None
    except httpx.TimeoutException as exc:
        raise AttemptError(
            "timeout_" + type(exc).__name__.lower().replace("timeout", ""),
            str(exc),
            retryable=not acc["chunks"],
        ) from None
    except httpx.HTTPError as exc:
        raise AttemptError(
            "http_error", f"{type(exc).__name__}: {exc}", retryable=not acc["chunks"]
        ) from None
    except (AttemptError, asyncio.CancelledError):
        raise
    except Exception as exc:  # anything else a hostile server provokes is still a record, never a crash
        raise AttemptError(
            "client_error",
            f"{type(exc).__name__}: {quote(str(exc), 200)}",
            retryable=False,
        ) from None
    if acc.get("done_ns") is None and acc.get("finish_reason") is None:
        raise AttemptError(
            "incomplete",
            "the stream ended without a finish_reason or [DONE]",
            retryable=not acc["chunks"],
        )


MAX_TOOL_CALLS = 16  # tool calls kept of one streamed answer
MAX_TOOL_TEXT = 4096  # characters kept of each call's name and arguments


def tool_call_pieces(obj: Any, acc: dict[str, Any]) -> None:
    """Join the streamed ``delta.tool_calls`` pieces of one answer (OpenAI's shape: an index, the id and
    name in the first piece, the arguments in parts) into ``acc["tool_calls"]``: [{id, name, arguments}],
    bounded; anything of another shape is skipped (the chunk's content was already counted)."""
    try:
        calls = obj["choices"][0]["delta"].get("tool_calls")
    except (KeyError, IndexError, TypeError, AttributeError):
        return
    if not isinstance(calls, list):
        return
    out = acc.setdefault("tool_calls", [])
    for c in calls:
        if not isinstance(c, dict):
            continue
        i = c.get("index")
        if (
            i is None
        ):  # no index: a piece with an id starts a call, one without goes on the last
            i = len(out) if c.get("id") or not out else len(out) - 1
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_TOOL_CALLS:
            continue
        while len(out) <= i:
            out.append({"id": None, "name": None, "arguments": ""})
        f = c.get("function")
        fn: dict[str, Any] = f if isinstance(f, dict) else {}
        if isinstance(c.get("id"), str):
            out[i]["id"] = c["id"][:200]
        if isinstance(fn.get("name"), str):
            out[i]["name"] = ((out[i]["name"] or "") + fn["name"])[:MAX_TOOL_TEXT]
        if isinstance(fn.get("arguments"), str):
            out[i]["arguments"] = (out[i]["arguments"] + fn["arguments"])[
                :MAX_TOOL_TEXT
            ]


def _fresh_acc(chunk_limit: int | None = None) -> dict[str, Any]:
    return {
        "chunk_limit": chunk_limit,
        "chunks": [],
        "text": [],
        "finish_reason": None,
        "usage": None,
        "done_ns": None,
        "last_data_ns": None,
        "status": None,
        "text_chars": 0,
        "bytes": 0,
        "timings": None,
        "parse_ns": 0,
        "serialize_ns": 0,
        "retry_after": None,
        "logprobs": [],
    }


MAX_LOGPROBS = (
    4096  # token log-probabilities kept per request (a request asking for them)
)


def take_logprobs(obj: Any, acc: dict[str, Any]) -> None:
    """The sampled tokens' log-probabilities of one chunk (``choices[0].logprobs.content[].logprob``,
    OpenAI's shape, which llama-server streams); anything else in their place is skipped, never trusted."""
    try:
        items = obj["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return
    if not isinstance(items, list):
        return
    for it in items:
        v = it.get("logprob") if isinstance(it, dict) else None
        if (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and -1e4 <= v <= 0.0
            and len(acc["logprobs"]) < MAX_LOGPROBS
        ):
            acc["logprobs"].append(float(v))


def quote(value: Any, limit: int = 120) -> str:
    """Server-sent text in an error message: one line, at most ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


async def bounded_lines(chunks: Any, acc: dict[str, Any]) -> Any:
    """SSE lines from a byte stream, each at most MAX_LINE_BYTES and the body at most MAX_BODY_BYTES:
    an endless line without a newline ends as ``too_large``, not as gigabytes of buffer."""
    buf = b""
    async for chunk in chunks:
        acc["bytes"] += len(chunk)
        if acc["bytes"] > MAX_BODY_BYTES:
            raise AttemptError(
                "too_large",
                f"the response body grew past {MAX_BODY_BYTES} bytes",
                retryable=False,
            )
        buf += chunk
        while True:
            cut = buf.find(b"\n")
            if cut < 0:
                break
            line, buf = buf[:cut], buf[cut + 1 :]
            if len(line) > MAX_LINE_BYTES:
                raise AttemptError(
                    "too_large",
                    f"a line of {len(line)} bytes (at most {MAX_LINE_BYTES})",
                    retryable=False,
                )
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(buf) > MAX_LINE_BYTES:
            raise AttemptError(
                "too_large",
                f"a line grew past {MAX_LINE_BYTES} bytes without a newline",
                retryable=False,
            )
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


def parse_chunk(obj: Any) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """(content, finish_reason, usage) of one ``chat.completion.chunk``; a chunk of any other shape
    (a JSON list, a string where an object belongs, a number where text belongs) is ``bad_payload``."""

    def bad(what: str) -> AttemptError:
        return AttemptError(
            "bad_payload", f"a chunk of the wrong shape: {what}", retryable=False
        )

    if not isinstance(obj, dict):
        raise bad(f"a JSON {type(obj).__name__} where an object belongs")
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise bad(f"choices is a {type(choices).__name__}, not a list")
    content = finish = None
    if choices:
        first = choices[0]
        if not isinstance(first, dict):
            raise bad(f"choices[0] is a {type(first).__name__}, not an object")
        delta = first.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise bad(f"delta is a {type(delta).__name__}, not an object")
        for key in ("content", "reasoning_content", "reasoning"):
            v = delta.get(key)
            if v is not None and not isinstance(v, str):
                raise bad(f"delta.{key} is a {type(v).__name__}, not text")
            if v and content is None:
                content = v
        calls = delta.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise bad(f"delta.tool_calls is a {type(calls).__name__}, not a list")
        if (
            calls and content is None
        ):  # a streamed tool call is output too (TTFT counts its first piece)
            content = (
                "".join(
                    str(((c or {}).get("function") or {}).get("arguments") or "")
                    for c in calls
                    if isinstance(c, dict)
                )
                or "\u200b"
            )
        finish = first.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise bad(f"finish_reason is a {type(finish).__name__}, not text")
    usage = obj.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise bad(f"usage is a {type(usage).__name__}, not an object")
        for key in ("completion_tokens", "prompt_tokens"):
            v = usage.get(key)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, int) or v < 0
            ):
                raise bad(f"usage.{key} is {quote(v, 40)}, not a count")
    return content, finish, usage or None


async def stream_chat(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    policy: RequestPolicy,
    *,
    origin_ns: int,
    server_alive: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Send one request (retrying what may be retried); always return a record, never raise."""
    t0 = time.perf_counter_ns()
    retries: list[dict[str, Any]] = []
    limit = plausibility.chunk_limit(body.get("max_tokens")) or plausibility.MAX_CHUNKS
    acc = _fresh_acc(limit)
    error: dict[str, Any] | None = None
    attempts = 0
    try:
        async with asyncio.timeout(policy.request_timeout_s):
            while True:
                attempts += 1
                acc = _fresh_acc(limit)
                try:
                    await _attempt(client, url, body, t0, acc)
                    error = None
                    break
                except AttemptError as exc:
                    error = {"reason": exc.reason, "message": exc.message}
                    if exc.status is not None:
                        error["status"] = exc.status
                    dead = server_alive is not None and not server_alive()
                    if dead:
                        error = {
                            "reason": "server_lost",
                            "message": f"the server process is gone ({exc.reason}: {exc.message})",
                        }
                    if dead or not exc.retryable or attempts > policy.retries:
                        break
                    retries.append(
                        {**error, "after_ms": _ms(time.perf_counter_ns() - t0)}
                    )
                    await asyncio.sleep(policy.retry_backoff_s * (2 ** (attempts - 1)))
    except TimeoutError:
        error = {
            "reason": "timeout_total",
            "message": f"no complete response within request_timeout_s = {policy.request_timeout_s:g} s"
            + (" (content had started)" if acc["chunks"] else ""),
        }
    end = time.perf_counter_ns()
    rec = _record(acc, error, t0, end, origin_ns, attempts, retries)
    if body.get("logprobs"):
        rec["logprobs"] = list(acc["logprobs"])
    return refuse_implausible(rec, body)


def refuse_implausible(rec: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A successful record whose server-reported numbers cannot be true (core.plausibility) becomes a
    failed request with the reason; its timings and counts are not kept as measurements."""
    if not rec.get("ok"):
        return rec
    bad_timings = plausibility.timings_problem(
        rec.get("server_timings"), rec, body.get("max_tokens")
    )
    if bad_timings:
        rec.pop("server_timings", None)
        rec["server_timings_refused"] = bad_timings
        if rec.get("cached_tokens_source") == "timings.cache_n":
            rec.pop("cached_tokens", None)
            rec.pop("cached_tokens_source", None)
    problem = plausibility.request_problem(
        rec,
        max_tokens=body.get("max_tokens"),
        prompt_size=plausibility.prompt_bytes(body),
    )
    if problem is None:
        return rec
    for k in (
        "ttft_ms",
        "e2e_ms",
        "tpot_ms",
        "output_tokens",
        "output_tokens_source",
        "prompt_tokens",
    ):
        if k in rec:
            rec[k] = None
    for k in ("cached_tokens", "cached_tokens_source", "server_timings"):
        rec.pop(k, None)
    if "itl_ms" in rec:
        rec["itl_ms"] = []
    rec["ok"] = False
    rec["error"] = {"reason": plausibility.REASON, "message": problem}
    return rec


def _record(
    acc: dict[str, Any],
    error: dict[str, Any] | None,
    t0: int,
    end: int,
    origin_ns: int,
    attempts: int,
    retries: list[dict[str, Any]],
) -> dict[str, Any]:
    chunks: list[int] = acc["chunks"]
    usage = acc.get("usage") or {}
    rec: dict[str, Any] = {
        "ok": error is None,
        "error": error,
        "attempts": attempts,
        "retries": retries,
        "status": acc.get("status"),
        "start_ms": _ms(t0 - origin_ns),
        "end_ms": _ms(end - origin_ns),
        "chunks": len(chunks),
        "finish_reason": acc.get("finish_reason"),
        "text": "".join(acc["text"])[:TEXT_LIMIT],
    }
    rec["client_parse_ms"] = round(acc.get("parse_ns", 0) / 1e6, 4)
    rec["client_serialize_ms"] = round(acc.get("serialize_ns", 0) / 1e6, 4)
    if acc.get("retry_after") is not None:
        rec["retry_after"] = str(acc["retry_after"])[:40]
    if error is not None:
        rec.update(
            ttft_ms=None,
            e2e_ms=None,
            tpot_ms=None,
            itl_ms=[],
            output_tokens=None,
            output_tokens_source=None,
            prompt_tokens=None,
            first_token_ms=None,
            last_token_ms=None,
            partial_chunks=len(chunks),
            elapsed_ms=_ms(end - t0),
            chunk_ms=[round(_ms(c - t0), 3) for c in chunks],
        )
        return rec
    last = acc.get("last_data_ns") or end
    ttft = _ms(chunks[0] - t0) if chunks else None
    e2e = _ms(last - t0)
    if usage.get("completion_tokens") is not None:
        out, source = int(usage["completion_tokens"]), "usage"
    else:
        out, source = len(chunks), "chunks"
    # a count no answer can have (10^400) is refused by core.plausibility; no float is made of it here
    plausible_out = out <= plausibility.MAX_COUNT
    tpot = (
        (e2e - ttft) / (out - 1)
        if ttft is not None and 1 < out and plausible_out
        else None
    )
    rec.update(
        ttft_ms=ttft,
        e2e_ms=e2e,
        tpot_ms=tpot,
        itl_ms=[round(_ms(b - a), 3) for a, b in zip(chunks, chunks[1:])],
        output_tokens=out,
        output_tokens_source=source,
        prompt_tokens=usage.get("prompt_tokens"),
        first_token_ms=_ms(chunks[0] - origin_ns) if chunks else None,
        last_token_ms=_ms(chunks[-1] - origin_ns) if chunks else None,
        chunk_ms=[round(_ms(c - t0), 3) for c in chunks],
    )
    if acc.get("tool_calls"):
        rec["tool_calls"] = acc["tool_calls"]
    cached, source = dialects.cached_tokens(usage, acc.get("timings"))
    if cached is not None:
        rec.update(cached_tokens=cached, cached_tokens_source=source)
    t = acc.get("timings")
    if isinstance(
        t, dict
    ):  # llama-server's own view of the request (prompt and generation time, cache)
        # NaN and infinities are refused as the server's timings (core.plausibility), never stored
        rec["server_timings"] = {
            k: t[k]
            for k in ("cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
            if isinstance(t.get(k), (int, float))
            and not isinstance(t.get(k), bool)
            and (isinstance(t[k], int) or math.isfinite(t[k]))
        }
    return rec


def not_sent(reason: str, message: str, origin_ns: int) -> dict[str, Any]:
    """A planned request that was never sent (its server was already gone): still accounted for."""
    now = _ms(time.perf_counter_ns() - origin_ns)
    return {
        "ok": False,
        "error": {"reason": reason, "message": message},
        "attempts": 0,
        "retries": [],
        "status": None,
        "start_ms": now,
        "end_ms": now,
        "chunks": 0,
        "finish_reason": None,
        "text": "",
        "ttft_ms": None,
        "e2e_ms": None,
        "tpot_ms": None,
        "itl_ms": [],
        "output_tokens": None,
        "output_tokens_source": None,
        "prompt_tokens": None,
        "first_token_ms": None,
        "last_token_ms": None,
        "partial_chunks": 0,
        "elapsed_ms": 0.0,
    }


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    policy: RequestPolicy,
    *,
    origin_ns: int,
) -> tuple[dict[str, Any], Any]:
    """One request without streaming (``stream: false``): (its record, the parsed answer or None).
    Never raises; an HTTP error keeps the server's own message whatever its dialect."""
    t0 = time.perf_counter_ns()
    answer: Any = None
    status: int | None = None
    error: dict[str, Any] | None = None
    try:
        async with asyncio.timeout(policy.request_timeout_s):
            async with client.stream("POST", url, json=body) as resp:
                status = resp.status_code
                raw = await read_bounded(resp, MAX_ANSWER_BYTES)
            if raw is None:
                error = {
                    "reason": "too_large",
                    "message": f"the answer grew past {MAX_ANSWER_BYTES} bytes (not read further)",
                }
            elif status >= 400:
                msg = dialects.error_message(raw)
                text = (
                    msg
                    if msg is not None
                    else " ".join(raw[:400].decode(errors="replace").split())
                )
                error = {
                    "reason": f"http_{status}",
                    "message": f"HTTP {status}: {text[:300]}",
                    "status": status,
                }
            else:
                try:
                    answer = json.loads(raw)
                except (ValueError, RecursionError):
                    error = {
                        "reason": "bad_payload",
                        "message": f"the answer is not JSON: {quote(raw[:200])}",
                    }
    except TimeoutError:
        error = {
            "reason": "timeout_total",
            "message": f"no answer within request_timeout_s = {policy.request_timeout_s:g} s",
        }
    except httpx.ConnectError as exc:
        error = {"reason": "connect_error", "message": f"connection failed: {exc}"}
    except httpx.TimeoutException as exc:
        error = {"reason": "timeout_read", "message": f"{type(exc).__name__}: {exc}"}
    except httpx.HTTPError as exc:
        error = {"reason": "dropped", "message": f"{type(exc).__name__}: {exc}"}
    end = time.perf_counter_ns()
    usage = (answer or {}).get("usage") if isinstance(answer, dict) else None
    if isinstance(usage, dict):
        usage = {
            k: v
            for k, v in usage.items()
            if k in ("completion_tokens", "prompt_tokens")
        }
        usage = {
            k: v
            for k, v in usage.items()
            if isinstance(v, int) and not isinstance(v, bool)
        }
    rec = {
        "ok": error is None,
        "error": error,
        "status": status,
        "start_ms": _ms(t0 - origin_ns),
        "end_ms": _ms(end - origin_ns),
        "e2e_ms": _ms(end - t0) if error is None else None,
        "elapsed_ms": _ms(end - t0),
        "output_tokens": (usage or {}).get("completion_tokens")
        if isinstance(usage, dict)
        else None,
        "prompt_tokens": (usage or {}).get("prompt_tokens")
        if isinstance(usage, dict)
        else None,
    }
    rec = refuse_implausible(rec, body)
    return rec, answer if rec["ok"] else None


@contextlib.asynccontextmanager
async def body_chunks(
    resp: httpx.Response,
) -> AsyncIterator[AsyncGenerator[bytes, None]]:
    """A response's body chunks, their generator closed on leaving. A loop that stops early (``[DONE]``,
    a size limit) otherwise leaves httpx's generators suspended inside httpcore's connection pool, to be
    closed by the garbage collector later, in another task, when the connection may serve another
    request (PEP 533; contextlib.aclosing)."""
    gen = cast("AsyncGenerator[bytes, None]", resp.aiter_bytes())  # an async generator
    async with contextlib.aclosing(gen) as chunks:
        yield chunks


async def read_bounded(resp: httpx.Response, limit: int) -> bytes | None:
    """A response's body, or None once it grows past ``limit`` bytes (the rest is not read)."""
    raw = bytearray()
    async with body_chunks(resp) as parts:
        async for part in parts:
            raw += part
            if len(raw) > limit:
                return None
    return bytes(raw)
