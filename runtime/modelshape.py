"""GGUF facts that memory and bandwidth models need, read with the ``gguf`` package (no llama.cpp).

``runtime.models.gguf_facts`` merges ``memory_facts(reader)`` into every model's facts, so
run artifacts carry what the memory planner and the decode roofline need:

* ``tensor_bytes_by_role``: bytes per tensor type for the token embedding, the output
  matrix, MoE expert tensors (names containing ``_exps``: only ``expert_used_count`` of
  ``expert_count`` are read per token) and everything else;
* ``sliding_window_pattern``: the GGUF's ``<arch>.attention.sliding_window_pattern`` (an
  int period or a per-layer list of booleans) when the file has one;
* ``head_count_kv_layers``: per-layer KV head counts where the file stores a list;
* ``kv_lora_rank`` / ``rope_dimension_count``: for MLA attention (DeepSeek-2 style caches);
* ``vocab_text_bytes``: total length of the token strings (tokenizer tables in RAM);
* ``vocab_sha256``: a hash of the token list (a draft model must share the vocabulary).
"""

from __future__ import annotations

import hashlib
from typing import Any

ROLES = ("token_embd", "output", "experts", "other")


def tensor_role(name: str) -> str:
    """Which part of the per-token read a tensor belongs to."""
    if name.startswith("token_embd."):
        return "token_embd"
    if name.startswith("output."):
        return "output"
    if "_exps." in name:
        return "experts"
    return "other"


def _field(reader: Any, key: str) -> Any:
    f = reader.get_field(key)
    if f is None:
        return None
    try:
        return f.contents()
    except Exception:
        return None


def memory_facts(reader: Any, arch: str | None) -> dict[str, Any]:
    """Extra facts from an open ``gguf.GGUFReader`` (see the module docstring)."""
    by_role: dict[str, dict[str, int]] = {r: {} for r in ROLES}
    for t in reader.tensors:
        role = tensor_role(t.name)
        tname = t.tensor_type.name
        by_role[role][tname] = by_role[role].get(tname, 0) + int(t.n_bytes)
    pattern = _field(reader, f"{arch}.attention.sliding_window_pattern") if arch else None
    if isinstance(pattern, list):
        pattern = [bool(x) for x in pattern]
    kv_layers = _field(reader, f"{arch}.attention.head_count_kv") if arch else None
    tokens = reader.get_field("tokenizer.ggml.tokens")
    text_bytes = vocab_hash = None
    if tokens is not None:
        digest = hashlib.sha256()
        text_bytes = 0
        for i in tokens.data:
            part = tokens.parts[i]
            text_bytes += len(part)
            digest.update(len(part).to_bytes(4, "little"))
            digest.update(part.tobytes())
        vocab_hash = digest.hexdigest()
    return {
        "tensor_bytes_by_role": by_role,
        "sliding_window_pattern": pattern,
        "head_count_kv_layers": [int(x) for x in kv_layers] if isinstance(kv_layers, list) else None,
        "kv_lora_rank": _field(reader, f"{arch}.attention.kv_lora_rank") if arch else None,
        "rope_dimension_count": _field(reader, f"{arch}.rope.dimension_count") if arch else None,
        "vocab_text_bytes": text_bytes,
        "vocab_sha256": vocab_hash,
    }
