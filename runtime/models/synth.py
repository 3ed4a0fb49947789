"""Synthetic GGUF files: a real architecture's shape, random weights, a small valid tokenizer.

A synthetic file lets a host be measured for a model *shape* before the real weights are
downloaded (speed only: the generated text is noise), and gives tests a tiny MoE model to
exercise ``kv_overrides={"<arch>.expert_used_count": N}`` for real.

* ``Shape`` describes an architecture shape; ``SHAPES`` names the known ones and
  ``make_shape(base, **overrides)`` builds an ad-hoc one (validated: a bad value raises
  ``ConfigError`` naming the field).
* ``write_gguf(shape, quant, path, seed=0)`` writes the file atomically and returns facts
  (path, size, sha256, ...). Same shape + quant + seed gives the same bytes.
  F32/F16/BF16 and the legacy quants (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) are written directly,
  as random blocks with a small fixed fp16 scale (fast, never NaN); K-quants are written as
  F16 to a temp file and converted by ``llama_cpp.llama_model_quantize``.
* ``python -m runtime.models.synth --shape tiny-llama --quant Q8_0 --out PATH [--seed N]
  [--set n_layer=4 ...]``; ``--list`` prints the registry.

Only numpy and gguf are needed, except for K-quants (llama_cpp, imported lazily).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import hashlib
import json
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ConfigError, UserError
from core.registry import Registry

# ---------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------

ARCHITECTURES = ("llama", "qwen3", "qwen3moe", "olmoe")
MOE_ARCHITECTURES = ("qwen3moe", "olmoe")
# architectures with per-head RMS norms on q and k (attn_q_norm / attn_k_norm)
_QK_NORM_PER_HEAD = ("qwen3", "qwen3moe")
_QK_NORM_FULL = ("olmoe",)

MAX_EXPERTS = (
    256  # llama.cpp allows more (LLAMA_MAX_EXPERTS), no real model we mimic needs more
)
BLOCK = (
    32  # every directly written quant has 32-element blocks along the input dimension
)

_N_SPECIAL = 5  # <unk> <s> </s> <|im_start|> <|im_end|>
MIN_VOCAB = _N_SPECIAL + 256 + 1 + 94  # specials, byte tokens, "▁", printable ASCII


@dataclass(frozen=True)
class Shape:
    """An architecture shape. ``head_dim`` 0 means ``n_embd // n_head``.

    ``n_ff`` is the dense feed-forward width (written as ``feed_forward_length``; unused by
    the MoE layers of qwen3moe); ``n_ff_exp`` is one expert's width.
    """

    name: str
    architecture: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    head_dim: int = 0
    tie_embeddings: bool = False
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    description: str = ""

    def __post_init__(self) -> None:
        _validate(self)

    # -- derived sizes ------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.architecture in MOE_ARCHITECTURES

    @property
    def n_embd_head(self) -> int:
        return self.head_dim or self.n_embd // self.n_head

    @property
    def n_embd_q(self) -> int:
        return self.n_embd_head * self.n_head

    @property
    def n_embd_kv(self) -> int:
        return self.n_embd_head * self.n_head_kv

    def tensors(self) -> list[TensorSpec]:
        """The tensors a file of this shape holds, in file order (numpy shapes: (out, in))."""
        return _tensor_specs(self)

    def n_params(self) -> int:
        """Total parameter count (every tensor, norms included; tied embeddings counted once)."""
        return sum(t.n_elements for t in self.tensors())

    def n_params_active(self) -> int:
        """Parameters used per token: for MoE, only ``n_expert_used`` of the experts."""
        total = 0
        for t in self.tensors():
            if t.kind == "expert":
                total += t.n_elements // self.n_expert * self.n_expert_used
            else:
                total += t.n_elements
        return total

    def file_size(self, quant: str) -> int:
        """Expected file size in bytes: exact for directly written quants, an estimate for
        K-quants (mimics llama.cpp's per-tensor type choice)."""
        return expected_file_size(self, quant)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_INT_FIELDS = (
    "n_embd",
    "n_layer",
    "n_head",
    "n_head_kv",
    "n_ff",
    "n_vocab",
    "n_ctx_train",
    "n_expert",
    "n_expert_used",
    "n_ff_exp",
    "head_dim",
)
_MUST_BE_POSITIVE = (
    "n_embd",
    "n_layer",
    "n_head",
    "n_head_kv",
    "n_ff",
    "n_vocab",
    "n_ctx_train",
)
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Shape))


def _bad(field: str, message: str) -> ConfigError:
    return ConfigError(message, field=field)


def _validate(s: Shape) -> None:
    if not isinstance(s.name, str) or not s.name.strip() or "\n" in s.name:
        raise _bad("name", "must be a non-empty one-line string")
    if s.architecture not in ARCHITECTURES:
        raise _bad(
            "architecture",
            f"{s.architecture!r} is not one of {', '.join(ARCHITECTURES)}",
        )
    for f in _INT_FIELDS:
        v = getattr(s, f)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _bad(f, f"must be an integer, got {v!r}")
        if v < 0 or (v == 0 and f in _MUST_BE_POSITIVE):
            raise _bad(f, f"must be a positive integer, got {v}")
    if not isinstance(s.tie_embeddings, bool):
        raise _bad("tie_embeddings", f"must be true or false, got {s.tie_embeddings!r}")
    for f in ("rope_theta", "rms_eps"):
        v = getattr(s, f)
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not np.isfinite(v)
            or v <= 0
        ):
            raise _bad(f, f"must be a positive number, got {v!r}")
    if s.n_head % s.n_head_kv:
        raise _bad(
            "n_head_kv",
            f"n_head {s.n_head} is not divisible by n_head_kv {s.n_head_kv}",
        )
    if not s.head_dim and s.n_embd % s.n_head:
        raise _bad(
            "n_head",
            f"n_embd {s.n_embd} is not divisible by n_head {s.n_head} (set head_dim)",
        )
    hd = s.head_dim or s.n_embd // s.n_head
    if hd % 2:
        raise _bad("head_dim", f"the head dimension must be even for RoPE, got {hd}")
    if s.n_embd % BLOCK:
        raise _bad(
            "n_embd",
            f"must be a multiple of {BLOCK} (quant block size), got {s.n_embd}",
        )
    if (hd * s.n_head) % BLOCK:
        raise _bad(
            "head_dim",
            f"head_dim * n_head = {hd * s.n_head} must be a multiple of {BLOCK}",
        )
    if s.n_ff % BLOCK:
        raise _bad(
            "n_ff", f"must be a multiple of {BLOCK} (quant block size), got {s.n_ff}"
        )
    if s.n_vocab < MIN_VOCAB:
        raise _bad(
            "n_vocab",
            f"must be at least {MIN_VOCAB} (specials, byte tokens, ASCII), got {s.n_vocab}",
        )
    if s.architecture in MOE_ARCHITECTURES:
        if s.n_expert < 1 or s.n_expert > MAX_EXPERTS:
            raise _bad(
                "n_expert",
                f"must be between 1 and {MAX_EXPERTS} for {s.architecture}, got {s.n_expert}",
            )
        if s.n_expert_used < 1 or s.n_expert_used > s.n_expert:
            raise _bad(
                "n_expert_used",
                f"must be between 1 and n_expert ({s.n_expert}), got {s.n_expert_used}",
            )
        if s.n_ff_exp < 1 or s.n_ff_exp % BLOCK:
            raise _bad(
                "n_ff_exp", f"must be a positive multiple of {BLOCK}, got {s.n_ff_exp}"
            )
    else:
        for f in ("n_expert", "n_expert_used", "n_ff_exp"):
            if getattr(s, f):
                raise _bad(f, f"must be 0 for the dense architecture {s.architecture}")
    if s.architecture == "olmoe" and s.n_ff != s.n_ff_exp:
        raise _bad(
            "n_ff",
            f"olmoe sizes its experts by n_ff: n_ff ({s.n_ff}) must equal n_ff_exp ({s.n_ff_exp})",
        )
    if s.architecture in _QK_NORM_FULL and s.n_head_kv != s.n_head:
        raise _bad(
            "n_head_kv", f"{s.architecture} needs n_head_kv == n_head ({s.n_head})"
        )


SHAPES: Registry[Shape] = Registry("synthetic model shape")


def _register(shape: Shape) -> Shape:
    return SHAPES.add(shape.name, shape, stacklevel=2)


_register(
    Shape(
        "tiny-llama",
        "llama",
        n_embd=256,
        n_layer=4,
        n_head=4,
        n_head_kv=2,
        n_ff=768,
        n_vocab=4096,
        n_ctx_train=2048,
        tie_embeddings=True,
        description="test fixture: about 4M parameters",
    )
)
_register(
    Shape(
        "tiny-qwen3",
        "qwen3",
        n_embd=256,
        n_layer=4,
        n_head=4,
        n_head_kv=2,
        n_ff=768,
        n_vocab=4096,
        n_ctx_train=4096,
        tie_embeddings=True,
        rope_theta=1e6,
        rms_eps=1e-6,
        description="test fixture: dense qwen3 (per-head q/k norms)",
    )
)
_register(
    Shape(
        "tiny-qwen3moe",
        "qwen3moe",
        n_embd=256,
        n_layer=4,
        n_head=4,
        n_head_kv=2,
        n_ff=768,
        n_vocab=4096,
        n_ctx_train=4096,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=128,
        tie_embeddings=True,
        rope_theta=1e6,
        rms_eps=1e-6,
        description="test fixture: MoE, 8 experts, 2 used",
    )
)
_register(
    Shape(
        "tiny-olmoe",
        "olmoe",
        n_embd=256,
        n_layer=4,
        n_head=4,
        n_head_kv=4,
        n_ff=128,
        n_vocab=4096,
        n_ctx_train=4096,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=128,
        description="test fixture: OLMoE-style MoE, 8 experts, 2 used",
    )
)
_register(
    Shape(
        "llama-1b",
        "llama",
        n_embd=2048,
        n_layer=16,
        n_head=32,
        n_head_kv=8,
        n_ff=8192,
        n_vocab=32000,
        n_ctx_train=131072,
        tie_embeddings=True,
        rope_theta=500000.0,
        description="Llama 3.2 1B shape with a 32k vocabulary",
    )
)
_register(
    Shape(
        "llama-3b",
        "llama",
        n_embd=3072,
        n_layer=28,
        n_head=24,
        n_head_kv=8,
        n_ff=8192,
        n_vocab=128256,
        n_ctx_train=131072,
        tie_embeddings=True,
        rope_theta=500000.0,
        description="Llama 3.2 3B shape",
    )
)
_register(
    Shape(
        "llama-8b",
        "llama",
        n_embd=4096,
        n_layer=32,
        n_head=32,
        n_head_kv=8,
        n_ff=14336,
        n_vocab=128256,
        n_ctx_train=131072,
        rope_theta=500000.0,
        description="Llama 3.1 8B shape",
    )
)
_register(
    Shape(
        "qwen3-0.6b",
        "qwen3",
        n_embd=1024,
        n_layer=28,
        n_head=16,
        n_head_kv=8,
        n_ff=3072,
        n_vocab=151936,
        n_ctx_train=40960,
        head_dim=128,
        tie_embeddings=True,
        rope_theta=1e6,
        rms_eps=1e-6,
        description="Qwen3 0.6B shape",
    )
)
_register(
    Shape(
        "qwen3-8b",
        "qwen3",
        n_embd=4096,
        n_layer=36,
        n_head=32,
        n_head_kv=8,
        n_ff=12288,
        n_vocab=151936,
        n_ctx_train=40960,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        description="Qwen3 8B shape",
    )
)
_register(
    Shape(
        "qwen3moe-30b-a3b",
        "qwen3moe",
        n_embd=2048,
        n_layer=48,
        n_head=32,
        n_head_kv=4,
        n_ff=6144,
        n_vocab=151936,
        n_ctx_train=40960,
        n_expert=128,
        n_expert_used=8,
        n_ff_exp=768,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        description="Qwen3-30B-A3B shape",
    )
)
_register(
    Shape(
        "olmoe-1b-7b",
        "olmoe",
        n_embd=2048,
        n_layer=16,
        n_head=16,
        n_head_kv=16,
        n_ff=1024,
        n_vocab=50304,
        n_ctx_train=4096,
        n_expert=64,
        n_expert_used=8,
        n_ff_exp=1024,
        description="OLMoE-1B-7B shape",
    )
)


def get_shape(name: str) -> Shape:
    """A registered shape by name; an unknown name raises ConfigError with suggestions."""
    try:
        return SHAPES[name]
    except KeyError:
        close = difflib.get_close_matches(name, SHAPES, n=3, cutoff=0.5)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else f"known: {', '.join(SHAPES)}"
        )
        raise ConfigError(f"unknown shape {name!r}; {hint}", field="shape") from None


def make_shape(base: str | Shape, name: str | None = None, **overrides: Any) -> Shape:
    """A shape built from a registered (or given) one with fields overridden, validated.

    String values (from a command line) are converted to the field's type. Without an
    explicit ``name`` the new shape is named ``<base>+field=value,...`` so files of
    different shapes never share a name.
    """
    shape = get_shape(base) if isinstance(base, str) else base
    if not overrides and name is None:
        return shape
    fields = {f.name: f for f in dataclasses.fields(Shape)}
    converted: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in fields or key == "name":
            close = difflib.get_close_matches(
                key, [f for f in fields if f != "name"], n=1
            )
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"unknown shape field {key!r}{hint}", field=key)
        converted[key] = _convert(key, value, getattr(shape, key))
    if name is None:
        name = (
            shape.name
            + "+"
            + ",".join(f"{k}={_fmt(converted[k])}" for k in sorted(converted))
        )
    return dataclasses.replace(shape, name=name, **converted)


def _fmt(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _convert(key: str, value: Any, current: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if isinstance(current, bool):
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError:
        kind = "true or false" if isinstance(current, bool) else type(current).__name__
        raise ConfigError(f"expected {kind}, got {value!r}", field=key) from None
    return text


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``["n_layer=4", "n_expert=16"]`` -> ``{"n_layer": "4", "n_expert": "16"}``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise ConfigError(f"expected FIELD=VALUE, got {item!r}", field="--set")
        out[key] = value
    return out


# ---------------------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: GGUF name, numpy shape ((n_expert,) out, in), and what it holds.

    kind: "weight" (a matrix, quantized), "expert" (a stack of expert matrices, quantized),
    "norm" (1-D, F32, all ones), "router" (the MoE gate, F32, never quantized).
    """

    name: str
    shape: tuple[int, ...]
    kind: str

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _tensor_specs(s: Shape) -> list[TensorSpec]:
    E, Q, KV, F = s.n_embd, s.n_embd_q, s.n_embd_kv, s.n_ff
    out = [TensorSpec("token_embd.weight", (s.n_vocab, E), "weight")]
    for i in range(s.n_layer):
        p = f"blk.{i}."
        out += [
            TensorSpec(p + "attn_norm.weight", (E,), "norm"),
            TensorSpec(p + "attn_q.weight", (Q, E), "weight"),
            TensorSpec(p + "attn_k.weight", (KV, E), "weight"),
            TensorSpec(p + "attn_v.weight", (KV, E), "weight"),
            TensorSpec(p + "attn_output.weight", (E, Q), "weight"),
        ]
        if s.architecture in _QK_NORM_PER_HEAD:
            out += [
                TensorSpec(p + "attn_q_norm.weight", (s.n_embd_head,), "norm"),
                TensorSpec(p + "attn_k_norm.weight", (s.n_embd_head,), "norm"),
            ]
        elif s.architecture in _QK_NORM_FULL:
            out += [
                TensorSpec(p + "attn_q_norm.weight", (Q,), "norm"),
                TensorSpec(p + "attn_k_norm.weight", (KV,), "norm"),
            ]
        out.append(TensorSpec(p + "ffn_norm.weight", (E,), "norm"))
        if s.is_moe:
            X, FX = s.n_expert, s.n_ff_exp
            out += [
                TensorSpec(p + "ffn_gate_inp.weight", (X, E), "router"),
                TensorSpec(p + "ffn_gate_exps.weight", (X, FX, E), "expert"),
                TensorSpec(p + "ffn_up_exps.weight", (X, FX, E), "expert"),
                TensorSpec(p + "ffn_down_exps.weight", (X, E, FX), "expert"),
            ]
        else:
            out += [
                TensorSpec(p + "ffn_gate.weight", (F, E), "weight"),
                TensorSpec(p + "ffn_up.weight", (F, E), "weight"),
                TensorSpec(p + "ffn_down.weight", (E, F), "weight"),
            ]
    out.append(TensorSpec("output_norm.weight", (E,), "norm"))
    if not s.tie_embeddings:
        out.append(TensorSpec("output.weight", (s.n_vocab, E), "weight"))
    return out


# ---------------------------------------------------------------------------------------
# quantization types
# ---------------------------------------------------------------------------------------

# Weight magnitude: about 0.02 (like a usual init), small enough that no activation
# overflows F16 in a deep stack, large enough that logits are not all equal.
_SIGMA = 0.02

# name -> (ggml type id, llama_ftype, bytes per block, elements per block)
_GGML = {  # ggml_type ids and block sizes, as in ggml.h
    "F32": (0, 4, 1),
    "F16": (1, 2, 1),
    "Q4_0": (2, 18, 32),
    "Q4_1": (3, 20, 32),
    "Q5_0": (6, 22, 32),
    "Q5_1": (7, 24, 32),
    "Q8_0": (8, 34, 32),
    "Q4_K": (12, 144, 256),
    "Q5_K": (13, 176, 256),
    "Q6_K": (14, 210, 256),
    "BF16": (30, 2, 1),
}
# quant name -> llama_ftype (general.file_type)
_FTYPE = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "BF16": 32,
}
DIRECT_QUANTS = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
K_QUANTS = ("Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K")
QUANTS = DIRECT_QUANTS + K_QUANTS

# random bit patterns for float types: random sign and mantissa, fixed exponent, so that
# |w| lies in [2^-6, 2^-5) (about 0.016 to 0.031): never NaN, inf or denormal.
_FLOAT_BITS = {  # dtype, keep-mask (sign + mantissa), exponent bits
    "F32": (np.uint32, 0x807FFFFF, 121 << 23),
    "F16": (np.uint16, 0x83FF, 9 << 10),
    "BF16": (np.uint16, 0x807F, 121 << 7),
}
# legacy quants: (rms of the integer code, has min); value = d * (q - offset) or d*q + m
_BLOCK_QUANTS = {
    "Q8_0": (73.9, False),  # int8 in [-128, 127]
    "Q4_0": (4.64, False),  # (q - 8), q in [0, 15]
    "Q4_1": (4.61, True),  # d*q + m, m = -7.5 d
    "Q5_0": (9.25, False),  # (q - 16), q in [0, 31]
    "Q5_1": (9.23, True),  # d*q + m, m = -15.5 d
}
_MIN_OFFSET = {"Q4_1": 7.5, "Q5_1": 15.5}


def normalize_quant(quant: str) -> str:
    q = str(quant).strip().upper()
    if q not in QUANTS:
        close = difflib.get_close_matches(q, QUANTS, n=2, cutoff=0.5)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else f"known: {', '.join(QUANTS)}"
        )
        raise ConfigError(f"unsupported quantization {quant!r}; {hint}", field="quant")
    return q


def _tensor_type(spec: TensorSpec, quant: str) -> str:
    """The ggml type a directly written file stores this tensor as."""
    if spec.kind in ("norm", "router"):
        return "F32"
    return quant


def _nbytes(n_elements: int, ggml_type: str) -> int:
    _, bs, be = _GGML[ggml_type]
    return n_elements // be * bs


def _pad(n: int, align: int = 32) -> int:
    return (n + align - 1) // align * align


# ---------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------

_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# token types (llama.cpp's llama_token_type)
_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_BYTE = 1, 2, 3, 6
_ALPHABET = "etaoinshrdlcumwfgypbvkjxqz"


def _bijective(k: int) -> str:
    """1 -> 'e', 26 -> 'z', 27 -> 'ee', ...: every positive k gives a distinct string."""
    out = []
    while k > 0:
        k -= 1
        out.append(_ALPHABET[k % 26])
        k //= 26
    return "".join(reversed(out))


@functools.lru_cache(maxsize=4)
def make_vocab(
    n_vocab: int,
) -> tuple[tuple[str, ...], tuple[float, ...], tuple[int, ...]]:
    """A deterministic SentencePiece-style vocabulary: specials, 256 byte tokens, "▁", the
    printable ASCII characters, then letter strings with and without the "▁" prefix."""
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [_TT_UNKNOWN, _TT_CONTROL, _TT_CONTROL, _TT_CONTROL, _TT_CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [_TT_BYTE] * 256
    normal = ["\u2581"] + [chr(c) for c in range(33, 127)]
    seen = set(tokens) | set(normal)
    k = 0
    while len(tokens) + len(normal) < n_vocab:
        k += 1
        s = _bijective(k)
        for piece in ("\u2581" + s, s):
            if piece not in seen and len(tokens) + len(normal) < n_vocab:
                normal.append(piece)
                seen.add(piece)
    normal = normal[: n_vocab - len(tokens)]
    scores = [0.0] * len(tokens) + [-float(i) for i in range(len(normal))]
    tokens += normal
    types += [_TT_NORMAL] * len(normal)
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab
    return tuple(tokens), tuple(scores), tuple(types)


def _metadata(shape: Shape, quant: str, seed: int) -> list[tuple[str, Any, Any, Any]]:
    """(key, value, GGUFValueType, array item type) in file order, after general.architecture."""
    from gguf import GGUFValueType as T

    a = shape.architecture
    kv: list[tuple[str, Any, Any, Any]] = [
        ("general.type", "model", T.STRING, None),
        ("general.name", shape.name, T.STRING, None),
        (
            "general.description",
            "synthetic: random weights, for speed measurement only",
            T.STRING,
            None,
        ),
        ("general.file_type", _FTYPE[quant], T.UINT32, None),
    ]
    if quant not in ("F32", "F16", "BF16"):
        kv.append(("general.quantization_version", 2, T.UINT32, None))
    kv += [
        (f"{a}.vocab_size", shape.n_vocab, T.UINT32, None),
        (f"{a}.context_length", shape.n_ctx_train, T.UINT32, None),
        (f"{a}.embedding_length", shape.n_embd, T.UINT32, None),
        (f"{a}.block_count", shape.n_layer, T.UINT32, None),
        (f"{a}.feed_forward_length", shape.n_ff, T.UINT32, None),
        (f"{a}.attention.head_count", shape.n_head, T.UINT32, None),
        (f"{a}.attention.head_count_kv", shape.n_head_kv, T.UINT32, None),
        (f"{a}.attention.key_length", shape.n_embd_head, T.UINT32, None),
        (f"{a}.attention.value_length", shape.n_embd_head, T.UINT32, None),
        (
            f"{a}.attention.layer_norm_rms_epsilon",
            float(shape.rms_eps),
            T.FLOAT32,
            None,
        ),
        (f"{a}.rope.freq_base", float(shape.rope_theta), T.FLOAT32, None),
        (f"{a}.rope.dimension_count", shape.n_embd_head, T.UINT32, None),
    ]
    if shape.is_moe:
        kv += [
            (f"{a}.expert_count", shape.n_expert, T.UINT32, None),
            (f"{a}.expert_used_count", shape.n_expert_used, T.UINT32, None),
            (f"{a}.expert_feed_forward_length", shape.n_ff_exp, T.UINT32, None),
        ]
    tokens, scores, types = make_vocab(shape.n_vocab)
    kv += [
        ("tokenizer.ggml.model", "llama", T.STRING, None),
        ("tokenizer.ggml.tokens", tokens, T.ARRAY, T.STRING),
        ("tokenizer.ggml.scores", scores, T.ARRAY, T.FLOAT32),
        ("tokenizer.ggml.token_type", types, T.ARRAY, T.INT32),
        ("tokenizer.ggml.unknown_token_id", 0, T.UINT32, None),
        ("tokenizer.ggml.bos_token_id", 1, T.UINT32, None),
        ("tokenizer.ggml.eos_token_id", 2, T.UINT32, None),
        ("tokenizer.ggml.add_bos_token", True, T.BOOL, None),
        ("tokenizer.ggml.add_eos_token", False, T.BOOL, None),
        ("tokenizer.chat_template", _CHAT_TEMPLATE, T.STRING, None),
        ("almanac.synthetic", True, T.BOOL, None),
        ("almanac.shape", shape.name, T.STRING, None),
        ("almanac.seed", int(seed), T.UINT64, None),
    ]
    return kv


_SCALAR_SIZE = {
    "UINT8": 1,
    "INT8": 1,
    "UINT16": 2,
    "INT16": 2,
    "UINT32": 4,
    "INT32": 4,
    "FLOAT32": 4,
    "UINT64": 8,
    "INT64": 8,
    "FLOAT64": 8,
    "BOOL": 1,
}


def _value_size(value: Any, vtype: Any, sub_type: Any) -> int:
    if vtype.name == "STRING":
        return 8 + len(value.encode("utf-8"))
    if vtype.name == "ARRAY":
        if sub_type.name == "STRING":
            return 4 + 8 + sum(8 + len(v.encode("utf-8")) for v in value)
        return 4 + 8 + len(value) * _SCALAR_SIZE[sub_type.name]
    return _SCALAR_SIZE[vtype.name]


@functools.lru_cache(maxsize=64)
def _header_size(shape: Shape, quant: str, extra: int = 0) -> int:
    """Bytes before the tensor data: magic, counts, key/values (plus ``extra`` bytes of
    them), tensor infos, padding to the data alignment."""
    from gguf import GGUFValueType as T

    kv = [("general.architecture", shape.architecture, T.STRING, None)] + _metadata(
        shape, quant, 0
    )
    n = 4 + 4 + 8 + 8
    for key, value, vtype, sub in kv:
        n += 8 + len(key.encode()) + 4 + _value_size(value, vtype, sub)
    for spec in shape.tensors():
        n += 8 + len(spec.name.encode()) + 4 + 8 * len(spec.shape) + 4 + 8
    return _pad(n + extra)


# ---------------------------------------------------------------------------------------
# expected sizes
# ---------------------------------------------------------------------------------------


def _kquant_types(shape: Shape, quant: str) -> list[str]:
    """Per-tensor ggml types llama.cpp's quantizer picks for a K-quant mixture (its
    llama_tensor_get_type rules for llama-like models, ne0 fallbacks included)."""
    base = {
        "Q4_K_S": "Q4_K",
        "Q4_K_M": "Q4_K",
        "Q5_K_S": "Q5_K",
        "Q5_K_M": "Q5_K",
        "Q6_K": "Q6_K",
    }[quant]
    n_layer = shape.n_layer
    n_expert = shape.n_expert if shape.is_moe else 0

    def more_bits(i: int, n: int) -> bool:
        return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2

    fallback = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
    out = []
    i_wv = 0
    for spec in shape.tensors():
        if spec.kind in ("norm", "router"):
            out.append("F32")
            continue
        ne0 = spec.shape[-1]
        t = base
        name = spec.name
        layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
        if name == "output.weight" or (
            shape.tie_embeddings and name == "token_embd.weight"
        ):
            t = "Q8_0" if ne0 % 256 else "Q6_K"
        elif name == "token_embd.weight":
            pass
        elif name.endswith("attn_v.weight"):
            if quant in ("Q4_K_M", "Q5_K_M") and more_bits(i_wv, n_layer):
                t = "Q6_K"
            elif quant == "Q4_K_S" and i_wv < 4:
                t = "Q5_K"
            if n_expert == 8:
                t = "Q8_0"
            i_wv += 1
        elif name.endswith("attn_k.weight"):
            if n_expert == 8:
                t = "Q8_0"
        elif "ffn_down" in name:
            if quant in ("Q4_K_M", "Q5_K_M") and more_bits(layer, n_layer):
                t = "Q6_K"
            elif quant == "Q4_K_S" and layer < n_layer // 8:
                t = "Q5_K"
        elif name.endswith("attn_output.weight"):
            if n_expert == 8 and quant in ("Q4_K_S", "Q4_K_M"):
                t = "Q5_K"
        if t in fallback and ne0 % 256:
            t = fallback[t]
        out.append(t)
    return out


def expected_file_size(shape: Shape, quant: str) -> int:
    """Exact size for directly written quants. For K-quants, a prediction from llama.cpp's
    per-tensor type rules (matched byte for byte with llama-cpp-python 0.3.36; another
    llama.cpp version may choose some tensor types differently)."""
    quant = normalize_quant(quant)
    specs = shape.tensors()
    if quant in K_QUANTS:
        types = _kquant_types(shape, quant)
        # the quantizer adds general.quantization_version (44 bytes) to the F16 header
        header = _header_size(shape, "F16", extra=44)
    else:
        types = [_tensor_type(s, quant) for s in specs]
        header = _header_size(shape, quant)
    return header + sum(_pad(_nbytes(s.n_elements, t)) for s, t in zip(specs, types))


# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------

_CHUNK_BYTES = 64 << 20  # random data generated and written per step


def _rng(seed: int, name: str) -> np.random.PCG64:
    # one stream per (seed, tensor name): a tensor's bytes do not depend on the others
    return np.random.PCG64(
        np.random.SeedSequence([int(seed), zlib.crc32(name.encode())])
    )


def _random_bytes(bg: np.random.PCG64, n: int) -> np.ndarray:
    return bg.random_raw((n + 7) // 8).view(np.uint8)[:n]


def _tensor_chunks(spec: TensorSpec, ggml_type: str, seed: int) -> Iterator[np.ndarray]:
    """The tensor's data as a sequence of uint8 arrays (deterministic for a seed)."""
    n = spec.n_elements
    if spec.kind == "norm":
        yield np.ones(n, dtype=np.float32).view(np.uint8)
        return
    bg = _rng(seed, spec.name)
    if ggml_type in _FLOAT_BITS:
        dtype, keep, exp = _FLOAT_BITS[ggml_type]
        itemsize = np.dtype(dtype).itemsize
        step = _CHUNK_BYTES // itemsize
        for start in range(0, n, step):
            m = min(step, n - start)
            words = _random_bytes(bg, m * itemsize).view(dtype)
            words &= dtype(keep)
            words |= dtype(exp)
            yield words.view(np.uint8)
        return
    rms, has_min = _BLOCK_QUANTS[ggml_type]
    _, bs, be = _GGML[ggml_type]
    d = np.float16(_SIGMA / rms)
    head = np.array([d], dtype="<f2").view(np.uint8)
    if has_min:
        dmin = np.float16(-_MIN_OFFSET[ggml_type] * float(d))
        head = np.concatenate([head, np.array([dmin], dtype="<f2").view(np.uint8)])
    n_blocks = n // be
    step = _CHUNK_BYTES // bs
    for start in range(0, n_blocks, step):
        nb = min(step, n_blocks - start)
        blocks = _random_bytes(bg, nb * bs).reshape(nb, bs)
        blocks[:, : head.size] = head
        yield blocks.reshape(-1)


ProgressFn = Callable[[int, int], None]


def _write_direct(
    shape: Shape, quant: str, path: Path, seed: int, progress: ProgressFn | None
) -> str:
    """Write a directly-generated file to ``path``; return its sha256."""
    import gguf

    specs = shape.tensors()
    types = [_tensor_type(s, quant) for s in specs]
    writer = gguf.GGUFWriter(path, shape.architecture)
    for key, value, vtype, sub in _metadata(shape, quant, seed):
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for spec, t in zip(specs, types):
        writer.add_tensor_info(
            spec.name,
            spec.shape,
            np.dtype(np.float32),
            _nbytes(spec.n_elements, t),
            raw_dtype=gguf.GGMLQuantizationType(_GGML[t][0]),
        )
    total = sum(_nbytes(s.n_elements, t) for s, t in zip(specs, types))
    done = 0
    sha = hashlib.sha256()
    try:
        writer.write_header_to_file(path)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        assert writer.fout is not None
        fout = writer.fout[0]
        align = writer.data_alignment

        def pad(n: int) -> None:
            extra = _pad(n, align) - n
            if extra:
                zeros = bytes(extra)
                fout.write(zeros)
                sha.update(zeros)

        fout.flush()
        with open(path, "rb") as f:  # the header, as gguf-py wrote it
            sha.update(f.read(fout.tell()))
        pad(fout.tell())
        for spec, t in zip(specs, types):
            written = 0
            for chunk in _tensor_chunks(spec, t, seed):
                fout.write(chunk.data)
                sha.update(chunk.data)
                written += chunk.size
            if written != _nbytes(
                spec.n_elements, t
            ):  # pragma: no cover - internal check
                raise AssertionError(f"{spec.name}: wrote {written} bytes")
            pad(written)
            done += written
            if progress is not None:
                progress(done, total)
        fout.flush()
        os.fsync(fout.fileno())
    finally:
        writer.close()
    return sha.hexdigest()


def _sha256_file(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(16 << 20):
            sha.update(block)
    return sha.hexdigest()


def _quantize(src: Path, dst: Path, quant: str) -> None:
    """Convert an F16 GGUF to a K-quant with llama.cpp, its log captured (shown on failure)."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise UserError(
            f"{quant} needs llama_cpp (llama-cpp-python) to convert from F16: {exc}",
            field="quant",
        ) from None
    import ctypes

    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def capture(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        lines.append(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(capture, ctypes.c_void_p(0))
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = _FTYPE[quant]
        params.nthread = os.cpu_count() or 1
        rc = llama_cpp.llama_model_quantize(
            str(src).encode(), str(dst).encode(), params
        )
    finally:
        try:  # give the log back to llama-cpp-python's own callback
            from llama_cpp._logger import llama_log_callback

            llama_cpp.llama_log_set(llama_log_callback, ctypes.c_void_p(0))
        except ImportError:  # pragma: no cover
            llama_cpp.llama_log_set(
                ctypes.cast(None, llama_cpp.llama_log_callback), ctypes.c_void_p(0)
            )
    if rc != 0:
        tail = " ".join("".join(lines).split())[-300:]
        raise RuntimeError(
            f"llama_model_quantize({src.name} -> {quant}) failed with code {rc}: {tail}"
        )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_gguf(
    shape: Shape | str,
    quant: str,
    path: str | os.PathLike[str],
    seed: int = 0,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Write a synthetic GGUF of ``shape`` at ``quant`` to ``path`` (atomically) and return
    its facts: path, shape, architecture, quant, n_params, n_params_active, size_bytes,
    sha256, seed, seconds. ``progress(done_bytes, total_bytes)`` is called per tensor
    written (for K-quants: of the intermediate F16 file; the conversion follows).

    Raises ConfigError for an unknown shape or quant, a bad seed or a directory as path.
    On any failure (or interrupt) nothing is left at ``path`` nor in its directory."""
    t0 = time.perf_counter()
    if isinstance(shape, str):
        shape = get_shape(shape)
    quant = normalize_quant(quant)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ConfigError(
            f"must be an integer in [0, 2^63), got {seed!r}", field="seed"
        )
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give a file name", field="out")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    f16_tmp: Path | None = None
    try:
        if quant in DIRECT_QUANTS:
            sha = _write_direct(shape, quant, tmp, seed, progress)
        else:
            fd, f16_name = tempfile.mkstemp(
                prefix=f".{path.name}.", suffix=".f16.tmp", dir=path.parent
            )
            os.close(fd)
            f16_tmp = Path(f16_name)
            _write_direct(shape, "F16", f16_tmp, seed, progress)
            _quantize(f16_tmp, tmp, quant)
            sha = _sha256_file(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if f16_tmp is not None:
            f16_tmp.unlink(missing_ok=True)
    return {
        "path": str(path),
        "shape": shape.name,
        "architecture": shape.architecture,
        "quant": quant,
        "n_params": shape.n_params(),
        "n_params_active": shape.n_params_active(),
        "size_bytes": path.stat().st_size,
        "sha256": sha,
        "seed": seed,
        "seconds": round(time.perf_counter() - t0, 3),
    }


# ---------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------


class _ArgumentParser(argparse.ArgumentParser):
    def error(
        self, message: str
    ) -> Any:  # one line, exit 2 (argparse prints usage too)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def _human(n: float, unit: str = "B") -> str:
    for prefix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or prefix == "T":
            return (
                f"{n:.0f} {prefix}{unit}" if not prefix else f"{n:.2f} {prefix}{unit}"
            )
        n /= 1000
    return f"{n} {unit}"  # pragma: no cover


def _list_shapes() -> str:
    rows = [
        f"{'shape':<18} {'arch':<9} {'params':>9} {'active':>9} {'F16':>10} {'Q8_0':>10} {'Q4_0':>10}"
    ]
    for s in SHAPES.values():
        rows.append(
            f"{s.name:<18} {s.architecture:<9} {s.n_params() / 1e9:>8.3f}B "
            f"{s.n_params_active() / 1e9:>8.3f}B "
            + " ".join(f"{_human(s.file_size(q)):>10}" for q in ("F16", "Q8_0", "Q4_0"))
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    p = _ArgumentParser(
        prog="python -m runtime.models.synth",
        description="Write a synthetic GGUF (random weights) of a named shape.",
    )
    p.add_argument("--shape", help="a registered shape (see --list)")
    p.add_argument(
        "--quant", default="Q8_0", help=f"one of {', '.join(QUANTS)} (default Q8_0)"
    )
    p.add_argument("--out", help="output .gguf path")
    p.add_argument("--seed", default="0", help="random seed (default 0)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a shape field, e.g. n_layer=4 (repeatable)",
    )
    p.add_argument("--name", help="name of the overridden shape (default: derived)")
    p.add_argument(
        "--list", action="store_true", help="list the registered shapes and exit"
    )
    args = p.parse_args(argv)
    if args.list:
        print(_list_shapes())
        return 0
    try:
        if not args.shape:
            raise ConfigError("is required (see --list)", field="--shape")
        if not args.out:
            raise ConfigError("is required", field="--out")
        try:
            seed = int(args.seed)
        except ValueError:
            raise ConfigError(
                f"expected an integer, got {args.seed!r}", field="--seed"
            ) from None
        shape = make_shape(args.shape, name=args.name, **parse_sets(args.sets))
        quant = normalize_quant(args.quant)
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] > 1.0 or done == total:
                last[0] = now
                print(
                    f"\rwriting {done / max(total, 1):6.1%}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

        facts = write_gguf(
            shape,
            quant,
            args.out,
            seed=seed,
            progress=progress if sys.stderr.isatty() else None,
        )
        if sys.stderr.isatty():
            print(file=sys.stderr)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # unwritable path, disk full: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(facts["path"])
    print(json.dumps(facts, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
