"""Host labels for the pages (issue 19): one owner. Every page that names a host asks here.

A label comes from data/hosts.yaml's ``host_labels:`` (by host id) or from the host's fingerprint
(core.hostlabel), unique within the set of artifacts; the id stays the secondary key (links,
filters, file names).
"""

from __future__ import annotations

from typing import Any

from core.hostlabel import configured_labels, fingerprints, resolve
from core.paths import data_dir, relpath
from pipelines.memo import per_set


def _configured() -> dict[str, str]:
    return configured_labels(data_dir() / "hosts.yaml")


# the last few labels resolved: (fingerprints, configured labels, hosts.yaml's path, labels), newest first
_RESOLVED: list[tuple[Any, tuple[tuple[str, str], ...], str, dict[str, str]]] = []
_RESOLVED_KEPT = 8


def labels(docs: list[Any]) -> dict[str, str]:
    """Every host of the artifacts (runs, host probes, ...), by id: its label (read-only). The fingerprints,
    a pass over every artifact, are taken once per set of artifacts; the configured labels are read each
    time (hosts.yaml can be edited between two builds of one loaded set: mkdocs serve), and the labels
    resolved again when they or the fingerprints changed."""
    fps = _fingerprints(docs)
    configured = tuple(_configured().items())
    source = relpath(data_dir() / "hosts.yaml")
    for i, (fps_, configured_, source_, out) in enumerate(_RESOLVED):
        if fps_ is fps and configured_ == configured and source_ == source:
            _RESOLVED.insert(0, _RESOLVED.pop(i))
            return out
    out = resolve(fps, dict(configured), source)
    _RESOLVED.insert(0, (fps, configured, source, out))
    del _RESOLVED[_RESOLVED_KEPT:]
    return out


@per_set
def _fingerprints(docs: list[Any]) -> dict[str, Any]:
    return fingerprints(docs)


def label(docs: list[Any], host_id: str) -> str:
    """One host's label (its id when no artifact of the set carries its fingerprint)."""
    return labels(docs).get(host_id, host_id)
