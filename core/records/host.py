"""The host artifact: a host's fingerprint and its memory-bandwidth probe, built and read here.

Built by :func:`new_host` (runtime.hosts.probe for host memory, benchmarks/gpu_bench.py for a
GPU's device memory), read as :class:`HostRecord`: ``rec.bandwidth`` / ``rec.read_bandwidth``
are :class:`BandwidthEntry` values (threads, samples in GB/s, their statistic). The fields are
declared once, in core.models.host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from core.models.host import BandwidthRow, Conditions, Host, Probe
from core.records.base import ArtifactRecord

ARTIFACT = "host"
HOST_MEMORY = "memory_bandwidth"  # probe kinds: host memory (the CPU probe), a GPU's device memory
GPU_MEMORY = "gpu_memory_bandwidth"


def _size_bytes(text: str | None) -> int | None:
    """'480 MiB', '32768K', '4M' (sysfs, lscpu) in bytes."""
    import re

    m = re.match(
        r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([KMG]?)(?:i?B)?\s*$", str(text or ""), re.I
    )
    if not m:
        return None
    return int(
        float(m.group(1))
        * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]
    )


def llc_bytes(fp: dict[str, Any]) -> int | None:
    """Size of the host's last-level cache from its fingerprint (the highest cache level listed)."""
    caches = (fp.get("cpu") or {}).get("cache") or {}
    levels = [
        (k, _size_bytes(v))
        for k, v in caches.items()
        if k[:2] in ("L2", "L3", "L4") and not k.endswith("i")
    ]
    levels = [(k, v) for k, v in levels if v]
    return max(levels)[1] if levels else None


#: one thread count of a probe pass: its samples (GB/s) and their statistic (the model's own type)
BandwidthEntry = BandwidthRow


def bandwidth_entry(threads: int, samples_gbs: Sequence[float]) -> dict[str, Any]:
    """One stored row of a probe pass: the samples and their summary (core.stats.summarize)."""
    from core import stats

    row = {
        "threads": int(threads),
        "samples_gbs": list(samples_gbs),
        "summary": stats.summarize(samples_gbs),
    }
    return BandwidthRow.model_validate(row).model_dump(mode="json", exclude_unset=True)


def new_host(
    *,
    fingerprint: dict[str, Any],
    created: datetime | str,
    probe: dict[str, Any],
    bandwidth: list[dict[str, Any]],
    read_bandwidth: list[dict[str, Any]] | None = None,
    conditions: dict[str, Any] | None = None,
    **optional: Any,
) -> dict[str, Any]:
    """A host artifact (the canonical dict written to disk), built in one place. ``probe`` says what
    was measured and how (its ``kind``: memory_bandwidth or gpu_memory_bandwidth); ``bandwidth`` the
    copy pass (bytes read + written), ``read_bandwidth`` the read-only pass where there is one, as
    rows of :func:`bandwidth_entry`; ``optional``: the model's other optional fields, by name. Built
    as its model (core.models.host)."""
    from core import artifacts

    if isinstance(created, datetime):
        stamp, created_s = (
            created.strftime("%Y%m%dT%H%M%SZ"),
            created.isoformat(timespec="seconds"),
        )
    else:
        stamp, created_s = created.replace("-", "").replace(":", "")[:15] + "Z", created
    doc: dict[str, Any] = {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": f"{fingerprint['id']}-{stamp}",
        "created": created_s,
        "host": fingerprint,
        "probe": dict(probe),
        "bandwidth": list(bandwidth),
        "conditions": dict(conditions or {}),
    }
    if read_bandwidth:
        doc["read_bandwidth"] = list(read_bandwidth)
    return Host.model_validate({**doc, **optional}).dump()


def artifact_path(
    doc: Mapping[str, Any], root: Path, prefix: str = "bandwidth"
) -> Path:
    """``<root>/<host id>/<prefix>-<stamp>.json``."""
    return root / doc["host"]["id"] / f"{prefix}-{doc['id'].rsplit('-', 1)[1]}.json"


class HostRecord(ArtifactRecord):
    """A loaded host artifact, read through typed fields."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def model(self) -> Host:
        """The document read through its model (core.models.host)."""
        return self._cached("model", lambda: Host.check(self.doc, self.path or self.id))

    @property
    def probe(self) -> Probe:
        return self.model.probe

    @property
    def probe_kind(self) -> str:
        return self.model.probe.kind

    @property
    def bandwidth(self) -> list[BandwidthRow]:
        """The copy pass (bytes read + written), per thread count."""
        return list(self.model.bandwidth)

    @property
    def read_bandwidth(self) -> list[BandwidthRow]:
        """The read-only pass, per thread count (empty for an older probe)."""
        return list(self.model.read_bandwidth or [])

    @property
    def conditions(self) -> Conditions:
        return self.model.conditions

    @property
    def loadavg_before(self) -> float | None:
        return self.conditions.get("loadavg_1m_before")

    @property
    def llc_bytes(self) -> int | None:
        """The last-level cache the probe recorded, else the fingerprint's (host memory probes only)."""
        llc = self.probe.get("llc_bytes")
        if llc is None and self.probe_kind == HOST_MEMORY:
            llc = llc_bytes(self.host)
        return llc


def as_host(doc: Mapping[str, Any]) -> HostRecord:
    return doc if isinstance(doc, HostRecord) else HostRecord(doc)
