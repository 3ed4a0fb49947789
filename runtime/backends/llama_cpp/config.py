"""Settings of the in-process llama-cpp-python backend.

Defaults follow llama.cpp's own tools (llama-bench), not llama-cpp-python's constructor:
n_batch 2048, n_ubatch 512, all layers on the GPU where there is one, flash attention
``auto``, threads = physical cores, f16 KV cache. Every value that really ran (including
the ones left at default) is read back from the context and recorded in the artifact.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..base import BackendSettings

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


class LlamaCppSettings(BackendSettings):
    n_threads: int | None = Field(None, ge=1, description="Threads for generation; null = physical cores (llama-bench's default).")
    n_threads_batch: int | None = Field(None, ge=1, description="Threads for prompt processing; null = same as n_threads.")
    n_batch: int = Field(2048, ge=1, description="Logical batch size: tokens submitted per llama_decode call (llama.cpp -b).")
    n_ubatch: int = Field(512, ge=1, description="Physical batch size (llama.cpp -ub).")
    n_ctx: int | None = Field(None, ge=0, description="Context size; null = n_depth + n_prompt + n_gen for rate tests (as llama-bench), 4096 for chat.")
    n_gpu_layers: int = Field(-1, ge=-1, description="Layers offloaded to the GPU; -1 = all (llama.cpp's default; nothing is offloaded on a CPU-only build).")
    main_gpu: int = Field(0, ge=0, description="GPU used for the model when not split.")
    flash_attn: Literal["auto", "on", "off"] = Field("auto", description="Flash attention: auto lets llama.cpp decide per device (llama.cpp -fa).")
    type_k: str = Field("f16", description=f"KV cache type for K ({', '.join(KV_TYPES)}).")
    type_v: str = Field("f16", description=f"KV cache type for V ({', '.join(KV_TYPES)}); quantized V needs flash attention.")
    offload_kqv: bool = Field(True, description="Keep the KV cache and attention on the GPU.")
    use_mmap: bool = Field(True, description="Memory-map the model file.")
    use_mlock: bool = Field(False, description="Lock the model in RAM.")
    seed: int = Field(42, ge=0, description="Seed for the sampler and for the random token ids of rate tests.")
    kv_overrides: dict[str, int | float | bool | str] = Field(default_factory=dict, description="GGUF metadata overrides, e.g. {'qwen3moe.expert_used_count': 4}.")
    chat_format: str | None = Field(None, description="llama-cpp-python chat format; null = the GGUF's chat template.")

    @field_validator("type_k", "type_v")
    @classmethod
    def _kv_type(cls, v: str) -> str:
        if v not in KV_TYPES:
            raise ValueError(f"unknown KV cache type {v!r} (known: {', '.join(KV_TYPES)})")
        return v
