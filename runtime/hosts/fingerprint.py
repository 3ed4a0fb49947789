"""Host fingerprint: CPU, cores, flags that matter for inference, RAM, OS, NUMA, GPUs."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

from core.paths import slug

import psutil

# Flags that change which llama.cpp kernels run.
INTERESTING_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
    "avx512vbmi", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "neon", "asimd", "sve", "sve2", "i8mm", "dotprod",
)


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
        name = f"L{level}" + ("d" if kind == "Data" else "i" if kind == "Instruction" else "")
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
    model = ci.get("model name") or ci.get("Model") or platform.processor() or platform.machine()
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
            "flags": sorted(f for f in INTERESTING_FLAGS if f in flags),
            "cache": _cache_sizes(),
            "hypervisor": "hypervisor" in flags,
        },
        "memory_bytes": int(mem.total),
        "numa_nodes": _numa_nodes(),
        "os": {"system": uname.system, "release": uname.release, "platform": platform.platform(),
               "python": platform.python_version()},
        "gpus": gpus(),
    }
    fp["id"] = host_id(fp)
    return fp


def host_id(fp: dict[str, Any]) -> str:
    """Stable id: the host's name plus a hash of its hardware (so a renamed or rebuilt
    machine does not silently merge with an old one)."""
    hw = {
        "cpu": fp["cpu"]["model"],
        "cores": [fp["cpu"]["physical_cores"], fp["cpu"]["logical_cores"]],
        "mem_gib": round(fp["memory_bytes"] / 2**30),
        "gpus": sorted(g.get("name", "") for g in fp.get("gpus", [])),
    }
    digest = hashlib.sha256(repr(sorted(hw.items())).encode()).hexdigest()[:8]
    return f"{slug(fp['name'])}-{digest}"
