"""Models derived from a registry model by llama.cpp's quantizer (a quantization ladder).

A registry entry ``derived: {from: gemma3-270m-q4_k_m, quant: Q3_K_M}`` is made on demand
into the cache by ``llama_cpp.llama_model_quantize`` with ``allow_requantize`` (the source
is already quantized, so this is a requantization: each tensor is dequantized and quantized
again, which costs more than quantizing from F16; the page says so). The file name carries
the source's hash; a sidecar JSON records the source sha256, the quantization and the
equivalent ``llama-quantize --allow-requantize SRC DST TYPE`` command, and every artifact of
the derived model carries that record (``model.derived``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import ModelError
from core.paths import cache_dir

QUANT_TYPES = (
    "Q2_K",
    "Q2_K_S",
    "Q3_K_S",
    "Q3_K_M",
    "Q3_K_L",
    "Q4_0",
    "Q4_1",
    "Q4_K_S",
    "Q4_K_M",
    "Q5_0",
    "Q5_1",
    "Q5_K_S",
    "Q5_K_M",
    "Q6_K",
    "Q8_0",
)


class DerivedSpec(BaseModel):
    """A model requantized from another registry model with llama.cpp's quantizer."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: str = Field(
        ..., alias="from", description="Registry name of the model it is derived from."
    )
    quant: str = Field(
        ..., description=f"Target type, one of {', '.join(QUANT_TYPES)}."
    )

    @field_validator("quant")
    @classmethod
    def _known(cls, v: str) -> str:
        v = v.upper()
        if v not in QUANT_TYPES:
            raise ValueError(
                f"unknown quantization {v!r} (known: {', '.join(QUANT_TYPES)})"
            )
        return v


def derived_path(spec: DerivedSpec, source_sha256: str) -> Path:
    return (
        cache_dir()
        / "derived"
        / f"{spec.source}-{spec.quant}-from-{source_sha256[:12]}.gguf"
    )


def command(src: Path, dst: Path, quant: str) -> str:
    return f"llama-quantize --allow-requantize {src.name} {dst.name} {quant}"


def ensure_derived(
    spec: DerivedSpec, source_path: Path, source_sha256: str, *, fetch: bool = True
) -> tuple[Path, dict[str, Any]]:
    """The derived file (quantized when missing) and its provenance record."""
    path = derived_path(spec, source_sha256)
    side = path.with_suffix(".derived.json")
    if path.is_file() and side.is_file():
        return path, json.loads(side.read_text())
    if not fetch:
        raise ModelError(
            "not derived yet: run `invoke model.fetch` for it", file=str(path)
        )
    import llama_cpp as L

    from core.artifacts import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    params = L.llama_model_quantize_default_params()
    params.ftype = getattr(L, f"LLAMA_FTYPE_MOSTLY_{spec.quant}")
    params.allow_requantize = True
    t0 = time.perf_counter()
    rc = L.llama_model_quantize(str(source_path).encode(), str(tmp).encode(), params)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise ModelError(
            f"llama_model_quantize returned {rc} for {spec.quant}",
            file=str(source_path),
        )
    tmp.replace(path)
    from importlib import metadata

    record = {
        "from": spec.source,
        "source_sha256": source_sha256,
        "source_file": source_path.name,
        "quant": spec.quant,
        "requantized": True,
        "tool": f"llama-cpp-python {metadata.version('llama-cpp-python')} "
        "llama_model_quantize(allow_requantize=True)",
        "command": command(source_path, path, spec.quant),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    atomic_write_text(side, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path, record
