"""A backend declared in the tests only, that runs the example kind (tests/support/example_kind.py)
through its dispatch table. Registered through ``ALMANAC_BACKENDS`` so the worker child finds it."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from runtime.backends.base import Backend, BackendSettings, TestResult, runs

NAME = "echoer"
REGISTRATION = {
    NAME: [
        "tests.support.example_backend:EchoerSettings",
        "tests.support.example_backend:EchoerBackend",
        "pytest",
    ]
}


class EchoerSettings(BackendSettings):
    delay_ms: float = Field(2.0, ge=0.0, description="How long an echo takes.")


class EchoerBackend(Backend):
    name = NAME
    settings_class = EchoerSettings
    test_kinds = ("echo",)
    in_process = True

    def load(self, test=None) -> dict[str, Any]:
        return {
            "load_time_s": 0.001,
            "effective_settings": {"delay_ms": self.settings.delay_ms},
        }

    @runs("echo")
    def _echo(self, test) -> TestResult:
        times = []
        for _ in range(test.requests):
            t0 = time.perf_counter()
            time.sleep(self.settings.delay_ms / 1000.0)
            times.append((time.perf_counter() - t0) * 1000.0)
        return TestResult(
            metrics={"echo_ms": times},
            samples={"round_trip_ms": times},
            details={
                "echoed": test.word,
                "method": "time.sleep, timed with perf_counter",
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"build": {"backend": NAME}, "model": {}}
