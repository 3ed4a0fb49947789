"""The ``chat`` kind: a real chat request through the model's template and sampler, streamed.

TTFT, TPOT, E2E latency, output tokens and inter-token latency percentiles, per request.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Kind, Message, Samples, SpeculativeStats, TestSpec
from core.kinds.request import RequestDetails, RequestRecord, request_values


class ChatTest(TestSpec):
    """A streamed chat completion through the model's chat template and sampler."""

    METHOD_FIELDS: ClassVar[frozenset[str]] = TestSpec.METHOD_FIELDS | {
        "requests",
        "warmup_requests",
    }
    kind: Literal["chat"] = "chat"
    id: str = Field("chat", description="Name of this chat workload, used in tables.")
    messages: list[Message] = Field(
        default_factory=lambda: [
            Message(
                role="user", content="Explain in three sentences why the sky is blue."
            )
        ],
        description="The conversation sent on every request.",
    )
    max_tokens: int = Field(
        64, ge=1, description="Maximum tokens generated per request."
    )
    requests: int = Field(5, ge=1, description="Timed requests (the samples).")
    warmup_requests: int = Field(
        1, ge=0, description="Untimed requests before the timed ones."
    )
    temperature: float = Field(
        0.0, ge=0.0, description="Sampling temperature (0 = greedy)."
    )
    top_k: int = Field(40, ge=0, description="Top-k sampling.")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling.")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="Min-p sampling.")
    repeat_penalty: float = Field(
        1.0, gt=0.0, description="Repetition penalty (1.0 = off)."
    )
    ignore_eos: bool = Field(
        False,
        description="Keep generating past EOS up to max_tokens (fixed-length decode).",
    )

    @property
    def name(self) -> str:
        return self.id


class ChatSamples(Samples):
    requests: list[RequestRecord] | None = Field(
        None, description="The timed requests."
    )
    warmup: list[RequestRecord] | None = Field(
        None, description="The untimed requests before them (over HTTP)."
    )


class ChatDetails(RequestDetails):
    prefix_cache: bool | None = Field(
        None, description="In process: whether requests could reuse a cached prefix."
    )
    speculative: SpeculativeStats | None = None


Send = Callable[[int], dict[str, Any]]


@dataclass
class RequestRun:
    """What :func:`run_requests` measured: the timed request records, their metrics, the warm-up
    count and records, and how repetition stopped (core.precision)."""

    records: list[dict[str, Any]]
    metrics: dict[str, list[float]]
    warmup: int
    precision: dict[str, Any]
    warmup_records: list[dict[str, Any]] = field(default_factory=list)


def request_metrics(
    records: list[dict[str, Any]], failures: bool = False
) -> dict[str, list[float]]:
    """The per-request metrics of a run's records. ``failures``: a request can fail (over a
    network): a failed record (``ok`` false) stays in the samples, is left out of every metric
    and counted in ``failed_requests``."""
    ok = [r for r in records if r.get("ok", True)]
    out: dict[str, list[float]] = {
        "ttft_ms": [r["ttft_ms"] for r in ok if r["ttft_ms"] is not None],
        "tpot_ms": [r["tpot_ms"] for r in ok if r["tpot_ms"] is not None],
        "e2e_ms": [r["e2e_ms"] for r in ok],
        "output_tokens": [
            r["output_tokens"] for r in ok if r["output_tokens"] is not None
        ],
        "decode_tps": [1000.0 / r["tpot_ms"] for r in ok if r["tpot_ms"]],
        "itl_ms": [g for r in ok for g in r["itl_ms"]],
    }
    if failures:
        out["failed_requests"] = [len(records) - len(ok)]
    return out


def run_requests(
    test: ChatTest,
    request: Send | None,
    seed: int,
    *,
    session: Callable[[], AbstractContextManager[Send]] | None = None,
    failures: bool = False,
) -> RequestRun:
    """The chat kind's loop over one backend primitive, ``request(seed) -> record`` (one streamed
    request, timed by the backend: ttft_ms, tpot_ms, e2e_ms, output_tokens, itl_ms, ...): the
    untimed warm-up requests (seeds ``seed + 1000 + i``), then timed requests (seeds ``seed + i``)
    until the precision target on the judged metric (E2E latency by default) or the fixed count.

    A backend whose requests share a transport (one HTTP connection held across a sequence)
    passes ``session`` instead: it opens a sequence and gives its ``request``; the warm-up and
    the timed requests are one sequence each. With ``failures`` a request may fail: its record
    says ``ok: false``, it counts as a sample without a value, and the metrics leave it out
    (:func:`request_metrics`)."""
    from core.precision import Repeater

    def sequence() -> AbstractContextManager[Send]:
        if session is not None:
            return session()
        assert request is not None
        return nullcontext(request)

    warm = test.warmup_requests if test.warmup is not False else 0
    warmup_records: list[dict[str, Any]] = []
    if warm:
        with sequence() as send:
            warmup_records = [send(seed + 1000 + i) for i in range(warm)]
    rep = Repeater(test.precision, test.requests, "e2e_ms")
    records: list[dict[str, Any]] = []
    with sequence() as send:
        while rep.more():
            records.append(send(seed + len(records)))
            r = records[-1]
            if not r.get("ok", True):
                rep.add(None)
                continue
            per_request = {
                "ttft_ms": r["ttft_ms"],
                "tpot_ms": r["tpot_ms"],
                "e2e_ms": r["e2e_ms"],
                "output_tokens": r["output_tokens"],
                "decode_tps": 1000.0 / r["tpot_ms"] if r["tpot_ms"] else None,
            }
            if (
                rep.metric not in per_request
            ):  # a metric a request does not carry: judged on E2E, and recorded so
                rep.metric = "e2e_ms"
            rep.add(per_request[rep.metric])
    return RequestRun(
        records,
        request_metrics(records, failures),
        warm,
        rep.record(),
        warmup_records,
    )


def _values(samples: ChatSamples, metric: str) -> list[float]:
    return request_values(samples.requests, metric)


KIND = register(
    Kind(
        "chat",
        ChatTest,
        "A streamed chat completion through the model's chat template and sampler.",
        headline="ttft_ms",
        columns=("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"),
        metrics=(
            "ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "output_tokens",
            "decode_tps",
            "itl_ms",
            "load_time_s",
            "peak_rss_bytes",
            "peak_vram_bytes",
            "startup_ms",
            "failed_requests",
        ),
        details=ChatDetails,
        samples=ChatSamples,
        values=_values,
    )
)
