"""The decision artifact: a go/no-go decision (seed 000's GO/NO-GO criteria) on one optimization of
data/optimizations.yaml and one host, with every gate's measured value, CI95, thresholds, verdict
and the run or quality artifacts it rests on.

Built by :func:`new_decision` (pipelines.gates evaluates the gates; ``invoke gates`` writes a
decision when its verdict or evidence changed), read as :class:`DecisionRecord` with
:class:`GateRecord` values. The fields are declared once, in core.models.decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from core.models.decision import Decision, Gate
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
    **optional: Any,
) -> dict[str, Any]:
    """A decision artifact (the canonical dict written to disk), built as its model
    (core.models.decision). ``optional``: the model's optional fields, by name (a name the model
    does not declare is refused)."""
    from core import artifacts

    return Decision.model_validate(
        {
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
            **optional,
        }
    ).dump()


def artifact_path(doc: Mapping[str, Any], root: Path) -> Path:
    return root / doc["host_id"] / f"{doc['id']}.json"


#: one gate of a decision as it was evaluated (the model's own type)
GateRecord = Gate


class DecisionRecord(ArtifactRecord):
    """A loaded decision artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def model(self) -> Decision:
        """The document read through its model (core.models.decision)."""
        return self._cached(
            "model", lambda: Decision.check(self.doc, self.path or self.id)
        )

    @property
    def host_id(self) -> str:  # a decision names its host by id only
        return self.model.host_id

    @property
    def optimization_id(self) -> str:
        return self.model.optimization.id

    @property
    def optimization_name(self) -> str:
        return self.model.optimization.name

    @property
    def optimization_settings(self) -> dict[str, Any]:
        return dict(self.model.optimization.settings)

    @property
    def catalogue(self) -> dict[str, Any]:
        return self.model.catalogue.model_dump(mode="json")

    @property
    def decision(self) -> str:
        return self.model.decision

    @property
    def rule(self) -> str:
        return self.model.rule

    @property
    def gates(self) -> list[Gate]:
        return list(self.model.gates)

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
