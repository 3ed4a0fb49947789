"""What a host is (issue 27): the one rule that says which facts of a fingerprint tell machines apart.

A host id is ``<slug(host name)>-<8 hex>``, the hex a hash of the host's *identity facts*:

* the CPU: vendor, architecture, its signature (x86: ``cpu family``, ``model``, ``stepping`` of
  /proc/cpuinfo; ARM: implementer, architecture, variant, part, revision), physical and logical
  cores, each cache level's size, and each instruction-set flag that selects kernels (AMX, the
  AVX-512 and VNNI variants, SVE, i8mm, dot product ...: :data:`FLAGS`), present or absent;
* NUMA nodes and memory (GiB, rounded);
* each visible GPU: name and memory (GiB, rounded); where a run sees only some of the machine's
  GPUs (``CUDA_VISIBLE_DEVICES``), how many the machine has (``gpus_on_host``), and where it sees
  several, how they are linked (``gpu_links``: NVLink with its link count, or the PCIe path).
  A run on one GPU of a 2-GPU machine and a run on both are two environments (issue 29); a
  fingerprint that sees every GPU and has one GPU or none has the facts it always had (the same id).

The CPU's model *string* is not a fact: the signature says which CPU it is, and hypervisors give
different CPUs one name ("Intel(R) Xeon(R) Processor"). Neither is anything that changes on one
machine (clock, OS, driver).

Fingerprints written since this rule carry ``id_scheme: 2`` (:data:`SCHEME`). An older
fingerprint (no ``id_scheme``) records fewer facts: no signature, and flags of the shorter list
:data:`FLAGS_V1` only. Its facts are the ones it has (:func:`identity_facts`), so two fingerprints
are compared on the facts both record (:func:`differing_fact`), and an older one that agrees with
exactly one newer host on all of them is that host (:func:`reconcile`, run by the loader on every
set of artifacts). Facts that are unknown (``null``, an inventory-only or imported host) are not
facts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.paths import slug

SCHEME = 2  # id_scheme of fingerprints written by this version

# The flags the first fingerprints recorded (an older fingerprint records these only).
FLAGS_V1 = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512vbmi",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
    "sve",
    "sve2",
    "i8mm",
    "dotprod",
)
# Every flag that changes which kernels llama.cpp (ggml) and its peers run, as Linux names them.
FLAGS = FLAGS_V1 + (
    "avx512cd",
    "avx512dq",
    "avx512ifma",
    "avx512_vbmi2",
    "avx512_bitalg",
    "avx512_vpopcntdq",
    "avx512_fp16",
    "avx512_vp2intersect",
    "avx_vnni_int8",
    "avx_ifma",
    "avx_ne_convert",
    "amx_fp16",
    "amx_complex",
    "asimddp",
    "asimdhp",
    "fphp",
    "bf16",
    "svei8mm",
    "svebf16",
    "sme",
    "sme2",
)

# The signature's fields as the fingerprint records them (integers), in order.
SIGNATURE = (
    "family",
    "model",
    "stepping",
    "implementer",
    "architecture",
    "variant",
    "part",
    "revision",
)


def scheme(fp: Mapping[str, Any]) -> int:
    """The identity scheme a fingerprint was written under (1: before ``id_scheme`` existed)."""
    v = fp.get("id_scheme")
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def flag_list(fp: Mapping[str, Any]) -> tuple[str, ...]:
    """The flags a fingerprint records as present or absent: its scheme's list."""
    return FLAGS if scheme(fp) >= 2 else FLAGS_V1


def measured(fp: Mapping[str, Any]) -> bool:
    """Whether the fingerprint was taken on the host (not an inventory entry nor a llama-bench import,
    whose hardware is unknown: their ids are their own, never recomputed)."""
    return fp.get("source") != "inventory" and not fp.get("known_from")


def _gib(n: Any) -> int | None:
    return (
        round(n / 2**30)
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0
        else None
    )


def _level(name: str) -> tuple[int, str]:
    # ASCII digits only: "³" is a digit to str.isdigit, not to int (a cache level's name is the
    # artifact's, any text); a handful of them, so no name is a number too long for int
    digits = "".join(c for c in name if "0" <= c <= "9")[:9]
    return (-int(digits) if digits else 0, name)


def identity_facts(fp: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of a fingerprint that tell machines apart, by name, in a fixed order (the most
    telling first: the last-level cache before the first). Unknown facts are left out."""
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), Mapping) else {}
    facts: dict[str, Any] = {}

    def put(name: str, value: Any) -> None:
        if value is not None and value != "":
            facts[name] = value

    put("cpu.vendor", cpu.get("vendor"))
    put("cpu.arch", cpu.get("arch"))
    sig = cpu.get("signature") if isinstance(cpu.get("signature"), Mapping) else {}
    for k in SIGNATURE:
        put(f"cpu.signature.{k}", sig.get(k))
    put("cpu.physical_cores", cpu.get("physical_cores"))
    put("cpu.logical_cores", cpu.get("logical_cores"))
    put("numa_nodes", fp.get("numa_nodes"))
    put("memory_gib", _gib(fp.get("memory_bytes")))
    cache = cpu.get("cache") if isinstance(cpu.get("cache"), Mapping) else {}
    for level in sorted(cache, key=_level):
        put(f"cpu.cache.{level}", cache[level])
    if measured(fp):
        have = {str(f) for f in cpu.get("flags") or []}
        for flag in flag_list(fp):
            facts[f"cpu.flags.{flag}"] = flag in have
    gpus = [g for g in fp.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus or measured(fp):
        put(
            "gpus",
            sorted(
                " ".join(
                    x
                    for x in (
                        str(g.get("name") or "GPU"),
                        f"{_gib(g.get('memory_bytes'))} GiB"
                        if _gib(g.get("memory_bytes"))
                        else "",
                    )
                    if x
                )
                for g in gpus
            ),
        )
    on_host = fp.get("gpus_on_host")
    if (
        isinstance(on_host, int)
        and not isinstance(on_host, bool)
        and on_host > len(gpus)
    ):
        put("gpus_on_host", on_host)
    links = [lk for lk in fp.get("gpu_links") or [] if isinstance(lk, Mapping)]
    if links:
        put("gpu_links", sorted(_link_fact(lk) for lk in links))
    return facts


def _link_fact(lk: Mapping[str, Any]) -> str:
    """A link between two GPUs as an identity fact: ``NVLink 18`` / ``PCIe, one switch``."""
    if lk.get("kind") == "NVLink":
        return f"NVLink {lk.get('nvlink_links') or ''}".strip()
    return ", ".join(
        str(x) for x in (lk.get("kind") or "unknown", lk.get("pcie_path")) if x
    )


def host_id(fp: Mapping[str, Any]) -> str:
    """``<slug(name)>-<8 hex>``: the host's name and a hash of its identity facts (so a renamed or
    rebuilt machine does not silently merge with an old one, and two machines never share an id)."""
    facts = identity_facts(fp)
    digest = hashlib.sha256(
        json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()[:8]
    return f"{slug(str(fp.get('name') or 'host'))}-{digest}"


def show(fact: str, value: Any) -> str:
    """A fact's value as a message shows it."""
    if fact.startswith("cpu.flags."):
        return "present" if value else "absent"
    if fact in ("gpus", "gpu_links"):
        return ", ".join(value) or "none"
    if fact == "memory_gib":
        return f"{value} GiB"
    return str(value)


def differing_facts(
    a: Mapping[str, Any], b: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """Every identity fact both fingerprints record on which they differ: (fact, a's value, b's value),
    in :func:`identity_facts`' order. Flags are compared on the flags both record (an older
    fingerprint's shorter list)."""
    fa, fb = identity_facts(a), identity_facts(b)
    return [(k, v, fb[k]) for k, v in fa.items() if k in fb and fb[k] != v]


def differing_fact(
    a: Mapping[str, Any], b: Mapping[str, Any]
) -> tuple[str, str, str] | None:
    """The first identity fact on which two fingerprints differ, its two values shown
    (``("cpu.cache.L3", "491520K", "266240K")``); None when they agree on every fact both record."""
    diff = differing_facts(a, b)
    if not diff:
        return None
    k, va, vb = diff[0]
    return k, show(k, va), show(k, vb)


def same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same name, and no identity fact recorded by both differs."""
    return (
        slug(str(a.get("name") or "host")) == slug(str(b.get("name") or "host"))
        and differing_fact(a, b) is None
    )


# -- a set of artifacts: one host id, one machine; older fingerprints joined to newer hosts --------


def _fingerprint(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    fp = doc.get("host")
    return (
        fp
        if isinstance(fp, Mapping)
        and isinstance(fp.get("id"), str)
        and isinstance(fp.get("cpu"), Mapping)
        else None
    )


def _hardware(fp: Mapping[str, Any]) -> tuple:
    """What identity_facts reads, as it stands (equal: same facts, without working them out)."""
    return (
        fp.get("cpu"),
        fp.get("memory_bytes"),
        fp.get("numa_nodes"),
        fp.get("gpus"),
        fp.get("gpus_on_host"),
        fp.get("gpu_links"),
        fp.get("id_scheme"),
        fp.get("source"),
        fp.get("known_from"),
    )


def conflicts(
    entries: Iterable[tuple[Any, Mapping[str, Any]]], name: Callable[[Any], str] = str
) -> list[str]:
    """One line per host id that artifacts of differing hardware claim: the first two files that
    differ and the first fact they differ in. ``entries``: (file, document); ``name`` shows a file."""
    first: dict[str, tuple[Any, Mapping[str, Any]]] = {}
    reported: set[str] = set()
    out: list[str] = []
    for source, doc in entries:
        fp = _fingerprint(doc)
        if fp is None:
            continue
        hid = fp["id"]
        if hid not in first:
            first[hid] = (source, fp)
            continue
        if hid in reported:
            continue
        src0, fp0 = first[hid]
        if _hardware(fp0) == _hardware(fp):
            continue
        diff = differing_fact(fp0, fp)
        if diff is not None:
            reported.add(hid)
            fact, va, vb = diff
            out.append(
                f"{name(src0)} and {name(source)} claim host {hid} but differ in {fact}: {va} vs {vb} "
                "(two machines under one id: `invoke host.reidentify` gives each its own)"
            )
    return out


def resolve_legacy(docs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Older host ids that are a newer host: {recorded id: that host's id}. An id of older
    fingerprints (``id_scheme`` < 2) is joined to a newer host when every fingerprint under it
    agrees with exactly one newer host (name and every fact both record), the same one for all."""
    newer: dict[str, Mapping[str, Any]] = {}
    older: dict[str, list[Mapping[str, Any]]] = {}
    for doc in docs:
        fp = _fingerprint(doc)
        if fp is None or not measured(fp):
            continue
        if scheme(fp) >= SCHEME:
            newer.setdefault(fp["id"], fp)
        else:
            older.setdefault(fp["id"], []).append(fp)
    out: dict[str, str] = {}
    if not newer:
        return out
    for old_id, fps in older.items():
        if old_id in newer:
            continue
        targets: set[str] = set()
        for fp in _distinct(fps):
            matches = [nid for nid, nfp in newer.items() if same_machine(fp, nfp)]
            if len(matches) != 1:
                targets = set()
                break
            targets.add(matches[0])
        if len(targets) == 1:
            out[old_id] = targets.pop()
    return out


def _distinct(fps: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One fingerprint of each machine among ``fps`` (a host's artifacts mostly repeat one)."""
    out: list[Mapping[str, Any]] = []
    for fp in fps:
        if not any(
            fp.get("name") == o.get("name") and _hardware(fp) == _hardware(o)
            for o in out
        ):
            out.append(fp)
    return out


def reconcile(
    entries: list[tuple[Any, dict[str, Any]]], name: Callable[[Any], str] = str
) -> list[str]:
    """Check a loaded set of artifacts as a whole and join older hosts to newer ones, in place.

    Returns one line per host id claimed by two machines (:func:`conflicts`); when there is none,
    every older fingerprint's host that :func:`resolve_legacy` joins to a newer host takes that
    host's id (the document's ``host.id``, and ``host_id`` of decisions and projections that name
    it), so every reader sees one host. The files are not rewritten."""
    problems = conflicts(entries, name)
    if problems:
        return problems
    joined = resolve_legacy(doc for _, doc in entries)
    if joined:
        for _, doc in entries:
            fp = _fingerprint(doc)
            if fp is not None and fp["id"] in joined:
                doc["host"] = {**fp, "id": joined[fp["id"]]}
            elif isinstance(doc.get("host_id"), str) and doc["host_id"] in joined:
                doc["host_id"] = joined[doc["host_id"]]
    return []
