"""The projection artifact: per role and scenario of a usage mix on one host, the measured baseline,
the projected value (low, mid, high) and the measurement that verified it where one existed.

Built by :func:`new_projection` (pipelines.projections computes the figures; ``invoke project``
writes them), read as :class:`ProjectionRecord` with :class:`ProjectionEntry` values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

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
) -> dict[str, Any]:
    """A projection artifact (the canonical dict written to disk), built in one place."""
    from core import artifacts

    return {
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
    }


def artifact_path(doc: Mapping[str, Any], root: Path) -> Path:
    return root / doc["host_id"] / f"projection-{doc['id'].rsplit('-', 1)[1]}.json"


@dataclass(frozen=True, slots=True)
class ProjectionEntry:
    """One role under one scenario (or a role with no data: scenario None, status NO DATA)."""

    role: str
    model: str
    test: str
    metric: str
    scenario: str | None
    optimizations: tuple[str, ...]
    baseline: dict[str, Any] | None  # run_id, created, value
    projected: dict[str, Any] | None  # low, mid, high
    target_settings: dict[str, Any] | None
    verification: dict[str, Any] | None
    status: str | None
    note: str | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProjectionEntry:
        return cls(
            d["role"],
            d["model"],
            d["test"],
            d["metric"],
            d.get("scenario"),
            tuple(d.get("optimizations") or ()),
            d.get("baseline"),
            d.get("projected"),
            d.get("target_settings"),
            d.get("verification"),
            d.get("status"),
            d.get("note"),
        )


class ProjectionRecord(ArtifactRecord):
    """A loaded projection artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def host_id(self) -> str:  # a projection names its host by id only
        return self.doc["host_id"]

    @property
    def mix(self) -> dict[str, Any]:
        return self.doc.get("mix") or {}

    @property
    def catalogue(self) -> dict[str, Any]:
        return self.doc.get("catalogue") or {}

    @property
    def inputs(self) -> list[str]:
        return list(self.doc.get("inputs") or [])

    @property
    def entries(self) -> list[ProjectionEntry]:
        return self._cached(
            "entries",
            lambda: [
                ProjectionEntry.from_dict(e) for e in self.doc.get("entries") or []
            ],
        )

    @property
    def weighted(self) -> list[dict[str, Any]]:
        return list(self.doc.get("weighted") or [])


def as_projection(doc: Mapping[str, Any]) -> ProjectionRecord:
    return doc if isinstance(doc, ProjectionRecord) else ProjectionRecord(doc)
