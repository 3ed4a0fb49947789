"""Placement settings shared by the backends that run llama.cpp (issue 29): where a model runs on
the GPUs (split_mode, tensor_split, main_gpu) and how the CPU threads are placed (numa, cpu_mask,
cpu_strict, prio, poll). One definition, one meaning; runtime.hosts.placement checks them against
the host and turns them into llama-bench's and llama-server's flags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

# Omitted from the recorded settings at their default (BackendSettings.recorded): added after
# artifacts were measured without them, they leave every earlier configuration's key as it was.
OMITTED = (
    "split_mode",
    "tensor_split",
    "numa",
    "cpu_mask",
    "cpu_strict",
    "prio",
    "poll",
)


class PlacementSettings(BaseModel):
    main_gpu: int = Field(
        0,
        ge=0,
        description="With split_mode none the GPU that holds the whole model; with row the GPU that keeps "
        "the small tensors and intermediate results (llama.cpp -mg). Checked against the visible GPUs.",
    )
    split_mode: Literal["none", "layer", "row", "tensor"] = Field(
        "layer",
        description="How a model is spread over the visible GPUs (llama.cpp -sm): none = one GPU (main_gpu), "
        "layer = whole layers per GPU (llama.cpp's default: every visible GPU), "
        "row = each weight matrix split by rows (needs a backend with split buffers: the CUDA backend of "
        "recent llama.cpp has none), tensor = tensor parallelism, every layer's weights and KV cache split "
        "over the GPUs with an all-reduce between them (llama.cpp's successor to row; needs flash attention).",
    )
    tensor_split: list[float] | None = Field(
        None,
        description="Share of the model per visible GPU (llama.cpp -ts, proportions; 0 leaves a GPU out); "
        "null = in proportion to each GPU's free memory. One share per visible GPU.",
    )
    numa: Literal["off", "distribute", "isolate", "numactl"] = Field(
        "off",
        description="llama.cpp's NUMA strategy (--numa): distribute threads over the nodes, isolate them on the "
        "node the process started on, or follow numactl's CPU map. Needs a host with several NUMA nodes.",
    )
    cpu_mask: str | None = Field(
        None,
        description="CPUs the work may run on, a hex mask (bit i = CPU i; llama.cpp -C). In process it is the "
        "process's affinity (sched_setaffinity), which llama.cpp's threads inherit.",
    )
    cpu_strict: bool = Field(
        False,
        description="Pin one thread per CPU of cpu_mask (llama.cpp --cpu-strict); llama-bench and llama-server only.",
    )
    prio: int = Field(
        0,
        ge=-1,
        le=3,
        description="Thread priority: -1 low, 0 normal, 1 medium, 2 high, 3 realtime (llama.cpp --prio); "
        "llama-bench and llama-server only.",
    )
    poll: int = Field(
        50,
        ge=0,
        le=100,
        description="How hard idle worker threads spin before sleeping, 0-100 (llama.cpp --poll; 50 is ggml's "
        "default, the one an in-process context uses); other values: llama-bench and llama-server only.",
    )

    @field_validator("tensor_split")
    @classmethod
    def _shares(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (not v or any(x < 0 for x in v) or not any(v)):
            raise ValueError(
                f"tensor_split {v}: shares must be >= 0 and one at least > 0"
            )
        return v
