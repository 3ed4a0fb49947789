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
    settings: EchoerSettings
    test_kinds = ("echo",)
    in_process = True

    def load(self, test=None) -> dict[str, Any]:
        return {
            "load_time_s": 0.001,
            "effective_settings": {"delay_ms": self.settings.delay_ms},
        }

    def _echo_once(self, word: str) -> str:
        """The backend's one primitive: one echo (a sleep of ``delay_ms``)."""
        time.sleep(self.settings.delay_ms / 1000.0)
        return word

    @runs("echo")
    def _echo(self, test) -> TestResult:
        # the kind owns the loop and the timer; the backend echoes once
        from tests.support.example_kind import run_echo

        times, answer = run_echo(test, self._echo_once)
        return TestResult(
            metrics={"echo_ms": times},
            samples={"round_trip_ms": times},
            details={
                "echoed": answer,
                "method": "time.sleep, timed with perf_counter",
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"build": {"backend": NAME}, "model": {}}
