"""A local model file's identity and facts, read with the ``gguf`` package (no llama.cpp).

:func:`sha256_file` / :func:`cached_sha256` give the file's identity; :func:`gguf_facts` reads its
header (architecture, quantization, shape) and merges ``memory_facts(reader)``, so run artifacts
carry what the memory planner and the decode roofline need:

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
import json
from pathlib import Path
from typing import Any

from core.errors import ModelError
from core.paths import cache_dir

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
    pattern = (
        _field(reader, f"{arch}.attention.sliding_window_pattern") if arch else None
    )
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
        "head_count_kv_layers": [int(x) for x in kv_layers]
        if isinstance(kv_layers, list)
        else None,
        "kv_lora_rank": _field(reader, f"{arch}.attention.kv_lora_rank")
        if arch
        else None,
        "rope_dimension_count": _field(reader, f"{arch}.rope.dimension_count")
        if arch
        else None,
        "vocab_text_bytes": text_bytes,
        "vocab_sha256": vocab_hash,
    }


# -- a model file's identity and facts (no llama.cpp) ------------------------------------------
def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def cached_sha256(path: Path) -> str:
    """sha256 of ``path``, cached in a sidecar keyed by size and mtime."""
    st = path.stat()
    side = (
        cache_dir()
        / "hashes"
        / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24] + ".json")
    )
    try:
        rec = json.loads(side.read_text())
        if rec["size"] == st.st_size and rec["mtime_ns"] == st.st_mtime_ns:
            return rec["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = sha256_file(path)
    side.parent.mkdir(parents=True, exist_ok=True)
    side.write_text(
        json.dumps(
            {
                "path": str(path),
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "sha256": value,
            }
        )
    )
    return value


def gguf_facts(path: Path) -> dict[str, Any]:
    """Facts from the GGUF header (no llama.cpp): architecture, quantization, shape, synthetic flag."""
    from gguf import GGUFReader, LlamaFileType

    try:
        reader = GGUFReader(str(path), "r")
    except Exception as exc:  # gguf raises plain ValueError/struct errors on bad files
        raise ModelError(f"not a readable GGUF file ({exc})", file=str(path)) from None

    def value(key: str) -> Any:
        f = reader.get_field(key)
        if f is None:
            return None
        try:
            return f.contents()
        except Exception:
            return None

    arch = value("general.architecture")
    ft = value("general.file_type")
    try:
        quant = (
            LlamaFileType(ft).name.removeprefix("MOSTLY_") if ft is not None else None
        )
    except ValueError:
        quant = f"file_type_{ft}"

    def a(key: str) -> Any:
        return value(f"{arch}.{key}") if arch else None

    n_head = a("attention.head_count")
    n_head_kv = a("attention.head_count_kv")
    if isinstance(n_head_kv, list):  # per-layer lists exist in some architectures
        n_head_kv = max(n_head_kv) if n_head_kv else None
    if isinstance(n_head, list):
        n_head = max(n_head) if n_head else None
    tensor_types: dict[str, int] = {}
    for t in reader.tensors:
        tensor_types[t.tensor_type.name] = tensor_types.get(
            t.tensor_type.name, 0
        ) + int(t.n_bytes)
    return {
        "architecture": arch,
        "name": value("general.name"),
        "quantization": quant,
        "file_type": ft,
        "context_length": a("context_length"),
        "embedding_length": a("embedding_length"),
        "block_count": a("block_count"),
        "feed_forward_length": a("feed_forward_length")
        if not isinstance(a("feed_forward_length"), list)
        else max(a("feed_forward_length")),
        "head_count": n_head,
        "head_count_kv": n_head_kv,
        "key_length": a("attention.key_length"),
        "value_length": a("attention.value_length"),
        "sliding_window": a("attention.sliding_window"),
        "expert_count": a("expert_count"),
        "expert_used_count": a("expert_used_count"),
        "vocab_size": len(reader.get_field("tokenizer.ggml.tokens").data)
        if reader.get_field("tokenizer.ggml.tokens")
        else None,
        "tensor_bytes_by_type": tensor_types,
        "synthetic": bool(value("almanac.synthetic")),
        "synthetic_shape": value("almanac.shape"),
        "has_chat_template": reader.get_field("tokenizer.chat_template") is not None,
        **memory_facts(reader, arch),  # memory planner and decode roofline (core.gguf)
    }


def _facts_code_version() -> str:
    """Identity of the code that computes GGUF facts (this module and the gguf package)."""
    from importlib import metadata

    here = Path(__file__).resolve()
    blob = here.read_bytes() + metadata.version("gguf").encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cached_gguf_facts(path: Path, digest: str) -> dict[str, Any]:
    """``gguf_facts`` cached in the cache dir by the file's sha256 and the code's identity:
    parsing a GGUF with a 262k-token vocabulary takes seconds, and every run, worker and test
    resolves its models again."""
    side = cache_dir() / "facts" / f"{digest[:32]}-{_facts_code_version()}.json"
    try:
        return json.loads(side.read_text())
    except (OSError, ValueError):
        pass
    facts = gguf_facts(path)
    try:
        text = json.dumps(facts, sort_keys=True)
    except (TypeError, ValueError):
        return facts
    if json.loads(text) == facts:  # cache only what survives the round trip unchanged
        from core.artifacts import atomic_write_text
        from core.errors import StorageError

        try:
            atomic_write_text(side, text)
        except (OSError, StorageError):  # a read-only or full cache only costs time
            pass
    return facts
