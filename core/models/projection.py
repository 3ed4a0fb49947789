"""The projection artifact's declaration: what the projection pipeline said at one moment for one
host, per role and scenario of a usage mix."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from core.models.base import (
    HOST_ID_PATTERN,
    ID_PATTERN,
    SHA256_PATTERN,
    ArtifactModel,
    Closed,
    DateTime,
    Integer,
    Number,
    Open,
    absent,
)


class FileRef(Open):
    """An input file (the usage mix, the catalogue) and its digest (null when it was missing)."""

    name: str = absent()
    file: str
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)] | None


class Range(Closed):
    """A projected value: low, mid and high."""

    low: Number
    mid: Number
    high: Number


class Baseline(Open):
    """The measured run a projection starts from."""

    run_id: str
    created: str
    value: Number


class Verification(Open):
    """The measurement of the projected configuration, where one existed."""

    run_id: str
    created: str
    value: Number
    ci95_low: Number | None = None
    ci95_high: Number | None = None
    n: Integer | None = None
    error: Number | None
    inside_range: bool
    within_ci95: bool | None = None
    verdict: Literal["VERIFIED", "MISSED"] = absent(
        "VERIFIED when the measured mean lies within the projected range [low, high], "
        "MISSED otherwise.",
    )


class Entry(Closed):
    """One role under one scenario (or a role with no data: scenario null, status NO DATA)."""

    role: str
    model: str
    test: str
    metric: str
    scenario: str | None
    optimizations: list[str]
    baseline: Baseline | None
    projected: Range | None
    target_settings: dict[str, Any] | None
    verification: Verification | None
    status: Literal["PROJECTED", "VERIFIED", "MISSED", "NO DATA"]
    note: str | None = None


class Weighted(Closed):
    """One scenario's usage-weighted averages."""

    scenario: str
    optimizations: list[str]
    current: Number | None
    low: Number | None
    mid: Number | None
    high: Number | None
    measured: Number | None
    current_ci95_low: Number | None = Field(
        default=None,
        description="CI95 of the weighted current value, propagated from the baselines' "
        "CI95s (delta method).",
    )
    current_ci95_high: Number | None = None
    measured_ci95_low: Number | None = Field(
        default=None,
        description="CI95 of the weighted measured value, propagated from the "
        "measurements' CI95s.",
    )
    measured_ci95_high: Number | None = None


class Projection(ArtifactModel):
    """What the projection pipeline said at one moment for one host: per role and scenario (a set
    of optimizations), the measured baseline, the projected value (low, mid, high), the
    configuration that would verify it, and the measurement that verified it where one existed;
    and the usage-weighted averages. Records accumulate, so the accuracy of projections stays on
    record."""

    ARTIFACT: ClassVar[str] = "projection"
    TITLE: ClassVar[str] = "Inference Almanac projection record"

    artifact: Literal["projection"]
    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    created: DateTime
    host_id: Annotated[str, Field(pattern=HOST_ID_PATTERN)]
    mix: FileRef
    catalogue: FileRef
    composition_rule: str
    weighting_rule: str
    inputs: list[str]
    entries: list[Entry]
    weighted: list[Weighted]
