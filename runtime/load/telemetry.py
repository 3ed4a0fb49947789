"""Scrapes a server's Prometheus /metrics while a load level runs, at a fixed interval, into the
roles of ``core.telemetry`` (queued, running, KV occupancy, cache hits): the series the level
stores (``telemetry``) and the Serving page draws under the latency chart.

The scrape never stops or slows the run. It holds its own connection (its own client): a scrape
never waits for, nor takes, a connection of the load (a closed loop of N users holds exactly N, so
a shared pool starved every scrape), and abandoning a scrape cannot leak a slot of the load's pool
(httpcore 1.0.9 can lose a pool slot to a cancelled request, encode/httpcore#1093: a level then
waits for a connection that never comes). Each scrape is bounded by the interval (a slow endpoint's
scrape is abandoned, counted as ``timeout``, and its client replaced), an absent endpoint is tried a few times and then
left alone (``absent``), a value that is not a number is dropped and counted, and anything else
that goes wrong is counted as ``error``. The stored series says which roles it never saw
(``missing``): the run says what telemetry it lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from core import telemetry as tel

MAX_SAMPLES = 1200  # beyond this the series keeps every other sample (and says so)
ABSENT_GIVE_UP = 3


class Scraper:
    def __init__(self, transport: Any, interval_s: float = 0.5):
        self.transport = transport
        self.interval_s = float(interval_s)
        self.samples: list[dict[str, Any]] = []
        self.failures = {"absent": 0, "timeout": 0, "error": 0, "non_numeric": 0}
        self.engine: str | None = None
        self.thinned = 0
        self._task: asyncio.Task | None = None
        self._client: Any = None

    def start(self, origin_ns: int) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(origin_ns))

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _one(self, origin_ns: int) -> None:
        fetch = getattr(self.transport, "metrics_text", None)
        if fetch is None:
            self.failures["absent"] += 1
            return
        if self._client is None:
            self._client = self.transport.client(1)
        t = (time.perf_counter_ns() - origin_ns) / 1e6
        try:
            text = await asyncio.wait_for(
                fetch(self._client), timeout=max(0.05, self.interval_s * 0.9)
            )
        except TimeoutError:
            self.failures["timeout"] += 1
            await (
                self._close_client()
            )  # an abandoned scrape may have lost its client a slot
            return
        except Exception:
            self.failures["error"] += 1
            return
        if text is None:
            self.failures["absent"] += 1
            return
        values, bad = tel.parse(text)
        self.failures["non_numeric"] += bad
        self.engine = self.engine or tel.engine_of(values)
        self.samples.append({"t_ms": round(t, 1), "v": tel.roles(values)})
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.thinned += 1

    async def _run(self, origin_ns: int) -> None:
        next_at = time.perf_counter()
        while True:
            if self.failures["absent"] >= ABSENT_GIVE_UP and not self.samples:
                return  # no endpoint: stop asking
            await self._one(origin_ns)
            next_at += self.interval_s
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._close_client()
        seen = {k for s in self.samples for k in s["v"]}
        return {
            "interval_s": self.interval_s * (2**self.thinned),
            "engine": self.engine,
            "samples": self.samples,
            "failures": {k: v for k, v in self.failures.items() if v},
            "missing": sorted(r for r in tel.ROLES if r not in seen)
            if self.samples
            else sorted(tel.ROLES),
            **tel.check_series(self.samples),
        }
