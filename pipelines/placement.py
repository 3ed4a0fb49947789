"""How a run placed its model (issue 29): GPUs used of those on the host, split mode, link, NUMA.

Read from a run's effective settings (``gpus_used``, ``gpus_visible``, ``split_mode``,
``tensor_split``, ``numa``: runtime.hosts.placement records them) and its host fingerprint
(``gpus_on_host``, ``gpu_links``, ``numa_nodes``). Runs recorded before these existed have no
placement (None): pages show the column only where a board has a run that records one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.hostlabel import link_label
from core.records.run import RunRecord


@dataclass(frozen=True)
class Placement:
    gpus_used: int  # 0: the CPU only
    gpus_on_host: int
    gpus_visible: int
    split_mode: str | None
    tensor_split: tuple[float, ...] | None
    link: str  # "NVLink 4 ×18", "PCIe", "" (one GPU)
    numa: (
        str | None
    )  # llama.cpp's NUMA strategy, where the host has several nodes or one was asked
    numa_nodes: int

    @property
    def text(self) -> str:
        """``2 of 2 GPUs · layer split · NVLink 4 ×18``, ``1 of 2 GPUs``, ``CPU · NUMA distribute (2 nodes)``."""
        parts = []
        if self.gpus_used:
            parts.append(
                f"{self.gpus_used} of {self.gpus_on_host} GPU{'s' if self.gpus_on_host != 1 else ''}"
            )
            if self.gpus_visible < self.gpus_on_host:
                parts[-1] += f" ({self.gpus_visible} visible)"
            elif self.gpus_used < self.gpus_visible:
                parts.append(f"split {self.split_mode}")
            if self.gpus_used > 1:
                parts.append(f"{self.split_mode} split")
                if self.tensor_split:
                    parts.append(
                        "shares " + ":".join(f"{x:g}" for x in self.tensor_split)
                    )
                if self.link:
                    parts.append(self.link)
        else:
            parts.append("CPU")
        if self.numa is not None:
            parts.append(
                f"NUMA {self.numa} ({self.numa_nodes} node{'s' if self.numa_nodes != 1 else ''})"
            )
        return " · ".join(parts)

    @property
    def key(self) -> tuple[int, str]:
        """What a scaling view compares: the number of GPUs used and the split."""
        return self.gpus_used, str(self.split_mode if self.gpus_used > 1 else "one GPU")


def of(doc: Any) -> Placement | None:
    """A run's placement; None for a run recorded before placement was (no ``gpus_used``)."""
    rec: RunRecord = doc
    eff = rec.reported
    used = eff.get("gpus_used")
    if not isinstance(used, list):
        return None
    host: Mapping[str, Any] = rec["host"] if isinstance(rec["host"], Mapping) else {}
    on_host = host.get("gpus_on_host")
    if not isinstance(on_host, int):
        on_host = len(host.get("gpus") or [])
    nodes = int(eff.get("numa_nodes") or host.get("numa_nodes") or 1)
    numa = eff.get("numa") or "off"
    visible = {
        g.get("index"): g.get("pci_bus_id")
        for g in host.get("gpus") or []
        if isinstance(g, Mapping)
    }
    buses = {visible.get(i) for i in used}
    links = [
        lk
        for lk in host.get("gpu_links") or []
        if isinstance(lk, Mapping) and set(lk.get("gpus") or []) <= buses
    ]
    ts = eff.get("tensor_split")
    return Placement(
        gpus_used=len(used),
        gpus_on_host=max(on_host, len(used)),
        gpus_visible=int(eff.get("gpus_visible") or len(used)),
        split_mode=eff.get("split_mode"),
        tensor_split=tuple(float(x) for x in ts) if isinstance(ts, list) else None,
        link=link_label(links) if len(used) > 1 else "",
        numa=numa if (nodes > 1 or numa != "off") else None,
        numa_nodes=nodes,
    )


def text(doc: Any) -> str | None:
    p = of(doc)
    return p.text if p is not None else None
