"""The perplexity artifact: perplexity of a model on a public text and, against a reference model,
KL-divergence and top-token agreement (llama-perplexity's chunking and standard errors).

Built by :func:`new_perplexity` (from runtime.quality.perplexity, which measures in a child
process), read as :class:`PerplexityRecord`: the model and the reference as :class:`PplModel`,
the text as :class:`PplText`, the figures as :class:`PplResults`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from core.records.base import ArtifactRecord

ARTIFACT = "perplexity"


def new_perplexity(
    *,
    key: str,
    created: datetime,
    status: str,
    error: dict[str, Any] | None,
    model: dict[str, Any],
    reference: dict[str, Any] | None,
    text: dict[str, Any],
    method: dict[str, Any],
    settings: dict[str, Any],
    host: dict[str, Any],
    build: dict[str, Any],
    results: dict[str, Any] | None,
    chunks: list[dict[str, Any]],
    resources: dict[str, Any],
    log_tail: str,
) -> dict[str, Any]:
    """A perplexity artifact (the canonical dict written to disk), built in one place; the id in the
    one format (core.records.run.run_id)."""
    from core import artifacts
    from core.records.run import run_id

    return {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "model": dict(model),
        "reference": dict(reference) if reference else None,
        "text": dict(text),
        "method": dict(method),
        "settings": dict(settings),
        "host": host,
        "build": dict(build),
        "results": results,
        "chunks": list(chunks),
        "resources": dict(resources),
        "log_tail": log_tail,
    }


@dataclass(frozen=True, slots=True)
class PplModel:
    """A model file measured (or the reference it is measured against)."""

    name: str
    sha256: str | None = None
    size_bytes: int | None = None
    file_name: str | None = None
    quantization: str | None = None
    vocab_size: int | None = None
    derived: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> PplModel | None:
        if not d:
            return None
        return cls(
            d["name"],
            d.get("sha256"),
            d.get("size_bytes"),
            d.get("file_name"),
            d.get("quantization"),
            d.get("vocab_size"),
            d.get("derived"),
        )


@dataclass(frozen=True, slots=True)
class PplText:
    name: str
    file: str | None = None
    sha256: str | None = None
    source: str | None = None
    licence: str | None = None
    n_tokens: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PplText:
        return cls(
            d["name"],
            d.get("file"),
            d.get("sha256"),
            d.get("source"),
            d.get("licence"),
            d.get("n_tokens"),
        )


@dataclass(frozen=True, slots=True)
class PplResults:
    """llama-perplexity's figures: PPL ± SE, and against a reference KLD ± SE, its tail, top-token agreement."""

    n_scored_tokens: int = 0
    ppl: float | None = None
    ppl_se: float | None = None
    nll_mean: float | None = None
    nll_se: float | None = None
    ppl_reference: float | None = None
    ppl_reference_se: float | None = None
    ln_ppl_ratio: float | None = None
    ln_ppl_ratio_se: float | None = None
    kld_mean: float | None = None
    kld_se: float | None = None
    kld_median: float | None = None
    kld_p99: float | None = None
    kld_max: float | None = None
    same_top: float | None = None
    same_top_se: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> PplResults | None:
        if d is None:
            return None
        return cls(**{f.name: d.get(f.name) for f in fields(cls) if f.name in d})


class PerplexityRecord(ArtifactRecord):
    """A loaded perplexity artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def model(self) -> PplModel:
        return self._cached("model", lambda: PplModel.from_dict(self.doc["model"]))

    @property
    def reference(self) -> PplModel | None:
        return self._cached(
            "reference", lambda: PplModel.from_dict(self.doc.get("reference"))
        )

    @property
    def text(self) -> PplText:
        return self._cached("text", lambda: PplText.from_dict(self.doc["text"]))

    @property
    def method(self) -> dict[str, Any]:
        return self.doc.get("method") or {}

    @property
    def n_ctx(self) -> int | None:
        return self.method.get("n_ctx")

    @property
    def n_chunk(self) -> int | None:
        return self.method.get("n_chunk")

    @property
    def rope_scaling(self) -> str:
        """The RoPE scaling the context ran with (none: the model's own RoPE)."""
        return str((self.doc.get("settings") or {}).get("rope_scaling") or "none")

    @property
    def rope_factor(self) -> int | None:
        """The extension factor of a scaled RoPE (method.rope_factor); None with the model's own."""
        v = self.method.get("rope_factor")
        return int(v) if v else None

    @property
    def context_allocated(self) -> int | None:
        """The context llama.cpp was given (a scaled RoPE's: the factor times the trained one)."""
        v = (self.doc.get("settings") or {}).get("n_ctx")
        return int(v) if v else None

    @property
    def results(self) -> PplResults | None:
        return self._cached(
            "results", lambda: PplResults.from_dict(self.doc.get("results"))
        )

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return self.doc.get("chunks") or []


def as_perplexity(doc: Mapping[str, Any]) -> PerplexityRecord:
    return doc if isinstance(doc, PerplexityRecord) else PerplexityRecord(doc)
