"""The ``embed`` kind: embedding a fixed corpus and building a retrieval index from it.

Seed 001's "Retrieval Stack" lists its embedding models with their dimension, quantization, index
size and benchmark score. Here a committed text (data/texts/, cut into passages at blank lines) is
embedded by a model in llama.cpp's embedding mode (mean pooling), timed per repetition: embeddings
per second. The index is the simplest exact one (L2-normalised float32 vectors, inner product):
its build time and its size in bytes are measured, and every passage is looked up once (its own
nearest neighbour must be itself: a check that the vectors are usable, not a quality score).
Retrieval quality needs a labelled set (queries with known relevant passages), which this project
does not have: it stays "not measurable here".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Details, Kind, Samples, TestSpec

QUALITY_NOTE = "not measurable here: no labelled retrieval set (queries with known relevant passages)"


class EmbedTest(TestSpec):
    """Embed a committed corpus passage by passage, build an exact index, look every passage up."""

    kind: Literal["embed"] = "embed"
    id: str = Field("embed", description="Name of this workload, used in tables.")
    corpus: str = Field(
        "gpl-3.0",
        description="A text of data/texts/texts.yaml, cut into passages at blank lines.",
    )
    max_passages: int = Field(
        64, ge=1, le=10_000, description="The first this many passages are embedded."
    )
    batch: int = Field(
        16,
        ge=1,
        le=512,
        description="Passages embedded per call (one llama.cpp batch).",
    )

    @property
    def name(self) -> str:
        return self.id


class EmbedSamples(Samples):
    """Per timed repetition: embedding wall time and rate, index build time and size, look-up time."""

    ns: list[int] | None = Field(
        None, description="Wall time of embedding every passage (ns)."
    )
    eps: list[float] | None = Field(
        None, description="Embeddings per second: passages / that wall time."
    )
    index_build_ns: list[int] | None = Field(
        None, description="Time to build the index from the vectors (ns)."
    )
    index_bytes: list[int] | None = Field(
        None, description="Size of the index (bytes)."
    )
    search_ns: list[int] | None = Field(
        None, description="Time to look every passage up in the index (ns)."
    )


class EmbedDetails(Details):
    corpus: str | None = None
    corpus_sha256: str | None = None
    passages: int | None = Field(None, description="Passages embedded.")
    tokens: int | None = Field(None, description="Tokens of all passages.")
    dim: int | None = Field(None, description="Dimension of an embedding.")
    pooling: str | None = None
    index: str | None = Field(None, description="The index, in words.")
    self_retrieval: float | None = Field(
        None,
        description="Share of passages whose nearest neighbour is themselves (a check, not quality).",
    )
    quality: str | None = Field(None, description="Retrieval quality, or why not.")
    repetitions: int | None = None
    warmup: bool | None = None


def _values(samples: EmbedSamples, metric: str) -> list[float]:
    if metric == "embeddings_per_second":
        return [float(v) for v in samples.eps or []]
    if metric == "index_build_ms":
        return [v / 1e6 for v in samples.index_build_ns or []]
    if metric == "index_bytes":
        return [float(v) for v in samples.index_bytes or []]
    return []


KIND = register(
    Kind(
        "embed",
        EmbedTest,
        "Embed a committed corpus (llama.cpp embedding mode), build an exact index, look every passage up.",
        headline="embeddings_per_second",
        columns=("embeddings_per_second", "index_build_ms", "index_bytes"),
        metrics=(
            "embeddings_per_second",
            "index_build_ms",
            "index_bytes",
            "load_time_s",
            "peak_rss_bytes",
        ),
        details=EmbedDetails,
        samples=EmbedSamples,
        values=_values,
    )
)
