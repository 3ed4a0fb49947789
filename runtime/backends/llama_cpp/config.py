"""Settings of the in-process llama-cpp-python backend.

Defaults follow llama.cpp's own tools (llama-bench), not llama-cpp-python's constructor:
n_batch 2048, n_ubatch 512, all layers on the GPU where there is one, flash attention
``auto``, threads = physical cores, f16 KV cache. Every value that really ran (including
the ones left at default) is read back from the context and recorded in the artifact.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from runtime.backends import placement
from runtime.backends.base import BackendSettings
from runtime.backends.placement import PlacementSettings

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# KV cache types llama.cpp stores unquantized; any other V type needs flash attention.
UNQUANTIZED_KV = ("f32", "f16", "bf16")
SPECULATIVE = ("none", "prompt_lookup", "draft_model")


class LlamaCppSettings(BackendSettings, PlacementSettings):
    OMITTED_AT_DEFAULT = (
        "lora_adapters",
        "lora_scale",
        "rope_scaling",
        "n_seq_max",
        "embedding",
        *placement.OMITTED,
    )

    n_threads: int | None = Field(
        None,
        ge=1,
        description="Threads for generation; null = physical cores (llama-bench's default).",
    )
    n_threads_batch: int | None = Field(
        None,
        ge=1,
        description="Threads for prompt processing; null = same as n_threads.",
    )
    n_batch: int = Field(
        2048,
        ge=1,
        description="Logical batch size: tokens submitted per llama_decode call (llama.cpp -b).",
    )
    n_ubatch: int = Field(512, ge=1, description="Physical batch size (llama.cpp -ub).")
    n_ctx: int | None = Field(
        None,
        ge=0,
        description="Context size; null = n_depth + n_prompt + n_gen for rate tests (as llama-bench), 4096 for chat.",
    )
    n_gpu_layers: int = Field(
        -1,
        ge=-1,
        description=(
            "Layers offloaded to the GPU; -1 = all (llama.cpp's default; nothing is "
            "offloaded on a CPU-only build)."
        ),
    )
    flash_attn: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Flash attention: auto lets llama.cpp decide per device (llama.cpp -fa).",
    )
    type_k: str = Field(
        "f16", description=f"KV cache type for K ({', '.join(KV_TYPES)})."
    )
    type_v: str = Field(
        "f16",
        description=f"KV cache type for V ({', '.join(KV_TYPES)}); quantized V needs flash attention.",
    )
    swa_full: bool = Field(
        False,
        description=(
            "Full-size KV cache for sliding-window layers (llama.cpp's library default "
            "is true; its tools, llama-bench and llama-server, use false: a "
            "window-sized cache)."
        ),
    )
    offload_kqv: bool = Field(
        True, description="Keep the KV cache and attention on the GPU."
    )
    use_mmap: bool = Field(True, description="Memory-map the model file.")
    use_mlock: bool = Field(False, description="Lock the model in RAM.")
    extra_bufts: bool | None = Field(
        None,
        description="llama.cpp's extra CPU weight buffer types (CPU_REPACK, AMX). null = the "
        "process policy (runtime.backends.llama_cpp.lib_policy, $ALMANAC_EXTRA_BUFTS: off where llama.cpp has AMX "
        "compiled in, whose matmul crashes on multi-token batches in this version; on otherwise); "
        "true/false forces it for this configuration. What ran is recorded (use_extra_bufts).",
    )
    seed: int = Field(
        42,
        ge=0,
        description="Seed for the sampler and for the random token ids of rate tests.",
    )
    kv_overrides: dict[str, int | float | bool | str] = Field(
        default_factory=dict,
        description="GGUF metadata overrides, e.g. {'qwen3moe.expert_used_count': 4}.",
    )
    chat_format: str | None = Field(
        None,
        description="llama-cpp-python chat format; null = the GGUF's chat template.",
    )
    # -- optimization tracks (issue 3): speculative decoding and MoE expert reduction --------
    speculative: Literal["none", "prompt_lookup", "draft_model"] = Field(
        "none",
        description=(
            "Speculative decoding in generate and chat tests: prompt_lookup drafts by "
            "matching the last n-gram in the context (llama-cpp-python "
            "LlamaPromptLookupDecoding; llama.cpp --spec-type ngram-simple), "
            "draft_model drafts with a second, smaller GGUF of the same vocabulary "
            "(llama.cpp -md); none = plain decoding."
        ),
    )
    draft_max: int = Field(
        16,
        ge=1,
        le=256,
        description=(
            "Tokens drafted per step, K (llama.cpp --spec-draft-n-max, formerly "
            "--draft-max; LlamaPromptLookupDecoding num_pred_tokens). Used only when "
            "speculative is not none."
        ),
    )
    lookup_ngram_max: int = Field(
        2,
        ge=1,
        le=64,
        description=(
            "Longest n-gram matched against the context by prompt lookup "
            "(LlamaPromptLookupDecoding max_ngram_size). Used only with speculative: "
            "prompt_lookup."
        ),
    )
    draft_model: str | None = Field(
        None,
        description=(
            "Draft model for speculative: draft_model: a registry name or a .gguf path, "
            "same vocabulary as the target (llama.cpp -md)."
        ),
    )
    lora_adapters: list[str] = Field(
        default_factory=list,
        description=(
            "LoRA adapters attached to the context, in order: registry names "
            "(data/models.yaml adapters:) or .gguf paths (llama.cpp --lora; "
            "llama_adapter_lora_init + llama_set_adapters_lora). Each must match the "
            "model's architecture and tensor shapes; one that does not is a failed "
            "point naming both."
        ),
    )
    lora_scale: float = Field(
        1.0,
        ge=0.0,
        le=16.0,
        description=(
            "Scale of every attached adapter (llama.cpp --lora-scaled; the update is "
            "scaled by scale x alpha / rank)."
        ),
    )
    rope_scaling: Literal["none", "linear", "yarn"] = Field(
        "none",
        description="RoPE scaling to run beyond the trained context: linear or YaRN, with the factor n_ctx ÷ the "
        "model's trained context (llama.cpp --rope-scaling, --rope-scale, --yarn-orig-ctx); none = the model's own "
        "RoPE. A context within the trained one leaves nothing to scale: that point is not measured.",
    )
    n_seq_max: int = Field(
        1,
        ge=1,
        le=256,
        description="Sequences the context holds at once (llama.cpp n_seq_max, llama-server -np): the KV "
        "cache of n_ctx cells is split among them (n_ctx ÷ n_seq_max each, kv_unified off), so a longer "
        "context leaves room for fewer. Rate tests of N sequences (tg16@d1008x8) need at least N.",
    )
    embedding: bool = Field(
        False,
        description="The context in embedding mode (llama.cpp --embedding, mean pooling): what embed "
        "tests need, and what no generating test can run in.",
    )
    n_expert_used: int | None = Field(
        None,
        ge=1,
        description=(
            "MoE expert reduction: experts used per token, passed as the GGUF override "
            "<architecture>.expert_used_count (llama.cpp --override-kv); null = the "
            "model's own. Checked against the model's expert_count before a run."
        ),
    )

    @field_validator("type_k", "type_v")
    @classmethod
    def _kv_type(cls, v: str) -> str:
        if v not in KV_TYPES:
            raise ValueError(
                f"unknown KV cache type {v!r} (known: {', '.join(KV_TYPES)})"
            )
        return v

    @model_validator(mode="after")
    def _combinations(self) -> LlamaCppSettings:
        """Combinations llama.cpp refuses, refused here with the reason. (n_ubatch above n_batch is
        not one: llama.cpp lowers n_ubatch to n_batch, and the effective settings record it.)"""
        if self.type_v not in UNQUANTIZED_KV and self.flash_attn == "off":
            raise ValueError(
                f"type_v {self.type_v!r} with flash_attn 'off': llama.cpp refuses a quantized V cache "
                "without flash attention ('quantized V cache requires flash_attn'); use flash_attn on or auto"
            )
        if self.speculative == "draft_model" and not self.draft_model:
            raise ValueError(
                "speculative 'draft_model' needs draft_model: a registry name or a .gguf path"
            )
        return self
