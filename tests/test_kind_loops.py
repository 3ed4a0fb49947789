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


class _Meter:
    """An energy counter that counts its reads (RateEnergy's interface, no device)."""

    def __init__(self, log: list[str]) -> None:
        self.log, self.j, self.added = log, 0.0, []

    def read(self) -> float:
        self.log.append("read")
        self.j += 1.0
        return self.j

    def add(self, e0, e1, seconds) -> None:
        self.added.append((e1 - e0, seconds))

    def finish(self, once) -> None:
        self.log.append("finish")
        once()

    def metrics(self) -> dict:
        return {"decode_j_per_token": [0.5]}

    def samples(self) -> dict:
        return {"repetitions": self.added, "regions": []}

    def details(self) -> dict:
        return {"available": True}


def test_rate_loop_warms_up_prepares_outside_the_timer_and_keeps_the_counters():
    from core.kinds.rate import RateTest, RateWork, run_rate

    log: list[str] = []
    meters: list[_Meter] = []

    def energy() -> _Meter:
        log.append("meter")  # made after the warm-up, as the backends did
        meters.append(_Meter(log))
        return meters[-1]

    def prepare() -> int:
        log.append("prepare")
        return len(log)

    def decode(prepared: int) -> None:
        assert isinstance(prepared, int)
        log.append("decode")

    n = iter(range(100))
    work = RateWork(
        tokens=16,
        prepare=prepare,
        decode=decode,
        warmup=lambda: log.append("warmup"),
        begin=lambda: log.append("begin"),
        end=lambda: {"n_eval": next(n)},
    )
    run = run_rate(RateTest(n_gen=16, repetitions=3, precision=None), work, energy)
    one = ["prepare", "begin", "read", "decode", "read"]
    assert log == ["warmup", "meter", *one * 3, "finish", "prepare", "decode"]
    assert run.warmup is True and len(run.samples_ns) == 3
    assert run.samples_ts == [16 * 1e9 / ns for ns in run.samples_ns]
    assert run.counters == [{"n_eval": 0}, {"n_eval": 1}, {"n_eval": 2}]
    assert run.metrics == {
        "tokens_per_second": run.samples_ts,
        "decode_j_per_token": [0.5],
    }
    assert set(run.samples) == {"ns", "ts", "energy"}
    assert run.precision["stop_reason"] == "fixed_count" and run.precision["n"] == 3

    log.clear()
    run = run_rate(
        RateTest(n_gen=16, warmup=False, precision=None),
        RateWork(tokens=16, prepare=prepare, decode=decode, warmup=lambda: 1 / 0),
        energy,
    )
    assert "warmup" not in log and run.warmup is False
    assert len(run.samples_ns) == 5  # llama-bench's -r 5 by default
    assert run.counters == []  # an engine without counters of its own


def test_generate_loop_warms_up_on_the_first_prompt_and_keeps_ids_once():
    from core.kinds.generate import GenerateTest, run_generate

    calls: list[tuple[int, int]] = []

    def generate(i: int, max_tokens: int) -> dict:
        calls.append((i, max_tokens))
        ids = [i, 1] if len(calls) < 5 else [i, 2]  # the last request differs
        return {
            "prompt_tokens": 3,
            "output_tokens": 2,
            "finish_reason": "length",
            "ttft_ms": 5.0,
            "e2e_ms": 9.0,
            "gen_steps": 1,
            "gen_ms": 4.0,
            "token_ids": ids,
            "draft": {
                "proposed": 4,
                "accepted": 1,
                "rounds": 1,
                "empty_rounds": 0,
                "draft_seconds": 0.1,
            },
        }

    test = GenerateTest(
        prompts=["a", "b"], max_tokens=16, repetitions=2, precision=None
    )
    run = run_generate(test, 2, generate, lambda ids, i: f"{i}:{ids}", drafts=True)
    assert calls == [(0, 8), (0, 16), (1, 16), (0, 16), (1, 16)]
    assert [o["text"] for o in run.details["outputs"]] == ["0:[0, 1]", "1:[1, 1]"]
    assert run.details["outputs_repeatable"] is False  # the second run of prompt 1
    assert all("token_ids" not in r for r in run.samples["requests"])
    assert run.metrics["generation_tps"] == [250.0, 250.0]
    assert run.metrics["draft_acceptance"] == [25.0, 25.0]
    assert run.details["speculative"]["proposed"] == 16
    assert run.details["prompts"] == 2 and run.details["repetitions"] == 2


def test_embed_loop_times_every_passage_and_checks_the_index():
    from core.kinds.embed import EmbedTest, run_embed

    seen: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.append(texts)
        return [[float(len(t)), 1.0] for t in texts]

    docs = ["a", "bbb", "cc"]
    run = run_embed(EmbedTest(batch=2, repetitions=2, precision=None), docs, embed)
    assert seen == [["a"], ["a", "bbb"], ["cc"], ["a", "bbb"], ["cc"]]
    assert run.details["dim"] == 2 and run.details["passages"] == 3
    assert run.samples["index_bytes"] == [24, 24] and run.metrics["index_bytes"] == [
        24.0
    ]
    assert len(run.metrics["embeddings_per_second"]) == 2


def _ok(seed: int) -> dict:
    return {
        "ok": True,
        "seed": seed,
        "ttft_ms": 10.0,
        "tpot_ms": 2.0,
        "e2e_ms": 20.0,
        "output_tokens": 6,
        "itl_ms": [2.0],
    }


def test_serve_loop_starts_the_server_before_each_cold_request():
    from core.kinds.serve import ServeTest, run_cold_warm

    log: list[str] = []

    def start() -> float:
        log.append("start")
        return 500.0

    def requests(seeds: list[int]) -> list[dict]:
        log.append(f"requests {seeds}")
        return [_ok(s) for s in seeds]

    run = run_cold_warm(
        ServeTest(cold_starts=2, requests=2, warmup_requests=1),
        2,
        start,
        lambda: log.append("stop"),
        requests,
        lambda: None,
    )
    assert log == [
        "start",
        "requests [2000]",
        "stop",
        "start",
        "requests [2001]",
        "requests [1000]",
        "requests [0, 1]",
    ]
    assert run.metrics["startup_ms"] == [500.0, 500.0]
    assert run.metrics["cold_total_ms"] == [520.0, 520.0]
    assert run.metrics["failed_requests"] == [0] and run.warmup == 1
    assert [r["cold_start"] for r in run.samples["cold"]] == [1, 2]


def test_serve_loop_stops_with_what_it_measured():
    import pytest

    from core.kinds.serve import ServeStopped, ServeTest, StartFailed, run_cold_warm

    starts = iter([100.0])

    def start() -> float:
        value = next(starts, None)
        if value is None:
            raise StartFailed("port taken")
        return value

    with pytest.raises(ServeStopped, match="cold start 2 of 3: port taken") as exc:
        run_cold_warm(
            ServeTest(cold_starts=3),
            3,
            start,
            lambda: None,
            lambda s: [_ok(0)],
            lambda: None,
        )
    assert len(exc.value.samples["cold"]) == 1
    with pytest.raises(ServeStopped, match="lost during cold start 1 \\(killed\\)"):
        run_cold_warm(
            ServeTest(cold_starts=1),
            1,
            lambda: None,
            lambda: None,
            lambda s: [_ok(0)],
            lambda: "killed",
        )
    # an endpoint given by URL: nobody starts it, so no startup figure
    run = run_cold_warm(
        ServeTest(requests=1),
        1,
        lambda: None,
        lambda: 1 / 0,
        lambda s: [_ok(0)] * len(s),
        lambda: None,
    )
    assert "startup_ms" not in run.metrics and run.metrics["cold_e2e_ms"] == [20.0]
