"""Resource preflight: refuse, before a model is loaded, a configuration that cannot fit.

A lower bound, from the GGUF header alone, of what llama.cpp must allocate for a context of
``n_ctx`` tokens: the weights (every tensor's bytes) plus the smallest KV cache such a context
can have (4.5 bits per K and V element, the smallest cache type, and only one layer of full
attention where the model has a sliding window). It is deliberately below the memory
planner's estimate (pipelines/memory.py models llama.cpp's allocations in detail and owns the
prediction shown on the site): a configuration refused here surely does not fit; one that
passes may still be killed by the OOM killer, which the runner records as a failed run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_KV_BITS = 4.5  # q4_0: 18 bytes per 32 elements


@dataclass(frozen=True)
class Fit:
    ok: bool
    message: str  # "does not fit: needs X, has Y" when not ok
    need_bytes: int | None = None
    have_bytes: int | None = None


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n < 2**40 else f"{n / 2**40:,.1f} TiB"


def weight_bytes(facts: dict[str, Any]) -> int:
    return int(sum((facts.get("tensor_bytes_by_type") or {}).values()))


def kv_lower_bound(facts: dict[str, Any], n_ctx: int) -> int:
    n_layer = int(facts.get("block_count") or 0)
    n_embd, n_head = (
        int(facts.get("embedding_length") or 0),
        int(facts.get("head_count") or 0),
    )
    if not n_layer or not n_embd or not n_head:
        return 0
    n_head_kv = int(facts.get("head_count_kv") or n_head)
    head_k = int(facts.get("key_length") or n_embd // n_head)
    head_v = int(facts.get("value_length") or n_embd // n_head)
    full_layers = 1 if facts.get("sliding_window") else n_layer
    return int(n_ctx * full_layers * n_head_kv * (head_k + head_v) * MIN_KV_BITS / 8)


def check(facts: dict[str, Any], n_ctx: int | None, available_bytes: int | None) -> Fit:
    """Whether a context of ``n_ctx`` tokens of this model can fit in ``available_bytes``. A
    context beyond the one the model was trained for is not refused by itself (llama.cpp runs
    it, and speed may be what is measured); the message names it when memory refuses."""
    if n_ctx is None or available_bytes is None:
        return Fit(True, "")
    need = weight_bytes(facts) + kv_lower_bound(facts, n_ctx)
    if need > available_bytes:
        trained = facts.get("context_length")
        beyond = (
            f"; the model was trained for {int(trained):,}"
            if trained and n_ctx > int(trained)
            else ""
        )
        return Fit(
            False,
            f"does not fit: needs at least {gib(need)} (weights + KV cache of {n_ctx:,} tokens{beyond}), "
            f"has {gib(available_bytes)} of free memory",
            need,
            available_bytes,
        )
    return Fit(True, "", need, available_bytes)


def available_memory(with_gpus: bool = True) -> int | None:
    """Free RAM now (MemAvailable), plus free VRAM of every NVIDIA GPU when ``with_gpus``: the
    lower bound must fit somewhere, in RAM or in VRAM."""
    try:
        import psutil

        total = int(psutil.virtual_memory().available)
    except Exception:
        return None
    if with_gpus:
        from runtime.hosts.gpu import _nvml

        nv = _nvml()
        if nv is not None:
            try:
                for i in range(nv.nvmlDeviceGetCount()):
                    total += int(
                        nv.nvmlDeviceGetMemoryInfo(
                            nv.nvmlDeviceGetHandleByIndex(i)
                        ).free
                    )
            except Exception:
                pass
    return total
