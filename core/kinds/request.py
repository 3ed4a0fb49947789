"""What the serving kinds send: one streamed chat request, as a ``chat`` test sends it.

``serve`` and ``concurrency`` (and the load profiles) send the same request a ``chat`` test
sends (messages, max_tokens, sampling), so a server can be compared with the in-process
backend on identical prompts (:func:`workload_fingerprint`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from core.kinds.base import Details, Message, PerfCounters, Shape, TestSpec

# The fields that define what one request asks for; two tests with equal values send the
# same request (the basis of in-process vs server comparisons).
WORKLOAD_FIELDS = (
    "messages",
    "max_tokens",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "ignore_eos",
)


class RequestWorkload(TestSpec):
    """Base of the serving kinds: one streamed chat request, as a ``chat`` test sends it."""

    METHOD_FIELDS: ClassVar[frozenset[str]] = TestSpec.METHOD_FIELDS | {
        "requests",
        "warmup_requests",
        "cold_starts",
        "rounds",
    }

    id: str = Field("serve", description="Name of this workload, used in tables.")
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
    warmup_requests: int = Field(
        1, ge=0, description="Untimed requests before the timed ones."
    )
    temperature: float = Field(
        0.0, ge=0.0, description="Sampling temperature (0 = greedy)."
    )
    top_k: int = Field(
        40,
        ge=0,
        description="Top-k sampling (sent as a non-OpenAI field; llama.cpp and vLLM read it).",
    )
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="Nucleus sampling.")
    min_p: float = Field(
        0.05, ge=0.0, le=1.0, description="Min-p sampling (non-OpenAI field)."
    )
    repeat_penalty: float = Field(
        1.0, gt=0.0, description="Repetition penalty, 1.0 = off (non-OpenAI field)."
    )
    ignore_eos: bool = Field(
        False,
        description="Ask for exactly max_tokens (sends ignore_eos and min_tokens).",
    )

    @property
    def name(self) -> str:
        return self.id


def workload_fingerprint(test: dict[str, Any]) -> str:
    """What a request asks for, as text: equal for a ``chat``, ``serve`` or ``concurrency`` test
    that sends the same request (defaults of the ``chat`` kind filled in where absent)."""
    defaults = {
        "max_tokens": 64,
        "temperature": 0.0,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "ignore_eos": False,
    }
    ident = {k: test.get(k, defaults.get(k)) for k in WORKLOAD_FIELDS}
    return json.dumps(ident, sort_keys=True)


# -- what the request kinds store -------------------------------------------------------------------
class RequestError(Shape):
    reason: str | None = Field(
        None,
        description="Why the request failed (timeout_total, server_lost, http_5xx, ...).",
    )
    message: str | None = None


class RequestRecord(Shape):
    """One streamed chat request as measured: over HTTP (runtime.backends.openai_http.client: ``ok``,
    ``error``, attempts and offsets from its phase's start) or in process (no ``ok``: a request that
    fails there fails the run; the stage split and llama.cpp's counters instead)."""

    ok: bool = Field(
        True, description="The request succeeded (absent in process: it did)."
    )
    error: RequestError | None = None
    attempts: int | None = None
    retries: list[dict[str, Any]] | None = None
    status: int | None = Field(None, description="HTTP status.")
    start_ms: float | None = None
    end_ms: float | None = None
    chunks: int | None = None
    finish_reason: str | None = None
    text: str | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: list[float] | None = None
    output_tokens: int | None = None
    output_tokens_source: str | None = Field(
        None, description="usage (the server's count) or chunks."
    )
    prompt_tokens: int | None = None
    first_token_ms: float | None = None
    last_token_ms: float | None = None
    partial_chunks: int | None = None
    elapsed_ms: float | None = None
    stages_ms: dict[str, float] | None = Field(
        None,
        description="In process: tokenise, prefill, decode, sample, "
        "detokenise, other (ms).",
    )
    stage_calls: dict[str, int] | None = None
    llama_perf: PerfCounters | None = None
    startup_ms: float | None = Field(
        None, description="serve: the start that preceded this cold request."
    )
    cold_start: int | None = None
    level: int | None = Field(
        None, description="concurrency: the level, client and round of the request."
    )
    user: int | None = None
    round: int | None = None


def request_values(records: Sequence[RequestRecord] | None, metric: str) -> list[float]:
    """The values of one per-request metric over the successful requests (decode_tps: 1000 / TPOT)."""
    out: list[float] = []
    for r in records or ():
        if not r.ok:
            continue
        if metric == "decode_tps":
            if r.tpot_ms:
                out.append(1000.0 / r.tpot_ms)
            continue
        v = (
            getattr(r, metric, None)
            if metric in RequestRecord.model_fields
            else (r.model_extra or {}).get(metric)
        )
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out


class ServerFacts(Shape):
    """The server a request kind talked to, as the HTTP backend saw it."""

    managed: bool | None = Field(
        None, description="Started by the backend (true) or given by URL."
    )
    command: list[str] | None = None
    base_url: str | None = None
    starts: list[dict[str, Any]] | None = Field(
        None, description="Each start: port, pid, startup_ms, how it stopped."
    )
    served_models: list[str | None] | None = None
    log_facts: dict[str, Any] | None = Field(
        None, description="From the server's log: generations and prefix-cache hits."
    )
    llama_log_facts: dict[str, Any] | None = Field(
        None,
        description="From llama.cpp's log in the server: flash "
        "attention, offloaded layers, slots.",
    )


class SloRecord(Shape):
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    attainment: float | None = None


class RequestPolicyRecord(Shape):
    request_timeout_s: float | None = None
    read_timeout_s: float | None = None
    connect_timeout_s: float | None = None
    retries: int | None = None
    retry_backoff_s: float | None = None


class FaultFacts(Shape):
    """Injected transient errors (runtime.backends.openai_http.faults): a loopback proxy answered every
    k-th chat request attempt with an error status at once and forwarded the rest."""

    every: int | None = Field(
        None,
        description="Every k-th attempt (warm-ups and retries counted) was answered with an error.",
    )
    status: int | None = Field(
        None, description="The HTTP status of an injected error."
    )
    attempts: int | None = Field(
        None, description="Chat request attempts the proxy saw."
    )
    injected: int | None = Field(
        None, description="Attempts answered with the injected error."
    )
    forwarded: int | None = Field(None, description="Attempts forwarded to the server.")
    method: str | None = None


class RequestDetails(Details):
    """What a run of a request kind keeps beside its samples (over HTTP: the endpoint and server)."""

    endpoint: str | None = Field(
        None, description="How the model was reached: the server's label."
    )
    server: ServerFacts | None = None
    slo: SloRecord | None = None
    request_policy: RequestPolicyRecord | None = None
    faults: FaultFacts | None = Field(
        None,
        description="Injected transient errors (settings fault_every, fault_status); "
        "absent without them.",
    )
    warmup_requests: int | None = None


# -- request records bounded in the artifact (core.request_records): load, capacity, concurrency --
class SampledRecord(Shape):
    """A level whose request records were bounded (core.request_records): ``kept`` of ``of`` stored."""

    kept: int = Field(..., description="Request records stored at this level.")
    of: int = Field(
        ...,
        description="Requests the level sent (every statistic is over all of them).",
    )
    seed: int = Field(
        ...,
        description="random.Random seed of the reservoir (the test's seed + the level's index).",
    )
    method: str = Field(..., description="How they were chosen.")


class RequestRecordsFile(Shape):
    """The full request records written beside the artifact (gzip-compressed JSON lines, one a request,
    each with its ``level_index``)."""

    file: str = Field(
        ...,
        pattern=r"^[^/\\.][^/\\]*\.requests\.jsonl\.gz$",
        description="File name, beside the artifact.",
    )
    sha256: str = Field(
        ..., pattern=r"^[0-9a-f]{64}$", description="sha256 of the file's bytes."
    )
    records: int = Field(..., ge=0, description="Lines (requests) in it.")
    bytes: int = Field(..., ge=0, description="Its size.")


class RequestRecordsRecord(Shape):
    """How the run's request records were stored (core.request_records)."""

    limit: int = Field(
        ..., description="Most request records a level stores (requests_kept)."
    )
    kept: int = Field(..., description="Records stored in the artifact, all levels.")
    of: int = Field(..., description="Requests sent, all levels.")
    sampled: bool = Field(..., description="Whether any level stores a sample.")
    full: RequestRecordsFile | None = Field(
        None,
        description="Every record, beside the artifact (keep_all_requests), when a level was sampled.",
    )
