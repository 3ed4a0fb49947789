"""A backend for the isolation tests only: it misbehaves on purpose in the worker process
(abort, segfault, hang, raise), the way llama.cpp can. Registered through ALMANAC_BACKENDS."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any, Literal

from pydantic import Field

from runtime.backends.base import Backend, BackendSettings, TestResult, runs

NAME = "crashy"
REGISTRATION = {
    NAME: [
        "tests.support.crash_backend:CrashSettings",
        "tests.support.crash_backend:CrashBackend",
        "pytest",
    ]
}


class CrashSettings(BackendSettings):
    mode: Literal["ok", "abort", "segv", "hang", "raise", "oom"] = Field(
        "ok", description="How to misbehave."
    )


class CrashBackend(Backend):
    name = NAME
    settings_class = CrashSettings
    test_kinds = ("rate",)
    in_process = True

    def load(self, test=None) -> dict[str, Any]:
        return {
            "load_time_s": 0.001,
            "effective_settings": {"mode": self.settings.mode},
        }

    @runs("rate")
    def _run_rate(self, test) -> TestResult:
        mode = self.settings.mode
        print(f"crashy backend about to {mode}", flush=True)
        if mode == "abort":
            os.abort()
        if mode == "segv":
            ctypes.string_at(0)
        if mode == "hang":
            time.sleep(3600)
        if mode == "raise":
            raise RuntimeError("deliberate failure for the test")
        if mode == "oom":
            os.kill(os.getpid(), signal.SIGKILL)
        return TestResult(
            metrics={"tokens_per_second": [10.0, 11.0, 12.0]},
            samples={"ts": [10.0, 11.0, 12.0]},
        )

    def describe(self) -> dict[str, Any]:
        return {"build": {"backend": NAME}, "model": {}}
