"""The projection artifact: per role and scenario of a usage mix on one host, the measured baseline,
the projected value (low, mid, high) and the measurement that verified it where one existed.

Built by :func:`new_projection` (pipelines.projections computes the figures; ``invoke project``
writes them), read as :class:`ProjectionRecord` with :class:`ProjectionEntry` values. The fields are declared
once, in core.models.projection.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from core.models.projection import Entry, Projection
from core.records.base import ArtifactRecord

ARTIFACT = "projection"


def new_projection(
    *,
    host_id: str,
    created: datetime,
    mix: dict[str, Any],
    catalogue: dict[str, Any],
    composition_rule: str,
    weighting_rule: str,
    inputs: list[str],
    entries: list[dict[str, Any]],
    weighted: list[dict[str, Any]],
    **optional: Any,
) -> dict[str, Any]:
    """A projection artifact (the canonical dict written to disk), built as its model
    (core.models.projection). ``optional``: the model's optional fields, by name (a name the
    model does not declare is refused)."""
    from core import artifacts

    return Projection.model_validate(
        {
            "artifact": ARTIFACT,
            "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
            "id": f"{host_id}-{created.strftime('%Y%m%dT%H%M%SZ')}",
            "created": created.isoformat(timespec="seconds"),
            "host_id": host_id,
            "mix": dict(mix),
            "catalogue": dict(catalogue),
            "composition_rule": composition_rule,
            "weighting_rule": weighting_rule,
            "inputs": sorted(inputs),
            "entries": list(entries),
            "weighted": list(weighted),
            **optional,
        }
    ).dump()


def artifact_path(doc: Mapping[str, Any], root: Path) -> Path:
    return root / doc["host_id"] / f"projection-{doc['id'].rsplit('-', 1)[1]}.json"


#: one role under one scenario (the model's own type)
ProjectionEntry = Entry


class ProjectionRecord(ArtifactRecord):
    """A loaded projection artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def model(self) -> Projection:
        """The document read through its model (core.models.projection)."""
        return self._cached(
            "model", lambda: Projection.check(self.doc, self.path or self.id)
        )

    @property
    def host_id(self) -> str:  # a projection names its host by id only
        return self.model.host_id

    @property
    def mix(self) -> dict[str, Any]:
        return self.model.mix.model_dump(mode="json", exclude_unset=True)

    @property
    def catalogue(self) -> dict[str, Any]:
        return self.model.catalogue.model_dump(mode="json", exclude_unset=True)

    @property
    def inputs(self) -> list[str]:
        return list(self.model.inputs)

    @property
    def entries(self) -> list[Entry]:
        return list(self.model.entries)

    @property
    def weighted(self) -> list[dict[str, Any]]:
        return [
            w.model_dump(mode="json", exclude_unset=True) for w in self.model.weighted
        ]


def as_projection(doc: Mapping[str, Any]) -> ProjectionRecord:
    return doc if isinstance(doc, ProjectionRecord) else ProjectionRecord(doc)
