"""The ``load`` kind: a load profile, at one level or swept over several.

Profiles (GuideLLM's names):

* ``synchronous``: one request at a time (one user, closed loop);
* ``concurrent``: N users, each sending its next request when the last one ends (closed loop);
  ``levels`` are user counts;
* ``constant`` / ``poisson``: requests arrive at a rate whatever the server does (open loop);
  ``levels`` are rates in requests per second; Poisson inter-arrival times come from a seeded
  generator (vLLM ``bench serve --request-rate``, MLPerf's Server scenario);
* ``gamma``: bursts: gamma-distributed gaps of mean 1 / rate and shape ``burstiness`` (vLLM's
  ``--burstiness``: 1 is Poisson, below 1 burstier, above 1 more regular);
* ``trace``: a recorded trace's own arrival times (the ``trace`` workload); ``levels`` are
  speed-ups (1: as recorded, 2: twice as fast).

An open-loop rate may ramp up (``ramp_up``: linear or exponential from ``ramp_up_start`` to the
level over the level's requests, vLLM's ``--ramp-up-strategy``). Headline figures may be taken
over the steady-state window only (``steady_state``, ``core.kinds.steady``), and a level may stop
at over-saturation (``oversaturation_stop``: the TTFT and in-flight slopes, GuideLLM's test).

Every request is a record: when it was scheduled, when it was sent (the difference is the
client's own queueing, kept apart from the server's latency), first token, every chunk, end,
usage tokens, error. Each level sends ``requests`` requests (or repeats to a precision); the
artifact keeps every record and each level's statistics (``core.kinds.load_stats``), and a sweep
says which levels met the SLOs with what confidence and the highest one, with its interval.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from core.kinds import register
from core.kinds.base import Kind, Samples, Shape, TestSpec
from core.kinds.request import (
    RequestDetails,
    RequestRecord,
    RequestRecordsRecord,
    SampledRecord,
)
from core.kinds.workload import Slo, Workload

OPEN_LOOP = ("constant", "poisson", "gamma", "trace")
RATE_PROFILES = ("constant", "poisson", "gamma")  # levels are requests per second
CLOSED_LOOP = ("synchronous", "concurrent")


class LoadSpec(TestSpec):
    """What the load kinds share: a profile, its levels, the workload, the SLOs."""

    id: str = Field("load", description="Name of this test, used in tables.")
    profile: Literal[
        "synchronous", "concurrent", "constant", "poisson", "gamma", "trace"
    ] = Field(
        "poisson",
        description="synchronous, concurrent (closed loop, levels = users), constant, poisson or gamma "
        "(open loop, levels = requests per second), trace (the trace's arrival times, levels = speed-ups).",
    )
    burstiness: float = Field(
        1.0,
        gt=0.0,
        le=100.0,
        description="gamma: the shape of the gaps (1 = Poisson, < 1 burstier).",
    )
    ramp_up: Literal["linear", "exponential"] | None = Field(
        None,
        description="Open loop: the rate ramps up from ramp_up_start to the level over the level's requests.",
    )
    ramp_up_start: float | None = Field(
        None,
        gt=0.0,
        description="ramp_up: the starting rate (requests per second; default a tenth of the level).",
    )
    steady_state: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="Headline figures over the steady-state window only: the longest interval with at least "
        "this fraction of the peak number of requests in flight (SGLang's definition; 0.9 usual). "
        "null: the whole level.",
    )
    telemetry_interval_s: float | None = Field(
        1.0,
        ge=0.1,
        le=60.0,
        description="Scrape the server's Prometheus /metrics every this many seconds while a level runs "
        "(queue depth, running requests, KV occupancy, cache hits; stored per level). null: never.",
    )
    oversaturation_stop: bool = Field(
        False,
        description="Stop a level when TTFT and the requests in flight both grow (a slope test, "
        "GuideLLM's over-saturation stop); the level records why.",
    )
    levels: list[float] = Field(
        default_factory=lambda: [1.0],
        description="Users (closed loop) or requests per "
        "second (open loop); several levels make a sweep, lowest first.",
    )
    workload: Workload = Field(
        default_factory=Workload, description="What each request asks (see Workload)."
    )
    slo: Slo = Field(
        default_factory=Slo,
        description="Percentile latency objectives and their confidence.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the arrival times (open loop); the workload has its own.",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="Open loop: most requests in flight; "
        "the others wait in the client (their wait is queue_ms, kept apart from "
        "the server's latency). null: no cap.",
    )
    warmup_requests: int = Field(
        2, ge=0, description="Untimed requests, one at a time, before the first level."
    )
    cache_reset: Literal["none", "erase", "restart"] = Field(
        "none",
        description="Before each level (and each repeat of it) empty the server's cache: erase (llama-server's "
        "POST /slots/{id}?action=erase: the slots only; its host-memory prompt cache, --cache-ram, keeps "
        "prompts through it) or restart (a server this run started, stopped and started again: every cache "
        "empty). What was done is recorded per level, and each repeat's server-reported cache hit says "
        "whether it ran cold. A managed server is started fresh for each test either way.",
    )

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("levels must name at least one level")
        if any(x <= 0 for x in v):
            raise ValueError(f"levels must be > 0 (got {v})")
        if sorted(set(v)) != v:
            raise ValueError(f"levels must be increasing and distinct (got {v})")
        return v

    @model_validator(mode="after")
    def _profile_levels(self) -> LoadSpec:
        if self.profile in CLOSED_LOOP:
            if any(x != int(x) for x in self.levels):
                raise ValueError(
                    f"profile {self.profile}: levels are user counts, whole numbers (got {self.levels})"
                )
            if self.levels[-1] > 256:
                raise ValueError(
                    f"a level above 256 users is not supported (got {self.levels[-1]:g})"
                )
            if self.profile == "synchronous" and self.levels != [1.0]:
                raise ValueError(
                    "profile synchronous has one level: 1 user (use concurrent for more)"
                )
        elif self.levels[-1] > 10000:
            raise ValueError(
                f"a rate above 10000 requests/s is not supported (got {self.levels[-1]:g})"
            )
        if (self.profile == "trace") != (self.workload.kind == "trace"):
            raise ValueError("the trace profile and the trace workload go together")
        if self.workload.kind == "multi_turn" and self.profile != "concurrent":
            raise ValueError(
                "a multi_turn workload runs with profile concurrent (levels = conversations at once)"
            )
        if self.ramp_up and self.profile not in RATE_PROFILES:
            raise ValueError(
                "ramp_up is for the rate profiles (constant, poisson, gamma)"
            )
        if self.max_concurrency is not None and self.profile in CLOSED_LOOP:
            raise ValueError(
                "max_concurrency is for the open-loop profiles (constant, poisson)"
            )
        return self

    @property
    def name(self) -> str:
        return self.id

    @property
    def open_loop(self) -> bool:
        return self.profile in OPEN_LOOP

    def level_unit(self) -> str:
        if self.profile == "trace":
            return "× speed"
        return "users" if self.profile in CLOSED_LOOP else "req/s"


class LoadTest(LoadSpec):
    """A load profile at each level: ``requests`` requests per level (or to a precision)."""

    kind: Literal["load"] = "load"
    requests: int = Field(
        60,
        ge=1,
        le=100000,
        description="Requests sent at each level (the samples), when "
        "precision is null.",
    )
    repeats: int = Field(
        1,
        ge=1,
        le=20,
        description="Measure each level this many times, one after another, pooled into one level "
        "(each record says its repeat; each repeat's server-reported cache hit is kept apart).",
    )
    repeat_workload: Literal["vary", "same"] = Field(
        "vary",
        description="vary: repeat r draws its prompts and arrival times with the seeds + r, so it never "
        "resends what the server may still hold in its cache; same: every repeat resends the first's "
        "requests (a test about the cache, or one with a cache_reset).",
    )
    warm_intended: bool = Field(
        False,
        description="The test is about the cache: a repeat that finds its prompts in the server's cache "
        "is what it measures and is not flagged as an unintended warm repeat.",
    )


# -- what the load kinds store (``load`` and ``capacity``) ------------------------------------------
class LoadRequestRecord(RequestRecord):
    """One request of a load level: the HTTP client's record plus its place in the schedule."""

    level: float | None = Field(
        None, description="The level (users or requests per second) it was sent at."
    )
    index: int | None = Field(None, description="Its index in the level's schedule.")
    scheduled_ms: float | None = Field(
        None, description="When the profile wanted it sent, from the level's origin."
    )
    queue_ms: float | None = Field(
        None,
        description="Sent - scheduled: the client's own wait, never the server's latency.",
    )
    dispatch_lag_ms: float | None = Field(
        None, description="How late the client's event loop got to it."
    )
    chunk_ms: list[float] | None = Field(
        None,
        description="Arrival of every content chunk, from the request's start "
        "(the inter-chunk gaps are its differences).",
    )
    client_parse_ms: float | None = Field(
        None, description="The client's own time parsing the stream."
    )
    client_serialize_ms: float | None = Field(
        None, description="The client's own time serialising the request body."
    )
    cached_tokens: int | None = Field(
        None, description="Prompt tokens the server took from its prefix cache."
    )
    cached_tokens_source: str | None = Field(
        None, description="Where cached_tokens was read (usage or timings)."
    )
    server_timings: dict[str, Any] | None = Field(
        None, description="The server's own timings (llama-server)."
    )
    prompt_tokens_requested: int | None = None
    output_tokens_requested: int | None = None


class LoadLevel(Shape):
    """One level of a load profile: its requests (every one, or a seeded reservoir sample of them: ``sampled``),
    the client's own overhead, the server's counters."""

    level: float
    index: int | None = None
    wall_s: float | None = None
    planned: int | None = Field(None, description="Requests planned at this level.")
    stop_reason: str | None = Field(
        None,
        description="all_sent, verdict_meets/verdict_misses (a capacity look), "
        "a precision stop, server_lost.",
    )
    requests: list[LoadRequestRecord] = Field(default_factory=list)
    sampled: SampledRecord | None = Field(
        None,
        description="Set when more requests were sent than a level stores (the matrix's requests_kept): "
        "which were kept. Absent: every request is here.",
    )
    client: dict[str, Any] | None = Field(
        None,
        description="The client's CPU time, event-loop lag and the host's load "
        "average at the level's start and end.",
    )
    server_metrics: dict[str, Any] | None = Field(
        None, description="The server's /metrics counters over the level (delta)."
    )
    gpu_telemetry: dict[str, Any] | None = Field(
        None,
        description="NVML sampled at the telemetry interval (runtime.load.gpu_telemetry): "
        "{available, interval_s, gpus [{index, nvml_index, name}], samples [{t_ms, g: per GPU "
        "{util_pct, mem_util_pct, power_w, mem_used_mib}]}}, or {available: false, reason} on a "
        "host without NVML or for a server on another host.",
    )


class LoadSamples(Samples):
    levels: list[LoadLevel] | None = None
    warmup: list[RequestRecord] | None = None


class LoadSloRecord(Shape):
    """The test's percentile SLOs (core.kinds.workload.Slo) as the run judged them."""

    percentile: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    confidence: float | None = None


class LoadDetails(RequestDetails):
    slo: LoadSloRecord | None = None
    request_records: RequestRecordsRecord | None = Field(
        None,
        description="How many request records the artifact stores of those sent; absent: all of them.",
    )
    summary: dict[str, Any] | None = Field(
        None,
        description="Every level's statistics, verdicts and the answer as the "
        "run computed them (core.kinds.load_stats.sweep_summary, versioned; "
        "recomputed from the samples where older).",
    )
    workload: dict[str, Any] | None = Field(
        None,
        description="How the requests were built (tokenizer or text, source "
        "text and its sha256).",
    )
    answer_text: str | None = None
    cache_state: dict[str, Any] | None = Field(
        None,
        description="Cold or warm: whether the run started on a fresh server (its caches empty) or an external one.",
    )


KIND = register(
    Kind(
        "load",
        LoadTest,
        "A load profile (synchronous, concurrent users, constant or Poisson arrivals) at one level or "
        "swept: per-request records, percentiles with order-statistic bounds, SLO "
        "verdicts, the highest level meeting them.",
        headline="slo_max_level",
        columns=("slo_max_level", "peak_aggregate_tps", "failed_requests"),
        metrics=(
            "slo_max_level",
            "peak_aggregate_tps",
            "requests_sent",
            "failed_requests",
            "startup_ms",
        ),
        details=LoadDetails,
        samples=LoadSamples,
    )
)
