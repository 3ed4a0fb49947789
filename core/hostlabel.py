"""Hosts have names people read (issue 19): a label from data/hosts.yaml (``host_labels:``, by
host id) or one derived from the host's fingerprint, the id kept as the secondary key.

* A GPU host is named by its GPUs: ``H100 80 GB HBM3`` (the driver's name without the vendor, the
  size spaced), ``2× H200 · 140 GiB`` (count, and the memory where the name does not give it).
* A CPU host by its processor family and generation (read from the instruction-set flags where the
  model string is generic, as a VM's often is), its logical CPUs and its memory:
  ``Xeon Sapphire Rapids · 2 vCPU · 24 GiB`` (vCPU under a hypervisor, cores otherwise).

:func:`resolve` gives every host of a set its label: the configured one, else the derived one;
two hosts that derive the same label get their id as a suffix; a configured label that
equals another host's label is a ConfigError naming both hosts (one line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.errors import ConfigError

MAX_LABEL = 80


def _gib(n: int | float | None) -> str | None:
    return f"{round(n / 2**30)} GiB" if n else None


def _gpu_name(name: str) -> str:
    name = re.sub(r"^(NVIDIA|AMD|Intel)\s+", "", name.strip())
    name = re.sub(r"\b(\d+)\s*GB\b", r"\1 GB", name)
    return " ".join(name.split())


def _intel_generation(flags: set[str]) -> str | None:
    if {"amx_tile", "amx_bf16"} <= flags:
        return "Sapphire Rapids"  # or later (Emerald, Granite Rapids): the first with AMX
    if "avx512_bf16" in flags:
        return "Cooper Lake"
    if "avx512_vnni" in flags:
        return "Cascade Lake"
    if "avx512f" in flags:
        return "Skylake-SP"
    if "avx2" in flags:
        return "Haswell+"
    return None


def _amd_generation(flags: set[str]) -> str | None:
    if "avx512f" in flags:
        return "Zen 4"  # or later: the first Zen with AVX-512
    if "avx2" in flags:
        return "Zen"
    return None


def _cpu_family(cpu: Mapping[str, Any]) -> str:
    model = str(cpu.get("model") or "")
    vendor = str(cpu.get("vendor") or "")
    flags = {str(f) for f in cpu.get("flags") or []}
    clean = re.sub(r"\((R|TM|tm|r)\)", "", model)
    clean = re.sub(r"\b(CPU|Processor|\d+-Core)\b", "", clean)
    clean = re.sub(r"@.*$", "", clean)
    clean = " ".join(clean.split())
    intel = "Intel" in vendor or "Intel" in model
    amd = "AMD" in vendor or "AMD" in model
    family = clean.removeprefix("Intel ").removeprefix("AMD ").strip()
    generic = family in ("", "Xeon", "EPYC", "Core", "Ryzen", "Common KVM", "QEMU Virtual")
    gen = _intel_generation(flags) if intel else _amd_generation(flags) if amd else None
    if generic and gen:
        return f"{family or ('Xeon' if intel else 'EPYC' if amd else 'CPU')} {gen}".strip()
    return family or model or "CPU"


def derived_label(fp: Mapping[str, Any]) -> str:
    """The label a host's fingerprint gives (no configuration, no other host considered)."""
    gpus = [g for g in fp.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        names = [_gpu_name(str(g.get("name") or "GPU")) for g in gpus]
        first = names[0]
        count = f"{len(gpus)}× " if len(gpus) > 1 else ""
        mem = None if re.search(r"\d+ GB", first) else _gib(gpus[0].get("memory_bytes"))
        same = all(n == first for n in names)
        base = f"{count}{first}" if same else " + ".join(names)
        return f"{base} · {mem}" if mem and same else base
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), Mapping) else {}
    parts = [_cpu_family(cpu)]
    n = cpu.get("logical_cores")
    if n:
        parts.append(f"{n} vCPU" if cpu.get("hypervisor") else f"{n} cores")
    mem = _gib(fp.get("memory_bytes"))
    if mem:
        parts.append(mem)
    return " · ".join(parts)


def resolve(fingerprints: Mapping[str, Mapping[str, Any]], configured: Mapping[str, str] | None = None,
            source: str = "data/hosts.yaml") -> dict[str, str]:
    """Every host's label, by host id: the configured label, else the derived one (made unique
    with the id's hash where two hosts derive the same). A configured label equal to another
    host's label raises ConfigError naming both."""
    configured = dict(configured or {})
    derived = {h: derived_label(fp) for h, fp in fingerprints.items()}
    counts: dict[str, int] = {}
    for h, lab in derived.items():
        if h not in configured:
            counts[lab] = counts.get(lab, 0) + 1
    out: dict[str, str] = {}
    for h in sorted(fingerprints):
        if h in configured:
            out[h] = configured[h]
        else:
            lab = derived[h]
            out[h] = f"{lab} · {h}" if counts[lab] > 1 else lab
    owner: dict[str, str] = {}
    for h in sorted(out, key=lambda h: (h not in configured, h)):
        lab = out[h]
        other = owner.get(lab.casefold())
        if other is not None:
            first, second = (other, h) if other in configured else (h, other)
            raise ConfigError(f"label {lab!r} of {first} is also the label of {second}; give each host its own",
                              file=source, field=f"host_labels.{first}")
        owner[lab.casefold()] = h
    return out


def check_labels(raw: Any, source: str) -> dict[str, str]:
    """``host_labels:`` of data/hosts.yaml: a mapping of host id to a non-empty one-line label."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping of host ids to labels", file=source, field="host_labels")
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str) or not v.strip() or "\n" in v or len(v) > MAX_LABEL:
            raise ConfigError(f"must be a label on one line of 1 to {MAX_LABEL} characters", file=source,
                              field=f"host_labels.{k}")
        label = " ".join(v.split())
        if label.casefold() in seen:
            raise ConfigError(f"label {label!r} of {k} is also the label of {seen[label.casefold()]}; give each host "
                              "its own", file=source, field=f"host_labels.{k}")
        seen[label.casefold()] = str(k)
        out[str(k)] = label
    return out


def configured_labels(path: Path) -> dict[str, str]:
    """The ``host_labels:`` of an inventory file ({} when the file or the key is absent)."""
    from core.paths import relpath
    from core.yamlio import load_yaml

    if not path.is_file():
        return {}
    raw = load_yaml(path)
    if not isinstance(raw, Mapping):
        return {}
    return check_labels(raw.get("host_labels"), relpath(path))


def fingerprints(records: Iterable[Any]) -> dict[str, Mapping[str, Any]]:
    """Each host's newest fingerprint among records that carry one (``host_id``, ``host``)."""
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for r in records:
        hid, fp = getattr(r, "host_id", None), getattr(r, "host", None)
        if not hid or not isinstance(fp, Mapping):
            continue
        created = str(getattr(r, "created", "") or "")
        if hid not in out or created >= out[hid][0]:
            out[hid] = (created, fp)
    return {h: fp for h, (_, fp) in out.items()}
