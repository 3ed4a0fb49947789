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

import time
from typing import Any

import httpx

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
    t0 = time.perf_counter()
    try:
        with httpx.Client(timeout=timeout, trust_env=False, headers=headers) as client:
            resp = client.post(
                f"{base_url}/completions",
                json=body(
                    model,
                    prompt,
                    max_tokens=max_tokens,
                    stop=stop,
                    temperature=temperature,
                    seed=seed,
                ),
            )
    except httpx.HTTPError as exc:
        raise CompletionError(f"{type(exc).__name__}: {exc}") from None
    e2e = (time.perf_counter() - t0) * 1000.0
    if resp.status_code != 200:
        raise CompletionError(
            f"HTTP {resp.status_code}: {' '.join(resp.text[:300].split())}"
        )
    try:
        doc = resp.json()
        choice = doc["choices"][0]
        text = choice["text"]
        if not isinstance(text, str):
            raise TypeError(f"choices[0].text is a {type(text).__name__}")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise CompletionError(
            f"not a completion response ({type(exc).__name__}: {exc})"
        ) from None
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    return {
        "text": text,
        "prompt_tokens": usage.get("prompt_tokens"),
        "output_tokens": usage.get("completion_tokens"),
        "e2e_ms": e2e,
        "finish_reason": choice.get("finish_reason"),
    }
