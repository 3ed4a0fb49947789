"""The quality artifact's declaration (version 1): one model and configuration answering a seeded
sample of a suite's items, scored per item, with the pass rate and its Wilson CI95.

The host, the settings, the matrix, the GGUF facts, the build's common fields and the failure's
kinds are the run's (core.models.run); the rest is the quality run's own.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from core.models.base import (
    SHA256_PATTERN,
    ArtifactModel,
    Closed,
    Count,
    DateTime,
    Fraction,
    Integer,
    NonNegativeNumber,
    Number,
    Open,
    Positive,
    absent,
)
from core.models.run import (
    RUN_ID_PATTERN,
    Build,
    GgufFacts,
    NonEmpty,
    RunError,
    RunHost,
    RunMatrix,
    RunSettings,
)

Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN)]
#: how the items were put to the model; scores of different styles are never merged
PromptStyle = Literal["chat", "completion", "loglikelihood"]


class QualityError(RunError):
    """Why a quality run failed."""

    kind: Literal["error", "crash", "timeout"]


class SuiteSample(Open):
    """The seeded sample of the suite's items that was asked."""

    requested: Integer | None
    seed: Integer
    ids: list[str]


class Suite(Open):
    """The suite the items came from (runtime.quality.suites): its identity, content hash and
    sample."""

    name: NonEmpty
    version: Positive
    category: str
    description: str
    file: str
    includes: list[str]
    content_sha256: Sha256
    n_items_in_suite: Positive
    source: dict[str, Any]
    sample: SuiteSample
    prompt_styles: list[PromptStyle] = absent()


class Generation(Open):
    """The generation parameters every item was answered with."""

    max_tokens: Positive
    temperature: NonNegativeNumber


class QualityModel(Open):
    """The local model file (GGUF) that answered: its sha256 is its identity."""

    name: NonEmpty
    file_name: str
    sha256: Sha256
    size_bytes: Count
    source: str
    synthetic: bool
    gguf: GgufFacts
    desc: str | None = absent()
    n_params: Integer | None = absent()


class QualityBuild(Build):
    """The software that measured, and each scorer's version."""

    scorers: dict[str, Integer]


class Degeneration(Open):
    """The shared degeneration detector's verdict on an output (core.degeneration)."""

    degenerate: bool
    flags: list[Literal["empty", "non_text", "repetition_loop"]]
    reasons: list[str]
    metrics: dict[str, Any] = absent()
    version: Integer = absent()


class ItemTiming(Open):
    """What answering the item took."""

    ttft_ms: Number | None = absent()
    tpot_ms: Number | None = absent()
    e2e_ms: Number | None = absent()
    output_tokens: Integer | None = absent()
    prompt_tokens: Integer | None = absent()
    finish_reason: str | None = absent()
    wall_s: Number | None = absent()


class QualityItem(Open):
    """One scored item: what was asked, what the model answered, the verdict and its evidence."""

    id: NonEmpty
    tags: list[str]
    prompt: str
    system: str | None = absent()
    expected: str
    scorer: NonEmpty
    scorer_version: Positive
    check: dict[str, Any]
    output: str
    passed: bool
    score: Fraction
    details: dict[str, Any]
    degeneration: Degeneration
    error: str | None
    timing: ItemTiming
    scoring_s: Number = absent()
    prompt_style: PromptStyle = absent()

    @property
    def degenerate(self) -> bool:
        return bool(self.degeneration.get("degenerate"))


class PassRate(Closed):
    """n, passed, the pass rate and its Wilson CI95 (core.records.quality.pass_rate)."""

    n: Count
    passed: Count
    pass_rate: Fraction | None
    ci95_low: Fraction | None
    ci95_high: Fraction | None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class QualitySummary(PassRate):
    """The pass rate with its CI95, per tag too, the chance level, degeneration and timing means
    (core.records.quality.summarize_items)."""

    model_config = ConfigDict(extra="allow")

    by_tag: dict[str, PassRate]
    degenerate: Count
    degenerate_rate: Number | None
    generation_errors: Count
    output_tokens_mean: Number | None = absent()
    prompt_tokens_mean: Number | None = absent()
    ttft_ms_mean: Number | None = absent()
    e2e_ms_mean: Number | None = absent()
    decode_tps_mean: Number | None = absent()
    chance: Fraction | None = absent(
        "Multiple choice: the expected rate of a uniform guess."
    )
    acc_norm: PassRate | None = absent(
        "Log-likelihood multiple choice: the rate with length-normalised log-likelihoods "
        "(lm-evaluation-harness acc_norm)."
    )

    @property
    def rate(self) -> PassRate:
        """The overall pass rate alone."""
        return PassRate.read({k: self.get(k) for k in PassRate.model_fields})


class Sandbox(Open):
    """The isolation layers the code items ran under."""

    isolation: list[str]


class QualityResources(Open):
    """What the quality run's process took."""

    peak_rss_bytes: Integer | None
    wall_s: Number | None
    load_time_s: Number | None = absent()
    exit_code: Integer | None
    signal: str | None
    scoring_s: Number | None = absent()


class Quality(ArtifactModel):
    """One quality run: a model and configuration (backend settings, generation parameters)
    answering a seeded sample of a suite's items on a host; per item the prompt, the output, the
    scorer's verdict and evidence, the degeneration flag and timing; a pass rate with its Wilson
    interval."""

    ARTIFACT: ClassVar[str] = "quality"
    TITLE: ClassVar[str] = "Inference Almanac quality artifact"

    artifact: Literal["quality"]
    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    key: Sha256
    created: DateTime
    status: Literal["ok", "failed"]
    error: QualityError | None
    matrix: RunMatrix
    backend: NonEmpty
    suite: Suite
    generation: Generation
    settings: RunSettings
    model: QualityModel
    host: RunHost
    build: QualityBuild
    items: list[QualityItem]
    summary: QualitySummary
    sandbox: Sandbox | None
    resources: QualityResources
    log_tail: str
    prompt_style: PromptStyle = absent(
        "How the items were put to the model (absent: chat, before prompt styles existed). "
        "Scores of different styles are never merged."
    )
