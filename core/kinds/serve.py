"""The ``serve`` kind: a server's lifecycle.

Startup to healthy, the cold first request (TTFT and full), then the warm steady state over
N requests after warm-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from core.kinds import register
from core.kinds.base import Kind, Samples
from core.kinds.request import (
    RequestDetails,
    RequestRecord,
    RequestWorkload,
    request_values,
)


class ServeTest(RequestWorkload):
    """Server lifecycle: startup to healthy, the cold first request, then warm steady state."""

    kind: Literal["serve"] = "serve"
    id: str = Field("serve", description="Name of this workload, used in tables.")
    cold_starts: int = Field(
        3,
        ge=1,
        le=20,
        description="Server starts, each followed by one cold request "
        "(an endpoint given by URL is started by nobody: one cold request).",
    )
    requests: int = Field(
        10,
        ge=1,
        description="Timed warm requests after the last start (the warm samples).",
    )


class ServeSamples(Samples):
    cold: list[RequestRecord] | None = Field(
        None, description="One request after each server start."
    )
    warmup: list[RequestRecord] | None = None
    warm: list[RequestRecord] | None = Field(
        None, description="The timed warm requests after the last start."
    )


class ServeDetails(RequestDetails):
    cold_starts: int | None = None
    cold_is_fresh_server: bool | None = Field(
        None,
        description="Each cold request followed a server start "
        "(false: an endpoint given by URL, started by nobody).",
    )


# -- the kind's loop (a server's lifecycle) -------------------------------------------------------
class StartFailed(Exception):
    """A backend's ``start()`` could not bring the server up (the message says why)."""


class ServeStopped(Exception):
    """A serve run that cannot go on: why, and the samples measured until then."""

    def __init__(self, message: str, samples: dict[str, list[dict[str, Any]]]):
        super().__init__(message)
        self.samples = samples


@dataclass
class ServeRun:
    """What :func:`run_cold_warm` measured."""

    metrics: dict[str, list[float]]
    samples: dict[str, list[dict[str, Any]]]
    warmup: int


def run_cold_warm(
    test: ServeTest,
    starts: int,
    start: Callable[[], float | None],
    stop: Callable[[], None],
    requests: Callable[[list[int]], list[dict[str, Any]]],
    gone: Callable[[], str | None],
) -> ServeRun:
    """The serve kind's loop for a backend behind a server, over its primitives: ``start()``
    (bring the server up, its startup in ms; None: nobody starts it, an endpoint given by URL;
    raises :class:`StartFailed`), ``stop()``, ``requests(seeds)`` (one sequence of streamed
    requests; records say ``ok``) and ``gone()`` (None while the server is up, else how it
    ended). ``starts`` times: a start then one cold request (seed 2000 + k); the server stopped
    between starts. Then the untimed warm-up (seeds 1000 + i) and ``test.requests`` timed warm
    requests (seeds 0, 1, ...) on the last start. A failed start or a lost server raises
    :class:`ServeStopped` with what was measured until then."""
    from core.kinds.chat import request_metrics

    cold: list[dict[str, Any]] = []
    warmup: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    samples = {"cold": cold, "warmup": warmup, "warm": warm}
    metrics: dict[str, list[float]] = {
        "startup_ms": [],
        "cold_ttft_ms": [],
        "cold_e2e_ms": [],
        "cold_total_ms": [],
    }
    for k in range(starts):
        try:
            startup = start()
        except StartFailed as exc:
            raise ServeStopped(
                f"cold start {k + 1} of {starts}: {exc}", samples
            ) from None
        rec = requests([2000 + k])[0]
        rec["startup_ms"] = startup
        rec["cold_start"] = k + 1
        cold.append(rec)
        if startup is not None:
            metrics["startup_ms"].append(startup)
        if rec["ok"]:
            metrics["cold_ttft_ms"].append(rec["ttft_ms"])
            metrics["cold_e2e_ms"].append(rec["e2e_ms"])
            if startup is not None:
                metrics["cold_total_ms"].append(startup + rec["e2e_ms"])
        ended = gone()
        if ended is not None:
            raise ServeStopped(
                f"the server was lost during cold start {k + 1} ({ended})", samples
            )
        if k < starts - 1:
            stop()
    warm_n = test.warmup_requests if test.warmup is not False else 0
    warmup.extend(requests([1000 + i for i in range(warm_n)]))
    warm.extend(requests(list(range(test.requests))))
    metrics.update(request_metrics(warm, failures=True))
    metrics["failed_requests"] = [sum(1 for r in cold + warm if not r["ok"])]
    return ServeRun({k: v for k, v in metrics.items() if v}, samples, warm_n)


_COLD = {"cold_ttft_ms": "ttft_ms", "cold_e2e_ms": "e2e_ms"}


def _values(samples: ServeSamples, metric: str) -> list[float]:
    if metric in _COLD:
        return request_values(samples.cold, _COLD[metric])
    return request_values(samples.warm, metric)


KIND = register(
    Kind(
        "serve",
        ServeTest,
        "Server lifecycle: startup to healthy, the cold first request, then warm steady state.",
        headline="cold_total_ms",
        columns=("cold_total_ms", "startup_ms", "cold_ttft_ms", "ttft_ms", "tpot_ms"),
        metrics=(
            "startup_ms",
            "cold_ttft_ms",
            "cold_e2e_ms",
            "cold_total_ms",
            "ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "output_tokens",
            "decode_tps",
            "itl_ms",
            "failed_requests",
        ),
        details=ServeDetails,
        samples=ServeSamples,
        values=_values,
    )
)
