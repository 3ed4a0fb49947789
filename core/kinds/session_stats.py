"""Conversations (the ``multi_turn`` workload): per-turn figures from a level's records, each
carrying ``turn`` (0-based), its prompt length (the server's usage ``prompt_tokens``, else the
counted length of the whole conversation is unknown and the turn is left out of the fit) and the
tokens the server took from its prefix cache (``cached_tokens``).

Agent sessions (the ``agent`` workload) are read the same way: each record also says whether the tool
call that followed its answer was the model's own or scripted (``tool_call``), counted per turn.

TTFT against context length: the least-squares line of TTFT on the prompt tokens of every
successful turn, and per turn its median TTFT, median prompt tokens and cache hit rate (cached /
prompt tokens). A growing context costs prefill only for the part the cache does not hold: with
a working prefix cache, later turns reuse the earlier ones and their TTFT rises less than their
context does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def turns(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """{agent, per_turn: [{turn, n, ttft_ms_median, prompt_tokens_median, cache_hit_rate (, tool_calls_model,
    tool_calls_scripted)}], fit: {slope_ms_per_token, intercept_ms, n}, conversations} of a conversation or
    agent level; None when its records carry no turns."""
    ok = [
        r
        for r in records
        if r.get("turn") is not None and r.get("ok") and r.get("ttft_ms") is not None
    ]
    if not ok:
        return None
    rows = []
    for t in sorted({int(r["turn"]) for r in ok}):
        rs = [r for r in ok if int(r["turn"]) == t]
        prompt = [r["prompt_tokens"] for r in rs if r.get("prompt_tokens")]
        rep = [
            r
            for r in rs
            if r.get("cached_tokens") is not None and r.get("prompt_tokens")
        ]
        calls = [r["tool_call"] for r in rs if r.get("tool_call")]
        rows.append(
            {
                **(
                    {
                        "tool_calls_model": calls.count("model"),
                        "tool_calls_scripted": calls.count("scripted"),
                    }
                    if calls
                    else {}
                ),
                "turn": t,
                "n": len(rs),
                "ttft_ms_median": float(np.median([r["ttft_ms"] for r in rs])),
                "prompt_tokens_median": float(np.median(prompt)) if prompt else None,
                "cache_hit_rate": sum(r["cached_tokens"] for r in rep)
                / sum(r["prompt_tokens"] for r in rep)
                if rep
                else None,
            }
        )
    pts = [
        (float(r["prompt_tokens"]), float(r["ttft_ms"]))
        for r in ok
        if r.get("prompt_tokens")
    ]
    fit = None
    if len(pts) >= 3 and len({x for x, _ in pts}) >= 2:
        x, y = np.asarray(pts).T
        slope, icpt = np.polyfit(x, y, 1)
        fit = {
            "slope_ms_per_token": float(slope),
            "intercept_ms": float(icpt),
            "n": len(pts),
        }
    return {
        "agent": any(r.get("tool_call") for r in ok),
        "per_turn": rows,
        "fit": fit,
        "conversations": len({r.get("session") for r in ok}),
    }
