"""The ``completion`` prompt style over HTTP: raw text continued by ``/v1/completions``.

Quality suites put few-shot items to a base model as raw text (``Backend.complete``); this is
the same request the in-process backend makes with ``Llama.create_completion``, sent to any
OpenAI-compatible server (llama-server, llama_cpp.server, vLLM, Ollama), so the same items can
be scored through each backend and compared item by item (the Quality page's backend parity).

The sampler fields llama-cpp-python's ``create_completion`` leaves at its defaults are sent
explicitly with those values (top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0): servers
default differently (llama_cpp.server's repeat_penalty is 1.1), and at temperature 0 a
repetition penalty still changes which token is the most likely one.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from core import plausibility
from runtime.backends.openai_http import client as http
from runtime.backends.openai_http import detect

# llama-cpp-python 0.3's create_completion defaults (what the in-process backend leaves unset)
SAMPLER_DEFAULTS = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}


class CompletionError(Exception):
    """One completion request failed (HTTP error, timeout, a response of the wrong shape)."""


def body(
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    stop: list[str],
    temperature: float,
    seed: int,
) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stop": list(stop),
        "temperature": temperature,
        "seed": seed,
        "stream": False,
        **SAMPLER_DEFAULTS,
    }


def complete(
    base_url: str,
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    stop: list[str],
    temperature: float,
    seed: int,
    connect_timeout_s: float,
    request_timeout_s: float,
    api_key: str | None = None,
) -> dict[str, Any]:
    """One non-streamed completion: {'text', 'prompt_tokens', 'output_tokens', 'e2e_ms', 'finish_reason'}
    (the shape of ``Backend.complete``); CompletionError with one line on any failure."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(request_timeout_s, connect=connect_timeout_s)
    payload = body(
        model,
        prompt,
        max_tokens=max_tokens,
        stop=stop,
        temperature=temperature,
        seed=seed,
    )
    t0 = time.perf_counter()
    try:
        with httpx.Client(timeout=timeout, trust_env=False, headers=headers) as client:
            # bounded in size and in wall time, however slowly the answer comes (detect.read_body)
            status, raw, _ = detect.read_body(
                client,
                f"{base_url}/completions",
                time.monotonic() + request_timeout_s,
                "POST",
                payload,
                limit=http.MAX_ANSWER_BYTES,
            )
    except (httpx.HTTPError, detect.TooSlow) as exc:
        raise CompletionError(
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        ) from None
    e2e = (time.perf_counter() - t0) * 1000.0
    if raw is None:
        raise CompletionError(
            f"the answer grew past {http.MAX_ANSWER_BYTES} bytes (not read further)"
        )
    if status != 200:
        raise CompletionError(
            f"HTTP {status}: {' '.join(raw[:300].decode(errors='replace').split())}"
        )
    try:
        doc = json.loads(raw)
        choice = doc["choices"][0]
        text = choice["text"]
        if not isinstance(text, str):
            raise TypeError(f"choices[0].text is a {type(text).__name__}")
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
        raise CompletionError(
            f"not a completion response ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        ) from None
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    counts = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")}
    counts = {
        k: v if isinstance(v, int) and not isinstance(v, bool) else None
        for k, v in counts.items()
    }
    problem = plausibility.request_problem(
        {
            "output_tokens": counts["completion_tokens"],
            "prompt_tokens": counts["prompt_tokens"],
        },
        max_tokens=max_tokens,
        prompt_size=len(prompt.encode("utf-8", "replace")),
    )
    if problem:
        raise CompletionError(f"{plausibility.REASON}: {problem}")
    return {
        "text": text,
        "prompt_tokens": counts["prompt_tokens"],
        "output_tokens": counts["completion_tokens"],
        "e2e_ms": e2e,
        "finish_reason": choice.get("finish_reason"),
    }
