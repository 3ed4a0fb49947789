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


@per_set
def labels(docs: list[Any]) -> dict[str, str]:
    """Every host of the artifacts (runs, host probes, ...), by id: its label."""
    return resolve(
        fingerprints(docs), _configured(), relpath(data_dir() / "hosts.yaml")
    )


def label(docs: list[Any], host_id: str) -> str:
    """One host's label (its id when no artifact of the set carries its fingerprint)."""
    return labels(docs).get(host_id, host_id)
