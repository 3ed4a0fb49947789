"""The ``probe`` kind: what an endpoint can do, case by case (seed 004's endpoint probe matrix).

Cases (each sent ``repeats`` times; success, latency and the failure reason recorded per try):

* ``chat``: a plain streamed chat answer (content arrives, the stream finishes);
* ``stream_usage``: the same with ``stream_options.include_usage``: does the server report
  token usage in the stream (vLLM, TGI, llama-server do; llama_cpp.server does not);
* ``tool_call``: a first turn offering one function; success is a ``tool_calls`` entry naming it
  with JSON arguments;
* ``tool_followup``: the conversation continued with the tool's result (an assistant turn that
  called the function, a ``tool`` message): success is a text answer;
* ``json_mode``: ``response_format: {type: json_object}``: success is content that parses as a
  JSON object;
* ``json_schema``: ``response_format: {type: json_schema, ...}``: success is JSON that validates
  against the schema.

A case a server refuses (an HTTP error, a parameter it does not know) is a failure with the
server's own message, never a crash of the run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from core.kinds import register
from core.kinds.base import Kind, Samples, Shape, TestSpec
from core.kinds.request import RequestDetails

CASES = (
    "chat",
    "stream_usage",
    "tool_call",
    "tool_followup",
    "json_mode",
    "json_schema",
)
CASE_HELP = {
    "chat": "plain streamed chat",
    "stream_usage": "usage reported in the stream (stream_options.include_usage)",
    "tool_call": "tool call, first turn",
    "tool_followup": "tool call, follow-up with the tool's result",
    "json_mode": "JSON mode (response_format json_object)",
    "json_schema": "structured output (response_format json_schema)",
}


class ProbeTest(TestSpec):
    """Endpoint probe: plain chat, usage in the stream, tool call and follow-up, JSON mode, structured output."""

    kind: Literal["probe"] = "probe"
    id: str = Field("probe", description="Name of this test, used in tables.")
    cases: list[str] = Field(
        default_factory=lambda: list(CASES),
        description="Cases to run: "
        + "; ".join(f"{k}: {v}" for k, v in CASE_HELP.items())
        + ".",
    )
    repeats: int = Field(
        3,
        ge=1,
        le=100,
        description="Tries of each case (success rate and latency over them).",
    )
    max_tokens: int = Field(
        96, ge=8, le=4096, description="Most tokens of each answer."
    )

    @field_validator("cases")
    @classmethod
    def _cases(cls, v: list[str]) -> list[str]:
        unknown = [c for c in v if c not in CASES]
        if unknown:
            raise ValueError(
                f"unknown probe case {unknown[0]!r} (known: {', '.join(CASES)})"
            )
        if not v or len(set(v)) != len(v):
            raise ValueError("cases must name at least one case, each once")
        return v

    @property
    def name(self) -> str:
        return self.id


class ProbeTry(Shape):
    """One try of a case: success, latency and the failure reason (the server's own message)."""

    ok: bool
    latency_ms: float | None = None
    reason: str | None = None
    status: int | None = Field(None, description="HTTP status.")
    ttft_ms: float | None = None
    finish_reason: str | None = None
    output_tokens_source: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    first_turn: str | None = None


class ProbeCaseSummary(Shape):
    """One case over its tries."""

    case: str
    description: str | None = None
    n: int
    succeeded: int
    success_rate: float | None = None
    latency_ms_median: float | None = None
    reasons: list[str] = Field(default_factory=list)


class ProbeCase(ProbeCaseSummary):
    tries: list[ProbeTry] = Field(default_factory=list)


class ProbeSamples(Samples):
    cases: dict[str, ProbeCase] | None = None


class ProbeDetails(RequestDetails):
    probe: dict[str, ProbeCaseSummary] | None = Field(
        None, description="Per case: tries, successes, median latency, failure reasons."
    )


def _values(samples: ProbeSamples, metric: str) -> list[float]:
    if metric == "probe_success_rate":
        return [
            c.success_rate
            for c in (samples.cases or {}).values()
            if c.success_rate is not None
        ]
    return []


KIND = register(
    Kind(
        "probe",
        ProbeTest,
        "Endpoint probe: plain chat, usage in the stream, tool call first turn and follow-up, JSON "
        "mode and structured output; success, latency and failure reason per case.",
        headline=None,
        columns=("probe_success_rate",),
        metrics=("probe_success_rate", "startup_ms"),
        details=ProbeDetails,
        samples=ProbeSamples,
        values=_values,
    )
)
