"""The decision artifact: a go/no-go decision (seed 000's GO/NO-GO criteria) on one optimization of
data/optimizations.yaml and one host, with every gate's measured value, CI95, thresholds, verdict
and the run or quality artifacts it rests on.

Built by :func:`new_decision` (pipelines.gates evaluates the gates; ``invoke gates`` writes a
decision when its verdict or evidence changed), read as :class:`DecisionRecord` with
:class:`GateRecord` values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.records.base import ArtifactRecord

ARTIFACT = "decision"
RULE = "NO-GO when any gate is NO-GO, GO when every gate is GO, else UNDECIDED (NOT MEASURED: no gate measured)"


def new_decision(
    *,
    host_id: str,
    created: datetime,
    optimization: dict[str, Any],
    catalogue: dict[str, Any],
    decision: str,
    gates: list[dict[str, Any]],
) -> dict[str, Any]:
    """A decision artifact (the canonical dict written to disk), built in one place."""
    from core import artifacts

    return {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": f"{optimization['id']}-{host_id}-{created.strftime('%Y%m%dT%H%M%SZ')}",
        "created": created.isoformat(timespec="seconds"),
        "host_id": host_id,
        "optimization": {
            "id": optimization["id"],
            "name": optimization["name"],
            "settings": dict(optimization.get("settings") or {}),
        },
        "catalogue": dict(catalogue),
        "decision": decision,
        "rule": RULE,
        "gates": [dict(g) for g in gates],
    }


def artifact_path(doc: Mapping[str, Any], root: Path) -> Path:
    return root / doc["host_id"] / f"{doc['id']}.json"


@dataclass(frozen=True, slots=True)
class GateRecord:
    """One gate of a decision as it was evaluated."""

    id: str
    name: str
    concern: str
    quantity: str
    metric: str | None
    direction: str
    target: float
    no_go: float
    verdict: str
    reason: str
    value: float | None
    ci95_low: float | None
    ci95_high: float | None
    exact: bool
    n: tuple[int, ...] | None
    evidence: dict[str, Any]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GateRecord:
        return cls(
            d["id"],
            d["name"],
            d["concern"],
            d["quantity"],
            d.get("metric"),
            d["direction"],
            float(d["target"]),
            float(d["no_go"]),
            d["verdict"],
            d["reason"],
            d.get("value"),
            d.get("ci95_low"),
            d.get("ci95_high"),
            bool(d.get("exact")),
            tuple(d["n"]) if d.get("n") else None,
            dict(d.get("evidence") or {}),
        )


class DecisionRecord(ArtifactRecord):
    """A loaded decision artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def host_id(self) -> str:  # a decision names its host by id only
        return self.doc["host_id"]

    @property
    def optimization_id(self) -> str:
        return self.doc["optimization"]["id"]

    @property
    def optimization_name(self) -> str:
        return self.doc["optimization"]["name"]

    @property
    def optimization_settings(self) -> dict[str, Any]:
        return dict(self.doc["optimization"].get("settings") or {})

    @property
    def catalogue(self) -> dict[str, Any]:
        return dict(self.doc.get("catalogue") or {})

    @property
    def decision(self) -> str:
        return self.doc["decision"]

    @property
    def rule(self) -> str:
        return self.doc.get("rule") or ""

    @property
    def gates(self) -> list[GateRecord]:
        return self._cached(
            "gates",
            lambda: [GateRecord.from_dict(g) for g in self.doc.get("gates") or []],
        )

    @property
    def signature(self) -> tuple:
        """What makes two decisions the same: the decision, and each gate's verdict and evidence."""
        return signature(self.doc)


def signature(doc: Mapping[str, Any]) -> tuple:
    """The signature of a decision document (written or about to be): its decision, and each gate's
    id, verdict and evidence."""
    return (
        doc["decision"],
        tuple(
            (
                g["id"],
                g["verdict"],
                tuple(sorted((g.get("evidence") or {}).items(), key=str)),
            )
            for g in doc["gates"]
        ),
    )


def as_decision(doc: Mapping[str, Any]) -> DecisionRecord:
    return doc if isinstance(doc, DecisionRecord) else DecisionRecord(doc)
