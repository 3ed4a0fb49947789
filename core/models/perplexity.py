"""The perplexity artifact's declaration (version 1): perplexity of a model on a public text and,
against a reference model, KL-divergence and top-token agreement.

The host, the settings values and the failure are the run's (core.models.run, core.models.base);
the rest is the measurement's own.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from core.models.base import (
    INTEGRAL,
    SHA256_PATTERN,
    ArtifactModel,
    Count,
    DateTime,
    Failure,
    Integer,
    Number,
    Open,
    absent,
)
from core.models.run import NonEmpty, RunHost, SettingsValues

Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN)]
PPL_ID_PATTERN = r"^p?[0-9a-f]{12}-[0-9]{8}T[0-9]{6}(\.[0-9]{3})?Z$"


class PplModel(Open):
    """A model file measured (or the reference it is measured against)."""

    name: NonEmpty
    file_name: str = absent()
    sha256: Sha256
    size_bytes: Count
    source: str = absent()
    quantization: str | None
    vocab_size: Integer | None = absent()
    derived: dict[str, Any] | None = absent(
        "For a model derived by requantization: source model, its sha256, the quantization and "
        "the command."
    )


class PplText(Open):
    """The public text scored (runtime.quality.perplexity texts)."""

    name: str
    file: str
    sha256: str
    source: NonEmpty
    licence: NonEmpty
    description: str = absent()
    n_tokens: Integer | None = absent()


class PplMethod(Open):
    """How it was measured: llama-perplexity's chunking, and a scaled RoPE where there was one."""

    version: Integer
    n_ctx: Annotated[int, Field(ge=8), INTEGRAL]
    n_chunk: Integer | None
    chunks_requested: Integer | None = absent()
    scored_per_chunk: Integer = absent()
    add_bos: bool | None = absent()
    anchor: str = absent()
    rope_scaling: Literal["linear", "yarn"] = absent(
        "RoPE scaling the context ran with (absent: the model's own RoPE)."
    )
    rope_factor: Annotated[int, Field(ge=2), INTEGRAL] = absent(
        "Extension factor: the context allocated at this many times the trained one, RoPE "
        "scaled to it."
    )
    rope_window: str = absent(
        "What was scored with a scaled RoPE (chunks of n_ctx tokens within the longer context)."
    )


class PplResults(Open):
    """llama-perplexity's figures: PPL ± SE, and against a reference KLD ± SE, its tail, top-token
    agreement."""

    ppl: Number | None
    ppl_se: Number | None
    nll_mean: Number | None
    nll_se: Number | None
    ppl_reference: Number | None = absent()
    ppl_reference_se: Number | None = absent()
    ln_ppl_ratio: Number | None = absent()
    ln_ppl_ratio_se: Number | None = absent()
    kld_mean: Number | None = absent()
    kld_se: Number | None = absent()
    kld_median: Number | None = absent()
    kld_p99: Number | None = absent()
    kld_max: Number | None = absent()
    same_top: Number | None = absent()
    same_top_se: Number | None = absent()
    n_scored_tokens: Count


class PplChunk(Open):
    """One chunk's figures (its index, the tokens scored, its perplexity, ...)."""

    index: Any
    n: Any
    ppl: Any


class Perplexity(ArtifactModel):
    """Perplexity of a model on a public text, chunked as llama.cpp's llama-perplexity (n_ctx
    chunks, second half scored, standard error of the mean), and, with a reference model of the
    same vocabulary, the KL-divergence of the model's token distributions from the reference's and
    top-token agreement."""

    ARTIFACT: ClassVar[str] = "perplexity"
    TITLE: ClassVar[str] = "Inference Almanac perplexity artifact"

    artifact: Literal["perplexity"]
    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=PPL_ID_PATTERN)] = Field(
        description="runtime.record.run_id: key prefix and UTC time to the millisecond (the "
        "earliest files: 'p' prefix, seconds)."
    )
    key: Sha256
    created: DateTime
    status: Literal["ok", "failed"]
    error: Failure | None
    model: PplModel
    reference: PplModel | None
    text: PplText
    method: PplMethod
    settings: SettingsValues
    host: RunHost
    build: dict[str, Any]
    results: PplResults | None
    chunks: list[PplChunk]
    resources: dict[str, Any]
    log_tail: str = absent()
