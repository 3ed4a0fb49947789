"""llama.cpp's C API as the rate kind's primitive (core.kinds.rate.RateWork), the way llama-bench
drives it: random token ids drawn before the timer, the prompt as ``llama_decode`` of
n_batch-sized batches, generation as one-token decodes with a synchronise after each, the KV
cache cleared before each repetition, the depth prefilled once, saved and restored outside the
timer; ``n_seq`` sequences decoded together for parallel generation (llama-batched-bench's S_TG).
The loop that times it is the rate kind's (core.kinds.rate.run_rate)."""

from __future__ import annotations

import ctypes
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.kinds.rate import RateTest, RateWork


@dataclass
class CApiRate:
    """One rate test's primitive over a loaded model, and what the backend records beside it."""

    work: RateWork
    n_vocab: int
    add_bos: bool
    #: depth fills: {"prefilled": n, "restored": n} (prefilled once, restored before the others)
    depth_state: dict[str, Any]
    #: free the llama_batch structs of the parallel path (after the loop)
    free: Callable[[], None]


def rate_work(
    llm: Any, test: RateTest, seed: int, n_threads: int, n_threads_batch: int
) -> CApiRate:
    """The primitive for ``test`` on ``llm`` (a llama_cpp.Llama): its thread counts set and its
    KV cache cleared, ready for the kind's loop."""
    import llama_cpp as L

    ctx = llm._ctx.ctx
    model = llm._model.model
    vocab = L.llama_model_get_vocab(model)
    n_vocab = int(L.llama_vocab_n_tokens(vocab))
    add_bos = bool(L.llama_vocab_get_add_bos(vocab))
    bos = int(L.llama_vocab_bos(vocab))
    n_batch = int(L.llama_n_batch(ctx))
    mem = L.llama_get_memory(ctx)
    rng = random.Random(seed)
    token_t = L.llama_token
    ptr_t = ctypes.POINTER(token_t)

    def tokens_for(n: int, first_bos: bool) -> Any:
        arr = (token_t * max(n, 1))()
        for i in range(n):
            arr[i] = rng.randrange(n_vocab)
        if first_bos and add_bos and n:
            arr[0] = bos
        return arr

    def prompt_plan(n: int) -> list[tuple[Any, int]]:
        """Batches of at most n_batch tokens, each batch starting with BOS at position 0 only."""
        plan, done = [], 0
        while done < n:
            k = min(n - done, n_batch)
            arr = tokens_for(k, done == 0)
            plan.append((arr, k))
            done += k
        return plan

    def decode_plan(plan: list[tuple[Any, int]]) -> None:
        for arr, k in plan:
            rc = L.llama_decode(ctx, L.llama_batch_get_one(arr, k))
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} (prompt batch of {k})")
        L.llama_synchronize(ctx)

    def gen_plan(n: int) -> list[Any]:
        arr = tokens_for(n, True)
        base = ctypes.addressof(arr)
        size = ctypes.sizeof(token_t)
        ptrs = [ctypes.cast(base + i * size, ptr_t) for i in range(n)]
        return [arr, ptrs]

    def decode_gen(plan: list[Any]) -> None:
        decode, get_one, sync = (
            L.llama_decode,
            L.llama_batch_get_one,
            L.llama_synchronize,
        )
        for p in plan[1]:
            rc = decode(ctx, get_one(p, 1))
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} (generation)")
            sync(ctx)

    n_seq = test.n_seq
    batches: list[
        Any
    ] = []  # llama_batch structs of the parallel path, freed at the end

    def seq_batch(entries: list[tuple[int, int, int]], logits_all: bool) -> Any:
        """A batch of (token, position, sequence) entries (llama_batch_init; freed with the run)."""
        b = L.llama_batch_init(len(entries), 0, 1)
        batches.append(b)
        for i, (tok, pos, seq) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits_all or i == len(entries) - 1
        b.n_tokens = len(entries)
        return b

    def free_batches() -> None:
        for b in batches:
            L.llama_batch_free(b)
        batches.clear()

    def decode_batch(b: Any, what: str) -> None:
        rc = L.llama_decode(ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} ({what})")

    def fill_depth_parallel() -> None:
        """Every sequence its own depth of random tokens (its own KV cells), prefilled once, the
        whole context's state saved, then restored for every later repetition."""
        buf = depth_state["buf"]
        if buf is not None and L.llama_state_set_data(ctx, buf, len(buf)):
            depth_state["restored"] += 1
            return
        for seq in range(n_seq):
            for at in range(0, test.n_depth, n_batch):
                k = min(n_batch, test.n_depth - at)
                arr = tokens_for(k, at == 0)
                decode_batch(
                    seq_batch(
                        [(arr[i], at + i, seq) for i in range(k)], logits_all=False
                    ),
                    f"depth of sequence {seq}",
                )
        L.llama_synchronize(ctx)
        depth_state["prefilled"] += 1
        size = int(L.llama_state_get_size(ctx))
        buf = (ctypes.c_uint8 * size)()
        depth_state["buf"] = (
            buf if L.llama_state_get_data(ctx, buf, size) == size else None
        )

    def gen_plan_parallel(n: int, at: int) -> list[Any]:
        """n steps from position ``at``, each one token of every sequence (its logits computed, as
        generation needs)."""
        return [
            seq_batch(
                [(rng.randrange(n_vocab), at + t, seq) for seq in range(n_seq)],
                logits_all=True,
            )
            for t in range(n)
        ]

    def decode_gen_parallel(plan: list[Any]) -> None:
        decode, sync = L.llama_decode, L.llama_synchronize
        for b in plan:
            rc = decode(ctx, b)
            if rc != 0:
                raise RuntimeError(
                    f"llama_decode returned {rc} (generation of {n_seq} sequences)"
                )
            sync(ctx)

    n_tokens = (test.n_prompt + test.n_gen) * n_seq
    depth_state: dict[str, Any] = {"buf": None, "restored": 0, "prefilled": 0}

    def fill_depth() -> None:
        """The depth as llama-bench makes it: prefilled once, saved (llama_state_seq_get_data),
        then restored for every later repetition. A prefill right before the timed region
        leaves llama.cpp's last graph a batch graph, so the first decode step rebuilds its
        graph (and the CUDA graph) inside the timed region; a restore does not."""
        buf = depth_state["buf"]
        if buf is not None and L.llama_state_seq_set_data(ctx, buf, len(buf), 0):
            depth_state["restored"] += 1
            return
        decode_plan(prompt_plan(test.n_depth))
        depth_state["prefilled"] += 1
        size = int(L.llama_state_seq_get_size(ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        depth_state["buf"] = (
            buf if L.llama_state_seq_get_data(ctx, buf, size, 0) == size else None
        )

    def prepare() -> tuple[Any, Any]:
        """Untimed: an empty KV cache, the depth filled, this repetition's token ids drawn."""
        L.llama_memory_clear(mem, False)
        if test.n_depth:
            fill_depth_parallel() if n_seq > 1 else fill_depth()
        pp = prompt_plan(test.n_prompt) if test.n_prompt else None
        if n_seq > 1:
            free_batches()  # the depth's and the previous repetition's: done with
            return pp, gen_plan_parallel(test.n_gen, test.n_depth)
        tg = gen_plan(test.n_gen) if test.n_gen else None
        return pp, tg

    def work(pp: Any, tg: Any) -> None:
        if pp is not None:
            decode_plan(pp)
        if tg is not None and n_seq > 1:
            decode_gen_parallel(tg)
        elif tg is not None:
            decode_gen(tg)

    def warm() -> None:
        """llama-bench's warm-up: one prompt batch and one generated token, untimed."""
        if test.n_prompt:
            decode_plan(prompt_plan(test.n_prompt))
        if test.n_gen and n_seq > 1:
            decode_gen_parallel(gen_plan_parallel(1, 0))
        elif test.n_gen:
            decode_gen(gen_plan(1))

    def perf_counters() -> dict[str, Any]:
        pd = L.llama_perf_context(ctx)
        return {
            "t_p_eval_ms": pd.t_p_eval_ms,
            "n_p_eval": pd.n_p_eval,
            "t_eval_ms": pd.t_eval_ms,
            "n_eval": pd.n_eval,
        }

    L.llama_set_n_threads(ctx, n_threads, n_threads_batch)
    L.llama_memory_clear(mem, False)
    return CApiRate(
        work=RateWork(
            tokens=n_tokens,
            prepare=prepare,
            decode=lambda planned: work(*planned),
            warmup=warm,
            begin=lambda: L.llama_perf_context_reset(ctx),
            end=perf_counters,
        ),
        n_vocab=n_vocab,
        add_bos=add_bos,
        depth_state=depth_state,
        free=free_batches,
    )
