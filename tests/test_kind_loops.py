"""A kind's timing loop over a backend primitive (core.kinds.chat.run_requests): the seeds and order
of the requests, the warm-up left out of the samples, and the metrics computed from the records."""

from __future__ import annotations

from core.kinds.chat import ChatTest, run_requests


def test_chat_loop_sends_warmup_then_timed_requests_and_summarises_them():
    calls = []

    def request(seed: int) -> dict:
        calls.append(seed)
        i = len(calls)
        return {
            "ttft_ms": 10.0 * i,
            "tpot_ms": 2.0 if i % 2 else None,
            "e2e_ms": 100.0 + i,
            "output_tokens": 8,
            "itl_ms": [2.0, 2.0],
        }

    run = run_requests(
        ChatTest(requests=3, warmup_requests=2, precision=None), request, seed=7
    )
    assert calls == [1007, 1008, 7, 8, 9]  # warm-up seeds, then the timed ones
    assert run.warmup == 2 and len(run.records) == 3
    assert run.metrics["e2e_ms"] == [103.0, 104.0, 105.0] and run.metrics[
        "ttft_ms"
    ] == [30.0, 40.0, 50.0]
    assert run.metrics["tpot_ms"] == [2.0, 2.0] and run.metrics["decode_tps"] == [
        500.0,
        500.0,
    ]
    assert len(run.metrics["itl_ms"]) == 6
    assert run.precision["stop_reason"] == "fixed_count" and run.precision["n"] == 3

    calls.clear()
    run = run_requests(
        ChatTest(requests=2, warmup=False, precision=None), request, seed=0
    )
    assert calls == [0, 1] and run.warmup == 0
