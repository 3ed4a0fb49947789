"""The ``rate`` kind: llama-bench-style token rates.

``pp512`` (prompt processing of 512 random tokens), ``tg128`` (128 single-token decodes),
``pp512+tg128``, and a context depth suffix ``@d2048`` (that many tokens prefilled outside
the timer). Random token ids, an untimed warm-up, repetitions; the rate of a repetition is
its tokens over its wall time (llama-bench's avg_ts is the mean of those rates).
"""

from __future__ import annotations

import re
from typing import Any, Literal

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
