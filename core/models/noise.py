"""The noise artifact's declaration (version 2): a host's run-to-run noise per kind of test."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PlainValidator, WithJsonSchema

from core.models.base import (
    AS_WRITTEN,
    ID_PATTERN,
    INTEGRAL,
    ArtifactModel,
    Closed,
    Count,
    DateTime,
    Integer,
    NonNegativeNumber,
    Number,
    Open,
    Positive,
    PositiveNumber,
    absent,
    bounded,
)

AtLeastOne = Annotated[
    int | float,
    PlainValidator(partial(bounded, ge=1)),
    AS_WRITTEN,
    WithJsonSchema({"type": "number", "minimum": 1}),
]
AboveOne = Annotated[
    int | float,
    PlainValidator(partial(bounded, gt=1)),
    AS_WRITTEN,
    WithJsonSchema({"type": "number", "exclusiveMinimum": 1}),
]


class NoiseCpu(Open):
    model: str
    physical_cores: Integer | None
    logical_cores: Integer | None
    flags: list[str]


class NoiseGpu(Open):
    name: str


class NoiseHost(Open):
    """The host the A/A ran on (its fingerprint, runtime.hosts.fingerprint)."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    name: str
    cpu: NoiseCpu
    memory_bytes: Count | None
    os: dict[str, Any]
    gpus: list[NoiseGpu]


class Matrix(Open):
    name: str
    file: str


class NoiseRun(Closed):
    id: str
    created: DateTime
    test: str
    klass: str = Field(
        alias="class", description="The kind of test (core.noise.noise_class)."
    )
    metric: str
    n: Positive
    mean: PositiveNumber
    stddev: NonNegativeNumber | None
    group: str = Field(description="Runs of one configuration and build share a group.")
    loadavg_1m_before: Number | None = absent()
    wall_s: Number | None = absent()
    warmup: bool = Field(
        description="The A/A's first run (a fresh process, warm-up): stored, not counted in any "
        "estimate."
    )
    round: Positive = absent("Which run of the matrix (1: the first).")


class Estimate(Closed):
    sigma: NonNegativeNumber = Field(
        description="Sample standard deviation of the log of a run's mean about its "
        "configuration's mean log (0.03: about 3%)."
    )
    df: Positive
    runs: Annotated[int, Field(ge=2), INTEGRAL] = Field(
        description="Runs counted (the warm-up left out)."
    )
    groups: Positive
    warmup_dropped: Count = Field(
        description="Warm-up runs of this kind of test run first and not counted."
    )
    ci95_factor: AtLeastOne = Field(
        description="A single run widened by this estimate gets a CI95 of ×ci95_factor each "
        "way: exp(t(0.975, df) · sigma)."
    )
    too_noisy: bool = Field(
        description="ci95_factor is wider than the useful factor (stopping.useful_factor): "
        "this host is too noisy to rank a single run of this kind of test."
    )
    why: str | None = Field(
        description="Why it is too noisy (the sigma reached, the df, the width that results, "
        "and how the A/A ended); null when it is not."
    )


class Stopping(Closed):
    """How the A/A decided how many runs to make (core.noise.RULE)."""

    rule: str
    useful_factor: AboveOne = Field(
        description="Useful: a single run widened by the estimate gets a CI95 no wider than "
        "this, each way."
    )
    min_df: Positive = Field(
        description="The fewest degrees of freedom the A/A stops on."
    )
    warmup_runs: Count = Field(
        description="Runs of the matrix made first and not counted."
    )
    counted_runs: Count = Field(
        description="Runs of the matrix counted (after the warm-up)."
    )
    max_runs: Positive | None = Field(
        description="The most counted runs allowed (null: a fixed count, version 1)."
    )
    budget_s: NonNegativeNumber | None = Field(
        description="No run starts that would end past this many seconds (null: none recorded)."
    )
    reason: Literal["useful", "budget", "max_runs", "no_runs", "fixed"] = Field(
        description="useful: every kind of test met the rule; budget or max_runs: the budget "
        "ended first; no_runs: no run succeeded; fixed: a fixed count of runs (version 1)."
    )


class Noise(ArtifactModel):
    """A host's run-to-run noise (`invoke noise`): a small matrix run again and again, each run a
    fresh process, the first (warm-up) run not counted, until the estimate is useful or the budget
    ends; per kind of test, the standard deviation of the log of a run's mean between runs of one
    configuration, with its degrees of freedom, what it means for a single run (the CI95 factor it
    gives, too noisy or not and why), and every run it comes from. Version 2 adds the warm-up flag
    on runs, the per-kind verdict and the stopping record."""

    ARTIFACT: ClassVar[str] = "noise"
    TITLE: ClassVar[str] = "Inference Almanac noise artifact"

    artifact: Literal["noise"]
    schema_version: Literal[2]
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    created: DateTime
    host: NoiseHost
    matrix: Matrix
    method: str
    conditions: dict[str, Any] = Field(
        description="The machine's state around the A/A: load averages, run count, wall time."
    )
    runs: list[NoiseRun]
    estimates: dict[str, Estimate]
    stopping: Stopping
