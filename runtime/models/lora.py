"""LoRA adapters in GGUF: synthetic ones written for a base model, facts read back, fit checked.

llama.cpp loads a LoRA adapter as its own GGUF (``llama_adapter_lora_init``, llama-server
``--lora``): ``general.type = adapter``, ``adapter.type = lora``, ``adapter.lora.alpha``, the
base model's ``general.architecture``, and for every adapted weight ``W`` (ggml shape
``ne = (in, out)``) a pair ``<W>.lora_a`` (ne ``(in, r)``) and ``<W>.lora_b`` (ne ``(r, out)``);
``convert_lora_to_gguf.py`` writes them as F16 by default (``src/llama-adapter.cpp`` checks the
architecture and each pair's shape against the model).

A synthetic adapter (``synth: {base, rank, targets, alpha, seed}`` in ``data/models.yaml``'s
``adapters:``) is written here for a registry model: random weights (speed and memory only:
what it does to the text is noise), same base file, spec and seed give the same bytes.
``mismatch()`` says, in one line naming both, why an adapter cannot attach to a model
(architecture, a missing tensor, a dimension), before llama.cpp is asked to.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import ModelError

# Module names (as the memory planner and the seed name them) -> the GGUF tensor they adapt.
MODULE_TENSORS = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "o": "attn_output",
    "gate": "ffn_gate",
    "up": "ffn_up",
    "down": "ffn_down",
}
TENSOR_MODULES = {v: k for k, v in MODULE_TENSORS.items()}
DTYPES = {"F16": np.float16, "F32": np.float32}
_SIGMA = 0.02  # scale of the random A and B entries (speed and memory only)


class LoraSynthSpec(BaseModel):
    """A synthetic LoRA adapter for a registry model: random weights, speed and memory only."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field(
        ...,
        description="Registry name of the model the adapter is written for (its tensor shapes are read from the file).",
    )
    rank: int = Field(
        16, ge=1, le=1024, description="LoRA rank r (A is r x in, B is out x r)."
    )
    targets: list[str] = Field(
        default_factory=lambda: ["q", "v", "o"],
        description=f"Adapted projections, any of {', '.join(MODULE_TENSORS)}.",
    )
    alpha: float = Field(
        32.0,
        gt=0,
        description="adapter.lora.alpha (llama.cpp scales the update by alpha / r).",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the random weights (same base file, spec and seed: same bytes).",
    )
    dtype: str = Field(
        "F16",
        description="Storage type of A and B: F16 (convert_lora_to_gguf's default) or F32.",
    )

    @field_validator("targets")
    @classmethod
    def _targets(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("targets must name at least one projection")
        bad = [m for m in v if m not in MODULE_TENSORS]
        if bad:
            raise ValueError(
                f"unknown target {bad[0]!r} (known: {', '.join(MODULE_TENSORS)})"
            )
        return list(dict.fromkeys(v))

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        v = v.upper()
        if v not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {v!r}")
        return v


# -- reading ---------------------------------------------------------------------------------
def _reader(path: Path) -> Any:
    from gguf import GGUFReader

    try:
        return GGUFReader(str(path), "r")
    except Exception as exc:  # gguf raises plain ValueError/struct errors on bad files
        raise ModelError(f"not a readable GGUF file ({exc})", file=str(path)) from None


def _value(reader: Any, key: str) -> Any:
    f = reader.get_field(key)
    if f is None:
        return None
    try:
        return f.contents()
    except Exception:
        return None


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in t.shape)


def model_weights(
    path: Path,
) -> tuple[str | None, dict[str, tuple[int, ...]], dict[str, Any]]:
    """(architecture, {tensor name: ggml ne}, summary) of a model GGUF, from its header.

    Cached by path, size and mtime: parsing a header with a 262k-token vocabulary takes seconds,
    and every run with adapters checks them against its model."""
    from core.paths import cache_dir

    st = path.stat()
    key = hashlib.sha256(
        f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    ).hexdigest()[:24]
    side = cache_dir() / "lora" / "shapes" / f"{key}.json"
    try:
        rec = json.loads(side.read_text())
        return (
            rec["architecture"],
            {k: tuple(v) for k, v in rec["shapes"].items()},
            rec["summary"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    r = _reader(path)
    arch = _value(r, "general.architecture")
    shapes = {t.name: _shape(t) for t in r.tensors}
    summary = {
        "architecture": arch,
        "n_embd": _value(r, f"{arch}.embedding_length") if arch else None,
        "n_layer": _value(r, f"{arch}.block_count") if arch else None,
    }
    try:
        from core.artifacts import atomic_write_text

        atomic_write_text(
            side,
            json.dumps({"architecture": arch, "shapes": shapes, "summary": summary}),
        )
    except (OSError, TypeError, ValueError):
        pass
    return arch, shapes, summary


def adapter_facts(path: Path) -> dict[str, Any]:
    """What an adapter file is: type, architecture, alpha, rank, targets, layers, pairs and bytes."""
    r = _reader(path)
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    n_bytes = 0
    types: set[str] = set()
    for t in r.tensors:
        n_bytes += int(t.n_bytes)
        for suffix in (".lora_a", ".lora_b"):
            if t.name.endswith(suffix):
                pairs.setdefault(t.name[: -len(suffix)], {})[suffix[1:]] = _shape(t)
                types.add(t.tensor_type.name)
    ranks = sorted(
        {
            p["lora_a"][1]
            for p in pairs.values()
            if "lora_a" in p and len(p["lora_a"]) == 2
        }
    )
    modules = sorted(
        {
            TENSOR_MODULES.get(n.split(".")[2], n.split(".")[2])
            for n in pairs
            if n.startswith("blk.")
        },
        key=lambda m: list(MODULE_TENSORS).index(m) if m in MODULE_TENSORS else 99,
    )
    layers = sorted({int(n.split(".")[1]) for n in pairs if n.startswith("blk.")})
    return {
        "general_type": _value(r, "general.type"),
        "adapter_type": _value(r, "adapter.type"),
        "architecture": _value(r, "general.architecture"),
        "alpha": _value(r, "adapter.lora.alpha"),
        "rank": ranks[0] if len(ranks) == 1 else (ranks or None),
        "targets": modules,
        "n_layers": len(layers),
        "n_pairs": len(pairs),
        "tensor_bytes": n_bytes,
        "tensor_types": sorted(types),
        "synthetic": bool(_value(r, "almanac.synthetic")),
        "base_name": _value(r, "almanac.base_name"),
        "base_sha256": _value(r, "almanac.base_sha256"),
        "base_n_embd": _value(r, "almanac.base_n_embd"),
        "base_n_layer": _value(r, "almanac.base_n_layer"),
        "pairs": {
            k: {
                "lora_a": list(v.get("lora_a", ())),
                "lora_b": list(v.get("lora_b", ())),
            }
            for k, v in sorted(pairs.items())
        },
    }


def _dims(ne: tuple[int, ...]) -> str:
    return f"{ne[0]}→{ne[1]}" if len(ne) == 2 else "x".join(map(str, ne))


def mismatch(
    adapter_name: str, facts: dict[str, Any], model_name: str, model_path: Path
) -> str | None:
    """Why this adapter cannot attach to this model (one line naming both), or None.

    llama.cpp's own checks (src/llama-adapter.cpp), made before it is asked: a GGUF of type
    adapter and adapter type lora, the same architecture, every adapted tensor present in the
    model, ``A.ne0 = W.ne0`` (in), ``B.ne1 = W.ne1`` (out) and ``A.ne1 = B.ne0`` (rank)."""
    arch, shapes, summary = model_weights(model_path)
    built = (
        f"{facts.get('architecture')}, n_embd {facts.get('base_n_embd') or _in_dim(facts) or '?'}, "
        f"{facts.get('base_n_layer') or facts.get('n_layers') or '?'} layers"
    )
    model = f"{arch}, n_embd {summary.get('n_embd')}, {summary.get('n_layer')} layers"
    head = f"LoRA adapter {adapter_name!r} ({built}) does not fit model {model_name!r} ({model})"
    if facts.get("general_type") != "adapter" or facts.get("adapter_type") != "lora":
        return (
            f"{head}: the file is not a LoRA adapter (general.type {facts.get('general_type')!r}, "
            f"adapter.type {facts.get('adapter_type')!r})"
        )
    if facts.get("architecture") != arch:
        return f"{head}: architecture {facts.get('architecture')} is not the model's {arch}"
    if not facts.get("pairs"):
        return f"{head}: the adapter holds no lora_a/lora_b pairs"
    for name, p in facts["pairs"].items():
        a, b = tuple(p["lora_a"]), tuple(p["lora_b"])
        if not a or not b:
            return f"{head}: tensor {name} lacks its {'lora_a' if not a else 'lora_b'}"
        w = shapes.get(name)
        if w is None:
            return f"{head}: the model has no tensor {name}"
        if len(w) != 2 or w[0] != a[0] or w[1] != b[1] or a[1] != b[0]:
            return (
                f"{head}: tensor {name} is {_dims(w)} in the model, the adapter is built for "
                f"{a[0]}→{b[1] if len(b) > 1 else '?'} (rank {a[1] if len(a) > 1 else '?'})"
            )
    return None


def _in_dim(facts: dict[str, Any]) -> int | None:
    for name, p in (facts.get("pairs") or {}).items():
        if name.endswith("attn_q.weight") and p.get("lora_a"):
            return int(p["lora_a"][0])
    return None


# -- writing ---------------------------------------------------------------------------------
def synthetic_path(spec: LoraSynthSpec, base_sha256: str, root: Path) -> Path:
    ident = hashlib.sha256(
        json.dumps(
            {**spec.model_dump(), "base_sha256": base_sha256}, sort_keys=True
        ).encode()
    ).hexdigest()
    targets = "".join(m[0] if len(m) == 1 else m[:2] for m in spec.targets)
    return (
        root
        / f"{spec.base}-r{spec.rank}-{targets}-seed{spec.seed}-{ident[:10]}.lora.gguf"
    )


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([int(seed), zlib.crc32(name.encode())]))
    )


def expected_pairs(
    spec: LoraSynthSpec, shapes: dict[str, tuple[int, ...]]
) -> list[tuple[str, int, int]]:
    """(tensor name, in, out) of every weight the spec adapts, in file order; a target the model
    lacks is an error naming it."""
    layers = sorted({int(n.split(".")[1]) for n in shapes if n.startswith("blk.")})
    out = []
    for il in layers:
        for m in spec.targets:
            name = f"blk.{il}.{MODULE_TENSORS[m]}.weight"
            ne = shapes.get(name)
            if ne is None:
                raise ModelError(
                    f"the model has no tensor {name} for LoRA target {m!r}",
                    file=spec.base,
                )
            out.append((name, int(ne[0]), int(ne[1])))
    return out


def write_synthetic(
    spec: LoraSynthSpec, base_path: Path, base_sha256: str, path: Path
) -> dict[str, Any]:
    """Write the adapter atomically; return its facts."""
    import gguf

    arch, shapes, summary = model_weights(base_path)
    if not arch:
        raise ModelError(
            "the base model has no general.architecture", file=str(base_path)
        )
    pairs = expected_pairs(spec, shapes)
    dtype = DTYPES[spec.dtype]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    writer = gguf.GGUFWriter(str(tmp), arch)
    try:
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(spec.alpha))
        writer.add_string(
            "general.name",
            f"synthetic LoRA r{spec.rank} ({', '.join(spec.targets)}) for {spec.base}",
        )
        writer.add_string(
            "general.description",
            "synthetic: random weights, for speed and memory measurement only",
        )
        writer.add_bool("almanac.synthetic", True)
        writer.add_string("almanac.base_name", spec.base)
        writer.add_string("almanac.base_sha256", base_sha256)
        writer.add_uint32("almanac.base_n_embd", int(summary.get("n_embd") or 0))
        writer.add_uint32("almanac.base_n_layer", int(summary.get("n_layer") or 0))
        writer.add_uint64("almanac.seed", int(spec.seed))
        for name, n_in, n_out in pairs:
            a = (
                _rng(spec.seed, name + ".lora_a").standard_normal(
                    (spec.rank, n_in), dtype=np.float32
                )
                * _SIGMA
            ).astype(dtype)
            b = (
                _rng(spec.seed, name + ".lora_b").standard_normal(
                    (n_out, spec.rank), dtype=np.float32
                )
                * _SIGMA
            ).astype(dtype)
            writer.add_tensor(name + ".lora_a", a)
            writer.add_tensor(name + ".lora_b", b)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    os.replace(tmp, path)
    return adapter_facts(path)


@dataclass(frozen=True)
class AdapterRef:
    """A resolved adapter: a name, a local file, its hash, and what the file says it is."""

    name: str
    path: str
    sha256: str
    size_bytes: int
    source: str
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What an artifact records of it (no per-tensor shapes)."""
        f = self.facts
        return {
            "name": self.name,
            "file_name": Path(self.path).name,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "source": self.source,
            "architecture": f.get("architecture"),
            "rank": f.get("rank"),
            "targets": f.get("targets"),
            "alpha": f.get("alpha"),
            "n_layers": f.get("n_layers"),
            "n_pairs": f.get("n_pairs"),
            "tensor_bytes": f.get("tensor_bytes"),
            "tensor_types": f.get("tensor_types"),
            "synthetic": f.get("synthetic"),
            "base_name": f.get("base_name"),
        }
