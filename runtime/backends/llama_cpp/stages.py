"""Stage timings of one llama-cpp-python request (for the what-if model).

``StageTimer(llm)`` wraps the ``Llama`` object's own methods for the duration of a request
(instance attributes shadow the class's methods, so llama-cpp-python's internal
``self.tokenize(...)`` calls are timed too) and splits the request's wall time into:

* ``tokenise``: ``Llama.tokenize`` (the templated prompt, stop strings);
* ``prefill``: the first ``Llama.eval`` of the request (the prompt, in n_batch chunks);
* ``decode``: every later ``Llama.eval`` (one token each; a speculative verification batch
  counts here too);
* ``sample``: ``Llama.sample`` (sampler chain and logits processors);
* ``detokenise``: ``Llama.detokenize`` (streamed text pieces);
* ``other``: the rest of the wall time (chat template rendering, chunk assembly, stop checks).

Only the outermost wrapped call is timed, so a wrapped method calling another is not
counted twice. llama.cpp's own counters (``llama_perf_context``) are read beside them.
"""

from __future__ import annotations

import functools
import time
from typing import Any

STAGES = ("tokenise", "prefill", "decode", "sample", "detokenise")
_METHODS = {
    "tokenize": "tokenise",
    "eval": None,
    "sample": "sample",
    "detokenize": "detokenise",
}


class StageTimer:
    def __init__(self, llm: Any):
        self.llm = llm
        self.ns = {s: 0 for s in STAGES}
        self.calls = {s: 0 for s in STAGES}
        self._depth = 0
        self._evals = 0

    def _wrap(self, method_name: str) -> Any:
        original = getattr(self.llm, method_name)
        fixed_stage = _METHODS[method_name]

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return original(*args, **kwargs)
            if fixed_stage is None:
                stage = "prefill" if self._evals == 0 else "decode"
                self._evals += 1
            else:
                stage = fixed_stage
            self._depth += 1
            t0 = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                self.ns[stage] += time.perf_counter_ns() - t0
                self.calls[stage] += 1
                self._depth -= 1

        return timed

    def __enter__(self) -> StageTimer:
        import llama_cpp as L

        for name in _METHODS:
            setattr(self.llm, name, self._wrap(name))
        L.llama_perf_context_reset(self.llm._ctx.ctx)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name in _METHODS:
            self.llm.__dict__.pop(name, None)

    def perf(self) -> dict[str, float]:
        """llama.cpp's own counters since the request started."""
        import llama_cpp as L

        p = L.llama_perf_context(self.llm._ctx.ctx)
        return {
            "t_p_eval_ms": p.t_p_eval_ms,
            "n_p_eval": p.n_p_eval,
            "t_eval_ms": p.t_eval_ms,
            "n_eval": p.n_eval,
        }

    def stages_ms(self, total_ns: int) -> dict[str, float]:
        out = {s: self.ns[s] / 1e6 for s in STAGES}
        out["other"] = max(0.0, (total_ns - sum(self.ns.values())) / 1e6)
        return out
