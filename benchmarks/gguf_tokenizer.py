"""A Hugging Face tokenizer folder (tokenizer.json) built offline from a GGUF file's own vocabulary, so a
tool that wants a Hugging Face tokenizer (AIPerf) tokenizes exactly as llama.cpp does, without the hub
and without torch (transformers 5 reads a GGUF tokenizer only with torch installed).

    /work/wt/traffic-venvs/aiperf/bin/python benchmarks/gguf_tokenizer.py MODEL.gguf DEST
        [--check IDS.json]

Needs ``gguf``, ``tokenizers`` and ``transformers`` (AIPerf's venv has all three). Only the GGUF
``llama`` tokenizer model (SentencePiece, as Gemma 3's) is built:

* llama.cpp's SPM tokenizer merges, again and again, the adjacent pair whose merged piece has the
  highest score: BPE with every (left, right) split of a normal token ranked by the merged token's
  score (transformers' GGUF converter builds llama merges the same way), byte fallback for the rest;
* spaces become U+2581 (no space prefix: ``tokenizer.ggml.add_space_prefix`` is false for Gemma 3);
* user-defined pieces (runs of spaces and newlines) are matched in the raw text before anything else,
  control tokens are special, and ``<bos>`` is prepended as ``add_bos_token`` says.

``--check IDS.json`` ([[text, llama.cpp ids], ...], made with llama_cpp's ``Llama(vocab_only=True)``)
counts the texts whose ids are identical. Measured for the embedded Gemma 3 270M: 303 of 303
(GPL text windows of 20-600 characters, spaces, newlines, tabs, accents, emoji).
"""

from __future__ import annotations

import argparse
import json
import sys


def build(src: str, dest: str) -> dict:
    from gguf import GGUFReader
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    r = GGUFReader(src)

    def arr(key: str) -> list:
        f = r.fields[key]
        return [f.parts[i] for i in f.data]

    def one(key: str) -> int:
        f = r.fields[key]
        return int(f.parts[f.data[0]][0])

    f = r.fields["tokenizer.ggml.model"]
    model = bytes(f.parts[f.data[0]]).decode()
    if model != "llama":
        raise SystemExit(
            f"{src}: tokenizer.ggml.model is {model!r}; only 'llama' (SentencePiece) is built here"
        )
    tokens = [bytes(p).decode("utf-8", "replace") for p in arr("tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in arr("tokenizer.ggml.scores")]
    types = [int(p[0]) for p in arr("tokenizer.ggml.token_type")]
    bos, eos, unk = (
        one(f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos", "unknown")
    )
    pad = (
        one("tokenizer.ggml.padding_token_id")
        if "tokenizer.ggml.padding_token_id" in r.fields
        else eos
    )
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for t, i in vocab.items():
        if (
            types[i] != 1 or len(t) < 2
        ):  # normal tokens only (1); 3 control, 4 user-defined, 6 byte
            continue
        for k in range(1, len(t)):
            a, b = t[:k], t[k:]
            if a in vocab and b in vocab:
                merges.append((-scores[i], vocab[a], vocab[b], a, b))
    merges.sort(key=lambda m: m[:3])
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=[(a, b) for *_, a, b in merges],
            unk_token=tokens[unk],
            byte_fallback=True,
            fuse_unk=True,
        )
    )
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.post_processor = processors.TemplateProcessing(
        single=f"{tokens[bos]} $A",
        pair=f"{tokens[bos]} $A $B",
        special_tokens=[(tokens[bos], bos)],
    )
    tok.add_special_tokens(
        [
            AddedToken(tokens[i], special=True, normalized=False)
            for i, ty in enumerate(types)
            if ty == 3
        ]
    )
    tok.add_tokens(
        [
            AddedToken(tokens[i], special=False, normalized=False)
            for i, ty in enumerate(types)
            if ty == 4
        ]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=tokens[bos],
        eos_token=tokens[eos],
        unk_token=tokens[unk],
        pad_token=tokens[pad],
    ).save_pretrained(dest)
    return {"vocab": len(vocab), "merges": len(merges)}


def check(dest: str, ids_file: str) -> dict:
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(f"{dest}/tokenizer.json")
    with open(ids_file, encoding="utf-8") as fh:
        ref = json.load(fh)
    same = sum(tk.encode(s, add_special_tokens=False).ids == ids for s, ids in ref)
    return {"identical": same, "texts": len(ref)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf", help="the GGUF file")
    ap.add_argument(
        "dest", help="the folder to write (tokenizer.json, tokenizer_config.json)"
    )
    ap.add_argument("--check", help="[[text, llama.cpp ids], ...] to compare with")
    a = ap.parse_args(argv)
    out = build(a.gguf, a.dest)
    if a.check:
        out.update(check(a.dest, a.check))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
