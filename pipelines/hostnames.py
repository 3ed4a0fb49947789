"""Host labels for the pages (issue 19): one owner. Every page that names a host asks here.

A label comes from data/hosts.yaml's ``host_labels:`` (by host id) or from the host's fingerprint
(core.hostlabel), unique within the set of artifacts; the id stays the secondary key (links,
filters, file names).
"""

from __future__ import annotations

from typing import Any

from core.hostlabel import configured_labels, fingerprints, resolve
from core.paths import data_dir, relpath
from pipelines import dataset
from pipelines.memo import per_set


def _configured() -> dict[str, str]:
    return configured_labels(data_dir() / "hosts.yaml")


# the last few labels resolved: (fingerprints, configured labels, hosts.yaml's path, labels), newest first
_RESOLVED: list[tuple[Any, tuple[tuple[str, str], ...], str, dict[str, str]]] = []
_RESOLVED_KEPT = 8


def labels(docs: list[Any]) -> dict[str, str]:
    """Every host of the artifacts (runs, host probes, ...), by id: its label (read-only).

    During a build a host has one label on every page: the one it has among every host of the set the build
    loaded (pipelines.dataset.building), whatever part of the set a page shows. Told apart only among the
    page's own artifacts, a host alone on its own page lost what tells it from its twins elsewhere in the
    fleet ("EPYC 9654 · 32 vCPU · 128 GiB" in a table under the heading "EPYC 9654 · 32 vCPU · 128 GiB ·
    fleet-121"). Outside a build, the artifacts given are the set.

    The fingerprints, a pass over every artifact, are taken once per set of artifacts; the configured
    labels are read each time (hosts.yaml can be edited between two builds of one loaded set: mkdocs
    serve), and the labels resolved again when they or the fingerprints changed."""
    fps = _fingerprints(docs)
    ds = dataset.building()
    every = (
        None
        if ds is None
        else ds.derived(
            "hostnames:fingerprints",
            lambda d: fingerprints([*d.runs, *d.hosts]),
        )
    )
    configured = tuple(_configured().items())
    source = relpath(data_dir() / "hosts.yaml")
    if every is None:
        return _resolved(fps, configured, source)
    # a page of the set: each host's label among the whole set's
    if fps.keys() <= every.keys():
        whole = _resolved(every, configured, source)
        return {h: whole[h] for h in fps}
    # a host the set does not hold: labelled among the set's hosts and the page's (the set's newest
    # fingerprint of a host both hold)
    merged = _resolved({**fps, **every}, configured, source)
    return {h: merged[h] for h in fps}


def _resolved(
    fps: dict[str, Any], configured: tuple[tuple[str, str], ...], source: str
) -> dict[str, str]:
    """The labels of the hosts of ``fps`` (resolved again only when the fingerprints' object or the
    configured labels changed)."""
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
