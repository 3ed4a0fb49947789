"""The ``agent_loop`` kind: multi-step tool-calling loops under injected tool faults.

A controller asks the model (an OpenAI-compatible chat endpoint) for one action at a time -
call a tool, or answer - runs the tool, hands back its result, and repeats until the model
answers or a step limit. The tools live in a tool service that injects faults: every k-th call
fails, every m-th hangs past the controller's timeout; the controller retries a failed call a
set number of times. Each fault **profile** (baseline → aggressive) runs every scenario twice
per episode: with the tools **internal** (a function call in the controller's process) and
**external** (the same tool service behind a real HTTP hop on loopback), in alternating order,
each placement with its own call counter so both meet the same faults at the same calls.

Per profile and placement: success rate (Wilson CI95), steps to convergence (model turns of a
successful episode), episode latency, tool-call latency and retries; per profile the
external/internal ratios with CI95 and the success difference with a paired exact test. The
functions here compute all of it from the episode records, so a page recomputes what the run
stored from the samples it links to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core import stats
from core.kinds import register
from core.kinds.base import Kind, Message, Samples, Shape, TestSpec
from core.kinds.request import RequestDetails, RequestError

Scenario = Literal["lookup", "add", "chain"]
Placement = Literal["internal", "external"]
SCENARIOS: tuple[Scenario, ...] = ("lookup", "add", "chain")
PLACEMENTS: tuple[Placement, ...] = ("internal", "external")


class FaultProfile(BaseModel):
    """How the tool service misbehaves, and how the controller copes."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        ...,
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Name of the profile in tables (e.g. p04-mixed-aggressive).",
    )
    fail_every: int | None = Field(
        None,
        ge=1,
        description="Every k-th tool call fails (HTTP 500 / an error); null = never.",
    )
    timeout_every: int | None = Field(
        None,
        ge=1,
        description="Every m-th tool call hangs for hang_s (past the controller's "
        "timeout); null = never. A call that is both k-th and m-th hangs.",
    )
    hang_s: float = Field(
        0.9,
        gt=0,
        le=60,
        description="How long a hanging tool call sleeps before it answers.",
    )
    tool_timeout_s: float = Field(
        0.25, gt=0, le=60, description="Controller timeout of one tool call attempt."
    )
    retries: int = Field(
        1,
        ge=0,
        le=5,
        description="Controller retries of a failed or timed-out tool call.",
    )
    backoff_s: float = Field(
        0.02,
        ge=0,
        le=10,
        description="Wait before a retry (doubled for each next one).",
    )


def default_profiles() -> list[FaultProfile]:
    """Baseline to aggressive, the shape of the seed's routing matrix (p00-p05)."""
    return [
        FaultProfile(name="p00-baseline"),
        FaultProfile(name="p01-fail-mild", fail_every=8),
        FaultProfile(name="p02-timeout-mild", timeout_every=8),
        FaultProfile(name="p03-mixed-moderate", fail_every=4, timeout_every=6),
        FaultProfile(name="p04-mixed-aggressive", fail_every=2, timeout_every=3),
        FaultProfile(
            name="p05-aggressive-retry2", fail_every=2, timeout_every=3, retries=2
        ),
    ]


class AgentLoopTest(TestSpec):
    """Tool-calling agent loops under injected faults, tools internal vs external."""

    kind: Literal["agent_loop"] = "agent_loop"
    id: str = Field("agent-loop", description="Name of this workload, used in tables.")
    scenarios: list[Scenario] = Field(
        default_factory=lambda: list(SCENARIOS),
        description="Built-in tasks: lookup (one lookup call), add (one add call), chain (a lookup whose value "
        "names the key of a second lookup).",
    )
    episodes: int = Field(
        3, ge=1, le=200, description="Episodes per scenario, profile and placement."
    )
    profiles: list[FaultProfile] = Field(
        default_factory=default_profiles, description="Fault profiles, in order."
    )
    placements: list[Placement] = Field(
        default_factory=lambda: list(PLACEMENTS),
        description="internal: tools called in the controller's process; external: the same tool service over HTTP.",
    )
    max_steps: int = Field(
        6,
        ge=1,
        le=50,
        description="Model turns per episode at most (an episode without an answer "
        "by then fails).",
    )
    max_tokens: int = Field(48, ge=8, description="Tokens per model turn at most.")
    temperature: float = Field(
        0.0,
        ge=0.0,
        description="Sampling temperature (0 = greedy: the two placements of an "
        "episode then see the same model turns).",
    )
    constrained: bool = Field(
        True,
        description="Ask for JSON matching the action schema (response_format json_object "
        "with a schema: llama-server and llama_cpp.server turn it into a grammar).",
    )
    tool_service_url: str | None = Field(
        None,
        description="External placement: this tool service (POST {url}/call) "
        "instead of the one the run starts on loopback.",
    )
    seed: int = Field(0, ge=0, description="Seed of the episodes' tasks.")
    uncertainty_threshold: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="Uncertainty gate (seed 004's uncertainty arm): ask the server for the sampled tokens' "
        "log-probabilities, and where a turn's confidence (its least likely token's probability) is below this, "
        "escalate: ask the model again at that step, told it was unsure (once per step). null = no gate.",
    )

    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("uncertainty_threshold",)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for name in (
            self.OMITTED_AT_DEFAULT
        ):  # tests measured before the gate keep their identity
            if d.get(name) == type(self).model_fields[name].default:
                d.pop(name, None)
        return d

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, v: list[FaultProfile]) -> list[FaultProfile]:
        if not v:
            raise ValueError("profiles must name at least one fault profile")
        names = [p.name for p in v]
        if len(set(names)) != len(names):
            raise ValueError(f"profile names must be distinct (got {names})")
        return v

    @field_validator("scenarios", "placements")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"must name at least one, each once (got {v})")
        return v

    @field_validator("tool_service_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(
                f"tool_service_url must start with http:// or https:// (got {v!r})"
            )
        return v.rstrip("/") if v else v

    @property
    def name(self) -> str:
        return self.id


# -- what a run stores ------------------------------------------------------------------------
class ToolAttempt(Shape):
    """One attempt at a tool call, timed by the controller."""

    ok: bool = Field(
        ..., description="The tool answered within the controller's timeout."
    )
    ms: float = Field(
        ..., description="Time of the attempt (ms), ended at the timeout at the latest."
    )
    error: str | None = Field(
        None,
        description="timeout, injected_failure, tool_error, connect_error, http_<status>.",
    )
    message: str | None = None
    result: Any = Field(
        None, description="What the tool returned (a successful attempt)."
    )


class ToolStep(Shape):
    """One tool action of the model: its attempts (retries included) and how the step ended."""

    name: str | None = Field(None, description="The tool the model called.")
    args: Any = None
    attempts: list[ToolAttempt] = Field(default_factory=list)
    ok: bool | None = None
    ms: float | None = Field(
        None, description="The whole step, back-off included (ms)."
    )
    failed: bool | None = Field(
        None,
        description="Every attempt failed or timed out (a refusal of bad arguments is not a failure).",
    )
    result: Any = None
    error: str | None = None


class ModelTurn(Shape):
    """One model turn: a streamed chat completion."""

    ok: bool | None = None
    e2e_ms: float | None = None
    ttft_ms: float | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    text: str | None = Field(
        None, description="What the model wrote (the first 500 characters)."
    )
    error: RequestError | None = None


class AgentTurn(Shape):
    step: int
    model: ModelTurn | None = None
    confidence: float | None = Field(
        None,
        description="The turn's least likely sampled token's probability (the uncertainty gate's measure).",
    )
    escalated: bool = Field(
        False, description="Below the gate: the model was asked again at this step."
    )
    action: dict[str, Any] | None = Field(
        None, description="The action parsed from the model's text; null: none."
    )
    tool: ToolStep | None = None


class InjectedFaults(Shape):
    fail: int = 0
    timeout: int = 0


class Episode(Shape):
    """One episode: a task, the model's turns and tool steps, and how it ended."""

    profile: str
    placement: Literal["internal", "external"]
    scenario: str
    episode: int = Field(
        ...,
        description="The task's index within its scenario (the pair key with profile and scenario).",
    )
    task: str | None = None
    expected: str | None = None
    answer: str | None = None
    success: bool = Field(
        ..., description="The model's answer equals the expected value."
    )
    end_reason: str = Field(
        ..., description="answer, max_steps, model_error or server_lost."
    )
    steps: int = Field(..., ge=0, description="Model turns.")
    loop_ms: float = Field(..., description="The whole episode (ms).")
    model_ms: float | None = None
    tool_ms: float = Field(0.0, description="Time in tool steps (ms).")
    tool_steps: int = 0
    tool_calls: int = Field(0, description="Tool call attempts (retries included).")
    tool_retries: int = 0
    tool_failures: int = Field(0, description="Tool steps whose every attempt failed.")
    tool_refusals: int = 0
    invalid_actions: int = 0
    escalations: int = Field(0, description="Turns the uncertainty gate escalated.")
    injected: InjectedFaults = Field(default_factory=InjectedFaults)
    turns: list[AgentTurn] = Field(default_factory=list)

    def attempts(self) -> list[ToolAttempt]:
        return [a for t in self.turns if t.tool is not None for a in t.tool.attempts]


class AgentSamples(Samples):
    episodes: list[Episode] | None = None


class AgentProtocol(Shape):
    """What the model is given: the system message, a solved example and the action schema."""

    system: str | None = None
    example: list[Message] | None = None
    action_schema: dict[str, Any] | None = Field(
        None,
        alias="schema",
        description="The JSON schema of an action (null: unconstrained).",
    )
    reask: str | None = None
    escalate: str | None = None
    uncertainty_threshold: float | None = None


class AgentFacts(Shape):
    matrix: dict[str, Any] | None = Field(
        None,
        description="The figures as the run computed them (matrix_stats); "
        "pages compute them again from the episodes.",
    )
    tool_service: dict[str, Any] | None = Field(
        None,
        description="The external placement's tool service: managed, "
        "url, command, start and stop.",
    )
    protocol: AgentProtocol | None = None
    method: str | None = None


class AgentDetails(RequestDetails):
    agent: AgentFacts | None = None


# -- statistics from episode records ----------------------------------------------------------
def episodes_of(raw: Iterable[Episode | Mapping[str, Any]]) -> list[Episode]:
    """Episode records typed (the run hands over dicts; an artifact's samples are typed already)."""
    return [e if isinstance(e, Episode) else Episode.model_validate(e) for e in raw]


def _summary(values: list[float]) -> dict[str, Any]:
    return stats.summarize([float(v) for v in values if v is not None])


def _attempt_ms(episodes: list[Episode]) -> list[float]:
    return [a.ms for e in episodes for a in e.attempts()]


def cell_stats(episodes: Iterable[Episode | Mapping[str, Any]]) -> dict[str, Any]:
    """One (profile, placement) cell: success with its Wilson CI95, steps to convergence of the
    successful episodes, episode and tool-call latency, retries per episode, failure counts."""
    episodes = episodes_of(episodes)
    n = len(episodes)
    ok = [e for e in episodes if e.success]
    lo, hi = stats.wilson_interval(len(ok), n)
    tool_steps = sum(e.tool_steps for e in episodes)
    return {
        "episodes": n,
        "successes": len(ok),
        "success_rate": len(ok) / n if n else None,
        "success_ci95": [lo, hi],
        "steps": _summary([e.steps for e in ok]),
        "loop_ms": _summary([e.loop_ms for e in episodes]),
        "tool_ms": _summary([e.tool_ms for e in episodes if e.tool_calls]),
        "tool_attempt_ms": _summary(_attempt_ms(episodes)),
        "retries": _summary([e.tool_retries for e in episodes]),
        "tool_calls": sum(e.tool_calls for e in episodes),
        "tool_failures": sum(e.tool_failures for e in episodes),
        "injected": {
            "fail": sum(e.injected.fail for e in episodes),
            "timeout": sum(e.injected.timeout for e in episodes),
        },
        "tool_error_rate": sum(e.tool_failures for e in episodes) / tool_steps
        if tool_steps
        else None,
        "end_reasons": {
            r: sum(1 for e in episodes if e.end_reason == r)
            for r in sorted({e.end_reason for e in episodes})
        },
    }


def _pair_key(e: Episode) -> tuple[str, str, int]:
    return e.profile, e.scenario, e.episode


def _pairs(
    internal: list[Episode], external: list[Episode]
) -> list[tuple[Episode, Episode]]:
    """The same task (profile, scenario, episode) in both placements."""
    ext = {_pair_key(e): e for e in external}
    return [(e, ext[_pair_key(e)]) for e in internal if _pair_key(e) in ext]


def placement_comparison(
    internal: Iterable[Episode | Mapping[str, Any]],
    external: Iterable[Episode | Mapping[str, Any]],
) -> dict[str, Any]:
    """External against internal in one profile: latency ratios (ratio of means, CI95 on the log
    scale) of the whole episode and of one tool call, and the success difference on the same
    episodes (paired: exact McNemar, Agresti-Min CI95)."""
    internal, external = episodes_of(internal), episodes_of(external)
    pairs = _pairs(internal, external)
    b = sum(1 for i, e in pairs if i.success and not e.success)  # internal only
    c = sum(1 for i, e in pairs if e.success and not i.success)  # external only
    n = len(pairs)
    lo, hi = stats.paired_difference_ci(b, c, n)
    return {
        "loop_ms": stats.compare(
            [e.loop_ms for e in internal], [e.loop_ms for e in external], False
        ).to_dict(),
        "tool_ms": stats.compare(
            [e.tool_ms for e in internal if e.tool_calls],
            [e.tool_ms for e in external if e.tool_calls],
            False,
        ).to_dict(),
        "tool_attempt_ms": stats.compare(
            _attempt_ms(internal), _attempt_ms(external), False
        ).to_dict(),
        "success": {
            "pairs": n,
            "internal_only": b,
            "external_only": c,
            "delta": (c - b) / n if n else None,
            "ci95": [lo, hi],
            "p_value": stats.mcnemar_exact(b, c) if b + c else None,
            "verdict": stats.paired_verdict(b, c),
        },
    }


def matrix_stats(
    episodes: Iterable[Episode | Mapping[str, Any]], profiles: list[str] | None = None
) -> dict[str, Any]:
    """Every cell of the profile x placement matrix, the per-profile external/internal
    comparison, and the whole run pooled per placement."""
    episodes = episodes_of(episodes)
    order = profiles or list(dict.fromkeys(e.profile for e in episodes))
    cells: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    for prof in order:
        by_place = {
            pl: [e for e in episodes if e.profile == prof and e.placement == pl]
            for pl in PLACEMENTS
        }
        for pl in PLACEMENTS:
            if by_place[pl]:
                cells.append(
                    {"profile": prof, "placement": pl, **cell_stats(by_place[pl])}
                )
        if by_place["internal"] and by_place["external"]:
            comparisons.append(
                {
                    "profile": prof,
                    **placement_comparison(by_place["internal"], by_place["external"]),
                }
            )
    pooled = {
        pl: cell_stats([e for e in episodes if e.placement == pl])
        for pl in PLACEMENTS
        if any(e.placement == pl for e in episodes)
    }
    overall = (
        placement_comparison(
            [e for e in episodes if e.placement == "internal"],
            [e for e in episodes if e.placement == "external"],
        )
        if len(pooled) == 2
        else None
    )
    return {
        "profiles": order,
        "cells": cells,
        "comparisons": comparisons,
        "pooled": pooled,
        "overall": overall,
    }


def metrics(episodes: Iterable[Episode | Mapping[str, Any]]) -> dict[str, list[float]]:
    """The run's metric samples, pooled over profiles and placements (the page splits them)."""
    episodes = episodes_of(episodes)
    return {
        "agent_success": [1.0 if e.success else 0.0 for e in episodes],
        "agent_steps": [float(e.steps) for e in episodes if e.success],
        "agent_loop_ms": [e.loop_ms for e in episodes],
        "agent_tool_ms": _attempt_ms(episodes),
        "agent_retries": [float(e.tool_retries) for e in episodes],
    }


def _values(samples: AgentSamples, metric: str) -> list[float]:
    return metrics(samples.episodes or []).get(metric, [])


KIND = register(
    Kind(
        "agent_loop",
        AgentLoopTest,
        "Tool-calling agent loops under injected tool faults (every k-th call fails, every m-th hangs), tools "
        "internal vs external: success, steps to convergence, latency and retries per fault profile.",
        headline=None,
        columns=("agent_success", "agent_steps", "agent_loop_ms", "agent_retries"),
        metrics=(
            "agent_success",
            "agent_steps",
            "agent_loop_ms",
            "agent_tool_ms",
            "agent_retries",
            "startup_ms",
        ),
        details=AgentDetails,
        samples=AgentSamples,
        values=_values,
    )
)
