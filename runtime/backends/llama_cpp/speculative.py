"""Speculative decoding through llama-cpp-python, instrumented, and the ``generate`` test.

llama-cpp-python's ``Llama.generate`` speculates when the Llama has a ``draft_model``: after
each sampled token it asks the draft for up to K tokens, evaluates them in one batch with
logits for every position, samples position by position and rolls the KV cache back at the
first disagreement. Two drafts are provided, both counting what they propose and what the
target accepts (llama.cpp's n_draft / n_accept):

* ``CountingPromptLookup``: ``LlamaPromptLookupDecoding`` (match the last n-gram of the
  context earlier in the context, propose what followed it);
* ``ModelDraft``: a second, smaller Llama of the same vocabulary drafting K tokens greedily.

Incompatibilities are refused with the reason (the worker records them as failed points
of kind "incompatible"): a draft whose vocabulary differs (llama.cpp's own rule,
``common_speculative_are_compatible``), and any speculation on a recurrent or hybrid model,
whose state cannot be rolled back to drop rejected tokens.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from core.kinds import generate as generate_kind
from core.kinds.generate import GenerateTest
from runtime.backends.base import Incompatible, TestResult

# llama.cpp common/speculative.cpp
SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128
SPEC_VOCAB_CHECK_START_TOKEN_ID = 5


class DraftStats:
    """Proposed and accepted draft tokens, settled against what the target really produced.

    A proposal made with context c (the tokens so far, ending with the last sampled one) is
    settled by the next draft call, whose context extends c by the accepted tokens and one
    sampled token, or by ``finish`` with the final sequence. Every token of a settled
    proposal counts as drafted (llama.cpp's n_draft) unless the request ended before the
    target reached it; accepted tokens are the proposal's longest prefix that the target
    produced (n_accept).
    """

    def __init__(self) -> None:
        self.proposed = 0
        self.accepted = 0
        self.rounds = 0
        self.empty_rounds = 0
        self.draft_seconds = 0.0
        self._pending: tuple[np.ndarray, np.ndarray] | None = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "proposed": self.proposed,
            "accepted": self.accepted,
            "rounds": self.rounds,
            "empty_rounds": self.empty_rounds,
            "draft_seconds": round(self.draft_seconds, 6),
        }

    def on_draft(
        self, context: np.ndarray, proposal: np.ndarray, seconds: float = 0.0
    ) -> None:
        self._settle(context, final=False)
        self.rounds += 1
        self.draft_seconds += seconds
        if len(proposal) == 0:
            self.empty_rounds += 1
            self._pending = None
            return
        self._pending = (
            np.array(context, dtype=np.int64),
            np.array(proposal, dtype=np.int64),
        )

    def begin(self) -> None:
        """A new request: a proposal still pending was never verified."""
        self._pending = None

    def finish(self, sequence: list[int] | np.ndarray) -> None:
        """The request ended with ``sequence`` (prompt + every sampled token)."""
        self._settle(np.asarray(sequence, dtype=np.int64), final=True)
        self._pending = None

    def _settle(self, seq: np.ndarray, final: bool) -> None:
        if self._pending is None:
            return
        ctx, prop = self._pending
        self._pending = None
        c = len(ctx)
        if len(seq) < c or not np.array_equal(np.asarray(seq[:c], dtype=np.int64), ctx):
            return  # another request started: never verified
        follow = np.asarray(seq[c:], dtype=np.int64)
        n = min(len(prop), len(follow))
        agree = prop[:n] == follow[:n]
        accepted = int(n if agree.all() else int(np.argmin(agree)))
        self.accepted += accepted
        # a proposal cut off by the end of the request counts only the positions reached
        self.proposed += n if (final and accepted == n) else len(prop)


class CountingPromptLookup:
    """LlamaPromptLookupDecoding (num_pred_tokens = K, max_ngram_size = n) that counts."""

    def __new__(cls, max_ngram_size: int, num_pred_tokens: int):
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        class _Counting(LlamaPromptLookupDecoding):
            def __init__(self) -> None:
                super().__init__(
                    max_ngram_size=max_ngram_size, num_pred_tokens=num_pred_tokens
                )
                self.stats = DraftStats()

            def __call__(self, input_ids, /, **kwargs):
                t0 = time.perf_counter()
                out = super().__call__(input_ids, **kwargs)
                self.stats.on_draft(input_ids, out, time.perf_counter() - t0)
                return out

        return _Counting()


class ModelDraft:
    """A LlamaDraftModel wrapping a second Llama: K greedy tokens per call, KV cache reused
    across calls (the prefix it shares with the target's context is not evaluated again)."""

    def __new__(cls, llm: Any, num_pred_tokens: int):
        import llama_cpp as L
        from llama_cpp.llama_speculative import LlamaDraftModel

        vocab = L.llama_model_get_vocab(llm._model.model)

        class _ModelDraft(LlamaDraftModel):
            def __init__(self) -> None:
                self.llm = llm
                self.num_pred_tokens = num_pred_tokens
                self.stats = DraftStats()

            def __call__(self, input_ids, /, **kwargs):
                t0 = time.perf_counter()
                context = [int(t) for t in input_ids]
                room = self.llm.n_ctx() - len(context)
                out: list[int] = []
                if room > 0:
                    gen = self.llm.generate(
                        context, temp=0.0, repeat_penalty=1.0, reset=True
                    )
                    try:
                        for tok in gen:
                            if L.llama_vocab_is_eog(vocab, tok):
                                break
                            out.append(int(tok))
                            if len(out) >= min(self.num_pred_tokens, room):
                                break
                    finally:
                        gen.close()
                proposal = np.array(out, dtype=np.intc)
                self.stats.on_draft(input_ids, proposal, time.perf_counter() - t0)
                return proposal

            def close(self) -> None:
                self.llm.close()

        return _ModelDraft()


# -- compatibility -----------------------------------------------------------------------
def recurrent_reason(model_ptr: Any, architecture: str | None) -> str | None:
    """Why speculation cannot run on this target, or None."""
    import llama_cpp as L

    if L.llama_model_is_recurrent(model_ptr) or L.llama_model_is_hybrid(model_ptr):
        kind = (
            "recurrent"
            if L.llama_model_is_recurrent(model_ptr)
            else "hybrid (recurrent + attention)"
        )
        return (
            f"speculative decoding needs to roll the state back past rejected draft tokens; {architecture or 'this'} "
            f"is a {kind} model whose state cannot be rolled back (llama.cpp refuses speculation on it, the seed's "
            "'inconsistent sequence positions')"
        )
    return None


def vocab_mismatch(target_ptr: Any, draft_ptr: Any) -> str | None:
    """llama.cpp's rule (common_speculative_are_compatible): same vocabulary type, same BOS/EOS
    use and ids, sizes within 128, identical token texts from id 5 on. The first difference, or None."""
    import llama_cpp as L

    vt, vd = L.llama_model_get_vocab(target_ptr), L.llama_model_get_vocab(draft_ptr)
    if L.llama_vocab_type(vt) != L.llama_vocab_type(vd):
        return f"vocabulary type {L.llama_vocab_type(vd)} differs from the target's {L.llama_vocab_type(vt)}"
    for what, add, tok in (
        ("BOS", L.llama_vocab_get_add_bos, L.llama_vocab_bos),
        ("EOS", L.llama_vocab_get_add_eos, L.llama_vocab_eos),
    ):
        if add(vt) != add(vd) or (add(vt) and tok(vt) != tok(vd)):
            return (
                f"{what} token differs (target adds {bool(add(vt))}, id {tok(vt)}; draft "
                f"adds {bool(add(vd))}, id {tok(vd)})"
            )
    nt, nd = int(L.llama_vocab_n_tokens(vt)), int(L.llama_vocab_n_tokens(vd))
    if abs(nt - nd) > SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        return f"vocabulary sizes {nt} (target) and {nd} (draft) differ by more than {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}"
    for i in range(SPEC_VOCAB_CHECK_START_TOKEN_ID, min(nt, nd)):
        a, b = L.llama_vocab_get_text(vt, i), L.llama_vocab_get_text(vd, i)
        if a != b:
            return f"token {i} differs: target {a.decode(errors='replace')!r}, draft {b.decode(errors='replace')!r}"
    return None


def make_draft(
    settings: Any,
    target: Any,
    model_facts: dict[str, Any],
    draft_ref: Any | None,
    llama_kwargs: dict[str, Any],
) -> tuple[Any, dict[str, Any]]:
    """The draft object for ``settings.speculative`` (after the target is loaded) and facts to record."""
    import llama_cpp

    reason = recurrent_reason(target._model.model, model_facts.get("architecture"))
    if reason:
        raise Incompatible(reason)
    if settings.speculative == "prompt_lookup":
        draft = CountingPromptLookup(settings.lookup_ngram_max, settings.draft_max)
        return draft, {
            "speculative": "prompt_lookup",
            "draft_max": settings.draft_max,
            "lookup_ngram_max": settings.lookup_ngram_max,
        }
    kwargs = {
        k: v
        for k, v in llama_kwargs.items()
        if k not in ("model_path", "kv_overrides", "chat_format", "logits_all")
    }
    t0 = time.perf_counter()
    dllm = llama_cpp.Llama(model_path=draft_ref.path, logits_all=False, **kwargs)
    load_s = time.perf_counter() - t0
    mismatch = vocab_mismatch(target._model.model, dllm._model.model)
    if mismatch:
        dllm.close()
        raise Incompatible(
            f"draft model {draft_ref.name!r} ({draft_ref.facts.get('architecture')}, "
            f"{draft_ref.facts.get('vocab_size')} tokens) cannot draft for the target: {mismatch}"
        )
    return ModelDraft(dllm, settings.draft_max), {
        "speculative": "draft_model",
        "draft_max": settings.draft_max,
        "draft_model": draft_ref.name,
        "draft_model_file": draft_ref.path.rsplit("/", 1)[-1],
        "draft_model_sha256": draft_ref.sha256,
        "draft_synthetic": bool(draft_ref.facts.get("synthetic")),
        "draft_load_time_s": load_s,
    }


# -- the generate test -------------------------------------------------------------------
class _Captured(Exception):
    pass


def chat_prompt_tokens(llm: Any, content: str) -> tuple[list[int], Any]:
    """Token ids of a one-message chat through the model's chat handler (GGUF template or
    named chat_format), exactly as create_chat_completion would build them, and its stop."""
    from llama_cpp import llama_chat_format

    handler = (
        llm.chat_handler
        or llm._chat_handlers.get(llm.chat_format)
        or llama_chat_format.get_chat_completion_handler(llm.chat_format)
    )
    captured: dict[str, Any] = {}

    class _Capture:  # stands in for the Llama: the handler tokenizes, then asks for a completion
        def __getattr__(self, name: str) -> Any:
            return getattr(llm, name)

        def create_completion(self, prompt: Any = None, **kwargs: Any) -> Any:
            captured["prompt"] = list(prompt)
            captured["stop"] = kwargs.get("stop")
            raise _Captured

    try:
        handler(
            llama=_Capture(),
            messages=[{"role": "user", "content": content}],
            temperature=0.0,
            max_tokens=1,
        )
    except _Captured:
        pass
    if "prompt" not in captured:  # pragma: no cover - a handler that never completes
        raise RuntimeError(f"chat format {llm.chat_format!r} did not produce a prompt")
    return [int(t) for t in captured["prompt"]], captured["stop"]


def run_generate(llm: Any, draft: Any | None, test: GenerateTest) -> TestResult:
    """Greedy generation of every prompt, ``repetitions`` times, after one untimed warm-up."""
    import llama_cpp as L

    vocab = L.llama_model_get_vocab(llm._model.model)
    n_vocab = int(L.llama_vocab_n_tokens(vocab))
    eog = (
        [i for i in range(n_vocab) if L.llama_vocab_is_eog(vocab, i)]
        if test.ignore_eos
        else []
    )
    processors = None
    if eog:

        def mask_eog(input_ids, scores):
            scores[eog] = -np.inf
            return scores

        processors = L.LogitsProcessorList([mask_eog])
    stats: DraftStats | None = getattr(draft, "stats", None)
    prompts = [chat_prompt_tokens(llm, p)[0] for p in test.prompts]

    temp = float(getattr(test, "temperature", 0.0) or 0.0)

    def one(tokens: list[int], max_tokens: int, index: int = 0) -> dict[str, Any]:
        llm.reset()  # no prefix reuse between requests
        if temp > 0:  # the same draws on every repetition (and with or without a draft)
            llm.set_seed(int(getattr(test, "seed", 0)) + index)
        if stats is not None:
            stats.begin()
        before = stats.snapshot() if stats is not None else None
        out: list[int] = []
        stamps: list[int] = []
        finish = "length"
        t0 = time.perf_counter_ns()
        gen = llm.generate(
            tokens,
            temp=temp,
            top_k=40,
            top_p=0.95,
            min_p=0.05,
            repeat_penalty=1.0,
            reset=True,
            logits_processor=processors,
        )
        final = list(tokens)
        try:
            for tok in gen:
                stamps.append(time.perf_counter_ns())
                final.append(int(tok))
                if not test.ignore_eos and L.llama_vocab_is_eog(vocab, tok):
                    finish = "stop"
                    break
                out.append(int(tok))
                if len(out) >= max_tokens:
                    break
        finally:
            gen.close()
        end = stamps[-1] if stamps else time.perf_counter_ns()
        rec: dict[str, Any] = {
            "prompt_tokens": len(tokens),
            "output_tokens": len(out),
            "finish_reason": finish,
            "ttft_ms": (stamps[0] - t0) / 1e6 if stamps else None,
            "e2e_ms": (end - t0) / 1e6,
            # generation after the first token: the sampled steps after it (an end token included)
            "gen_steps": max(len(stamps) - 1, 0),
            "gen_ms": (stamps[-1] - stamps[0]) / 1e6 if len(stamps) > 1 else None,
            "token_ids": out,
        }
        if stats is not None:
            stats.finish(final)
            after = stats.snapshot()
            rec["draft"] = {
                k: round(after[k] - before[k], 6)
                if k == "draft_seconds"
                else after[k] - before[k]
                for k in after
            }
        return rec

    # the kind's loop (core.kinds.generate.run_generate) over this backend's one primitive: one
    # greedy generation of a prompt, timed per sampled step
    run = generate_kind.run_generate(
        test,
        len(prompts),
        lambda i, max_tokens: one(prompts[i], max_tokens, i),
        lambda ids, i: llm.detokenize(ids, prev_tokens=prompts[i]).decode(
            "utf-8", errors="replace"
        ),
        drafts=stats is not None,
    )
    return TestResult(
        metrics=run.metrics,
        samples=run.samples,
        details={
            **run.details,
            "method": "Llama.generate with greedy sampling (temp 0, no penalties) on chat-templated prompts; "
            "generation rate = sampled steps after the first / time from the first to the last step",
        },
    )
