"""Runs one level of a load profile and records every request.

Open loop (``constant``, ``poisson``): arrival times are fixed before anything is sent (constant:
i / rate; Poisson: exponential gaps from ``numpy.random.default_rng([seed, level])``, so a level
repeats exactly), and each request is sent at its time whatever the server is doing. Closed
loop (``synchronous``, ``concurrent``): N users, each sending its next request when the last one
ended.

Records are compact (thousands per artifact): ``itl_ms`` is dropped (the gaps are ``chunk_ms``'s
differences) and the answer's text cut to its first 80 characters. Each record gets
``scheduled_ms`` (its arrival, from the level's origin), ``start_ms`` (sent),
``queue_ms`` = sent - scheduled (the client's own wait: a ``max_concurrency`` cap, or a client
too busy to keep the schedule; never part of the server's latency) and, open loop,
``dispatch_lag_ms`` (how late the event loop got to the request at all: the client's drift).
While a level runs, a ticker measures the event loop's lag, and the process's CPU time is read
around it: the client's own overhead, stated beside the figures.

A level may stop early: ``stop_rule(records)`` is asked every ``check_every`` completed requests
(from ``min_requests`` on) and returns a reason to stop, or None. Requests already in flight
then finish and are recorded; nothing more is sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.load import agent
from runtime.load.workload import Request

LAG_TICK_S = 0.01
TEXT_KEPT = 80  # characters of each answer kept in a load record


@dataclass
class LevelPlan:
    profile: str
    level: float
    index: int
    requests: list[Request]
    seed: int = 0
    max_concurrency: int | None = None
    check_every: int | None = None
    min_requests: int = 1
    stop_rule: Callable[[list[dict[str, Any]]], str | None] | None = None
    seed_base: int = (
        0  # request i carries seed seed_base + i (the server's sampler seed)
    )
    extra: dict[str, Any] = field(default_factory=dict)
    times: list[float] | None = (
        None  # arrival offsets in seconds given outright (trace replay)
    )
    burstiness: float = 1.0
    ramp_up: str | None = None
    ramp_up_start: float | None = None
    gpu_telemetry: Any = (
        None  # a runtime.load.gpu_telemetry.GpuSampler, started beside ``telemetry``
    )
    sessions: list[list[int]] | None = (
        None  # multi_turn: each conversation's request indices, in turn order
    )
    agent: bool = False  # sessions are agent sessions (runtime.load.agent): tool calls between turns
    think_time_s: float = 0.0
    telemetry: Any = (
        None  # a runtime.load.telemetry.Scraper started and stopped around the level
    )


def rates(rate: float, n: int, ramp: str | None, start: float | None) -> list[float]:
    """The rate each request's gap is drawn at: the level throughout, or ramped from ``start`` to it
    (linear or exponential in the request's index, vLLM's ramp-up strategies)."""
    if not ramp or n < 2:
        return [rate] * n
    s = min(start or rate / 10.0, rate)
    if ramp == "linear":
        return [s + (rate - s) * i / (n - 1) for i in range(n)]
    return [s * (rate / s) ** (i / (n - 1)) for i in range(n)]


def arrivals(
    profile: str,
    rate: float,
    n: int,
    seed: int,
    index: int,
    burstiness: float = 1.0,
    ramp: str | None = None,
    ramp_start: float | None = None,
) -> list[float]:
    """Arrival offsets in seconds, first at 0: constant gaps 1 / rate, Poisson (seeded exponential gaps)
    or gamma (shape ``burstiness``, mean 1 / rate: vLLM's bursts), each gap at its request's ramped rate."""
    r = rates(rate, n, ramp, ramp_start)[1:]
    if profile == "constant":
        gaps = [1.0 / x for x in r]
    else:
        rng = np.random.default_rng([seed, index])
        if profile == "gamma":
            gaps = [float(rng.gamma(burstiness, 1.0 / (x * burstiness))) for x in r]
        else:
            gaps = [float(rng.exponential(1.0 / x)) for x in r]
    return [0.0] + [float(x) for x in np.cumsum(gaps)]


class _LagMonitor:
    """Event-loop lag: how late a 10 ms sleep wakes up while the level runs."""

    def __init__(self):
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(LAG_TICK_S)
            self.lags.append(max(0.0, (time.perf_counter() - t - LAG_TICK_S) * 1000.0))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        arr = np.asarray(self.lags) if self.lags else None
        return {
            "loop_lag_ms_p50": float(np.percentile(arr, 50))
            if arr is not None
            else None,
            "loop_lag_ms_p99": float(np.percentile(arr, 99))
            if arr is not None
            else None,
            "loop_lag_ms_max": float(arr.max()) if arr is not None else None,
            "ticks": len(self.lags),
        }


def _loadavg() -> float | None:
    """The host's 1-minute load average (another process competing for the cores shows here)."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _delta(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, float] | None:
    if not before or not after:
        return None
    return {
        k: after[k] - before[k] for k in after if k in before and k.endswith("_total")
    }


LOSS_REASONS = frozenset({"dropped", "connect_error", "incomplete"})


def attribute_to_loss(records: list[dict[str, Any]]) -> int:
    """The server the run started is gone: a request whose connection failed after the level's last
    answered request failed because of it, even where the process was still seen alive the instant the
    socket closed (on a loaded host its exit is seen later). Such records say ``server_lost``, keeping
    what the client saw; returns how many were relabelled."""
    last_ok = max(
        (r.get("end_ms") or 0.0 for r in records if r.get("ok")), default=float("-inf")
    )
    n = 0
    for r in records:
        e = r.get("error")
        if (
            isinstance(e, dict)
            and e.get("reason") in LOSS_REASONS
            and (r.get("end_ms") or 0.0) >= last_ok
        ):
            r["error"] = {
                "reason": "server_lost",
                "message": f"the server process is gone ({e['reason']}: {e.get('message')})",
            }
            n += 1
    return n


async def run_level(transport: Any, client: Any, plan: LevelPlan) -> dict[str, Any]:
    """Send one level; return {level, wall_s, requests (records), stop_reason, client, server_metrics}."""
    records: list[dict[str, Any]] = []
    stop = asyncio.Event()
    state: dict[str, Any] = {"reason": None, "checked": 0}
    n = len(plan.requests)
    metrics_before = await transport.metrics(client)
    monitor = _LagMonitor()
    load0 = _loadavg()
    cpu0 = time.process_time()
    origin = time.perf_counter_ns()
    monitor.start()
    if plan.telemetry is not None:
        plan.telemetry.start(origin)
    if plan.gpu_telemetry is not None:
        plan.gpu_telemetry.start(origin)

    def body_of(i: int) -> dict[str, Any]:
        req = plan.requests[i]
        return {**transport.base_body(), **req.body, "seed": plan.seed_base + i}

    def done(rec: dict[str, Any]) -> None:
        records.append(rec)
        if plan.stop_rule is None or stop.is_set():
            return
        every = plan.check_every or n
        if (
            len(records) >= plan.min_requests
            and len(records) - state["checked"] >= every
        ):
            state["checked"] = len(records)
            reason = plan.stop_rule(records)
            if reason:
                state["reason"] = reason
                stop.set()
        if not transport.alive():
            state["reason"] = "server_lost"
            stop.set()

    def stamp(
        rec: dict[str, Any], i: int, scheduled_ms: float, lag_ms: float | None
    ) -> dict[str, Any]:
        # compact: the gaps between chunks are chunk_ms's differences, the answer's text is not measured
        rec.pop("itl_ms", None)
        rec["text"] = (rec.get("text") or "")[:TEXT_KEPT]
        rec.update(
            level=plan.level,
            index=i,
            scheduled_ms=round(scheduled_ms, 3),
            queue_ms=round(rec["start_ms"] - scheduled_ms, 3),
            dispatch_lag_ms=round(lag_ms, 3) if lag_ms is not None else None,
            **plan.requests[i].meta,
        )
        return rec

    if plan.times is not None or plan.profile in ("constant", "poisson", "gamma"):
        times = (
            [t / float(plan.level) for t in plan.times]
            if plan.times is not None
            else arrivals(
                plan.profile,
                float(plan.level),
                n,
                plan.seed,
                plan.index,
                plan.burstiness,
                plan.ramp_up,
                plan.ramp_up_start,
            )
        )
        sem = asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else None
        tasks: list[asyncio.Task] = []

        async def one(i: int, at_s: float) -> None:
            lag = (time.perf_counter_ns() - origin) / 1e6 - at_s * 1000.0
            if sem is not None:
                await sem.acquire()
            try:
                if not transport.alive():
                    rec = transport.not_sent(
                        "server_lost", "not sent: the server is gone", origin
                    )
                else:
                    rec = await transport.send(client, body_of(i), origin)
            finally:
                if sem is not None:
                    sem.release()
            done(stamp(rec, i, at_s * 1000.0, lag))

        for i, at in enumerate(times):
            wait = origin / 1e9 + at - time.perf_counter_ns() / 1e9
            if wait > 0:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                except TimeoutError:
                    pass
            if stop.is_set():
                break
            if not transport.alive():
                state["reason"] = "server_lost"
                for j in range(i, n):
                    done(
                        stamp(
                            transport.not_sent(
                                "server_lost",
                                "not sent: the server was lost during this level",
                                origin,
                            ),
                            j,
                            times[j] * 1000.0,
                            None,
                        )
                    )
                break
            tasks.append(asyncio.get_running_loop().create_task(one(i, at)))
        if tasks:
            await asyncio.gather(*tasks)
    elif plan.sessions is not None:
        await _conversations(
            transport, client, plan, body_of, stamp, done, stop, state, origin
        )
    else:
        users = int(plan.level)
        counter = iter(range(n))

        async def user(u: int) -> None:
            for i in counter:
                if stop.is_set():
                    return
                ready = (time.perf_counter_ns() - origin) / 1e6
                if not transport.alive():
                    state["reason"] = "server_lost"
                    rec = transport.not_sent(
                        "server_lost", "not sent: the server is gone", origin
                    )
                else:
                    rec = await transport.send(client, body_of(i), origin)
                rec["user"] = u
                done(stamp(rec, i, ready, None))

        await asyncio.gather(*(user(u) for u in range(users)))
    lag = await monitor.stop()
    telemetry = await plan.telemetry.stop() if plan.telemetry is not None else None
    gpu = plan.gpu_telemetry.stop() if plan.gpu_telemetry is not None else None
    end_ms = max((r.get("end_ms") or 0.0) for r in records) if records else 0.0
    cpu = time.process_time() - cpu0
    metrics_after = await transport.metrics(client)
    if not transport.alive():
        attribute_to_loss(records)
    records.sort(key=lambda r: (r.get("scheduled_ms") or 0.0, r.get("index") or 0))
    return {
        "level": plan.level,
        "index": plan.index,
        "wall_s": end_ms / 1000.0,
        "requests": records,
        "planned": n,
        "stop_reason": state["reason"] or ("all_sent" if len(records) >= n else None),
        "client": {
            **lag,
            "cpu_s": cpu,
            "loadavg_1m_start": load0,
            "loadavg_1m_end": _loadavg(),
        },
        "server_metrics": {"delta": _delta(metrics_before, metrics_after)}
        if metrics_before
        else None,
        **({"telemetry": telemetry} if telemetry is not None else {}),
        **({"gpu_telemetry": gpu} if gpu is not None else {}),
    }


async def _conversations(
    transport, client, plan, body_of, stamp, done, stop, state, origin
) -> None:
    """Closed loop over conversations: ``level`` users, each taking the next conversation and sending
    its turns one after another; a turn carries the whole conversation so far (the server's own
    answers included) and waits ``think_time_s`` after the answer before it is sent."""
    users = int(plan.level)
    queue = iter(plan.sessions or [])

    async def user(u: int) -> None:
        for conv in queue:
            history: list[dict[str, Any]] = []
            for turn, i in enumerate(conv):
                if stop.is_set():
                    return
                if turn and plan.think_time_s:
                    await asyncio.sleep(plan.think_time_s)
                body = body_of(i)
                new = body["messages"]
                if plan.agent:
                    new = agent.with_call_id(new, history)
                body["messages"] = history + new
                ready = (time.perf_counter_ns() - origin) / 1e6
                if not transport.alive():
                    state["reason"] = "server_lost"
                    rec = transport.not_sent(
                        "server_lost", "not sent: the server is gone", origin
                    )
                else:
                    rec = await transport.send(client, body, origin)
                answer = rec.get("text") or ""
                rec.update(user=u, turn=turn, context_messages=len(body["messages"]))
                done(stamp(rec, i, ready, None))
                if not rec.get("ok"):
                    break  # a conversation whose turn failed cannot go on: its next turn would lack the answer
                if plan.agent:
                    history, source = agent.next_history(
                        history, new, rec, answer, str(rec.get("session")), turn
                    )
                    rec["tool_call"] = source
                else:
                    history = history + new + [{"role": "assistant", "content": answer}]

    await asyncio.gather(*(user(u) for u in range(users)))
