"""The perplexity artifact: perplexity of a model on a public text and, against a reference model,
KL-divergence and top-token agreement (llama-perplexity's chunking and standard errors).

Built by :func:`new_perplexity` (from runtime.quality.perplexity, which measures in a child
process) as its model, read as :class:`PerplexityRecord`: the model and the reference, the text and
the figures are the model's parts (core.models.perplexity: PplModel, PplText, PplResults),
declared there once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from core.models.perplexity import Perplexity, PplModel, PplResults, PplText

__all__ = ["PerplexityRecord", "PplModel", "PplResults", "PplText"]
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
    """A perplexity artifact (the canonical dict written to disk), built in one place as its model
    (core.models.perplexity.Perplexity); the id in the one format (core.records.run.run_id). A value
    the model refuses is one ArtifactError naming the field path and what is wrong."""
    from core import artifacts
    from core.records.run import run_id

    raw = {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "model": model,
        "reference": reference or None,
        "text": text,
        "method": method,
        "settings": settings,
        "host": host,
        "build": build,
        "results": results,
        "chunks": chunks,
        "resources": resources,
        "log_tail": log_tail,
    }
    # as JSON values (a tuple is a list, as it is written), then through the model
    return Perplexity.check(
        json.loads(json.dumps(raw)), f"<perplexity artifact {raw['id']}>"
    ).dump()


class PerplexityRecord(ArtifactRecord):
    """A loaded perplexity artifact, read through its model (core.models.perplexity.Perplexity)."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def envelope(self) -> Perplexity:
        """The document read through its model; a rejection is one ArtifactError naming the file,
        the field path and what is wrong."""
        return self._cached(
            "envelope", lambda: Perplexity.check(self.stored, self.path or self.id)
        )

    @property
    def model(self) -> PplModel:
        return self._cached("model", lambda: PplModel.read(self.doc["model"]))

    @property
    def reference(self) -> PplModel | None:
        d = self.doc.get("reference")
        return self._cached("reference", lambda: PplModel.read(d) if d else None)

    @property
    def text(self) -> PplText:
        return self._cached("text", lambda: PplText.read(self.doc["text"]))

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
        d = self.doc.get("results")
        return self._cached(
            "results", lambda: None if d is None else PplResults.read(d)
        )

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return self.doc.get("chunks") or []


def as_perplexity(doc: Mapping[str, Any]) -> PerplexityRecord:
    return doc if isinstance(doc, PerplexityRecord) else PerplexityRecord(doc)
