"""Device topology (issue 29): which GPUs a run can see, how they are linked, and the NUMA nodes.

NVML numbers every GPU of the machine in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``;
CUDA (and so llama.cpp) sees only the GPUs that variable lists, renumbered from 0. This module
owns the mapping: :func:`parse_visible` turns the variable into NVML devices by index or UUID
(CUDA's rules: the list stops at the first entry that names no device), and every reader of
NVML (the fingerprint, peak memory, the energy meter) goes through :func:`visible`.

* a GPU: ``index`` (the CUDA ordinal the process uses), ``nvml_index``, ``uuid``, ``pci_bus_id``
  and the NUMA node its PCI slot hangs off;
* a link between two visible GPUs: NVLink (active links and their version, as NVML reports
  them) or PCIe (the closest common ancestor: same switch, host bridge, across NUMA nodes);
* a NUMA node: its CPUs (a Linux cpulist) and its memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.hostlabel import NVLINK_VERSIONS

NODE_ROOT = Path("/sys/devices/system/node")
PCI_ROOT = Path("/sys/bus/pci/devices")
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")

# NVML's topology levels (nvmlGpuTopologyLevel_t) as a reader says them
PCIE_LEVELS = {
    0: "same board",
    10: "PCIe, one switch",
    20: "PCIe, several switches",
    30: "PCIe, host bridge",
    40: "PCIe, across host bridges (one NUMA node)",
    50: "PCIe, across NUMA nodes",
}


@dataclass(frozen=True)
class Device:
    """One GPU as NVML knows it (``nvml_index`` in PCI order)."""

    nvml_index: int
    uuid: str
    pci_bus_id: str


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def visible_spec(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(variable, value) of the variable that restricts the GPUs, or None when none is set."""
    env = os.environ if environ is None else environ
    for var in ENV_VARS:
        if var in env:
            return var, env[var]
    return None


def parse_visible(raw: str | None, devices: Sequence[Device]) -> list[Device]:
    """The devices a process sees, in the order it numbers them, for ``CUDA_VISIBLE_DEVICES=raw``.

    None (unset) is every device. Entries are indices or UUIDs (``GPU-…``, a unique prefix is
    enough); like CUDA, the list ends at the first entry that names no device (``-1``, an index
    out of range, an unknown UUID), and a device listed twice makes the whole list invalid."""
    if raw is None:
        return list(devices)
    out: list[Device] = []
    for part in raw.split(","):
        part = part.strip()
        dev: Device | None = None
        if part.isascii() and part.lstrip("-").isdigit():
            i = int(part)
            dev = devices[i] if 0 <= i < len(devices) else None
        elif part:
            key = part if part.upper().startswith(("GPU-", "MIG-")) else f"GPU-{part}"
            found = [d for d in devices if d.uuid.lower().startswith(key.lower())]
            dev = found[0] if len(found) == 1 else None
        if dev is None:
            break
        if dev in out:
            return []
        out.append(dev)
    return out


def _nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def all_devices(nv: Any) -> list[Device]:
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        try:
            bus = _s(nv.nvmlDeviceGetPciInfo(h).busId)
        except Exception:
            bus = ""
        try:
            uuid = _s(nv.nvmlDeviceGetUUID(h))
        except Exception:
            uuid = ""
        out.append(Device(i, uuid, normalise_bus_id(bus)))
    return out


def normalise_bus_id(bus: str) -> str:
    """``00000000:1A:00.0`` -> ``0000:1a:00.0`` (sysfs's spelling)."""
    bus = bus.strip().lower()
    if not bus:
        return ""
    dom, _, rest = bus.partition(":")
    return f"{dom[-4:]:0>4}:{rest}" if rest else bus


def visible(nv: Any = None) -> list[Device]:
    """The GPUs this process may use, in CUDA's order; [] without NVML."""
    nv = nv or _nvml()
    if nv is None:
        return []
    try:
        devices = all_devices(nv)
    except Exception:
        return []
    spec = visible_spec()
    return parse_visible(spec[1] if spec else None, devices)


def host_count(nv: Any = None) -> int | None:
    """Every GPU NVML reports on the machine (visible or not); None without NVML."""
    nv = nv or _nvml()
    if nv is None:
        return None
    try:
        return int(nv.nvmlDeviceGetCount())
    except Exception:
        return None


def pci_numa_node(bus_id: str, root: Path = PCI_ROOT) -> int | None:
    try:
        n = int((root / bus_id / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return n if n >= 0 else None


def link(nv: Any, a: Device, b: Device) -> dict[str, Any]:
    """How two GPUs talk: NVLink (active links of ``a``, their version, direct or through an
    NVSwitch) when NVML says peer-to-peer over NVLink works, else the PCIe path."""
    ha, hb = (
        nv.nvmlDeviceGetHandleByIndex(a.nvml_index),
        nv.nvmlDeviceGetHandleByIndex(b.nvml_index),
    )
    out: dict[str, Any] = {"gpus": [a.pci_bus_id, b.pci_bus_id]}
    nvlink_ok = False
    try:
        nvlink_ok = (
            nv.nvmlDeviceGetP2PStatus(ha, hb, nv.NVML_P2P_CAPS_INDEX_NVLINK)
            == nv.NVML_P2P_STATUS_OK
        )
    except Exception:
        pass
    links, versions, via_switch = 0, set(), False
    for i in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nv.nvmlDeviceGetNvLinkState(ha, i) != nv.NVML_FEATURE_ENABLED:
                continue
        except Exception:
            continue
        try:
            remote = normalise_bus_id(
                _s(nv.nvmlDeviceGetNvLinkRemotePciInfo_v2(ha, i).busId)
            )
        except Exception:
            remote = ""
        try:
            kind = nv.nvmlDeviceGetNvLinkRemoteDeviceType(ha, i)
            is_switch = kind == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        except Exception:
            is_switch = False
        if remote != b.pci_bus_id and not is_switch:
            continue
        via_switch = via_switch or is_switch
        links += 1
        try:
            versions.add(int(nv.nvmlDeviceGetNvLinkVersion(ha, i)))
        except Exception:
            pass
    if links or nvlink_ok:
        out.update(kind="NVLink", nvlink_links=links or None, via_nvswitch=via_switch)
        if versions:  # NVML's enum (6 = NVLink 4.0) as the version it names
            v = max(versions)
            out["nvlink_version"] = NVLINK_VERSIONS.get(v, str(v))
        return out
    out["kind"] = "PCIe"
    try:
        level = int(nv.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
        out["pcie_path"] = PCIE_LEVELS.get(level, f"level {level}")
    except Exception:
        pass
    return out


def links(nv: Any, devices: Sequence[Device]) -> list[dict[str, Any]]:
    out = []
    for i, a in enumerate(devices):
        for b in devices[i + 1 :]:
            try:
                out.append(link(nv, a, b))
            except Exception as exc:
                out.append(
                    {
                        "gpus": [a.pci_bus_id, b.pci_bus_id],
                        "kind": "unknown",
                        "error": str(exc),
                    }
                )
    return out


# -- CPUs and NUMA ----------------------------------------------------------------------------
def parse_cpulist(text: str) -> list[int]:
    """Linux's cpulist (``0-3,8,10-11``) as CPU numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def numa_nodes(root: Path = NODE_ROOT) -> list[dict[str, Any]]:
    """Each NUMA node with its CPUs and memory; [] where the kernel shows none."""
    out = []
    for node in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        entry: dict[str, Any] = {"node": int(node.name[4:])}
        try:
            cpus = (node / "cpulist").read_text().strip()
            entry["cpus"] = cpus
            entry["logical_cores"] = len(parse_cpulist(cpus))
        except (OSError, ValueError):
            pass
        try:
            for line in (node / "meminfo").read_text().splitlines():
                if "MemTotal:" in line:
                    entry["memory_bytes"] = int(line.split()[-2]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        out.append(entry)
    return out


def parse_cpu_mask(mask: str) -> set[int]:
    """llama.cpp's CPU mask (hex, ``0xff`` or ``ff``, bit i = CPU i) as CPU numbers; ValueError if bad."""
    m = mask.strip().lower()
    m = m.removeprefix("0x")
    if not m or any(c not in "0123456789abcdef" for c in m):
        raise ValueError(f"{mask!r} is not a hex CPU mask (like 0xff)")
    n = int(m, 16)
    return {i for i in range(n.bit_length()) if n >> i & 1}


def topology(nv: Any = None) -> dict[str, Any]:
    """What the fingerprint records: visible GPUs (facts by device), GPUs on the machine, links, NUMA."""
    nv = nv or _nvml()
    devs = visible(nv) if nv is not None else []
    spec = visible_spec()
    return {
        "devices": devs,
        "gpus_on_host": host_count(nv) if nv is not None else 0,
        "gpu_links": links(nv, devs) if nv is not None and len(devs) > 1 else [],
        "visible_devices_env": f"{spec[0]}={spec[1]}" if spec else None,
        "numa": numa_nodes(),
    }
