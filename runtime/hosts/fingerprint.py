"""Host fingerprint: CPU (with its signature), cores, flags that matter for inference, caches, RAM, OS,
NUMA, GPUs. Which of these facts make the host's id is core.hostid's rule."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import psutil

from core import hostid

# Flags that change which llama.cpp kernels run (core.hostid: part of the host's identity).
INTERESTING_FLAGS = hostid.FLAGS

# /proc/cpuinfo's names of the CPU's signature: x86 (family, model, stepping), ARM (implementer ... revision)
_SIGNATURE_KEYS = {
    "cpu family": "family",
    "model": "model",
    "stepping": "stepping",
    "CPU implementer": "implementer",
    "CPU architecture": "architecture",
    "CPU variant": "variant",
    "CPU part": "part",
    "CPU revision": "revision",
}


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if ":" in line:
                k, v = (x.strip() for x in line.split(":", 1))
                info.setdefault(k, v)
    except OSError:
        pass
    return info


def signature(info: dict[str, str]) -> dict[str, int]:
    """The CPU's signature from /proc/cpuinfo's fields, as integers (ARM gives hex: 0x41)."""
    out: dict[str, int] = {}
    for key, name in _SIGNATURE_KEYS.items():
        raw = (info.get(key) or "").strip()
        try:
            out[name] = int(raw, 0)
        except ValueError:
            continue
    return out


def _cache_sizes() -> dict[str, str]:
    out: dict[str, str] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + (
            "d" if kind == "Data" else "i" if kind == "Instruction" else ""
        )
        out[name] = size
    return out


def _numa_nodes() -> int:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return len(nodes) or 1


def host_name() -> str:
    return os.environ.get("ALMANAC_HOST_NAME") or socket.gethostname()


def gpus() -> list[dict[str, Any]]:
    from runtime.hosts import gpu

    return gpu.list_gpus()


def fingerprint() -> dict[str, Any]:
    ci = _cpuinfo()
    flags = set((ci.get("flags") or ci.get("Features") or "").split())
    model = (
        ci.get("model name")
        or ci.get("Model")
        or platform.processor()
        or platform.machine()
    )
    freq = None
    try:
        f = psutil.cpu_freq()
        freq = round(f.max or f.current) if f else None
    except (NotImplementedError, FileNotFoundError, AttributeError):
        pass
    mem = psutil.virtual_memory()
    uname = platform.uname()
    fp: dict[str, Any] = {
        "name": host_name(),
        "cpu": {
            "model": model,
            "vendor": ci.get("vendor_id"),
            "arch": uname.machine,
            "physical_cores": psutil.cpu_count(logical=False),
            "logical_cores": psutil.cpu_count(logical=True),
            "max_mhz": freq,
            "signature": signature(ci),
            "flags": sorted(f for f in INTERESTING_FLAGS if f in flags),
            "cache": _cache_sizes(),
            "hypervisor": "hypervisor" in flags,
        },
        "memory_bytes": int(mem.total),
        "numa_nodes": _numa_nodes(),
        "os": {
            "system": uname.system,
            "release": uname.release,
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "gpus": gpus(),
        "id_scheme": hostid.SCHEME,
    }
    fp["id"] = host_id(fp)
    return fp


def host_id(fp: dict[str, Any]) -> str:
    """The host's id (core.hostid.host_id: its name and a hash of the facts that tell machines apart)."""
    return hostid.host_id(fp)
