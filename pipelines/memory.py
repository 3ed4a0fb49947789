"""Memory planner: predict what llama.cpp allocates for a GGUF, from the file's own facts.

Everything here is arithmetic over the facts ``runtime.models.registry.gguf_facts`` reads from a
GGUF header (run artifacts carry them under ``model.gguf``), following llama.cpp's own
sizing (the vendored source of llama-cpp-python 0.3.36, ``src/llama-kv-cache*.cpp``,
``src/llama-context.cpp``, ``src/llama-model.cpp``):

* **Weights**: the tensor bytes of the file, per tensor type. On a CPU, llama.cpp maps
  the file and prefetches it (``MAP_POPULATE``), so every tensor page is resident; tensors
  of the types its CPU_REPACK buffer re-lays for SIMD kernels (Q4_0, Q4_K, IQ4_NL, except
  the token embedding) are copied once more.
* **KV cache**: ``n_ctx`` is padded to a multiple of 256 cells. Each attention layer ``l``
  holds ``cells(l) × (row(type_k, head_k × n_head_kv(l)) + row(type_v, head_v ×
  n_head_kv(l)))`` bytes, where ``row(type, n)`` is ggml's row size (f16: 2 bytes per
  element; q8_0: 34 bytes per 32; q4_0: 18 bytes per 32). Sliding-window layers (Gemma 2/3,
  Cohere 2, gpt-oss, ...) get a cache of ``pad256(min(n_ctx, n_swa + n_ubatch))`` cells
  unless ``swa_full`` is set, when they get the full context. MLA caches (DeepSeek-2 style)
  store ``kv_lora_rank + n_rot`` per cell and no V.
* **Compute buffer** (estimate): llama.cpp reserves the worst-case graph for one micro-batch
  of ``n_ubatch`` tokens with every token an output. The estimate is the largest of three
  live sets: the logits (``4 × n_ubatch × (n_vocab + n_embd)`` bytes), the attention phase
  (the f16 masks, ``2 × n_ubatch × n_kv`` each, Q/K/V, and without flash attention the scores
  ``4 × n_ubatch × n_kv × n_head``) and the feed-forward activations (``4 × n_ubatch × (3 ×
  n_ff + 3 × n_embd)``, masks still alive). On a CPU only the pages a real batch writes become
  resident: the same formula with the run's largest batch and one output.
* **Tokenizer tables** (estimate): llama.cpp's vocabulary (token data, the text→id hash map,
  the piece cache): 192 bytes per token plus three copies of the token text.
* **LoRA adapters**: the seed formula ``r × (in + out) × layers × modules × bytes`` with the
  model's real projection shapes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.errors import ConfigError, ModelError
from core.kinds.rate import RateTest
from core.paths import data_dir, relpath
from core.records.run import RunRecord, flash_attention_on
from core.yamlio import load_yaml, pydantic_error_line, quote
from pipelines.memo import per_run

GiB = 1024**3
MiB = 1024**2

# (block size, bytes per block) of the KV cache types llama.cpp accepts (ggml's type traits).
KV_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "iq4_nl": (32, 18),
}

# Sliding-window layer patterns llama.cpp applies when the GGUF has no
# `<arch>.attention.sliding_window_pattern` (src/models/<arch>.cpp: load_swa_pattern(ml, N, dense_first)).
SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "gpt-oss": (2, False),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "olmo2": (4, False),
    "smallthinker": (4, True),
    "afmoe": (4, False),
    "mellum": (4, False),
    "plamo3": (8, False),
    "muse-glimmer": (4, False),
}
# llm_arch_is_recurrent / llm_arch_is_hybrid (src/llama-arch.cpp): state, not (only) a KV cache.
RECURRENT_ARCHITECTURES = ("mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7")
HYBRID_ARCHITECTURES = (
    "jamba",
    "falcon-h1",
    "plamo2",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "nemotron_h",
    "nemotron_h_moe",
    "qwen3next",
    "kimi-linear",
    "bailingmoe3",
    "kimi-k3",
    "glm5-next",
    "qwen35",
    "qwen35moe",
    "qwen4exp",
    "deepseek4",
    "minimax-01",
)
# Weight types the CPU_REPACK buffer re-lays on x86 (AVX2 and up) in this llama.cpp build
# (the load log lists "repack tensor ... with q4_K_8x8"; q8_0, q5_0, q6_K stay as mapped).
REPACK_TYPES = ("Q4_0", "Q4_K", "IQ4_NL")
TOKENIZER_BYTES_PER_TOKEN = 192
TOKENIZER_TEXT_COPIES = 3


def pad(n: int, to: int = 256) -> int:
    return ((n + to - 1) // to) * to


class CacheTypeError(ConfigError, ModelError):
    """A KV cache type the planner cannot size: unknown to it, or a block size the model's rows cannot
    take. Asked for (a planner setting, --cache-type) it is bad input; met in a run artifact (an imported
    llama-bench file with type_k q6_k) it makes that run unplannable, like missing GGUF facts: the pages
    show it as not predicted (they catch ModelError) and go on."""


def row_bytes(cache_type: str, n_elements: int) -> int:
    """Bytes of one cache row of ``n_elements`` values (ggml_row_size)."""
    try:
        block, size = KV_TYPES[cache_type]
    except (KeyError, TypeError):
        raise CacheTypeError(
            f"unknown KV cache type {cache_type!r} (known: {', '.join(KV_TYPES)})",
            field="cache_type",
        ) from None
    if n_elements % block:
        raise CacheTypeError(
            f"{cache_type} needs a row length divisible by {block}; this model's is {n_elements}",
            field="cache_type",
        )
    return n_elements // block * size


def swa_layer_flags(n_layer: int, period: int, dense_first: bool) -> list[bool]:
    """llama_hparams::set_swa_pattern: which layers use the sliding window."""
    if dense_first:
        return [period == 0 or (il % period != 0) for il in range(n_layer)]
    return [period == 0 or (il % period < period - 1) for il in range(n_layer)]


# What a GGUF may claim before the planner believes it: the planner's cost is linear in the layer
# count (per-layer KV heads and window flags), so a header claiming 10^9 layers ran out of memory.
# The bounds are far beyond any model llama.cpp loads (the largest have about 160 layers).
FACT_BOUNDS = {
    "block_count": 1 << 12,
    "embedding_length": 1 << 20,
    "feed_forward_length": 1 << 24,
    "head_count": 1 << 16,
    "head_count_kv": 1 << 16,
    "key_length": 1 << 16,
    "value_length": 1 << 16,
    "sliding_window": 1 << 31,
    "context_length": 1 << 31,
    "expert_count": 1 << 16,
    "expert_used_count": 1 << 16,
    "vocab_size": 1 << 24,
    "kv_lora_rank": 1 << 20,
    "rope_dimension_count": 1 << 16,
    "vocab_text_bytes": 1 << 40,
}
_GGUF_KEY = {
    "head_count": "attention.head_count",
    "head_count_kv": "attention.head_count_kv",
    "head_count_kv_layers": "attention.head_count_kv",
    "key_length": "attention.key_length",
    "value_length": "attention.value_length",
    "sliding_window": "attention.sliding_window",
    "sliding_window_pattern": "attention.sliding_window_pattern",
    "kv_lora_rank": "attention.kv_lora_rank",
    "rope_dimension_count": "rope.dimension_count",
}


def _is_int(v: Any) -> bool:
    return (
        isinstance(v, int)
        and not isinstance(v, bool)
        or type(v).__module__ == "numpy"
        and "int" in type(v).__name__
    )


def checked_facts(facts: dict[str, Any], arch: str, source: str) -> dict[str, Any]:
    """``facts`` with every count the planner uses checked: an integer (not a string, an array or
    a boolean), not negative, within FACT_BOUNDS; per-layer arrays no longer than the layer bound.
    Anything else is one ModelError naming the GGUF key (``invoke plan.memory`` on hostile metadata
    costs no more than on a real model)."""
    out = dict(facts)

    def bad(key: str, what: str) -> ModelError:
        return ModelError(
            f"the GGUF's {arch}.{_GGUF_KEY.get(key, key)} {what}: no model to plan",
            file=source,
            field=key,
        )

    for key, bound in FACT_BOUNDS.items():
        v = facts.get(key)
        if v is None:
            continue
        if not _is_int(v):
            raise bad(key, f"is {quote(v, 60)} (a {type(v).__name__}), not an integer")
        if v < 0:
            raise bad(key, f"is {int(v)}, a negative count")
        if v > bound:
            raise bad(key, f"is {int(v)}, more than the {bound} this planner accepts")
        out[key] = int(v)
    layers = facts.get("head_count_kv_layers")
    if layers is not None:
        if not isinstance(layers, list) or len(layers) > FACT_BOUNDS["block_count"]:
            raise bad(
                "head_count_kv_layers",
                "is not a per-layer list of at most "
                f"{FACT_BOUNDS['block_count']} counts",
            )
        for x in layers:
            if not _is_int(x) or not 0 <= x <= FACT_BOUNDS["head_count_kv"]:
                raise bad(
                    "head_count_kv_layers",
                    f"has the entry {quote(x, 40)}, "
                    + (
                        "a negative count"
                        if _is_int(x) and x < 0
                        else "not a count of heads"
                    ),
                )
    pattern = facts.get("sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) > FACT_BOUNDS["block_count"]:
        raise bad(
            "sliding_window_pattern",
            f"has {len(pattern)} entries, more than any layer count",
        )
    if (
        pattern is not None
        and not isinstance(pattern, (list, bool))
        and not (_is_int(pattern) and 0 <= pattern <= FACT_BOUNDS["block_count"])
    ):
        raise bad(
            "sliding_window_pattern",
            f"is {quote(pattern, 60)}, not a period or a per-layer list",
        )
    return out


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on, from a GGUF's facts."""

    name: str
    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: tuple[int, ...]  # per layer
    head_k: int
    head_v: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int | None
    n_swa: int
    swa_layers: tuple[bool, ...]
    swa_pattern_source: str
    expert_count: int
    expert_used_count: int
    tensor_bytes_by_type: dict[str, int]
    tensor_bytes_by_role: dict[str, dict[str, int]]
    vocab_text_bytes: int | None
    kv_lora_rank: int | None = None
    n_rot: int | None = None
    notes: tuple[str, ...] = ()

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_facts(cls, facts: dict[str, Any], name: str = "") -> ModelShape:
        arch = facts.get("architecture") or "?"
        if not isinstance(arch, str):
            raise ModelError(
                f"the GGUF's general.architecture is {quote(arch)}, not a name: no model to plan",
                file=name or "model",
                field="architecture",
            )
        facts = checked_facts(facts, arch, name or "model")
        notes: list[str] = []

        def need(key: str) -> int:
            v = facts.get(key)
            if v is None:
                raise ModelError(
                    f"the GGUF has no {arch}.{key.replace('_', '.')} (needed for the memory plan)",
                    file=name or "model",
                    field=key,
                )
            if int(v) <= 0:
                raise ModelError(
                    f"the GGUF's {arch}.{key.replace('_', '.')} is {v}: no model to plan",
                    file=name or "model",
                    field=key,
                )
            return int(v)

        n_layer, n_embd, n_head = (
            need("block_count"),
            need("embedding_length"),
            need("head_count"),
        )

        def per_layer(key: str, values: list) -> list:
            # llama.cpp refuses a per-layer array whose length is not the layer count ("wrong array length")
            if len(values) != n_layer:
                raise ModelError(
                    f"the GGUF's {arch}.{key.replace('_', '.')} has {len(values)} entries for "
                    f"{n_layer} layers: no model to plan",
                    file=name or "model",
                    field=key,
                )
            return values

        kv_list = facts.get("head_count_kv_layers")
        if kv_list:
            n_head_kv = tuple(
                int(x) for x in per_layer("head_count_kv_layers", kv_list)
            )
            if min(n_head_kv) < 0:
                raise ModelError(
                    f"the GGUF's {arch}.attention.head_count_kv has a negative entry: no model to plan",
                    file=name or "model",
                    field="head_count_kv_layers",
                )
        else:
            n_head_kv = (int(facts.get("head_count_kv") or n_head),) * n_layer
        head_k = int(facts.get("key_length") or n_embd // n_head)
        head_v = int(facts.get("value_length") or n_embd // n_head)
        n_swa = int(facts.get("sliding_window") or 0)
        pattern = facts.get("sliding_window_pattern")
        if n_swa <= 0:
            swa, source = (False,) * n_layer, "no sliding window"
        elif isinstance(pattern, list) and pattern:
            swa, source = (
                tuple(bool(x) for x in per_layer("sliding_window_pattern", pattern)),
                "the GGUF's per-layer pattern",
            )
        elif isinstance(pattern, int):
            swa, source = (
                tuple(swa_layer_flags(n_layer, pattern, False)),
                f"the GGUF's period {pattern}",
            )
        elif arch in SWA_PATTERNS:
            period, dense_first = SWA_PATTERNS[arch]
            swa = tuple(swa_layer_flags(n_layer, period, dense_first))
            source = f"llama.cpp's {arch} default: period {period}" + (
                ", full layer first"
                if dense_first
                else ", every last layer of a period is full"
            )
        else:
            swa, source = (False,) * n_layer, "unknown pattern"
            notes.append(
                f"{arch} declares a sliding window of {n_swa} but no layer pattern this planner knows: "
                "every layer is sized as full attention (an upper bound)."
            )
        if arch in RECURRENT_ARCHITECTURES or arch in HYBRID_ARCHITECTURES:
            notes.append(
                f"{arch} is recurrent or hybrid: its recurrent state is not modelled; the KV figure "
                "covers every layer as attention (an upper bound)."
            )
        by_role = facts.get("tensor_bytes_by_role") or {}
        if not by_role:
            notes.append(
                "this artifact predates per-role tensor bytes: embedding and expert tensors are not told apart."
            )
            by_role = {"other": dict(facts.get("tensor_bytes_by_type") or {})}
        ff = facts.get("feed_forward_length") or 4 * n_embd
        return cls(
            name=name or facts.get("name") or arch,
            architecture=arch,
            n_layer=n_layer,
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_k=head_k,
            head_v=head_v,
            n_ff=int(ff),
            n_vocab=int(facts.get("vocab_size") or 0),
            n_ctx_train=facts.get("context_length"),
            n_swa=n_swa,
            swa_layers=swa,
            swa_pattern_source=source,
            expert_count=int(facts.get("expert_count") or 0),
            expert_used_count=int(facts.get("expert_used_count") or 0),
            tensor_bytes_by_type=dict(facts.get("tensor_bytes_by_type") or {}),
            tensor_bytes_by_role={k: dict(v) for k, v in by_role.items()},
            vocab_text_bytes=facts.get("vocab_text_bytes"),
            kv_lora_rank=facts.get("kv_lora_rank"),
            n_rot=facts.get("rope_dimension_count"),
            notes=tuple(notes),
        )

    @classmethod
    def from_gguf(cls, path: str | Path) -> ModelShape:
        from core import safefile
        from core.gguf import gguf_facts

        p = Path(path).expanduser()
        if not p.exists() and not p.is_symlink():
            raise ModelError("no such GGUF file", file=str(path))
        safefile.check_regular(
            p, what="GGUF file", error=ModelError
        )  # a FIFO or a device: refused unopened
        return cls.from_facts(gguf_facts(p), name=p.name)

    # -- weights ----------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> int:
        return sum(self.tensor_bytes_by_type.values())

    def role_bytes(self, role: str) -> int:
        return sum(self.tensor_bytes_by_role.get(role, {}).values())

    @property
    def tied_output(self) -> bool:
        """No output matrix: the token embedding is read in full as the output projection."""
        return self.role_bytes("output") == 0 and self.role_bytes("token_embd") > 0

    @property
    def is_moe(self) -> bool:
        return self.expert_count > 0

    @property
    def recurrent(self) -> bool:
        return (
            self.architecture in RECURRENT_ARCHITECTURES
            or self.architecture in HYBRID_ARCHITECTURES
        )

    def repack_bytes(self) -> int:
        """Bytes llama.cpp copies into its CPU_REPACK buffer: weights of a repackable type, except
        the token embedding (row lookups), which is repacked only as the duplicated output matrix
        of a tied model."""
        total = 0
        for role, types in self.tensor_bytes_by_role.items():
            if role == "token_embd" and not self.tied_output:
                continue
            total += sum(b for t, b in types.items() if t in REPACK_TYPES)
        return total

    def weights_read_per_token(self, expert_used: int | None = None) -> int:
        """Weight bytes one decode step reads: every tensor once, the token embedding only as the
        output matrix when tied (one row otherwise), ``expert_used / expert_count`` of the experts."""
        experts: float = self.role_bytes("experts")
        if experts and self.expert_count:
            used = expert_used if expert_used is not None else self.expert_used_count
            experts = experts * used / self.expert_count
        embd = self.role_bytes("token_embd")
        embd_read = (
            embd if self.tied_output else (embd / self.n_vocab if self.n_vocab else 0)
        )
        return int(
            self.role_bytes("other") + self.role_bytes("output") + experts + embd_read
        )

    # -- KV cache ---------------------------------------------------------------------------
    def kv_row_bytes(self, il: int, type_k: str, type_v: str) -> int:
        """Bytes of K plus V for one cell of layer ``il``."""
        if self.kv_lora_rank:
            return row_bytes(type_k, int(self.kv_lora_rank) + int(self.n_rot or 0))
        n_kv = self.n_head_kv[il]
        if n_kv == 0:
            return 0
        return row_bytes(type_k, self.head_k * n_kv) + row_bytes(
            type_v, self.head_v * n_kv
        )


@dataclass(frozen=True)
class KvPlan:
    n_ctx: int  # requested
    cells: int  # cells of a full-attention layer (padded)
    swa_cells: int  # cells of a sliding-window layer
    type_k: str
    type_v: str
    swa_full: bool
    full_layers: int
    swa_layers: int
    full_bytes: int
    swa_bytes: int

    @property
    def bytes(self) -> int:
        return self.full_bytes + self.swa_bytes

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bytes": self.bytes}


def kv_cache(
    shape: ModelShape,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    swa_full: bool = False,
    n_ubatch: int = 512,
    n_seq: int = 1,
) -> KvPlan:
    """The KV cache llama.cpp allocates (llama_kv_cache / llama_kv_cache_iswa), for one sequence
    stream per ``n_seq`` (not unified)."""
    n_ctx_padded = pad(max(n_ctx, 1))
    cells = pad(max(n_ctx_padded // n_seq, 1)) if n_seq > 1 else n_ctx_padded
    swa_cells = cells if swa_full else pad(min(cells, shape.n_swa + n_ubatch))
    full_b = swa_b = 0
    n_full = n_swa = 0
    for il in range(shape.n_layer):
        row = shape.kv_row_bytes(il, type_k, type_v)
        if shape.swa_layers[il]:
            swa_b += row * swa_cells * n_seq
            n_swa += 1
        else:
            full_b += row * cells * n_seq
            n_full += 1
    return KvPlan(
        n_ctx,
        cells,
        swa_cells if n_swa else 0,
        type_k,
        type_v,
        swa_full,
        n_full,
        n_swa,
        full_b,
        swa_b,
    )


def kv_read_bytes(
    shape: ModelShape,
    depth: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    flash_attn: bool = True,
    cache: KvPlan | None = None,
    rows: tuple[int, int] | None = None,
) -> int:
    """KV bytes one decode step reads with ``depth`` tokens already in the context.

    With flash attention, llama.cpp's CPU kernel skips masked cells, so a sliding-window
    layer reads at most ``n_swa`` cells; without it, every layer multiplies over the whole
    view of used cells, padded to 256 (and capped by the layer's cache size)."""
    full_row, swa_row = rows if rows is not None else kv_rows(shape, type_k, type_v)
    attended = depth + 1
    if flash_attn:
        return full_row * attended + swa_row * min(attended, shape.n_swa)
    view = max(256, pad(attended))
    if cache is None:
        return (full_row + swa_row) * view
    return full_row * min(view, cache.cells) + swa_row * min(view, cache.swa_cells)


def _sum_x(lo: int, hi: int) -> int:
    """lo + (lo+1) + ... + hi (0 when hi < lo)."""
    return (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0


def _sum_min_x(lo: int, hi: int, cap: int) -> int:
    """The sum of min(x, cap) for x in lo..hi."""
    if hi < lo:
        return 0
    below = _sum_x(lo, min(hi, cap))
    return below + cap * max(0, hi - max(lo, cap + 1) + 1)


def _sum_pad(n: int, to: int = 256) -> int:
    """pad(1) + pad(2) + ... + pad(n), ``pad`` rounding up to ``to`` (0 for n <= 0)."""
    if n <= 0:
        return 0
    q, r = divmod(n, to)
    return to * to * q * (q + 1) // 2 + r * to * (q + 1)


def _sum_min_pad(lo: int, hi: int, cap: int | None, to: int = 256) -> int:
    """The sum of min(pad(x), cap) for x in lo..hi (x >= 1, so pad(x) >= ``to``); no cap: of pad(x)."""
    if hi < lo:
        return 0
    if cap is None:
        return _sum_pad(hi, to) - _sum_pad(lo - 1, to)
    if cap <= to:
        return cap * (hi - lo + 1)
    first = to * (-(-cap // to) - 1) + 1  # the first x whose pad(x) reaches the cap
    padded = (
        _sum_pad(min(hi, first - 1), to) - _sum_pad(lo - 1, to)
        if lo <= first - 1
        else 0
    )
    return padded + cap * max(0, hi - max(lo, first) + 1)


def kv_read_bytes_sum(
    shape: ModelShape,
    start: int,
    stop: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    flash_attn: bool = True,
    cache: KvPlan | None = None,
    rows: tuple[int, int] | None = None,
) -> int:
    """``sum(kv_read_bytes(shape, d, ...) for d in range(start, stop))`` in closed form: its cost does
    not grow with the number of tokens (a reported 10^9 decoded tokens costs what 10 do)."""
    start = max(start, 0)
    if stop <= start:
        return 0
    full_row, swa_row = rows if rows is not None else kv_rows(shape, type_k, type_v)
    lo, hi = (
        start + 1,
        stop,
    )  # cells attended: depth + 1 (at least 1, so a view pads to at least 256)
    if flash_attn:
        return full_row * _sum_x(lo, hi) + swa_row * _sum_min_x(lo, hi, shape.n_swa)
    if cache is None:
        return (full_row + swa_row) * _sum_min_pad(lo, hi, None)
    return full_row * _sum_min_pad(lo, hi, cache.cells) + swa_row * _sum_min_pad(
        lo, hi, cache.swa_cells
    )


def kv_rows(shape: ModelShape, type_k: str, type_v: str) -> tuple[int, int]:
    """Bytes of one K+V cell summed over the full-attention layers and over the sliding-window layers
    (a decode step reads the same number of cells in every layer of a kind); pass it to
    ``kv_read_bytes(rows=...)`` when summing over many depths."""
    full = swa = 0
    for il in range(shape.n_layer):
        row = shape.kv_row_bytes(il, type_k, type_v)
        if shape.swa_layers[il]:
            swa += row
        else:
            full += row
    return full, swa


# -- compute buffer and other runtime memory -------------------------------------------------
def compute_buffer(
    shape: ModelShape,
    n_tokens: int,
    n_kv: int,
    *,
    n_outputs: int | None = None,
    flash_attn: bool = True,
    n_kv_swa: int | None = None,
) -> dict[str, int]:
    """Estimated live set of llama.cpp's graph for one micro-batch (see the module docstring):
    the largest of the logits phase, the attention phase (with the f16 attention masks, alive
    until the last attention layer) and the feed-forward phase (masks alive too)."""
    n_out = n_tokens if n_outputs is None else n_outputs
    n_ff = shape.n_ff
    if shape.is_moe and shape.expert_used_count:
        n_ff = max(n_ff, shape.n_ff * shape.expert_used_count)
    masks = 2 * n_tokens * n_kv + (
        2 * n_tokens * (n_kv_swa or n_kv) if any(shape.swa_layers) else 0
    )
    qkv = 4 * n_tokens * (2 * shape.n_head * shape.head_k + shape.n_embd)
    parts = {
        "logits": 4 * n_out * (shape.n_vocab + shape.n_embd),
        "attention": masks
        + qkv
        + (0 if flash_attn else 4 * n_tokens * n_kv * shape.n_head),
        "feed_forward": masks + 4 * n_tokens * (3 * n_ff + 3 * shape.n_embd),
    }
    return {**parts, "total": max(parts.values())}


def tokenizer_bytes(shape: ModelShape) -> int:
    text = (
        shape.vocab_text_bytes
        if shape.vocab_text_bytes is not None
        else 8 * shape.n_vocab
    )
    return TOKENIZER_BYTES_PER_TOKEN * shape.n_vocab + TOKENIZER_TEXT_COPIES * int(text)


def output_buffer(shape: ModelShape, n_seq: int = 1) -> int:
    """llama_context's output buffer: logits of one output per sequence (float)."""
    return 4 * shape.n_vocab * max(1, n_seq)


# -- whole plans -------------------------------------------------------------------------------
@dataclass
class Plan:
    """One predicted footprint: named components in bytes."""

    target: str  # "cpu-rss" or "gpu-vram"
    components: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.components.values())


def cpu_plan(
    shape: ModelShape,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    swa_full: bool = False,
    n_ubatch: int = 512,
    max_batch: int | None = None,
    depth: int | None = None,
    flash_attn: bool = True,
    runtime_baseline: int | None = None,
    repack: bool = True,
    n_outputs: int = 1,
    logits_rows: int = 0,
    draft: ModelShape | None = None,
) -> Plan:
    """Resident memory of a CPU run: the weights (mapped and prefetched), CPU_REPACK copies, the
    KV cache (cleared at allocation, so resident), the output buffer, the tokenizer tables, the
    compute pages the run's largest batch touches, and the process before the model (measured).

    With logits for every token (``logits_all``, which speculative decoding needs), llama.cpp's
    output buffer holds ``n_outputs`` rows of logits and llama-cpp-python keeps one row per
    evaluated token (``logits_rows``) in its scores array."""
    kv = kv_cache(shape, n_ctx, type_k, type_v, swa_full=swa_full, n_ubatch=n_ubatch)
    batch = min(max_batch if max_batch is not None else n_ubatch, n_ubatch)
    n_kv = min(kv.cells, max(256, pad(depth if depth is not None else n_ctx)))
    # the graph's logits tensor holds one row per output: one, or every token of the batch with logits_all
    comp = compute_buffer(
        shape,
        batch,
        n_kv,
        n_outputs=max(1, min(n_outputs, batch)),
        flash_attn=flash_attn,
        n_kv_swa=min(n_kv, kv.swa_cells or n_kv),
    )
    components = {
        "weights (mapped)": shape.weight_bytes,
        "repacked weights": shape.repack_bytes() if repack else 0,
        "KV cache": kv.bytes,
        "output buffer": output_buffer(shape) * max(1, n_outputs),
        "tokenizer tables (est.)": tokenizer_bytes(shape),
        "compute, touched (est.)": comp["total"],
    }
    if logits_rows:
        components["logits kept per token (llama-cpp-python)"] = (
            4 * shape.n_vocab * logits_rows
        )
    notes = list(shape.notes)
    if (
        draft is not None
    ):  # a second model loaded beside the target, same context settings, logits of the last token only
        sub = cpu_plan(
            draft,
            n_ctx,
            type_k,
            type_v,
            swa_full=swa_full,
            n_ubatch=n_ubatch,
            max_batch=max_batch,
            depth=depth,
            flash_attn=flash_attn,
            runtime_baseline=None,
            repack=repack,
        )
        for k, v in sub.components.items():
            components[f"draft model: {k}"] = v
        notes += [f"draft model: {n}" for n in draft.notes]
    if runtime_baseline is not None:
        components["process before load (measured)"] = int(runtime_baseline)
    else:
        notes.append(
            "no measured baseline of the process before the model load: the interpreter and "
            "libraries are not included."
        )
    return Plan("cpu-rss", components, notes)


def gpu_plan(
    shape: ModelShape,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    swa_full: bool = False,
    n_ubatch: int = 512,
    flash_attn: bool = True,
    runtime_overhead: int = 0,
    n_seq: int = 1,
) -> Plan:
    """VRAM with every layer offloaded: the weights except the token embedding (llama.cpp keeps
    its row lookups on the CPU; a tied embedding is duplicated as the output matrix), the KV
    cache, the full reserved compute buffer, and the runtime overhead assumed in the planner's
    settings (CUDA context, cuBLAS workspace). ``n_seq`` parallel sequences share ``n_ctx``
    (llama-server ``-np``: one cache stream each)."""
    kv = kv_cache(
        shape, n_ctx, type_k, type_v, swa_full=swa_full, n_ubatch=n_ubatch, n_seq=n_seq
    )
    weights = (
        shape.weight_bytes
        - shape.role_bytes("token_embd")
        + (shape.role_bytes("token_embd") if shape.tied_output else 0)
    )
    comp = compute_buffer(
        shape,
        n_ubatch,
        kv.cells,
        flash_attn=flash_attn,
        n_kv_swa=kv.swa_cells or kv.cells,
    )
    components = {
        "weights": weights,
        "KV cache": kv.bytes,
        "compute buffer (est.)": comp["total"],
        "runtime overhead (assumed)": int(runtime_overhead),
    }
    return Plan("gpu-vram", components, list(shape.notes))


# -- a model over several GPUs (issue 29) -------------------------------------------------------
SPLIT_CARD_COUNTS = (1, 2, 4, 8)


def layer_devices(n_layer: int, shares: list[float]) -> list[int]:
    """The GPU of each of the ``n_layer`` repeating layers and, last, of the output layer, by
    llama.cpp's rule (``llama_model::load_tensors``, every layer offloaded): layer ``il`` goes to
    the first GPU whose cumulative share exceeds ``il / (n_layer + 1)``."""
    total = float(sum(shares))
    cum, acc = [], 0.0
    for x in shares:
        acc += x / total
        cum.append(acc)
    out = []
    for il in range(n_layer + 1):
        f = il / (n_layer + 1)
        out.append(next((i for i, c in enumerate(cum) if f < c), len(cum) - 1))
    return out


def split_gpu_plans(
    shape: ModelShape,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    *,
    n_gpus: int,
    split_mode: str = "layer",
    tensor_split: list[float] | None = None,
    main_gpu: int = 0,
    swa_full: bool = False,
    n_ubatch: int = 512,
    flash_attn: bool = True,
    runtime_overhead: int = 0,
    comm_overhead: int = 0,
) -> list[Plan]:
    """One plan per visible GPU for a model with every layer offloaded.

    * ``none``: the whole one-GPU plan on ``main_gpu``;
    * ``layer``: whole layers per GPU by :func:`layer_devices` (shares: ``tensor_split``, else
      equal, which is llama.cpp's free-memory rule on alike idle cards), each layer's weights
      and KV cache where the layer is, the output matrix on the output layer's GPU; the full
      compute buffer (with the logits) there, the attention or feed-forward phase elsewhere;
    * ``row``: every weight matrix split by rows in proportion to the shares, the KV cache and
      compute buffer on ``main_gpu``;
    * ``tensor``: tensor parallelism: every layer's weights and its KV cache (by attention heads)
      in proportion to the shares, the compute buffer on every GPU (each computes its slice of
      every layer and holds the all-reduced activations), plus ``comm_overhead``: what the
      all-reduce's communicators (NCCL) hold on each GPU, which no model fact tells.

    Every visible GPU also holds the runtime overhead (llama.cpp's CUDA backend opens a context
    on each: about 0.5 GiB seen on an idle H200 of a 2-GPU host)."""
    one = gpu_plan(
        shape,
        n_ctx,
        type_k,
        type_v,
        swa_full=swa_full,
        n_ubatch=n_ubatch,
        flash_attn=flash_attn,
    )
    overhead = {"runtime overhead (assumed)": int(runtime_overhead)}
    if n_gpus <= 1 or split_mode == "none":
        return [
            Plan(
                "gpu-vram",
                {**one.components, **overhead}
                if i == main_gpu
                else {"weights": 0, **overhead},
                list(one.notes),
            )
            for i in range(max(n_gpus, 1))
        ]
    shares = list(tensor_split or [1.0] * n_gpus)
    weights, kv = one.components["weights"], one.components["KV cache"]
    kv_plan = kv_cache(
        shape, n_ctx, type_k, type_v, swa_full=swa_full, n_ubatch=n_ubatch
    )
    comp = compute_buffer(
        shape,
        n_ubatch,
        kv_plan.cells,
        flash_attn=flash_attn,
        n_kv_swa=kv_plan.swa_cells or kv_plan.cells,
    )
    plans = []
    if split_mode == "row":
        total = float(sum(shares))
        for i in range(n_gpus):
            c = {"weights (rows)": int(weights * shares[i] / total)}
            if i == main_gpu:
                c.update({"KV cache": kv, "compute buffer (est.)": comp["total"]})
            plans.append(Plan("gpu-vram", {**c, **overhead}, list(one.notes)))
        return plans
    if split_mode == "tensor":
        total = float(sum(shares))
        for i in range(n_gpus):
            f = shares[i] / total
            c = {
                "weights (tensor slice)": int(weights * f),
                "KV cache": int(kv * f),
                "compute buffer (est.)": comp["total"] if f > 0 else 0,
            }
            if comm_overhead:
                c["collective buffers (NCCL, from other runs)"] = int(comm_overhead)
            plans.append(Plan("gpu-vram", {**c, **overhead}, list(one.notes)))
        return plans
    n_layer = shape.n_layer
    devs = layer_devices(n_layer, shares)
    output = (
        shape.role_bytes("output")
        if not shape.tied_output
        else shape.role_bytes("token_embd")
    )
    per_layer = (weights - output) / n_layer
    last = devs[-1]
    for i in range(n_gpus):
        layers = sum(1 for d in devs[:-1] if d == i)
        c = {
            "weights": int(per_layer * layers + (output if i == last else 0)),
            "KV cache": int(kv * layers / n_layer),
            "compute buffer (est.)": comp["total"]
            if i == last
            else max(comp["attention"], comp["feed_forward"]),
        }
        plans.append(
            Plan(
                "gpu-vram",
                {**c, **overhead},
                [*one.notes, f"layers on this GPU: {layers} of {n_layer}"],
            )
        )
    return plans


def cards_needed(
    shape: ModelShape,
    n_ctx: int,
    cache_type: str,
    card_bytes: int,
    settings: PlannerSettings,
) -> int | None:
    """The fewest alike cards (of :data:`SPLIT_CARD_COUNTS`) a layer split fits on, each card
    within the headroom; None when even the most does not fit."""
    keep = 1.0 - settings.headroom
    for n in SPLIT_CARD_COUNTS:
        plans = split_gpu_plans(
            shape,
            n_ctx,
            cache_type,
            cache_type,
            n_gpus=n,
            split_mode="layer",
            swa_full=settings.swa_full,
            n_ubatch=settings.n_ubatch,
            flash_attn=settings.flash_attn,
            runtime_overhead=int(settings.gpu_runtime_overhead_mib * MiB),
        )
        if max(p.total for p in plans) <= keep * card_bytes:
            return n
    return None


# -- LoRA ------------------------------------------------------------------------------------
LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")


def lora_module_dims(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each projection an adapter can target, from the shape."""
    q_out = shape.n_head * shape.head_k
    kv_heads = max(shape.n_head_kv) if shape.n_head_kv else shape.n_head
    return {
        "q": (shape.n_embd, q_out),
        "k": (shape.n_embd, kv_heads * shape.head_k),
        "v": (shape.n_embd, kv_heads * shape.head_v),
        "o": (shape.n_head * shape.head_v, shape.n_embd),
        "gate": (shape.n_embd, shape.n_ff),
        "up": (shape.n_embd, shape.n_ff),
        "down": (shape.n_ff, shape.n_embd),
    }


def lora_bytes(
    shape: ModelShape, rank: int, modules: tuple[str, ...], bytes_per_value: float = 2.0
) -> int:
    """The seed's formula, per module: r × (in + out) × layers × bytes (A is r×in, B is out×r)."""
    dims = lora_module_dims(shape)
    unknown = [m for m in modules if m not in dims]
    if unknown:
        raise ConfigError(
            f"unknown LoRA module {unknown[0]!r} (known: {', '.join(LORA_MODULES)})",
            field="modules",
        )
    return int(
        sum(rank * (dims[m][0] + dims[m][1]) for m in modules)
        * shape.n_layer
        * bytes_per_value
    )


def adapter_bytes(shape: ModelShape, adapters: list[dict[str, Any]]) -> int:
    """Predicted bytes of attached adapters (each: rank, targets, tensor types as an artifact
    records them) by :func:`lora_bytes`, at each adapter's storage size (F16: 2, F32: 4 bytes)."""
    total = 0
    for a in adapters:
        types = a.get("tensor_types") or ["F16"]
        per_value = 4.0 if types == ["F32"] else 2.0
        mods = tuple(m for m in (a.get("targets") or []) if m in LORA_MODULES)
        if a.get("rank") and mods:
            total += lora_bytes(shape, int(a["rank"]), mods, per_value)
    return total


# -- planner settings ---------------------------------------------------------------------------
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
GPU_UNITS_NOTE = (
    "GPU memory is checked in the unit each card states (data/memory_planner.yaml, gpu_cards): a card sold as "
    '"24 GB" carries 24 GiB of memory chips (GDDR and HBM come in binary densities: an RTX 4090 has '
    "24,576 MiB), so those cards are given in GiB (2^30 bytes), the unit of every total on this page; an "
    "H100 80GB is given as the bytes its driver reports usable (85,520,809,984 on the lent H100: 79.6 GiB)."
)


def parse_size(value: Any) -> int:
    """A byte count from an integer or a string with its unit: '24 GiB' (2^30), '24 GB' (10^9)."""
    import re

    if isinstance(value, bool):
        raise ValueError("expected a size such as '24 GiB'")
    if isinstance(value, (int, float)):
        return int(value)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?i?B)\s*", str(value), re.I)
    if not m:
        raise ValueError(f"{value!r} is not a size with a unit (e.g. 24 GiB, 24 GB)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


class GpuCard(BaseModel):
    """One GPU memory size to check, in the unit its spec states."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        ...,
        min_length=1,
        description="What the column is called (e.g. '24 GB card (RTX 4090)').",
    )
    memory: int | str = Field(
        ...,
        description="Its memory with the unit: '24 GiB' (2^30 bytes), '40 GB' (10^9 bytes), or bytes.",
    )

    @property
    def bytes(self) -> int:
        return parse_size(self.memory)

    @property
    def unit_text(self) -> str:
        return self.memory if isinstance(self.memory, str) else f"{self.memory:,} bytes"

    @field_validator("memory")
    @classmethod
    def _size(cls, v: Any) -> Any:
        parse_size(v)
        return v


class SweetSpotSettings(BaseModel):
    """One card's sweet spot: the largest context, the most parallel sequences and the most adapters
    that fit beside the base model (each at the others' minimum), by the same VRAM plan."""

    model_config = ConfigDict(extra="forbid")
    context: int = Field(
        4096,
        ge=1,
        description="Tokens per sequence for the batch and adapter counts (each sequence's own context).",
    )
    cache_type: str = Field("f16", description="KV cache type (type_k = type_v).")
    adapter_rank: int = Field(
        16, ge=1, description="Rank of each planned LoRA adapter."
    )
    adapter_targets: list[str] = Field(
        default_factory=lambda: ["q", "k", "v", "o", "gate", "up", "down"],
        description="Modules each planned adapter targets (f16 weights).",
    )
    max_batch: int = Field(
        64,
        ge=1,
        le=4096,
        description="Parallel sequences tried at most (llama-server -np).",
    )
    max_adapters: int = Field(64, ge=0, le=4096, description="Adapters tried at most.")


class PlannerSettings(BaseModel):
    """data/memory_planner.yaml: what the fits table explores (inputs, not results)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    contexts: list[int] = Field(
        ..., min_length=1, description="Context lengths (tokens) to plan for."
    )
    cache_types: list[str] = Field(
        ..., min_length=1, description="KV cache types (type_k = type_v)."
    )
    gpu_cards: list[GpuCard] = Field(
        default_factory=list,
        description="GPU cards to check, each with its memory in the unit its spec states.",
    )
    gpu_sizes_gb: list[float] = Field(
        default_factory=list,
        description="GPU memory sizes in GB (10^9 bytes) to check, beside gpu_cards.",
    )
    headroom: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Share of a memory kept free: fits when total <= (1 - headroom) x size.",
    )
    n_ubatch: int = Field(
        512,
        ge=1,
        description="Micro-batch assumed for the compute buffer (llama.cpp -ub).",
    )
    swa_full: bool = Field(
        False,
        description="Full-size caches for sliding-window layers (llama-bench/llama-server: false).",
    )
    flash_attn: bool = Field(
        True,
        description="Flash attention assumed on (llama.cpp's auto enables it on CPU and recent GPUs).",
    )
    gpu_runtime_overhead_mib: float = Field(
        0,
        ge=0,
        description="Assumed per-process GPU overhead (CUDA context, cuBLAS workspace) in MiB, shown as an assumption.",
    )
    gpu_runtime_overhead_source: str = Field(
        "", description="Where the overhead assumption comes from."
    )
    lora_ranks: list[int] = Field(
        default_factory=lambda: [8, 16, 32],
        description="Adapter ranks for the LoRA table.",
    )
    lora_targets: dict[str, list[str]] = Field(
        default_factory=dict, description="Named module sets for the LoRA table."
    )
    sweet_spot: SweetSpotSettings = Field(
        default_factory=lambda: SweetSpotSettings(),
        description="What the per-card sweet-spot table plans for (seed 002's Domestic GPU Sweet Spots).",
    )

    @model_validator(mode="after")
    def _some_gpu(self) -> PlannerSettings:
        if not self.gpu_cards and not self.gpu_sizes_gb:
            raise ValueError("gpu_cards: give at least one GPU card (or gpu_sizes_gb)")
        return self

    @property
    def cards(self) -> list[GpuCard]:
        """Every GPU size checked: the cards, then each gpu_sizes_gb entry as a card in GB (10^9 bytes)."""
        return list(self.gpu_cards) + [
            GpuCard(name=f"{g:g} GB", memory=f"{g:g} GB") for g in self.gpu_sizes_gb
        ]


def planner_settings_path() -> Path:
    return data_dir() / "memory_planner.yaml"


def load_planner_settings(path: Path | None = None) -> PlannerSettings:
    from pydantic import ValidationError

    path = path or planner_settings_path()
    raw = load_yaml(path)
    try:
        s = PlannerSettings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None
    for i, t in enumerate(s.cache_types):
        if t not in KV_TYPES:
            raise ConfigError(
                f"unknown KV cache type {t!r} (known: {', '.join(KV_TYPES)})",
                file=relpath(path),
                field=f"cache_types.{i}",
            )
    for name, mods in s.lora_targets.items():
        bad = [m for m in mods if m not in LORA_MODULES]
        if bad:
            raise ConfigError(
                f"unknown module {bad[0]!r} (known: {', '.join(LORA_MODULES)})",
                file=relpath(path),
                field=f"lora_targets.{name}",
            )
    sp = s.sweet_spot
    if sp.cache_type not in KV_TYPES:
        raise ConfigError(
            f"unknown KV cache type {sp.cache_type!r} (known: {', '.join(KV_TYPES)})",
            file=relpath(path),
            field="sweet_spot.cache_type",
        )
    bad = [m for m in sp.adapter_targets if m not in LORA_MODULES]
    if bad or not sp.adapter_targets:
        raise ConfigError(
            f"unknown module {bad[0]!r} (known: {', '.join(LORA_MODULES)})"
            if bad
            else "no module: give at least one",
            file=relpath(path),
            field="sweet_spot.adapter_targets",
        )
    return s


# -- predicted against measured -------------------------------------------------------------------
def facts_by_sha(runs: list[RunRecord]) -> dict[str, dict[str, Any]]:
    """GGUF facts of every model a run artifact describes, by file sha256 (a draft model's facts
    come from a run of that model: the draft's own artifact fields name only its file)."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        sha = r.model_sha256
        if sha and sha not in out and r.architecture:
            out[sha] = r.gguf
    return out


@per_run
def _prompt_tokens(rec: RunRecord) -> tuple[tuple[int, int], ...]:
    """(prompt tokens, output tokens) of each timed request of a run that sends requests (chat,
    generate; a count not reported is 0); none for the others. Once per run: kept with it."""
    return tuple(
        (r.prompt_tokens or 0, r.output_tokens or 0)
        for r in getattr(rec.samples, "requests", None) or []
    )


def _rss_measured(rec: RunRecord) -> bool:
    """A finished CPU run whose measured process held the model, with its peak RSS."""
    return (
        rec.ok
        and rec.in_process
        and (rec.reported.get("n_gpu_layers") or 0) <= 0
        and bool(rec.resources.peak_rss_bytes)
    )


def _vram_measured(rec: RunRecord) -> bool:
    """A finished run with a measured peak VRAM."""
    return rec.ok and bool(rec.resources.peak_vram_bytes)


def other_backends(runs: list[RunRecord], gpu: bool = False) -> dict[str, int]:
    """Runs the planner does not score, by backend: measured (peak RSS of a CPU run in process, or
    with ``gpu`` a peak VRAM) but not by llama.cpp (transformers, an endpoint that is not llama.cpp-based).
    The planner predicts llama.cpp's buffers; another runtime's memory is no test of it."""
    measured = _vram_measured if gpu else _rss_measured
    out: dict[str, int] = {}
    for r in runs:
        if measured(r) and not r.llama_cpp_based:
            out[r.backend_name] = out.get(r.backend_name, 0) + 1
    return dict(sorted(out.items()))


def run_prediction(
    doc: RunRecord, known_facts: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """Predicted peak RSS of a CPU run artifact beside its measured peak. None when the run
    used a GPU or has no peak RSS, for runs whose model was not loaded in the measured
    process (over HTTP the run's process is the client; the server's memory is not its own:
    the backend declares it, ``build.in_process``), and for runs of a backend other than llama.cpp
    (the plan is llama.cpp's memory; :func:`other_backends` counts them).

    Everything the configuration loads is in the plan: with a draft model, the draft's weights,
    KV cache, buffers and tokenizer tables too (its GGUF facts from ``known_facts``, by sha256;
    the prediction is marked incomplete when they are unknown); with logits for every token
    (speculative decoding), the output and compute buffers' logits rows and llama-cpp-python's
    per-token scores."""
    rec = doc
    if (
        not _rss_measured(rec) or not rec.llama_cpp_based
    ):  # the plan is llama.cpp's memory: other backends' apart
        return None
    eff = rec.reported
    req = rec.requested
    measured = rec.resources.peak_rss_bytes
    if not measured:  # (_rss_measured has it)
        return None
    try:
        shape = ModelShape.from_facts(rec.gguf, rec.model_name)
        kv_rows(
            shape,
            eff.get("type_k") or req.get("type_k") or "f16",
            eff.get("type_v") or req.get("type_v") or "f16",
        )
    except (
        ModelError
    ):  # facts missing, or a cache type the planner cannot size: not predicted
        return None
    n_ctx = int(eff.get("n_ctx") or req.get("n_ctx") or 4096)
    n_ubatch = int(eff.get("n_ubatch") or req.get("n_ubatch") or 512)
    type_k = eff.get("type_k") or req.get("type_k") or "f16"
    type_v = eff.get("type_v") or req.get("type_v") or "f16"
    swa_full = bool(eff.get("swa_full", req.get("swa_full", False)))
    flash = flash_attention_on(req, eff)
    test = rec.spec
    reqs = _prompt_tokens(rec)
    if isinstance(test, RateTest):
        batch = test.n_prompt or 1
        if test.n_depth:
            batch = max(batch, min(test.n_depth, n_ubatch))
    else:
        prompts = [p for p, _ in reqs]
        batch = max(prompts or [1]) or 1
    baseline = rec.resources.baseline_rss_bytes
    n_outputs, logits_rows = 1, 0
    if eff.get("logits_all"):  # speculative decoding: logits of every evaluated token
        draft = int(req.get("draft_max") or 0) + 1
        n_outputs = max(batch, draft)
        logits_rows = max([p + o for p, o in reqs] or [batch]) + draft
    draft_shape, missing = None, []
    if (
        eff.get("speculative") == "draft_model"
        or req.get("speculative") == "draft_model"
    ):
        dfacts = (known_facts or {}).get(eff.get("draft_model_sha256") or "")
        if dfacts is None:
            missing.append(
                f"the draft model {eff.get('draft_model') or req.get('draft_model')!r}: no "
                "artifact gives its GGUF facts"
            )
        else:
            try:
                draft_shape = ModelShape.from_facts(
                    dfacts, str(eff.get("draft_model") or "draft")
                )
            except ModelError as exc:
                missing.append(f"the draft model: {exc.detail}")
    plan = cpu_plan(
        shape,
        n_ctx,
        type_k,
        type_v,
        swa_full=swa_full,
        n_ubatch=n_ubatch,
        max_batch=batch,
        depth=n_ctx,
        flash_attn=flash,
        runtime_baseline=baseline,
        # extra buffer types off (extra_bufts: false): no CPU_REPACK copies
        repack=repack_applies(rec.host)
        and eff.get("use_extra_bufts", eff.get("extra_bufts", req.get("extra_bufts")))
        is not False,
        n_outputs=n_outputs,
        logits_rows=logits_rows,
        draft=draft_shape,
    )
    adapters = doc.lora_adapters
    if adapters:  # LoRA adapters attached to the context: their A and B tensors, by the seed's formula
        plan.components["LoRA adapters (formula)"] = adapter_bytes(shape, adapters)
    amx = ((eff.get("llama_memory_mib") or {}).get("model") or {}).get("AMX")
    if amx:
        plan.notes.append(
            f"llama.cpp put {amx:.1f} MiB of weights in AMX buffers (an Intel AMX host): that layout is not "
            "modelled, so the weights may be counted differently from what is resident"
        )
    plan.notes += [f"not predicted: {m}" for m in missing]
    error = (plan.total - measured) / measured
    reported = eff.get("llama_memory_mib") or {}
    return {
        "id": rec.id,
        "model": rec.model_name,
        "test_name": rec.test_name,
        "n_ctx": n_ctx,
        "type_k": type_k,
        "type_v": type_v,
        "swa_full": swa_full,
        "flash_attn": flash,
        "plan": plan,
        "predicted": plan.total,
        "measured": int(measured),
        "error": error,
        "within_10pct": abs(error) <= 0.10,
        "has_baseline": baseline is not None,
        "reported_mib": reported,
        "created": rec.created,
        "host_id": rec.host_id,
        "incomplete": missing,
        "run_type": run_type(rec),
    }


def run_type(doc: RunRecord) -> str:
    """What kind of run this is for the accuracy table: test kind, and the speculative mode."""
    rec = doc
    spec = rec.requested.get("speculative") or "none"
    return rec.test_kind + ("" if spec == "none" else f" + {spec.replace('_', ' ')}")


def vram_prediction(
    doc: RunRecord, runtime_overhead: int = 0, *, split_ok: bool = False
) -> dict[str, Any] | None:
    """Predicted VRAM of a run with every layer on a GPU beside its measured peak VRAM; the
    residual (measured − predicted without overhead) is the runtime's own share (CUDA context,
    cuBLAS workspace, ...)."""
    rec = doc
    if (
        not _vram_measured(rec) or not rec.llama_cpp_based
    ):  # llama.cpp's memory only (other_backends counts the rest)
        return None
    if len(rec.resources.peak_vram_by_gpu or []) > 1 and not split_ok:
        return None  # several visible GPUs: checked per GPU (vram_split_prediction)
    eff = rec.reported
    req = rec.requested
    measured = rec.resources.peak_vram_bytes
    n_gpu = eff.get("n_gpu_layers") or 0
    if (
        not measured
        or n_gpu <= 0
        or (eff.get("n_layers_total") and n_gpu < eff["n_layers_total"])
    ):
        return None
    try:
        shape = ModelShape.from_facts(rec.gguf, rec.model_name)
        kv_rows(
            shape,
            eff.get("type_k") or req.get("type_k") or "f16",
            eff.get("type_v") or req.get("type_v") or "f16",
        )
    except (
        ModelError
    ):  # facts missing, or a cache type the planner cannot size: not predicted
        return None
    flash = flash_attention_on(
        req, eff
    )  # the requested value counts where the backend did not report one
    plan = gpu_plan(
        shape,
        int(eff.get("n_ctx") or 4096),
        eff.get("type_k") or req.get("type_k") or "f16",
        eff.get("type_v") or req.get("type_v") or "f16",
        swa_full=bool(eff.get("swa_full", req.get("swa_full", False))),
        n_ubatch=int(eff.get("n_ubatch") or 512),
        flash_attn=flash,
        runtime_overhead=runtime_overhead,
    )
    without = plan.total - runtime_overhead
    return {
        "id": rec.id,
        "model": rec.model_name,
        "test_name": rec.test_name,
        "created": rec.created,
        "host_id": rec.host_id,
        "plan": plan,
        "predicted": plan.total,
        "measured": int(measured),
        "error": (plan.total - measured) / measured,
        "residual": int(measured) - without,
        "exact_roles": "tensor_bytes_by_role" in rec.gguf,
        "method": rec.resources.peak_vram_method,
    }


def vram_split_prediction(
    doc: RunRecord, runtime_overhead: int, comm_overhead: int = 0
) -> dict[str, Any] | None:
    """A run's measured peak VRAM per visible GPU beside the split plan's (:func:`split_gpu_plans`,
    with the run's split_mode, tensor_split, main_gpu and visible GPUs, and ``runtime_overhead``
    per GPU); None for a run without per-GPU peaks or not fully offloaded."""
    rec = doc
    per_gpu = rec.resources.peak_vram_by_gpu
    base = vram_prediction(doc, split_ok=True)
    if not per_gpu or base is None:
        return None
    eff, req = rec.reported, rec.requested
    try:
        shape = ModelShape.from_facts(rec.gguf, rec.model_name)
    except ModelError:
        return None
    plans = split_gpu_plans(
        shape,
        int(eff.get("n_ctx") or 4096),
        eff.get("type_k") or req.get("type_k") or "f16",
        eff.get("type_v") or req.get("type_v") or "f16",
        n_gpus=len(per_gpu),
        split_mode=str(eff.get("split_mode") or "layer"),
        tensor_split=eff.get("tensor_split"),
        main_gpu=int(eff.get("main_gpu") or 0),
        swa_full=bool(eff.get("swa_full", req.get("swa_full", False))),
        n_ubatch=int(eff.get("n_ubatch") or 512),
        flash_attn=flash_attention_on(req, eff),
        runtime_overhead=runtime_overhead,
        comm_overhead=comm_overhead,
    )
    gpus = []
    for g, plan in zip(per_gpu, plans, strict=True):
        measured = int(g.get("peak_bytes") or 0)
        # a GPU that holds nothing of the model keeps only the runtime's context (smaller than a
        # working GPU's, whose cuBLAS workspace and pools the overhead includes): not predicted
        idle = not any(v for k, v in plan.components.items() if "overhead" not in k)
        err = (plan.total - measured) / measured if measured and not idle else None
        gpus.append(
            {
                "index": g.get("index"),
                "pci_bus_id": g.get("pci_bus_id"),
                "plan": plan,
                "predicted": plan.total,
                "measured": measured,
                "error": err,
                "within_10pct": None if err is None else abs(err) <= 0.10,
                "idle": idle,
                "utilisation_mean_pct": g.get("utilisation_mean_pct"),
            }
        )
    return {
        "id": rec.id,
        "model": rec.model_name,
        "test_name": rec.test_name,
        "host_id": rec.host_id,
        "split_mode": eff.get("split_mode") or "layer",
        "gpus_used": eff.get("gpus_used"),
        "runtime_overhead": runtime_overhead,
        "gpus": gpus,
    }


def split_predictions(
    runs: list[RunRecord], runtime_overhead: int
) -> list[dict[str, Any]]:
    """:func:`vram_split_prediction` of every run that has one. A tensor split's communicators
    (NCCL) hold memory no model fact tells: each tensor-split run is predicted with the median
    residual (measured peak - plan, over working GPUs) of the *other* tensor-split runs
    (leave-one-out, so no run predicts itself; none: that share is left out), recorded as
    ``comm_overhead`` with ``comm_runs``. Each run is planned once for its residual."""
    preds = [p for p in (vram_split_prediction(d, runtime_overhead) for d in runs) if p]
    residuals = {
        p["id"]: [g["measured"] - g["predicted"] for g in p["gpus"] if not g["idle"]]
        for p in preds
        if p["split_mode"] == "tensor"
    }
    out = []
    by_id = {d.id: d for d in runs}
    for p in preds:
        if p["split_mode"] != "tensor":
            out.append(p)
            continue
        others = [r for i, rs in residuals.items() if i != p["id"] for r in rs]
        comm = sorted(others)[len(others) // 2] if others else None
        q = vram_split_prediction(by_id[p["id"]], runtime_overhead, comm or 0)
        if q is not None:
            q["comm_overhead"] = comm
            q["comm_runs"] = sum(
                1 for i, rs in residuals.items() if i != p["id"] and rs
            )
            out.append(q)
    return out


def gpu_overhead_from_runs(runs: list[RunRecord]) -> tuple[int | None, int]:
    """The median VRAM residual of GPU runs whose facts tell the embedding apart (so the
    residual is the runtime's own memory), and how many runs it comes from."""
    res = sorted(
        p["residual"]
        for p in (vram_prediction(d) for d in runs)
        if p is not None and p["exact_roles"]
    )
    if not res:
        return None, 0
    return int(res[len(res) // 2]), len(res)


def fits_rows(
    shape: ModelShape,
    settings: PlannerSettings,
    host_memory: int | None,
    runtime_baseline: int | None,
) -> list[dict[str, Any]]:
    """Every (context, cache type) of the settings: predicted host RAM and VRAM, and where they fit."""
    rows = []
    for n_ctx in settings.contexts:
        beyond = bool(
            shape.n_ctx_train and n_ctx > shape.n_ctx_train
        )  # shown, with a warning: never dropped
        for ct in settings.cache_types:
            try:
                cpu = cpu_plan(
                    shape,
                    n_ctx,
                    ct,
                    ct,
                    swa_full=settings.swa_full,
                    n_ubatch=settings.n_ubatch,
                    flash_attn=settings.flash_attn,
                    runtime_baseline=runtime_baseline,
                )
                gpu = gpu_plan(
                    shape,
                    n_ctx,
                    ct,
                    ct,
                    swa_full=settings.swa_full,
                    n_ubatch=settings.n_ubatch,
                    flash_attn=settings.flash_attn,
                    runtime_overhead=int(settings.gpu_runtime_overhead_mib * MiB),
                )
            except (
                ConfigError
            ) as exc:  # e.g. a quantized cache the head size cannot take
                rows.append(
                    {
                        "n_ctx": n_ctx,
                        "cache_type": ct,
                        "error": exc.detail,
                        "beyond_training": beyond,
                    }
                )
                continue
            keep = 1.0 - settings.headroom
            host_fit = None if not host_memory else cpu.total <= keep * host_memory
            gpus = {c.name: gpu.total <= keep * c.bytes for c in settings.cards}
            rows.append(
                {
                    "n_ctx": n_ctx,
                    "cache_type": ct,
                    "kv_bytes": cpu.components["KV cache"],
                    "cpu": cpu,
                    "gpu": gpu,
                    "host_fit": host_fit,
                    "gpu_fit": gpus,
                    "error": None,
                    "beyond_training": beyond,
                }
            )
    return rows


def smallest_gpu(row: dict[str, Any], settings: PlannerSettings) -> str | None:
    """The name of the smallest card the row fits."""
    size = {c.name: c.bytes for c in settings.cards}
    fits = sorted((size[g], g) for g, ok in row["gpu_fit"].items() if ok)
    return fits[0][1] if fits else None


@dataclass
class SweetSpot:
    """One card's sweet spot (see :class:`SweetSpotSettings`); ``None`` where the base does not fit."""

    card: GpuCard
    base_bytes: int  # the plan at one sequence of sweet_spot.context, no adapter
    fits: bool
    max_context: (
        int | None
    )  # the largest planned context (settings.contexts) at one sequence
    max_context_kv: int | None
    batch: int | None  # parallel sequences of sweet_spot.context each
    batch_total: int | None  # the plan at that batch
    adapters: int | None  # adapters beside one sequence of sweet_spot.context
    adapter_bytes: int
    capped_batch: bool = False
    capped_adapters: bool = False


def _largest(fits: Any, lo: int, hi: int) -> int:
    """The largest n in [lo, hi] with fits(n), fits monotone decreasing and fits(lo) true."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def sweet_spots(shape: ModelShape, settings: PlannerSettings) -> list[SweetSpot]:
    """Per card of the settings: what fits beside the base model, by :func:`gpu_plan` (all layers
    offloaded) with the settings' headroom: the largest context at one sequence, the most
    parallel sequences of ``sweet_spot.context`` tokens each, and the most adapters
    (``adapter_rank`` on ``adapter_targets``, f16, :func:`lora_bytes`) beside one such sequence."""
    sp = settings.sweet_spot
    ct = sp.cache_type
    overhead = int(settings.gpu_runtime_overhead_mib * MiB)
    one = lora_bytes(shape, sp.adapter_rank, tuple(sp.adapter_targets))

    def total(n_ctx: int, n_seq: int = 1) -> int:
        return gpu_plan(
            shape,
            n_ctx,
            ct,
            ct,
            swa_full=settings.swa_full,
            n_ubatch=settings.n_ubatch,
            flash_attn=settings.flash_attn,
            runtime_overhead=overhead,
            n_seq=n_seq,
        ).total

    base = total(sp.context)
    out = []
    for card in settings.cards:
        keep = (1.0 - settings.headroom) * card.bytes
        if base > keep:
            out.append(SweetSpot(card, base, False, None, None, None, None, None, one))
            continue
        ctxs = [c for c in sorted(settings.contexts) if total(c) <= keep]
        max_ctx = ctxs[-1] if ctxs else None
        kv = (
            kv_cache(
                shape,
                max_ctx,
                ct,
                ct,
                swa_full=settings.swa_full,
                n_ubatch=settings.n_ubatch,
            ).bytes
            if max_ctx
            else None
        )
        batch = _largest(
            lambda n, keep=keep: total(n * sp.context, n) <= keep, 1, sp.max_batch
        )
        adapters = (
            _largest(lambda k, keep=keep: base + k * one <= keep, 0, sp.max_adapters)
            if one
            else 0
        )
        out.append(
            SweetSpot(
                card,
                base,
                True,
                max_ctx,
                kv,
                batch,
                total(batch * sp.context, batch),
                adapters,
                one,
                capped_batch=batch == sp.max_batch,
                capped_adapters=adapters == sp.max_adapters,
            )
        )
    return out


def repack_applies(host: dict[str, Any]) -> bool:
    """Whether llama.cpp's CPU_REPACK buffer is in play: x86 with AVX2, or ARM with dot-product or
    i8mm instructions (the CPU features its repacked kernels need)."""
    flags = set((host.get("cpu") or {}).get("flags") or [])
    return bool(flags & {"avx2", "dotprod", "i8mm", "sve"})


def plan_text(
    shape: ModelShape,
    settings: PlannerSettings,
    host_memory: int | None = None,
    runtime_baseline: int | None = None,
) -> str:
    """A plain-text plan for the terminal (``invoke plan.memory``)."""

    def b(n: float | int | None) -> str:
        return (
            "-"
            if n is None
            else f"{n / MiB:,.1f} MiB"
            if n < GiB
            else f"{n / GiB:,.2f} GiB"
        )

    lines = [
        f"{shape.name}: {shape.architecture}, {shape.n_layer} layers, {shape.n_head} heads / "
        f"{max(shape.n_head_kv)} KV heads, head {shape.head_k}/{shape.head_v}, vocab {shape.n_vocab:,}"
        + (
            f", sliding window {shape.n_swa} on {sum(shape.swa_layers)} layers ({shape.swa_pattern_source})"
            if shape.n_swa
            else ""
        )
    ]
    lines.append(
        f"weights: {b(shape.weight_bytes)} ("
        + ", ".join(
            f"{t} {b(v)}"
            for t, v in sorted(
                shape.tensor_bytes_by_type.items(), key=lambda kv: -kv[1]
            )
        )
        + ")"
        + f"; read per decoded token: {b(shape.weights_read_per_token())}"
    )
    for note in shape.notes:
        lines.append(f"note: {note}")
    gpus = "  ".join(c.name for c in settings.cards)
    lines.append(
        f"{'n_ctx':>7} {'cache':>5} {'KV':>11} {'host RAM':>11} {'fits':>4} {'VRAM':>11}  {gpus}"
    )
    for r in fits_rows(shape, settings, host_memory, runtime_baseline):
        if r["error"]:
            lines.append(f"{r['n_ctx']:>7} {r['cache_type']:>5}  {r['error']}")
            continue
        fit = "-" if r["host_fit"] is None else "yes" if r["host_fit"] else "no"
        marks = "  ".join(
            ("yes" if ok else "no").rjust(len(g)) for g, ok in r["gpu_fit"].items()
        )
        warn = (
            f"  ! beyond the training context ({shape.n_ctx_train:,})"
            if r["beyond_training"]
            else ""
        )
        lines.append(
            f"{r['n_ctx']:>7} {r['cache_type']:>5} {b(r['kv_bytes']):>11} {b(r['cpu'].total):>11} {fit:>4} "
            f"{b(r['gpu'].total):>11}  {marks}{warn}"
        )
    lines.append(
        "GPU cards: "
        + "; ".join(f"{c.name} = {c.unit_text}" for c in settings.cards)
        + " (GiB = 2^30 bytes, GB = 10^9)"
    )
    lines.append(
        f"(PROJECTED; headroom {settings.headroom:.0%}; n_ubatch {settings.n_ubatch}; swa_full {settings.swa_full}; "
        f"host RAM includes {'the measured process baseline' if runtime_baseline else 'no process baseline'})"
    )
    return "\n".join(lines)
