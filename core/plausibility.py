"""Whether what a server reports can be true, given what was asked and what was seen.

A server's answer carries numbers the client cannot measure itself: the output tokens it counted
(``usage.completion_tokens``), the prompt tokens it took from its prefix cache, its own timings.
Before they become a measurement they are checked here against what the client asked
(``max_tokens``, the prompt it sent) and what it saw (the content chunks it received, its own
clock). An answer that fails a check is an *implausible* request: a failed request whose reason
says which number cannot be true (runtime.backends.openai_http.client), never a measurement; a
run counts how many it refused. ``invoke validate`` runs the same checks on stored artifacts
(:func:`artifact_problems`).

The bounds are loose on purpose (a chunk may carry a part of a token, a server may count one token
more than asked, a template adds tokens to the prompt): they refuse what cannot be, not what is
merely unusual.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, TypeGuard

REASON = "implausible"
TOKEN_SLACK = (
    1  # a server may count one token more than max_tokens (an end-of-generation token)
)
CHUNKS_PER_TOKEN = (
    2  # a token's bytes may be split over two chunks (an incomplete UTF-8 sequence)
)
CHUNK_SLACK = 8  # role-only and empty chunks aside, a few chunks beyond that
TEMPLATE_TOKENS = (
    8192  # tokens a chat template and a system prompt may add to the messages
)
CLOCK_SLACK_MS = (
    100.0  # a server's own timing may exceed the client's by this (and 10 %)
)
# No hardware of this decade generates 10^7 tokens a second in one run (an H100 decodes a 1B model at
# about 10^3 t/s and processes a prompt at about 5 * 10^4): a rate above it is not a measurement.
MAX_RATE_TPS = 1e7
MAX_COUNT = 10**9  # tokens of one request: no context window holds more
MAX_CHUNKS = 1 << 16  # content chunks of one answer when max_tokens is not known


def count_text(n: Any) -> str:
    """A reported count, short however large (``10^400`` is written as such, not in 401 digits)."""
    if isinstance(n, bool) or not isinstance(n, int):
        return repr(n)[:40]
    s = str(abs(n)) if abs(n) < 10**4000 else "1" + "0" * 4000
    if len(s) <= 15:
        return f"{n:,}"
    return f"{'-' if n < 0 else ''}about 10^{len(s) - 1}"


def chunk_limit(max_tokens: int | None) -> int | None:
    """The most content chunks an answer of ``max_tokens`` can take (None: no bound known)."""
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or max_tokens < 1
    ):
        return None
    return CHUNKS_PER_TOKEN * max_tokens + CHUNK_SLACK


def prompt_bytes(body: dict[str, Any] | None) -> int | None:
    """The UTF-8 size of the text a request sends as its prompt (messages' contents, or ``prompt``)."""
    if not isinstance(body, dict):
        return None
    total = 0
    msgs = body.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, str):
                total += len(c.encode("utf-8", "replace"))
            elif c is not None:
                return None  # structured content (images, parts): no bound from bytes
        return total
    p = body.get("prompt")
    return len(p.encode("utf-8", "replace")) if isinstance(p, str) else None


def _count(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def request_problem(
    rec: dict[str, Any],
    *,
    max_tokens: int | None,
    prompt_size: int | None = None,
) -> str | None:
    """Why a successful request's record cannot be true (None when it can): its output tokens
    against ``max_tokens`` and the chunks received, its cached tokens against its prompt tokens, its
    prompt tokens against the bytes sent. (The server's own timings: :func:`timings_problem`.)"""
    out = rec.get("output_tokens")
    chunks = rec.get("chunks")
    limit = chunk_limit(max_tokens)
    for key in ("output_tokens", "prompt_tokens", "cached_tokens"):
        v = rec.get(key)
        if _count(v) and v > MAX_COUNT:
            return (
                f"the server reports {count_text(v)} {key.replace('_', ' ')} "
                f"(no request holds more than {MAX_COUNT:.0e})"
            )
    if _count(out) and out < 0:
        return f"the server reports {count_text(out)} output tokens"
    if _count(out) and _count(max_tokens) and out > max_tokens + TOKEN_SLACK:
        return f"the server reports {count_text(out)} output tokens for max_tokens {max_tokens}"
    if _count(chunks) and limit is not None and chunks > limit:
        return (
            f"{count_text(chunks)} content chunks for max_tokens {max_tokens} "
            f"(at most {limit}: each carries a token or part of one)"
        )
    prompt = rec.get("prompt_tokens")
    if (
        _count(prompt)
        and prompt_size is not None
        and prompt > prompt_size + TEMPLATE_TOKENS
    ):
        return (
            f"the server reports {count_text(prompt)} prompt tokens for a prompt of {prompt_size:,} bytes "
            f"(a token is at least a byte; a template adds at most {TEMPLATE_TOKENS:,})"
        )
    cached = rec.get("cached_tokens")
    if _count(cached) and cached < 0:
        return f"the server reports {count_text(cached)} cached prompt tokens"
    if _count(cached) and _count(prompt) and cached > prompt:
        return f"the server reports {count_text(cached)} cached tokens of a {count_text(prompt)}-token prompt"
    if (
        _count(cached)
        and prompt is None
        and prompt_size is not None
        and cached > prompt_size + TEMPLATE_TOKENS
    ):
        return f"the server reports {count_text(cached)} cached tokens for a prompt of {prompt_size:,} bytes"
    return None


def timings_problem(t: Any, rec: dict[str, Any], max_tokens: int | None) -> str | None:
    """llama-server's own ``timings`` against the client's clock and the request. The client times a
    request itself: timings that cannot be true are left out of its record (``server_timings_refused``
    says why), the request stays what the client measured."""
    if not isinstance(t, dict):
        return None
    seen_ms = rec.get("elapsed_ms") or rec.get("e2e_ms")
    total = 0.0
    for k in ("prompt_ms", "predicted_ms"):
        v = t.get(k)
        if v is None:
            continue
        if (
            not isinstance(v, (int, float))
            or isinstance(v, bool)
            or (isinstance(v, float) and not math.isfinite(v))
            or v < 0
            or v > 1e15
        ):
            return f"the server's timings.{k} is {count_text(v) if isinstance(v, int) else repr(v)[:40]}"
        total += v
    if isinstance(seen_ms, (int, float)) and total > 1.1 * seen_ms + CLOCK_SLACK_MS:
        return f"the server's timings add up to {total:,.1f} ms of a request the client saw take {seen_ms:,.1f} ms"
    n = t.get("predicted_n")
    if _count(n) and _count(max_tokens) and n > max_tokens + TOKEN_SLACK:
        return f"the server's timings.predicted_n is {count_text(n)} for max_tokens {max_tokens}"
    c, p = t.get("cache_n"), t.get("prompt_n")
    if _count(c) and _count(p) and (c < 0 or p < 0):
        return "the server's timings report a negative token count"
    return None


# -- stored artifacts (invoke validate) -------------------------------------------------------------
_RECORD_LISTS = ("requests", "warmup", "cold", "warm")


def refused(samples: Any) -> int:
    """How many request records of a run's samples were refused as implausible."""
    return sum(
        1
        for _, r in request_records(samples)
        if (r.get("error") or {}).get("reason") == REASON
    )


def request_records(samples: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) for every request record of a run's samples (chat, serve, concurrency, load)."""
    if not isinstance(samples, dict):
        return
    for key in _RECORD_LISTS:
        recs = samples.get(key)
        if isinstance(recs, list):
            for i, r in enumerate(recs):
                if isinstance(r, dict):
                    yield f"samples.{key}[{i}]", r
    levels = samples.get("levels")
    if isinstance(levels, list):
        for j, lv in enumerate(levels):
            recs = lv.get("requests") if isinstance(lv, dict) else None
            if isinstance(recs, list):
                for i, r in enumerate(recs):
                    if isinstance(r, dict):
                        yield f"samples.levels[{j}].requests[{i}]", r


def _rate_metrics(summary: Any) -> Iterator[tuple[str, float]]:
    from core.metrics import METRICS

    if not isinstance(summary, dict):
        return
    for name, s in summary.items():
        m = METRICS.get(name)
        if m is None or not isinstance(s, dict) or "/s" not in (m.unit or ""):
            continue
        if "t/s" not in m.unit and "token" not in m.unit:
            continue
        for stat in ("mean", "median", "max"):
            v = s.get(stat)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield f"summary.{name}.{stat}", float(v)


def artifact_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, what cannot be true) for a stored run artifact: every successful request record checked
    as the client checks it now, and every token rate against :data:`MAX_RATE_TPS`."""
    if not isinstance(doc, dict) or doc.get("artifact") != "run":
        return []
    raw_test = doc.get("test")
    test = raw_test if isinstance(raw_test, dict) else {}
    max_tokens = test.get("max_tokens")
    size = prompt_bytes(test)
    out: list[tuple[str, str]] = []
    for where, rec in request_records(doc.get("samples")):
        if rec.get("ok") is False:
            continue
        problem = request_problem(
            rec, max_tokens=max_tokens, prompt_size=size
        ) or timings_problem(rec.get("server_timings"), rec, max_tokens)
        if problem:
            out.append((where, problem))
            break  # one record says it: the rest of a lying server's records say the same
    for where, v in _rate_metrics(doc.get("summary")):
        if v > MAX_RATE_TPS or v < 0:
            out.append(
                (
                    where,
                    f"{v:.4g} t/s is not a rate any hardware reaches (at most {MAX_RATE_TPS:.0e})",
                )
            )
            break
    return out
