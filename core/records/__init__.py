"""Typed records of every artifact type, each with the one function that builds its document.

``run`` (core.records.run: new_run, RunRecord), ``quality`` (new_quality, QualityRecord),
``perplexity`` (new_perplexity, PerplexityRecord), ``host`` (new_host, HostRecord),
``projection`` (new_projection, ProjectionRecord), ``noise`` (new_noise, NoiseRecord) and ``decision``
(new_decision, DecisionRecord); the statistic of a metric is
core.summary.Summary. :func:`record_class` names the record of a type.
"""

from __future__ import annotations

import importlib
from typing import Any

MODULES = {
    "run": ("core.records.run", "RunRecord"),
    "quality": ("core.records.quality", "QualityRecord"),
    "perplexity": ("core.records.perplexity", "PerplexityRecord"),
    "host": ("core.records.host", "HostRecord"),
    "projection": ("core.records.projection", "ProjectionRecord"),
    "noise": ("core.records.noise", "NoiseRecord"),
    "decision": ("core.records.decision", "DecisionRecord"),
}


def record_class(artifact: str) -> Any:
    """The record class of an artifact type (KeyError for a type without one)."""
    module, name = MODULES[artifact]
    return getattr(importlib.import_module(module), name)
