"""The ``serve`` kind: a server's lifecycle.

Startup to healthy, the cold first request (TTFT and full), then the warm steady state over
N requests after warm-up.
"""

from __future__ import annotations

from typing import Literal

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
