"""An example test kind, added the way a contributor adds one (tests/test_example_kind.py).

One module: the kind's spec, the metric it is ranked on, the shapes of its samples and details,
where its summary's values come from, its loop (:func:`run_echo`: the kind times, the backend
echoes once) and its registration. The worker child processes import it
through ``ALMANAC_KINDS=tests.support.example_kind``; a backend runs it through its dispatch table
(tests/support/example_backend.py); its site builder is tests/support/example_site.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Details, Kind, Samples, TestSpec
from core.metrics import METRICS, Metric, register_metric


class EchoTest(TestSpec):
    """Send a word to the backend and time the echo."""

    kind: Literal["echo"] = "echo"
    id: str = Field("echo", description="Name of this test in tables.")
    word: str = Field("ping", min_length=1, description="What is sent.")
    requests: int = Field(4, ge=1, description="Timed echoes (the samples).")

    @property
    def name(self) -> str:
        return self.id


class EchoSamples(Samples):
    round_trip_ms: list[float] | None = Field(
        None, description="Each echo's round trip."
    )


class EchoDetails(Details):
    echoed: str | None = Field(None, description="What came back.")


def run_echo(test: EchoTest, echo: Callable[[str], str]) -> tuple[list[float], str]:
    """The kind's loop over the backend's one primitive, ``echo(word) -> what came back``: each
    of ``requests`` echoes timed with ``time.perf_counter``. Returns the round trips (ms) and
    the last answer."""
    times: list[float] = []
    answer = ""
    for _ in range(test.requests):
        t0 = time.perf_counter()
        answer = echo(test.word)
        times.append((time.perf_counter() - t0) * 1000.0)
    return times, answer


def _values(samples: EchoSamples, metric: str) -> list[float]:
    return list(samples.round_trip_ms or []) if metric == "echo_ms" else []


METRIC = METRICS.get("echo_ms") or register_metric(
    Metric(
        "echo_ms",
        "Echo round trip",
        "ms",
        False,
        "mean over echoes",
        "Time from sending the word to its echo.",
        3,
    )
)

KIND = register(
    Kind(
        "echo",
        EchoTest,
        "An example kind: a word echoed by the backend, timed.",
        headline="echo_ms",
        columns=("echo_ms",),
        metrics=("echo_ms",),
        details=EchoDetails,
        samples=EchoSamples,
        values=_values,
    )
)
