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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Details, Kind, Samples, TestSpec

INDEX = "exact: the vectors L2-normalised into one float32 matrix, searched by inner product (numpy)"
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


# -- the kind's loop ---------------------------------------------------------------------------
@dataclass
class EmbedRun:
    """What :func:`run_embed` measured: its metrics, samples and the details every backend shares."""

    metrics: dict[str, list[float]]
    samples: dict[str, Any]
    details: dict[str, Any]


def run_embed(
    test: EmbedTest,
    docs: list[str],
    embed: Callable[[list[str]], list[list[float]]],
) -> EmbedRun:
    """The embed kind's loop over one backend primitive, ``embed(texts) -> vectors`` (one call, one
    batch): an untimed warm-up of one passage (unless the test turns it off), then timed
    repetitions (3 by default, or to the precision target on embeddings per second) of every
    passage in batches of ``test.batch``; after each, outside the embedding timer, the exact index
    built (timed, sized) and every passage looked up once. Clock: ``time.perf_counter_ns``."""
    import numpy as np

    from core.precision import Repeater

    batches = [docs[i : i + test.batch] for i in range(0, len(docs), test.batch)]

    def embed_all() -> list[list[float]]:
        out: list[list[float]] = []
        for b in batches:
            out.extend(embed(b))
        return out

    warmup = True if test.warmup is None else test.warmup
    if warmup:
        embed(batches[0][:1])
    rep = Repeater(test.precision, test.repetitions or 3, "embeddings_per_second")
    ns: list[int] = []
    eps: list[float] = []
    build_ns: list[int] = []
    sizes: list[int] = []
    search_ns: list[int] = []
    self_hits = 0.0
    dim = 0
    while rep.more():
        t0 = time.perf_counter_ns()
        vecs = embed_all()
        ns.append(time.perf_counter_ns() - t0)
        eps.append(len(docs) * 1e9 / ns[-1])
        rep.add(eps[-1])
        t0 = time.perf_counter_ns()
        index = np.asarray(vecs, dtype=np.float32)
        index /= np.maximum(np.linalg.norm(index, axis=1, keepdims=True), 1e-12)
        build_ns.append(time.perf_counter_ns() - t0)
        sizes.append(int(index.nbytes))
        t0 = time.perf_counter_ns()
        nearest = np.argmax(index @ index.T, axis=1)
        search_ns.append(time.perf_counter_ns() - t0)
        self_hits = float(np.mean(nearest == np.arange(len(docs))))
        dim = int(index.shape[1])
    return EmbedRun(
        metrics={
            "embeddings_per_second": eps,
            "index_build_ms": [v / 1e6 for v in build_ns],
            "index_bytes": [float(sizes[-1])],
        },
        samples={
            "ns": ns,
            "eps": eps,
            "index_build_ns": build_ns,
            "index_bytes": sizes,
            "search_ns": search_ns,
        },
        details={
            "passages": len(docs),
            "dim": dim,
            "index": INDEX,
            "self_retrieval": self_hits,
            "quality": QUALITY_NOTE,
            "repetitions": len(ns),
            "warmup": warmup,
            "precision": rep.record(),
        },
    )


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
