"""Hosts have names people read (issues 19 and 27): every host and device label is made here.

A label comes from data/hosts.yaml (``host_labels:``, by host id) or from the host's fingerprint,
the id kept as the secondary key. Memory is in GiB (2^30 bytes) computed from the bytes recorded,
for host RAM and GPUs alike; a size in a GPU's driver name ("80GB") is dropped for that reason, so
every card reads the same way.

* A GPU (:func:`device_label`): its driver's name without the vendor and size, and its memory:
  ``H100 HBM3 · 80 GiB``, ``H200 · 140 GiB``.
* A GPU host (:func:`derived_label`): its GPUs, ``2× H200 · 140 GiB each`` when alike.
* A CPU (:func:`cpu_label`): the processor family and generation. The generation comes from the
  CPU's signature where the fingerprint records it (family, model and stepping; an ARM part), else
  from its instruction-set flags, and never contradicts the flags: a signature whose generation
  lacks a flag the CPU shows gives way to the flags, and an AMX generation without AMX flags says
  ``AMX hidden`` (a hypervisor masks it). AVX-VNNI with AVX-512 BF16 and no AMX is such a CPU
  (Sapphire Rapids or later), never Cooper Lake.
* A CPU host: ``Xeon Sapphire Rapids+ · 2 vCPU · 24 GiB`` (its CPU, logical CPUs, memory; vCPU under
  a hypervisor, cores otherwise).

:func:`resolve` gives every host of a set its label: the configured one, else the derived one;
hosts that derive the same label are told apart by the facts that differ between them
(``· AMX`` / ``· no AMX``, ``· L3 480 MiB`` / ``· L3 260 MiB``; core.hostid), by name where the
hardware is alike, never by a hash unless nothing else differs; a configured label that equals
another host's label is a ConfigError naming both hosts (one line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.hostid import identity_facts

MAX_LABEL = 80


def gib(n: int | float | None) -> str | None:
    """Bytes as whole GiB ("80 GiB"); None when unknown."""
    return (
        f"{round(n / 2**30)} GiB"
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0
        else None
    )


def gpu_name(name: str) -> str:
    """A GPU's driver name without its vendor and its size ("NVIDIA H100 80GB HBM3" -> "H100 HBM3")."""
    name = re.sub(r"^(NVIDIA|AMD|Intel)\s+", "", str(name or "").strip())
    name = re.sub(r"[-\s]*\b\d+\s*GB\b", "", name)
    return " ".join(name.split()).strip("- ") or "GPU"


def device_label(gpu: Mapping[str, Any]) -> str:
    """One GPU: ``H100 HBM3 · 80 GiB`` (its name, and its memory where recorded)."""
    mem = gib(gpu.get("memory_bytes"))
    name = gpu_name(str(gpu.get("name") or "GPU"))
    return f"{name} · {mem}" if mem else name


# -- CPU generations ---------------------------------------------------------------------------
_BASE = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
_SKX = _BASE | {"avx512f", "avx512bw", "avx512vl", "avx512cd", "avx512dq"}
_CLX = _SKX | {"avx512_vnni"}
_CPX = _CLX | {"avx512_bf16"}
_ICX = _CLX | {
    "avx512vbmi",
    "avx512_vbmi2",
    "avx512_bitalg",
    "avx512_vpopcntdq",
    "avx512ifma",
}
_AMX = frozenset({"amx_tile", "amx_int8", "amx_bf16"})
_SPR = _ICX | _CPX | _AMX | {"avx_vnni", "avx512_fp16"}
_GNR = _SPR | {"amx_fp16", "amx_complex"}
_ZEN3 = _BASE
_ZEN4 = _ICX | {"avx512_bf16"}
_ZEN5 = _ZEN4 | {"avx_vnni", "avx512_vp2intersect"}
# the x86 flags a generation is judged by (ARM flags say nothing of an x86 generation)
_X86 = _GNR | _ZEN5 | {"avx_vnni_int8", "avx_ifma", "avx_ne_convert"}

# Intel family 6: model -> (generation, the flags it can show); model 85 by stepping
_INTEL_MODELS: dict[int, tuple[str, frozenset[str]]] = {
    63: ("Haswell", _BASE),
    79: ("Broadwell", _BASE),
    106: ("Ice Lake-SP", _ICX),
    108: ("Ice Lake-D", _ICX),
    143: ("Sapphire Rapids", _SPR),
    207: ("Emerald Rapids", _SPR),
    173: ("Granite Rapids", _GNR),
    174: ("Granite Rapids-D", _GNR),
}
_ARM_PARTS = {
    (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD40): "Neoverse V1",
    (0x41, 0xD49): "Neoverse N2",
    (0x41, 0xD4F): "Neoverse V2",
    (0x41, 0xD8E): "Neoverse N3",
    (0x41, 0xD84): "Neoverse V3",
    (0xC0, 0xAC3): "AmpereOne",
}


def _intel_by_signature(sig: Mapping[str, Any]) -> tuple[str, frozenset[str]] | None:
    if sig.get("family") != 6:
        return None
    model, stepping = sig.get("model"), sig.get("stepping")
    if model == 85:
        if not isinstance(stepping, int):
            return "Skylake-SP / Cascade Lake", _CPX
        return (
            ("Skylake-SP", _SKX)
            if stepping <= 4
            else ("Cooper Lake", _CPX)
            if stepping >= 10
            else ("Cascade Lake", _CLX)
        )
    return _INTEL_MODELS.get(model) if isinstance(model, int) else None


def _intel_by_flags(flags: set[str]) -> str | None:
    if "amx_fp16" in flags:
        return "Granite Rapids+"
    if "amx_tile" in flags:
        return "Sapphire Rapids+"
    if "avx512f" in flags and ("avx_vnni" in flags or "avx512_fp16" in flags):
        return "Sapphire Rapids+ (AMX hidden)"  # AVX-VNNI or FP16 beside AVX-512: no Xeon before Sapphire Rapids
    if "avx512_bf16" in flags:
        return "Cooper Lake"
    if flags & {
        "avx512vbmi",
        "avx512_vbmi2",
        "avx512ifma",
        "avx512_bitalg",
        "avx512_vpopcntdq",
    }:
        return "Ice Lake"
    if "avx512_vnni" in flags:
        return "Cascade Lake"
    if "avx512f" in flags:
        return "Skylake-SP"
    if "avx2" in flags:
        return "Haswell+"
    return None


def _amd_by_signature(sig: Mapping[str, Any]) -> tuple[str, frozenset[str]] | None:
    family, model = sig.get("family"), sig.get("model")
    if not isinstance(model, int):
        return None
    if family == 23:
        return ("Zen / Zen+", _BASE) if model < 0x30 else ("Zen 2", _BASE)
    if family == 25:
        zen4 = 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF
        return ("Zen 4", _ZEN4) if zen4 else ("Zen 3", _ZEN3)
    if family == 26:
        return "Zen 5", _ZEN5
    return None


def _amd_by_flags(flags: set[str]) -> str | None:
    if flags & {"avx_vnni", "avx512_vp2intersect"} and "avx512f" in flags:
        return "Zen 5"
    if "avx512f" in flags:
        return "Zen 4"  # the first Zen with AVX-512
    if "avx2" in flags:
        return "Zen 1–3"
    return None


def cpu_generation(cpu: Mapping[str, Any]) -> str | None:
    """The CPU's generation ("Sapphire Rapids", "Zen 4", "Neoverse V2"), from its signature where
    recorded and not contradicted by its flags, else from its flags; None when neither tells."""
    vendor, model = str(cpu.get("vendor") or ""), str(cpu.get("model") or "")
    flags = {str(f) for f in cpu.get("flags") or []}
    sig = cpu.get("signature") if isinstance(cpu.get("signature"), Mapping) else {}
    intel = "Intel" in vendor or "Intel" in model
    amd = "AMD" in vendor or "AMD" in model
    if isinstance(sig.get("implementer"), int) and isinstance(sig.get("part"), int):
        return _ARM_PARTS.get((sig["implementer"], sig["part"]))
    by_sig = (
        _intel_by_signature(sig) if intel else _amd_by_signature(sig) if amd else None
    )
    if by_sig is not None:
        name, can = by_sig
        if (
            not (flags & _X86) - can
        ):  # the flags say nothing this generation could not show
            hidden = can >= _AMX and not flags & _AMX and "flags" in cpu
            return f"{name} (AMX hidden)" if hidden else name
    return _intel_by_flags(flags) if intel else _amd_by_flags(flags) if amd else None


def cpu_label(cpu: Mapping[str, Any]) -> str:
    """A CPU: its family and generation where the model string is generic (a VM's often is:
    ``Xeon Sapphire Rapids+``), else the model string cleaned (``Ryzen 9 7950X``)."""
    model = str(cpu.get("model") or "")
    vendor = str(cpu.get("vendor") or "")
    clean = re.sub(r"\((R|TM|tm|r)\)", "", model)
    clean = re.sub(r"\b(CPU|Processor|\d+-Core)\b", "", clean)
    clean = re.sub(r"@.*$", "", clean)
    clean = " ".join(clean.split())
    intel = "Intel" in vendor or "Intel" in model
    amd = "AMD" in vendor or "AMD" in model
    family = clean.removeprefix("Intel ").removeprefix("AMD ").strip()
    generic = family in (
        "",
        "Xeon",
        "EPYC",
        "Core",
        "Ryzen",
        "Common KVM",
        "QEMU Virtual",
        "aarch64",
        "arm64",
    )
    gen = cpu_generation(cpu)
    if generic and gen:
        base = (
            "Xeon"
            if intel and family in ("", "Common KVM", "QEMU Virtual")
            else "EPYC"
            if amd and family in ("", "Common KVM", "QEMU Virtual")
            else family
        )
        if base in ("aarch64", "arm64"):
            base = ""
        return f"{base} {gen}".strip()
    return family or model or "CPU"


def gpus_label(gpus: Iterable[Mapping[str, Any]]) -> str:
    """A host's GPUs: ``H100 HBM3 · 80 GiB``, ``2× H200 · 140 GiB each``, ``A + B`` when unlike; "" for none."""
    names = [device_label(g) for g in gpus if isinstance(g, Mapping)]
    if not names:
        return ""
    if all(n == names[0] for n in names):
        if len(names) == 1:
            return names[0]
        return f"{len(names)}× {names[0]}" + (" each" if "·" in names[0] else "")
    return " + ".join(names)


# NVML's nvmlNvlinkVersion_t as NVLink generations (a fingerprint may hold the raw enum value)
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0"}


def nvlink_generation(v: Any) -> str | None:
    """NVLink's generation ("4") from NVML's enum (6) or a version string ("4.0")."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = NVLINK_VERSIONS.get(v)
    if not v:
        return None
    return str(v).removesuffix(".0")


def link_label(links: Iterable[Mapping[str, Any]]) -> str:
    """The links between a set of GPUs: ``NVLink 4 ×18``, ``PCIe``, ``NVLink + PCIe`` when mixed."""
    kinds = []
    for lk in links:
        if lk.get("kind") == "NVLink":
            n, v = lk.get("nvlink_links"), nvlink_generation(lk.get("nvlink_version"))
            kinds.append("NVLink" + (f" {v}" if v else "") + (f" ×{n}" if n else ""))
        elif lk.get("kind"):
            kinds.append(str(lk["kind"]))
    return " + ".join(dict.fromkeys(kinds))


def placement_label(fp: Mapping[str, Any]) -> str:
    """The GPUs a fingerprint's run saw, as the machine holds them: ``H100 HBM3 · 80 GiB ×1 of 2``
    when it saw some of the machine's GPUs, ``2× H100 HBM3 · 80 GiB each · NVLink 4 ×18`` with
    their link when several; "" without a GPU (issue 29)."""
    gpus = [g for g in fp.get("gpus") or [] if isinstance(g, Mapping)]
    text = gpus_label(gpus)
    if not text:
        return ""
    on_host = fp.get("gpus_on_host")
    if (
        isinstance(on_host, int)
        and not isinstance(on_host, bool)
        and on_host > len(gpus)
    ):
        text += f" ×{len(gpus)} of {on_host}"
    links = [lk for lk in fp.get("gpu_links") or [] if isinstance(lk, Mapping)]
    if links:
        text += f" · {link_label(links)}"
    return text


def derived_label(fp: Mapping[str, Any]) -> str:
    """The label a host's fingerprint gives (no configuration, no other host considered)."""
    gpus = placement_label(fp)
    if gpus:
        return gpus
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), Mapping) else {}
    parts = [cpu_label(cpu)]
    n = cpu.get("logical_cores")
    if n:
        parts.append(f"{n} vCPU" if cpu.get("hypervisor") else f"{n} cores")
    mem = gib(fp.get("memory_bytes"))
    if mem:
        parts.append(mem)
    return " · ".join(parts)


def machine_summary(fp: Mapping[str, Any]) -> str:
    """A host's machine in a few words, GPUs or not: ``Xeon Sapphire Rapids+ · 16 threads · H200 · 140 GiB``."""
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), Mapping) else {}
    parts = [cpu_label(cpu)]
    if cpu.get("logical_cores"):
        parts.append(f"{cpu['logical_cores']} threads")
    gpus = placement_label(fp)
    if gpus:
        parts.append(gpus)
    return " · ".join(parts)


# -- telling alike hosts apart -----------------------------------------------------------------
_FIRST = (
    "cpu.flags.amx_tile",
    "cpu.cache.L3",
)  # the facts most worth naming when they differ


def _cache_text(v: Any) -> str:
    m = re.fullmatch(r"\s*(\d+)\s*K(iB)?\s*", str(v))
    if m:
        kib = int(m.group(1))
        return f"{kib // 1024} MiB" if kib >= 1024 and kib % 1024 == 0 else f"{kib} KiB"
    return str(v)


def fact_text(fact: str, value: Any) -> str:
    """A fact as a label names it: ``AMX`` / ``no AMX``, ``L3 480 MiB``, ``stepping 8``."""
    if fact.startswith("cpu.flags."):
        flag = fact.removeprefix("cpu.flags.")
        name = "AMX" if flag == "amx_tile" else flag
        return name if value else f"no {name}"
    if fact.startswith("cpu.cache."):
        return f"{fact.removeprefix('cpu.cache.')} {_cache_text(value)}"
    if fact.startswith("cpu.signature."):
        return f"{fact.removeprefix('cpu.signature.')} {value}"
    if fact == "memory_gib":
        return f"{value} GiB"
    if fact == "gpus":
        return ", ".join(value) or "no GPU"
    if fact == "numa_nodes":
        return f"{value} NUMA node{'s' if value != 1 else ''}"
    return f"{fact.rsplit('.', 1)[-1].replace('_', ' ')} {value}"


def _told_apart(group: dict[str, Mapping[str, Any]]) -> dict[str, str]:
    """For hosts that derive one label: a suffix each, naming the facts that differ between them
    (those all of them record, the most telling first), else the host's name, else its id."""
    facts = {h: identity_facts(fp) for h, fp in group.items()}
    shared = [
        f for f in next(iter(facts.values())) if all(f in fs for fs in facts.values())
    ]
    order = [f for f in _FIRST if f in shared] + [f for f in shared if f not in _FIRST]
    chosen: list[str] = []
    for f in order:
        if len({repr(fs[f]) for fs in facts.values()}) > 1:
            chosen.append(f)
            if len({tuple(repr(facts[h][c]) for c in chosen) for h in group}) == len(
                group
            ):
                break
    out = {h: " · ".join(fact_text(f, facts[h][f]) for f in chosen) for h in group}
    if len(set(out.values())) < len(group):
        names = {h: str(fp.get("name") or "") for h, fp in group.items()}
        out = {h: " · ".join(x for x in (out[h], names[h]) if x) for h in group}
    if len(set(out.values())) < len(group):
        out = {h: " · ".join(x for x in (out[h], h) if x) for h in group}
    return out


def resolve(
    fingerprints: Mapping[str, Mapping[str, Any]],
    configured: Mapping[str, str] | None = None,
    source: str = "data/hosts.yaml",
) -> dict[str, str]:
    """Every host's label, by host id: the configured label, else the derived one (hosts that derive
    the same told apart by the facts that differ between them). A configured label equal to another
    host's label raises ConfigError naming both."""
    configured = dict(configured or {})
    derived = {h: derived_label(fp) for h, fp in fingerprints.items()}
    alike: dict[str, dict[str, Mapping[str, Any]]] = {}
    for h, lab in derived.items():
        if h not in configured:
            alike.setdefault(lab, {})[h] = fingerprints[h]
    suffix: dict[str, str] = {}
    for group in alike.values():
        if len(group) > 1:
            suffix.update(_told_apart(group))
    out: dict[str, str] = {}
    for h in sorted(fingerprints):
        if h in configured:
            out[h] = configured[h]
        else:
            out[h] = " · ".join(x for x in (derived[h], suffix.get(h)) if x)
    owner: dict[str, str] = {}
    for h in sorted(out, key=lambda h: (h not in configured, h)):
        lab = out[h]
        other = owner.get(lab.casefold())
        if other is not None:
            first, second = (other, h) if other in configured else (h, other)
            raise ConfigError(
                f"label {lab!r} of {first} is also the label of {second}; give each host its own",
                file=source,
                field=f"host_labels.{first}",
            )
        owner[lab.casefold()] = h
    return out


def check_labels(raw: Any, source: str) -> dict[str, str]:
    """``host_labels:`` of data/hosts.yaml: a mapping of host id to a non-empty one-line label."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "must be a mapping of host ids to labels", file=source, field="host_labels"
        )
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str) or not v.strip() or "\n" in v or len(v) > MAX_LABEL:
            raise ConfigError(
                f"must be a label on one line of 1 to {MAX_LABEL} characters",
                file=source,
                field=f"host_labels.{k}",
            )
        label = " ".join(v.split())
        if label.casefold() in seen:
            raise ConfigError(
                f"label {label!r} of {k} is also the label of {seen[label.casefold()]}; give each host "
                "its own",
                file=source,
                field=f"host_labels.{k}",
            )
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
