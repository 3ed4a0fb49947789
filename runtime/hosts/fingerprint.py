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
from core.paths import slug

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


def topology() -> dict[str, Any]:
    """GPUs on the machine, links between the visible ones, NUMA nodes (runtime.hosts.devices)."""
    from runtime.hosts import devices

    t = devices.topology()
    out: dict[str, Any] = {"numa": t["numa"], "gpus_on_host": t["gpus_on_host"] or 0}
    if t["gpu_links"]:
        out["gpu_links"] = t["gpu_links"]
    if t["visible_devices_env"]:
        out["visible_devices"] = t["visible_devices_env"]
    return out


def suggested_name(fp: dict[str, Any]) -> str:
    """A name for a lent machine from its fingerprint, the same whichever GPUs a run sees:
    ``gpu-2x-h100-hbm3`` (every GPU on the machine), ``cpu-32-cores`` without a GPU."""
    from core.hostlabel import gpu_name

    gpus = fp.get("gpus") or []
    n = fp.get("gpus_on_host") or len(gpus)
    if gpus:
        return slug(f"gpu-{n}x-{gpu_name(str(gpus[0].get('name') or 'gpu'))}")
    return slug(f"cpu-{fp['cpu'].get('logical_cores') or 0}-cores")


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
        **topology(),
        "id_scheme": hostid.SCHEME,
    }
    fp["id"] = host_id(fp)
    return fp


def main(argv: list[str] | None = None) -> int:
    """``python -m runtime.hosts.fingerprint [--suggest-name]``: the fingerprint as JSON, or a name for it."""
    import argparse
    import json

    ap = argparse.ArgumentParser(
        description="This host's fingerprint (JSON) or a name derived from it."
    )
    ap.add_argument(
        "--suggest-name",
        action="store_true",
        help="print a host name derived from the hardware",
    )
    a = ap.parse_args(argv)
    fp = fingerprint()
    print(
        suggested_name(fp)
        if a.suggest_name
        else json.dumps(fp, indent=1, sort_keys=True)
    )
    return 0


def host_id(fp: dict[str, Any]) -> str:
    """The host's id (core.hostid.host_id: its name and a hash of the facts that tell machines apart)."""
    return hostid.host_id(fp)


if __name__ == "__main__":
    raise SystemExit(main())
