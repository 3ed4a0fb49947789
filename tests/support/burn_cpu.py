"""A child for tests/test_process_cpu.py: spends a known CPU time (BURN_S of its own process time,
on one thread), then exits. Run as ``python -m tests.support.burn_cpu JOB OUT`` (the runner's
worker arguments, ignored)."""

from __future__ import annotations

import time

BURN_S = 0.4

if __name__ == "__main__":
    end = time.process_time() + BURN_S
    while time.process_time() < end:
        pass
