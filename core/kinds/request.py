"""What the serving kinds send: one streamed chat request, as a ``chat`` test sends it.

``serve`` and ``concurrency`` (and the load profiles) send the same request a ``chat`` test
sends (messages, max_tokens, sampling), so a server can be compared with the in-process
backend on identical prompts (:func:`workload_fingerprint`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from core.kinds.base import Message, TestSpec

# The fields that define what one request asks for; two tests with equal values send the
# same request (the basis of in-process vs server comparisons).
WORKLOAD_FIELDS = ("messages", "max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "ignore_eos")


class RequestWorkload(TestSpec):
    """Base of the serving kinds: one streamed chat request, as a ``chat`` test sends it."""

    id: str = Field("serve", description="Name of this workload, used in tables.")
    messages: list[Message] = Field(
        default_factory=lambda: [Message(role="user", content="Explain in three sentences why the sky is blue.")],
        description="The conversation sent on every request.")
    max_tokens: int = Field(64, ge=1, description="Maximum tokens generated per request.")
    warmup_requests: int = Field(1, ge=0, description="Untimed requests before the timed ones.")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature (0 = greedy).")
    top_k: int = Field(40, ge=0, description="Top-k sampling (sent as a non-OpenAI field; llama.cpp and vLLM read it).")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling.")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="Min-p sampling (non-OpenAI field).")
    repeat_penalty: float = Field(1.0, gt=0.0, description="Repetition penalty, 1.0 = off (non-OpenAI field).")
    ignore_eos: bool = Field(False, description="Ask for exactly max_tokens (sends ignore_eos and min_tokens).")

    @property
    def name(self) -> str:
        return self.id


def workload_fingerprint(test: dict[str, Any]) -> str:
    """What a request asks for, as text: equal for a ``chat``, ``serve`` or ``concurrency`` test
    that sends the same request (defaults of the ``chat`` kind filled in where absent)."""
    defaults = {"max_tokens": 64, "temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                "repeat_penalty": 1.0, "ignore_eos": False}
    ident = {k: test.get(k, defaults.get(k)) for k in WORKLOAD_FIELDS}
    return json.dumps(ident, sort_keys=True)
