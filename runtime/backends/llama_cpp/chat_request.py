"""One streamed chat request on llama.cpp in process: the chat kind's primitive
(core.kinds.chat.run_requests takes it).

``Llama.create_chat_completion(stream=True)``, so the model's template and sampler are what is
measured; a logits processor timestamps every sampling step (exact output-token count and
inter-token gaps); the request starts from an empty KV cache (no prefix reuse between
requests); StageTimer splits its time into tokenise, prefill, decode, sample and detokenise.
TTFT is the first chunk that carries content, TPOT (E2E - TTFT) / (output tokens - 1), the
clock ``time.perf_counter_ns``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from core.kinds.chat import ChatTest
from runtime.backends.llama_cpp.stages import StageTimer


def chat_request(llm: Any, test: ChatTest) -> Callable[[int], dict[str, Any]]:
    """``request(seed) -> record`` for ``test`` on ``llm`` (a llama_cpp.Llama)."""
    import llama_cpp as L
    import numpy as np

    eog = None
    if test.ignore_eos:
        vocab = L.llama_model_get_vocab(llm._model.model)
        eog = [
            i
            for i in range(int(L.llama_vocab_n_tokens(vocab)))
            if L.llama_vocab_is_eog(vocab, i)
        ]

    def request(seed: int) -> dict[str, Any]:
        steps: list[int] = []
        prompt_tokens: list[int] = []

        def stamp(input_ids, scores):
            if not steps:
                prompt_tokens.append(len(input_ids))
            steps.append(time.perf_counter_ns())
            if eog:
                scores[eog] = -np.inf
            return scores

        llm.reset()  # no prefix reuse: every request pays its own prefill
        first = last = None
        parts: list[str] = []
        finish = None
        with StageTimer(
            llm
        ) as stages:  # tokenise/prefill/decode/sample/detokenise split (what-if page)
            t0 = time.perf_counter_ns()
            stream = llm.create_chat_completion(
                messages=[m.model_dump() for m in test.messages],
                max_tokens=test.max_tokens,
                temperature=test.temperature,
                top_k=test.top_k,
                top_p=test.top_p,
                min_p=test.min_p,
                repeat_penalty=test.repeat_penalty,
                seed=seed,
                stream=True,
                logits_processor=L.LogitsProcessorList([stamp]),
            )
            for chunk in stream:
                now = time.perf_counter_ns()
                choice = chunk["choices"][0]
                content = choice.get("delta", {}).get("content")
                if content:
                    if first is None:
                        first = now
                    parts.append(content)
                    last = now
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            end = time.perf_counter_ns()
            llama_perf = stages.perf()
        n_sampled = len(steps)
        out_tokens = n_sampled - 1 if finish == "stop" and n_sampled > 0 else n_sampled
        ttft = (first - t0) / 1e6 if first else None
        e2e = ((last or end) - t0) / 1e6
        tpot = (
            (e2e - ttft) / (out_tokens - 1)
            if ttft is not None and out_tokens > 1
            else None
        )
        gaps = [(b - a) / 1e6 for a, b in zip(steps, steps[1:])]
        return {
            "ttft_ms": ttft,
            "e2e_ms": e2e,
            "tpot_ms": tpot,
            "output_tokens": out_tokens,
            "prompt_tokens": prompt_tokens[0] if prompt_tokens else None,
            "finish_reason": finish,
            "itl_ms": gaps,
            "text": "".join(parts),
            "stages_ms": stages.stages_ms(end - t0),
            "stage_calls": dict(stages.calls),
            "llama_perf": llama_perf,
        }

    return request
