"""Test kinds that measure a server, not an in-process call.

* ``serve``: the server's lifecycle: startup to healthy, the cold first request (TTFT and
  full), then the warm steady state over N requests after warm-up.
* ``concurrency``: a closed-loop sweep of concurrency levels (1, 2, 4, 8 ...): aggregate
  output tokens/s, per-request latency percentiles, the p95 multiplier against the lowest
  level, goodput against SLOs, the highest level that meets them.

Both send the same request a ``chat`` test sends (messages, max_tokens, sampling), so a
server can be compared with the in-process backend on identical prompts
(:func:`workload_fingerprint`). Registered into ``runtime.workloads.TEST_KINDS``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from .workloads import Message, TestSpec, register_test_kind

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


@register_test_kind
class ServeTest(RequestWorkload):
    """Server lifecycle: startup to healthy, the cold first request, then warm steady state."""

    kind: Literal["serve"] = "serve"
    id: str = Field("serve", description="Name of this workload, used in tables.")
    cold_starts: int = Field(3, ge=1, le=20, description="Server starts, each followed by one cold request "
                             "(an endpoint given by URL is started by nobody: one cold request).")
    requests: int = Field(10, ge=1, description="Timed warm requests after the last start (the warm samples).")


@register_test_kind
class ConcurrencyTest(RequestWorkload):
    """Concurrency sweep: aggregate throughput, latency percentiles and SLO goodput per level."""

    kind: Literal["concurrency"] = "concurrency"
    id: str = Field("concurrency", description="Name of this workload, used in tables.")
    levels: list[int] = Field(default_factory=lambda: [1, 2, 4, 8],
                              description="Concurrency levels: that many clients, each sending requests back to back.")
    rounds: int = Field(2, ge=1, le=100, description="Requests each client sends at a level (a level sends level x rounds).")

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("levels must name at least one concurrency level")
        if any(x < 1 for x in v):
            raise ValueError(f"concurrency levels must be >= 1 (got {v})")
        if sorted(set(v)) != v:
            raise ValueError(f"levels must be increasing and distinct (got {v})")
        if v[-1] > 256:
            raise ValueError(f"a level above 256 clients is not supported (got {v[-1]})")
        return v


def workload_fingerprint(test: dict[str, Any]) -> str:
    """What a request asks for, as text: equal for a ``chat``, ``serve`` or ``concurrency`` test
    that sends the same request (defaults of the ``chat`` kind filled in where absent)."""
    defaults = {"max_tokens": 64, "temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                "repeat_penalty": 1.0, "ignore_eos": False}
    ident = {k: test.get(k, defaults.get(k)) for k in WORKLOAD_FIELDS}
    return json.dumps(ident, sort_keys=True)
