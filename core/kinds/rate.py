"""The ``rate`` kind: llama-bench-style token rates.

``pp512`` (prompt processing of 512 random tokens), ``tg128`` (128 single-token decodes),
``pp512+tg128``, and a context depth suffix ``@d2048`` (that many tokens prefilled outside
the timer). Random token ids, an untimed warm-up, repetitions; the rate of a repetition is
its tokens over its wall time (llama-bench's avg_ts is the mean of those rates).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field, model_validator

from core.kinds import register
from core.kinds.base import Details, Kind, PerfCounters, Samples, TestSpec

_RATE_RE = re.compile(
    r"^(?:pp(?P<pp>\d+))?(?P<plus>\+)?(?:tg(?P<tg>\d+))?(?:@d(?P<d>\d+))?(?:x(?P<s>\d+))?$"
)


class RateTest(TestSpec):
    """llama-bench's method: random token ids, untimed warm-up, r timed repetitions."""

    kind: Literal["rate"] = "rate"
    n_prompt: int = Field(
        0, ge=0, description="Prompt tokens decoded in batches of n_batch (pp)."
    )
    n_gen: int = Field(
        0, ge=0, description="Tokens generated one decode at a time (tg)."
    )
    n_depth: int = Field(
        0,
        ge=0,
        description="Context tokens prefilled outside the timer before each repetition.",
    )

    n_seq: int = Field(
        1,
        ge=1,
        le=256,
        description="Sequences decoded together (llama-batched-bench's npl): each holds its own depth, "
        "and every generation step decodes one token of each; the rate is all of them over the time.",
    )

    @model_validator(mode="after")
    def _something(self) -> RateTest:
        if self.n_prompt == 0 and self.n_gen == 0:
            raise ValueError("a rate test needs n_prompt > 0 or n_gen > 0")
        if self.n_seq > 1 and self.n_prompt:
            raise ValueError(
                "parallel sequences (x N) apply to generation (tg) only, not to prompt processing"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if (
            self.n_seq == 1
        ):  # one sequence: the test every artifact before parallel sequences measured
            d.pop("n_seq", None)
        return d

    @property
    def name(self) -> str:
        parts = []
        if self.n_prompt:
            parts.append(f"pp{self.n_prompt}")
        if self.n_gen:
            parts.append(f"tg{self.n_gen}")
        s = "+".join(parts)
        s = f"{s}@d{self.n_depth}" if self.n_depth else s
        return f"{s}x{self.n_seq}" if self.n_seq > 1 else s

    @classmethod
    def parse(cls, text: str) -> RateTest:
        m = _RATE_RE.match(text.strip())
        if (
            not m
            or not (m["pp"] or m["tg"])
            or (m["plus"] and not (m["pp"] and m["tg"]))
        ):
            raise ValueError(
                f"{text!r} is not a rate test (expected e.g. pp512, tg128, pp512+tg128, tg128@d2048, "
                "tg16@d1008x8 for 8 sequences at once)"
            )
        return cls(
            n_prompt=int(m["pp"] or 0),
            n_gen=int(m["tg"] or 0),
            n_depth=int(m["d"] or 0),
            n_seq=int(m["s"] or 1),
        )


class RateSamples(Samples):
    """Per timed repetition: its wall time and its rate (llama-bench's samples_ns, samples_ts)."""

    ns: list[int] | None = Field(
        None, description="Wall time of each timed repetition (ns)."
    )
    ts: list[float] | None = Field(
        None,
        description="Tokens per second of each repetition: its tokens / its wall time.",
    )


class RateDetails(Details):
    perf_counters: list[PerfCounters] | None = Field(
        None, description="llama.cpp's own counters, per repetition."
    )
    perf_counter_ts: list[float | None] | None = Field(
        None, description="The rate by llama.cpp's counters, per repetition."
    )
    n_vocab: int | None = None
    add_bos: bool | None = None
    repetitions: int | None = None
    warmup: bool | None = None
    # imported llama-bench results (runtime.importers.llama_bench): where each came from
    imported_from: str | None = None
    imported_from_sha256: str | None = None
    record_index: int | None = None
    imported_at: str | None = None
    llama_bench: dict[str, Any] | None = Field(
        None, description="The imported record's own figures (avg_ts, stddev_ts, ...)."
    )


# -- the kind's loop ---------------------------------------------------------------------------
class RateEnergyMeter(Protocol):
    """The device's energy counter around each timed region (runtime.hosts.energy.RateEnergy)."""

    def read(self) -> float | None: ...
    def add(self, e0: float | None, e1: float | None, seconds: float) -> None: ...
    def finish(self, once: Callable[[], None]) -> None: ...
    def metrics(self) -> dict[str, list[float]]: ...
    def samples(self) -> dict[str, Any]: ...
    def details(self) -> dict[str, Any]: ...


def _nothing() -> None:
    return None


@dataclass
class RateWork:
    """A backend's primitive for the rate kind: one repetition's work, prepared and timed apart.

    ``prepare()`` is untimed (an empty KV cache, the depth filled, this repetition's random
    token ids drawn and placed where the decode reads them) and returns what ``decode(prepared)``
    works through inside the timer: the prompt in batches, then one-token decode steps,
    synchronised after each, as llama-bench does. ``warmup()`` is the untimed warm-up the backend
    needs (llama-bench: one token of each phase); ``begin()`` runs right before each timed
    region, outside it (reset the engine's own counters), and ``end()`` right after it returns
    the engine's own counters of that repetition (None: it has none). ``tokens``: the tokens one
    repetition processes, the rate's numerator."""

    tokens: int
    prepare: Callable[[], Any]
    decode: Callable[[Any], None]
    warmup: Callable[[], None]
    begin: Callable[[], None] = _nothing
    end: Callable[[], dict[str, Any] | None] = _nothing


@dataclass
class RateRun:
    """What :func:`run_rate` measured: per timed repetition its wall time (ns) and rate, the
    engine's own counters (where it has them), whether it warmed up, how repetition stopped
    (core.precision) and the energy meter with what it read."""

    samples_ns: list[int]
    samples_ts: list[float]
    counters: list[dict[str, Any]]
    warmup: bool
    precision: dict[str, Any]
    energy: RateEnergyMeter
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, list[float]]:
        return {"tokens_per_second": self.samples_ts, **self.energy.metrics()}

    @property
    def samples(self) -> dict[str, Any]:
        return {
            "ns": self.samples_ns,
            "ts": self.samples_ts,
            "energy": self.energy.samples(),
        }


def run_rate(
    test: RateTest, work: RateWork, energy: Callable[[], RateEnergyMeter]
) -> RateRun:
    """The rate kind's loop over one backend primitive (:class:`RateWork`): the untimed warm-up
    (unless the test turns it off), then timed repetitions until the precision target on the
    rate or the fixed count (5 by default, llama-bench's ``-r``). Each repetition is prepared
    outside the timer; the timer (``time.perf_counter_ns``) and the energy counter (made by
    ``energy()`` after the warm-up) are read immediately around ``work.decode`` alone. After the
    timed repetitions the meter may run whole repetitions back to back (RateEnergy.finish)."""
    from core.precision import Repeater

    warmup = True if test.warmup is None else test.warmup
    if warmup:
        work.warmup()
    meter = energy()
    samples_ns: list[int] = []
    counters: list[dict[str, Any]] = []
    rep = Repeater(test.precision, test.repetitions or 5, "tokens_per_second")
    while rep.more():
        prepared = work.prepare()
        work.begin()
        e0 = meter.read()
        t0 = time.perf_counter_ns()
        work.decode(prepared)
        samples_ns.append(time.perf_counter_ns() - t0)
        meter.add(e0, meter.read(), samples_ns[-1] / 1e9)
        rep.add(work.tokens * 1e9 / samples_ns[-1])
        own = work.end()
        if own is not None:
            counters.append(own)
        del prepared
    meter.finish(lambda: work.decode(work.prepare()))
    return RateRun(
        samples_ns=samples_ns,
        samples_ts=[work.tokens * 1e9 / ns for ns in samples_ns],
        counters=counters,
        warmup=warmup,
        precision=rep.record(),
        energy=meter,
    )


def _values(samples: RateSamples, metric: str) -> list[float]:
    return [float(v) for v in samples.ts or []] if metric == "tokens_per_second" else []


KIND = register(
    Kind(
        "rate",
        RateTest,
        "llama-bench's method: random token ids, untimed warm-up, timed repetitions.",
        headline="tokens_per_second",
        columns=("tokens_per_second", "prefill_j_per_token", "decode_j_per_token"),
        metrics=(
            "tokens_per_second",
            "load_time_s",
            "peak_rss_bytes",
            "peak_vram_bytes",
            "prefill_j_per_token",
            "decode_j_per_token",
        ),
        details=RateDetails,
        samples=RateSamples,
        values=_values,
    )
)
