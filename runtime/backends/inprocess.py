"""The ``serve`` kind for a backend that runs the model in the measuring process.

There is no server to start: the worker process is fresh, so its model load *is* the cold
start. What ``serve`` means in process:

* **startup** = the backend's model load in this fresh worker process (file read,
  dequantisation or upload, context creation; importing the backend's library is not part of
  it), the figure a server's "startup → healthy" holds apart from its process start;
* **cold request** = the first request on the just-loaded model (no warm-up before it: lazy
  initialisation, kernel loading and allocator growth land here);
* then ``warmup_requests`` untimed and ``requests`` timed **warm** requests, as a ``chat`` test
  sends them (the same request: messages, max_tokens, sampling).

One cold start per process: a second load in the same process would find the libraries, the
GPU context and the page cache warm, so it would not be cold. ``cold_starts`` above 1 is
recorded as asked and run once (as for an endpoint given by URL); repeat the configuration
under other test ids for more cold samples (each is a fresh process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.kinds.chat import ChatTest
from core.kinds.request import WORKLOAD_FIELDS
from core.kinds.serve import ServeTest
from runtime.backends.base import TestResult

SERVE_NOTE = (
    "serve in process: startup is the model load in a fresh worker process, the cold request the first "
    "request after it; then warm requests as a chat test sends them (one cold start per process)"
)


def _chat(test: ServeTest, **over: Any) -> ChatTest:
    fields = {k: getattr(test, k) for k in WORKLOAD_FIELDS}
    return ChatTest(id=test.id, **fields, **over)


def run_serve(
    test: ServeTest, chat: Callable[[ChatTest], TestResult], startup_s: float | None
) -> TestResult:
    """Cold request then warm requests through the backend's own ``chat`` runner."""
    cold_res = chat(
        _chat(test, requests=1, warmup_requests=0, warmup=False, precision=None)
    )
    cold_rec = dict(cold_res.samples["requests"][0])
    startup_ms = startup_s * 1000.0 if startup_s is not None else None
    cold_rec.update(ok=True, cold_start=1, startup_ms=startup_ms, fresh_process=True)
    warm_n = test.warmup_requests if test.warmup is not False else 0
    warm_res = chat(
        _chat(
            test,
            requests=test.requests,
            warmup_requests=warm_n,
            warmup=test.warmup,
            precision=test.precision,
        )
    )
    warm = [dict(r, ok=True) for r in warm_res.samples["requests"]]
    metrics: dict[str, list[float]] = {
        "startup_ms": [startup_ms] if startup_ms is not None else [],
        "cold_ttft_ms": [cold_rec["ttft_ms"]]
        if cold_rec.get("ttft_ms") is not None
        else [],
        "cold_e2e_ms": [cold_rec["e2e_ms"]],
        "cold_total_ms": [startup_ms + cold_rec["e2e_ms"]]
        if startup_ms is not None
        else [],
    }
    for name in (
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "output_tokens",
        "decode_tps",
        "itl_ms",
    ):
        if warm_res.metrics.get(name):
            metrics[name] = warm_res.metrics[name]
    metrics["failed_requests"] = [0]
    details = {
        "in_process": True,
        "cold_starts": 1,
        "cold_starts_requested": test.cold_starts,
        "cold_is_fresh_server": True,
        "warmup_requests": warm_n,
        "startup": "model load in a fresh worker process",
        "precision": warm_res.details.get("precision"),
        "method": SERVE_NOTE,
        "request_method": warm_res.details.get("method"),
        **{
            k: v
            for k, v in warm_res.details.items()
            if k not in ("precision", "warmup_requests", "method")
        },
    }
    return TestResult(
        metrics={k: v for k, v in metrics.items() if v},
        samples={"cold": [cold_rec], "warmup": [], "warm": warm},
        details=details,
    )
