"""The decision artifact's declaration: a go/no-go decision (seed 000's GO/NO-GO criteria) on one
optimization of data/optimizations.yaml and one host."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from core.models.base import (
    HOST_ID_PATTERN,
    ID_PATTERN,
    INTEGRAL,
    SHA256_PATTERN,
    ArtifactModel,
    Closed,
    DateTime,
    Number,
)

Verdict = Literal["GO", "NO-GO", "UNDECIDED", "NOT MEASURED"]


class Optimization(Closed):
    """The optimization decided on, as the catalogue named it."""

    id: str
    name: str
    settings: dict[str, Any]


class Catalogue(Closed):
    """The catalogue file the gates came from, and its digest (null when it was missing)."""

    file: str
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)] | None


class Gate(Closed):
    """One gate as it was evaluated: its thresholds, the measured value with its CI95, the verdict
    and the artifacts it rests on."""

    id: str
    name: str
    concern: Literal["overhead", "memory", "quality", "speed"]
    quantity: Literal[
        "ratio",
        "difference",
        "value",
        "kv_cache_ratio",
        "text_agreement",
        "quality_delta",
    ]
    metric: str | None = None
    direction: Literal["higher", "lower"]
    target: Number
    no_go: Number
    verdict: Verdict
    reason: str
    value: Number | None
    ci95_low: Number | None
    ci95_high: Number | None
    exact: bool
    #: the sample sizes behind the value (read as a tuple, stored as a list)
    n: (
        Annotated[
            tuple[Annotated[int, Field(strict=True), INTEGRAL], ...],
            Field(strict=False),
        ]
        | None
    ) = None
    evidence: dict[str, Any]


class Decision(ArtifactModel):
    """A go/no-go decision (seed 000's GO/NO-GO criteria) on one optimization of
    data/optimizations.yaml and one host: each gate's measured value with its CI95, its thresholds,
    its verdict and the run or quality artifacts it rests on. Written by `invoke gates` when the
    decision or its evidence changed; records accumulate."""

    ARTIFACT: ClassVar[str] = "decision"
    TITLE: ClassVar[str] = "Inference Almanac go/no-go decision"

    artifact: Literal["decision"]
    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    created: DateTime
    host_id: Annotated[str, Field(pattern=HOST_ID_PATTERN)]
    optimization: Optimization
    catalogue: Catalogue
    decision: Verdict
    rule: str
    gates: list[Gate]
