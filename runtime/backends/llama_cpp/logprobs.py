"""Log-probabilities from llama.cpp's logits, without ``logits_all``.

``Llama(logits_all=True)`` keeps an ``n_ctx x n_vocab`` float32 array (Gemma 3's vocabulary
is 262,144 tokens: 1 GiB per 1,024 positions of context). Here a sequence is decoded from an
empty cache with the output flag set only on the positions whose logits are needed, as
llama.cpp's ``llama-perplexity`` does, and the logits are copied out batch by batch.

Used by the quality worker (multiple choice by log-likelihood, lm-evaluation-harness style)
and the perplexity / KL-divergence worker.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def decode_logits(llm: Any, tokens: list[int], first: int) -> np.ndarray:
    """float32 logits of positions ``first .. len(tokens)-1`` (row i predicts token first+i+1)."""
    import llama_cpp as L

    if len(tokens) > llm.n_ctx():
        raise ValueError(
            f"{len(tokens)} tokens do not fit the context of {llm.n_ctx()}"
        )
    ctx = llm._ctx.ctx
    n_vocab = llm.n_vocab()
    llm.reset()
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    n_batch = llm.n_batch
    rows: list[np.ndarray] = []
    for b0 in range(0, len(tokens), n_batch):
        chunk = tokens[b0 : b0 + n_batch]
        batch = L.llama_batch_init(len(chunk), 0, 1)
        try:
            n_out = 0
            for k, tok in enumerate(chunk):
                pos = b0 + k
                batch.token[k] = int(tok)
                batch.pos[k] = pos
                batch.n_seq_id[k] = 1
                batch.seq_id[k][0] = 0
                need = pos >= first
                batch.logits[k] = need
                n_out += need
            batch.n_tokens = len(chunk)
            rc = L.llama_decode(ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            if n_out:
                ptr = L.llama_get_logits(ctx)
                rows.append(np.ctypeslib.as_array(ptr, shape=(n_out, n_vocab)).copy())
        finally:
            L.llama_batch_free(batch)
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    return np.concatenate(rows) if rows else np.empty((0, n_vocab), np.float32)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64 (sums of 262k terms)."""
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def tokenize(llm: Any, text: str, add_bos: bool = True) -> list[int]:
    return list(llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False))


def continuation_logprob(llm: Any, context: str, continuation: str) -> dict[str, Any]:
    """lm-evaluation-harness's loglikelihood: sum of log p(continuation tokens | context).

    The pair is encoded as whole = enc(context + continuation), context = enc(context),
    continuation = whole[len(context):] (its ``_encode_pair``); a trailing space of the
    context moves to the continuation first. ``is_greedy``: every continuation token is
    the argmax at its position."""
    n_space = len(context) - len(context.rstrip(" "))
    if n_space:
        continuation = context[-n_space:] + continuation
        context = context[:-n_space]
    whole = tokenize(llm, context + continuation)
    ctx_toks = tokenize(llm, context)
    n_ctx_toks = len(ctx_toks)
    if (
        whole[:n_ctx_toks] != ctx_toks
    ):  # the boundary merged: keep the shared prefix as context
        n_ctx_toks = next(i for i, (a, b) in enumerate(zip(whole, ctx_toks)) if a != b)
    cont = whole[n_ctx_toks:]
    if not cont:
        raise ValueError(f"the continuation {continuation!r} adds no token")
    logits = decode_logits(llm, whole[:-1], n_ctx_toks - 1)
    lp = log_softmax(logits)
    picked = lp[np.arange(len(cont)), cont]
    greedy = bool(np.all(lp.argmax(axis=1) == np.asarray(cont)))
    return {
        "logprob": float(picked.sum()),
        "n_tokens": len(cont),
        "is_greedy": greedy,
        "n_bytes": len(continuation.encode("utf-8")),
    }
