"""The ``chat`` kind: a real chat request through the model's template and sampler, streamed.

TTFT, TPOT, E2E latency, output tokens and inter-token latency percentiles, per request.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Kind, Message, Samples, SpeculativeStats, TestSpec
from core.kinds.request import RequestDetails, RequestRecord, request_values


class ChatTest(TestSpec):
    """A streamed chat completion through the model's chat template and sampler."""

    kind: Literal["chat"] = "chat"
    id: str = Field("chat", description="Name of this chat workload, used in tables.")
    messages: list[Message] = Field(
        default_factory=lambda: [Message(role="user", content="Explain in three sentences why the sky is blue.")],
        description="The conversation sent on every request.")
    max_tokens: int = Field(64, ge=1, description="Maximum tokens generated per request.")
    requests: int = Field(5, ge=1, description="Timed requests (the samples).")
    warmup_requests: int = Field(1, ge=0, description="Untimed requests before the timed ones.")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature (0 = greedy).")
    top_k: int = Field(40, ge=0, description="Top-k sampling.")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling.")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="Min-p sampling.")
    repeat_penalty: float = Field(1.0, gt=0.0, description="Repetition penalty (1.0 = off).")
    ignore_eos: bool = Field(False, description="Keep generating past EOS up to max_tokens (fixed-length decode).")

    @property
    def name(self) -> str:
        return self.id


class ChatSamples(Samples):
    requests: list[RequestRecord] | None = Field(None, description="The timed requests.")
    warmup: list[RequestRecord] | None = Field(None, description="The untimed requests before them (over HTTP).")


class ChatDetails(RequestDetails):
    prefix_cache: bool | None = Field(None, description="In process: whether requests could reuse a cached prefix.")
    speculative: SpeculativeStats | None = None


def _values(samples: ChatSamples, metric: str) -> list[float]:
    return request_values(samples.requests, metric)


KIND = register(Kind(
    "chat", ChatTest, "A streamed chat completion through the model's chat template and sampler.",
    headline="ttft_ms", columns=("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"),
    metrics=("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens", "decode_tps", "itl_ms", "load_time_s",
             "peak_rss_bytes", "peak_vram_bytes", "startup_ms", "failed_requests"),
    details=ChatDetails, samples=ChatSamples, values=_values))
