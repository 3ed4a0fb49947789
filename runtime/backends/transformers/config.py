"""Settings of the in-process transformers backend (PyTorch).

The model is the same GGUF file llama.cpp runs: transformers reads it with the ``gguf``
package and dequantizes every tensor to ``dtype`` (the weights in memory are no longer
quantized: that is part of what a comparison with llama.cpp on the same file shows).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from runtime.backends.base import BackendSettings


class TransformersSettings(BackendSettings):
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto",
        description="Where the model runs: auto = the first CUDA GPU when "
        "torch sees one, else the CPU.",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description=(
            "Weights and activations after dequantizing the GGUF: auto = bfloat16 on a "
            "GPU, float32 on the CPU."
        ),
    )
    attn_implementation: Literal["sdpa", "eager"] = Field(
        "sdpa",
        description="Attention kernel: PyTorch's "
        "scaled_dot_product_attention (transformers' default) or eager matmuls.",
    )
    n_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads (torch.set_num_threads); null = physical cores, as for llama.cpp.",
    )
    seed: int = Field(
        42,
        ge=0,
        description="Seed for sampling and for the random token ids of rate tests.",
    )
