"""A synthetic GGUF's weights as a Hugging Face checkpoint: the same random numbers, served by an
engine of another family (``transformers serve``) beside llama.cpp (issue 31).

:func:`write_checkpoint` reads a dense ``llama`` GGUF written by :mod:`runtime.models.synth` (F16,
F32 or BF16: no dequantization here) and writes, in a Hugging Face hub cache layout
(``models--<org>--<name>/blobs``, ``snapshots/<revision>``, ``refs/<revision>``), the files
``transformers`` loads offline:

* ``model.safetensors``: every tensor under its ``LlamaForCausalLM`` name, as float16. The query
  and key projections are permuted back (llama.cpp's converter interleaves their rotary halves;
  ``transformers`` keeps them apart), so both engines compute the same function of the same
  numbers; the norms, F32 in the GGUF, are rounded to float16;
* ``config.json`` (``LlamaConfig``) from the GGUF's shape keys;
* ``tokenizer.json`` / ``tokenizer_config.json``: the GGUF's SentencePiece-style vocabulary as a
  BPE model with byte fallback whose merges follow the pieces' scores (what ``transformers``' own
  GGUF converter builds), so both engines split a text into the same tokens, and its chat
  template. (A first H200 run used a Unigram model over the same scores, which split text into
  about 2.2 times as many tokens as llama.cpp; it was measured again with this tokenizer.)

The revision is the first 40 hex digits of the sha256 of the safetensors file, so the listing of a
``transformers serve`` reading that cache (``/v1/models``: ``<org>/<name>@<revision>``) names the
weights. No torch, no transformers and no network here: numpy and gguf only.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ModelError

#: GGUF tensor name (per layer after ``blk.N.``) -> LlamaForCausalLM parameter name
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
SPIECE_UNDERLINE = "\u2581"


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of llama.cpp's ``LlamaModel.permute`` (convert_hf_to_gguf.py) on a q/k weight
    of shape (n_head * head_dim, n_embd)."""
    rows = w.shape[0]
    return (
        w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's permutation (for tests: ``unpermute(permute(w)) == w``)."""
    rows = w.shape[0]
    return (
        w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _field(reader: Any, key: str) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return None
    if len(f.data) == 1:
        part = f.parts[f.data[0]]
        if f.types and f.types[0].name == "STRING":
            return bytes(part).decode("utf-8")
        return part.tolist()[0]
    vals = [f.parts[i] for i in f.data]
    if f.types and len(f.types) > 1 and f.types[1].name == "STRING":
        return [bytes(v).decode("utf-8") for v in vals]
    return [v.tolist()[0] for v in vals]


def config_of(reader: Any, path: Path) -> dict[str, Any]:
    """LlamaConfig's fields from a llama GGUF's keys (one line naming the file and key when one lacks)."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ModelError(
            f"{path}: general.architecture is {arch!r}; only dense 'llama' GGUFs convert"
        )

    def need(key: str) -> Any:
        v = _field(reader, f"llama.{key}")
        if v is None:
            raise ModelError(f"{path}: llama.{key} is missing")
        return v

    n_embd, n_head = int(need("embedding_length")), int(need("attention.head_count"))
    n_head_kv = int(_field(reader, "llama.attention.head_count_kv") or n_head)
    tokens = _field(reader, "tokenizer.ggml.tokens") or []
    theta = float(_field(reader, "llama.rope.freq_base") or 10000.0)
    names = {t.name for t in reader.tensors}
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": len(tokens),
        "hidden_size": n_embd,
        "intermediate_size": int(need("feed_forward_length")),
        "num_hidden_layers": int(need("block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_head_kv,
        "head_dim": n_embd // n_head,
        "hidden_act": "silu",
        "max_position_embeddings": int(need("context_length")),
        "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
        "rope_theta": theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": int(_field(reader, "tokenizer.ggml.bos_token_id") or 1),
        "eos_token_id": int(_field(reader, "tokenizer.ggml.eos_token_id") or 2),
        "dtype": "float16",
        "use_cache": True,
    }


def tensors_of(reader: Any, cfg: dict[str, Any], path: Path):
    """(HF name, float16 array) for every tensor of the GGUF, q/k permuted back."""
    for t in reader.tensors:
        if t.tensor_type.name not in ("F16", "F32", "BF16"):
            raise ModelError(
                f"{path}: tensor {t.name} is {t.tensor_type.name}; convert an F16, BF16 or F32 file"
            )
        stem, _, suffix = t.name.rpartition(".")
        if stem.startswith("blk."):
            _, layer, part = stem.split(".", 2)
            if part not in LAYER_NAMES:
                raise ModelError(f"{path}: tensor {t.name} has no llama counterpart")
            name = f"model.layers.{int(layer)}.{LAYER_NAMES[part]}.{suffix}"
        elif stem in TOP_NAMES:
            name, part = f"{TOP_NAMES[stem]}.{suffix}", stem
        else:
            raise ModelError(f"{path}: tensor {t.name} has no llama counterpart")
        data = np.asarray(t.data)
        if t.tensor_type.name == "BF16":
            data = (data.astype(np.uint32) << 16).view(np.float32)
        shape = [int(x) for x in reversed(t.shape)]  # ne order reversed: (out, in)
        w = data.reshape(shape).astype(np.float16)
        if part == "attn_q":
            w = unpermute(w, cfg["num_attention_heads"])
        elif part == "attn_k":
            w = unpermute(w, cfg["num_key_value_heads"])
        yield name, w


def write_safetensors(items: list[tuple[str, np.ndarray]], dest: Path) -> str:
    """Write a safetensors file (header, then the tensors' bytes in order) atomically; its sha256."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, w in items:
        n = int(w.nbytes)
        header[name] = {
            "dtype": "F16",
            "shape": list(w.shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    h = hashlib.sha256()
    tmp = dest.with_name(dest.name + ".tmp")
    with tmp.open("wb") as f:
        for chunk in (struct.pack("<Q", len(raw)), raw):
            f.write(chunk)
            h.update(chunk)
        for _, w in items:
            b = np.ascontiguousarray(w).tobytes()
            f.write(b)
            h.update(b)
    os.replace(tmp, dest)
    return h.hexdigest()


def spm_merges(
    tokens: list[str], scores: list[float], types: list[int]
) -> list[list[str]]:
    """BPE merges that tokenize as llama.cpp's SentencePiece tokenizer does (llm_tokenizer_spm: from
    single characters, merge the adjacent pair whose union is the best-scored piece of the vocabulary):
    every split of every normal piece into two pieces of the vocabulary, ranked by the union's score
    (best first), as transformers' own GGUF converter derives them."""
    ids = {t: i for i, t in enumerate(tokens)}
    out = []
    for i, piece in enumerate(tokens):
        if types[i] != 1 or len(piece) < 2:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in ids and right in ids:
                out.append((-scores[i], ids[left], ids[right], left, right))
    out.sort()
    return [[a, b] for *_, a, b in out]


def tokenizer_files(reader: Any) -> dict[str, Any]:
    """tokenizer.json and tokenizer_config.json for the GGUF's SentencePiece-style vocabulary."""
    tokens = _field(reader, "tokenizer.ggml.tokens") or []
    scores = _field(reader, "tokenizer.ggml.scores") or [0.0] * len(tokens)
    types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    unk = int(_field(reader, "tokenizer.ggml.unknown_token_id") or 0)
    bos = int(_field(reader, "tokenizer.ggml.bos_token_id") or 1)
    eos = int(_field(reader, "tokenizer.ggml.eos_token_id") or 2)
    template = _field(reader, "tokenizer.chat_template")
    special = [i for i, ty in enumerate(types) if ty in (2, 3)]  # unknown, control
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": tokens[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in special
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Metaspace",
            "replacement": SPIECE_UNDERLINE,
            "prepend_scheme": "first",
            "split": False,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": tokens[bos], "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {
                tokens[bos]: {"id": tokens[bos], "ids": [bos], "tokens": [tokens[bos]]}
            },
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {
                    "type": "Replace",
                    "pattern": {"String": SPIECE_UNDERLINE},
                    "content": " ",
                },
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": tokens[unk],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": spm_merges(tokens, scores, types),
        },
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tokens[bos],
        "eos_token": tokens[eos],
        "unk_token": tokens[unk],
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": int(_field(reader, "llama.context_length") or 4096),
        "clean_up_tokenization_spaces": False,
        **({"chat_template": template} if template else {}),
    }
    return {"tokenizer.json": tok, "tokenizer_config.json": config}


def write_checkpoint(
    gguf_path: str | Path, cache_dir: str | Path, repo_id: str
) -> dict[str, Any]:
    """Write the GGUF's weights as ``repo_id`` into the hub cache ``cache_dir``; return
    {repo_id, revision, served_name, snapshot, sha256, size_bytes, config}."""
    from gguf import GGUFReader

    path = Path(gguf_path)
    org, sep, name = repo_id.partition("/")
    if not sep or not org or not name or "/" in name:
        raise ModelError(f"repo id {repo_id!r} is not '<org>/<name>'")
    if not path.is_file():
        raise ModelError(f"{path}: no such GGUF file")
    try:
        reader = GGUFReader(str(path), "r")
    except (ValueError, OSError) as exc:
        raise ModelError(f"{path}: not a readable GGUF file ({exc})") from None
    cfg = config_of(reader, path)
    items = list(tensors_of(reader, cfg, path))
    repo = Path(cache_dir) / f"models--{org}--{name}"
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    staged = blobs / "model.safetensors.staged"
    digest = write_safetensors(items, staged)
    size = staged.stat().st_size
    os.replace(staged, blobs / digest)
    revision = digest[:40]
    files: dict[str, bytes] = {
        "config.json": json.dumps(cfg, indent=1).encode(),
        "generation_config.json": json.dumps(
            {
                "bos_token_id": cfg["bos_token_id"],
                "eos_token_id": cfg["eos_token_id"],
            }
        ).encode(),
    }
    for fname, doc in tokenizer_files(reader).items():
        files[fname] = json.dumps(doc, ensure_ascii=False).encode()
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True, exist_ok=True)
    links = {"model.safetensors": digest}
    for fname, raw in files.items():
        d = hashlib.sha256(raw).hexdigest()
        (blobs / d).write_bytes(raw)
        links[fname] = d
    for fname, d in links.items():
        link = snap / fname
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path("..") / ".." / "blobs" / d)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(revision)
    return {
        "repo_id": repo_id,
        "revision": revision,
        "served_name": f"{repo_id}@{revision}",
        "snapshot": str(snap),
        "sha256": digest,
        "size_bytes": size,
        "config": cfg,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf")
    ap.add_argument(
        "--cache", required=True, help="hub cache folder (HF_HUB_CACHE of the server)"
    )
    ap.add_argument("--repo", default="almanac/synthetic")
    a = ap.parse_args(argv)
    try:
        out = write_checkpoint(a.gguf, a.cache, a.repo)
    except ModelError as exc:
        print(f"error: {exc}")
        return 2
    print(json.dumps({k: v for k, v in out.items() if k != "config"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
