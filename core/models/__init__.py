"""Artifact types declared once, as pydantic models.

A type listed in ``MODELS`` is declared by its model alone: the writer builds the model and saves
``model.dump()``, ``data/schema/<type>.v<N>.schema.json`` is generated from it by core/schema.py
(``python -m core.schema``; fastjsonschema still validates every load from that file), and the
record in core.records wraps the model (its fields are the model's).

Converted: every current version of every type: ``decision``, ``projection``, ``host``, ``noise``
(version 2; version 1 stays hand-written, read through core.migrations), ``run`` (version 2: the
envelope; its per-kind part is generated from core.kinds, core/schema.py), ``quality`` and
``perplexity`` (they reuse the run's host, settings, matrix, GGUF facts and the common build
fields, core.models.run, and the failure, core.models.base).

Adding an optional field to a converted type: declare it on the model (``absent()`` when, present,
it is never null), run ``python -m core.schema`` (the schema file follows), pass it by name to the
writer (``new_<type>(..., field=value)``) where it is measured, and read ``rec.model.field`` on the
page that shows it. A run's field goes in the part it belongs to (``resources``, ``build``, ...):
the runner puts it there, and the record reads it as the model does (``rec.resources.<field>``,
``rec.envelope``); the run viewer lists every stored resource and setting.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.models.base import ArtifactModel

#: artifact type -> "module:Class" of its model (imported when asked for)
MODELS: dict[str, str] = {
    "decision": "core.models.decision:Decision",
    "projection": "core.models.projection:Projection",
    "host": "core.models.host:Host",
    "noise": "core.models.noise:Noise",
    "run": "core.models.run:Run",
    "quality": "core.models.quality:Quality",
    "perplexity": "core.models.perplexity:Perplexity",
}


def model_for(artifact: str) -> type[ArtifactModel] | None:
    """The model that declares ``artifact``, or None for a type whose schema is hand-written."""
    target = MODELS.get(artifact)
    if target is None:
        return None
    module, _, name = target.partition(":")
    cls: type[ArtifactModel] = getattr(importlib.import_module(module), name)
    return cls
