"""Where a load level was steady, and whether it was over-saturated: pure functions over the
request records of one level (``start_ms``, ``end_ms``, ``first_token_ms`` or ``ttft_ms``,
``scheduled_ms``).

* **Steady-state window** (SGLang's definition): the longest interval during which at least
  ``fraction`` of the level's peak number of requests were in flight. Ramp-up (in flight still
  climbing) and drain (the last requests finishing alone) fall outside it. The headline figures of
  a level with ``steady_state`` set are computed over the window (latencies of the requests that
  started inside it, throughput of those that ended inside it), and the window (its start, end
  and the requests in it) is stated beside them.
* **Over-saturation** (GuideLLM's over-saturation detection): over the requests completed so far (a
  failed one's time to failure standing for its TTFT), the least-squares slope of TTFT against
  the request's start and the slope of the requests in flight (at each start) against time,
  each with a one-sided t-test; the level is over-saturated when both slopes are positive at
  ``alpha`` and TTFT grew by more than ``min_growth`` over the fitted span (a server whose queue
  grows without bound: every new request waits longer than the last). A level that stops for it
  records the slopes and their p-values as its reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_REQUESTS = 12  # fewer records test nothing
ALPHA = 0.01
MIN_GROWTH = 1.5  # TTFT at the end of the fit / at its start


def _intervals(records: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    out = []
    for r in records:
        a, b = r.get("start_ms"), r.get("end_ms")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a:
            out.append((float(a), float(b)))
    return out


def in_flight(records: Sequence[dict[str, Any]]) -> list[tuple[float, int]]:
    """The step function of requests in flight: [(time ms, count from then on)], in time order."""
    events = sorted(
        [(a, 1) for a, _ in _intervals(records)]
        + [(b, -1) for _, b in _intervals(records)]
    )
    out: list[tuple[float, int]] = []
    n = 0
    for t, d in events:
        n += d
        if out and out[-1][0] == t:
            out[-1] = (t, n)
        else:
            out.append((t, n))
    return out


def window(records: Sequence[dict[str, Any]], fraction: float) -> dict[str, Any] | None:
    """The steady-state window: {start_ms, end_ms, peak, threshold, requests (started inside)}; None
    when the records hold no interval."""
    steps = in_flight(records)
    if not steps:
        return None
    peak = max(n for _, n in steps)
    need = max(1, math.ceil(fraction * peak))
    best: tuple[float, float] | None = None
    start = None
    for (t, n), _nxt in zip(steps, steps[1:] + [(steps[-1][0], 0)]):
        if n >= need and start is None:
            start = t
        if n < need and start is not None:
            if best is None or t - start > best[1] - best[0]:
                best = (start, t)
            start = None
    if start is not None and (best is None or steps[-1][0] - start > best[1] - best[0]):
        best = (start, steps[-1][0])
    if best is None:
        return None
    inside = [
        i
        for i, r in enumerate(records)
        if r.get("start_ms") is not None and best[0] <= r["start_ms"] <= best[1]
    ]
    return {
        "fraction": fraction,
        "peak_in_flight": peak,
        "threshold": need,
        "start_ms": best[0],
        "end_ms": best[1],
        "requests": len(inside),
        "indices": inside,
    }


def _slope(x: Sequence[float], y: Sequence[float]) -> dict[str, float] | None:
    """Least-squares slope of y on x and the one-sided p-value of slope > 0."""
    if len(x) < 3 or len(set(x)) < 2:
        return None
    # imported here: importing scipy.stats is a second of every site build
    from scipy import stats as sps

    r = sps.linregress(np.asarray(x, float), np.asarray(y, float))
    if not math.isfinite(r.stderr) or r.stderr == 0:
        p = 0.0 if r.slope > 0 else 1.0
    else:
        p = float(sps.t.sf(r.slope / r.stderr, len(x) - 2))
    return {"slope": float(r.slope), "p_value": p, "intercept": float(r.intercept)}


def oversaturation(
    records: Sequence[dict[str, Any]],
    alpha: float = ALPHA,
    min_growth: float = MIN_GROWTH,
) -> dict[str, Any]:
    """GuideLLM's test (the module's docstring) on the records so far: {oversaturated, ttft, in_flight, growth}."""

    # a failed request waited at least until it failed: its elapsed time stands for its TTFT (as
    # load_stats.queue_growth counts it), so a server whose requests time out is not taken for a calm one
    def wait(r: dict[str, Any]) -> float | None:
        if r.get("ok") and r.get("ttft_ms") is not None:
            return float(r["ttft_ms"])
        if not r.get("ok") and r.get("elapsed_ms") is not None:
            return float(r["elapsed_ms"])
        return None

    done = sorted(
        (
            {**r, "_wait": wait(r)}
            for r in records
            if r.get("start_ms") is not None and wait(r) is not None
        ),
        key=lambda r: r["start_ms"],
    )
    out: dict[str, Any] = {
        "oversaturated": False,
        "n": len(done),
        "ttft": None,
        "in_flight": None,
        "growth": None,
    }
    if len(done) < MIN_REQUESTS:
        return out
    xs = [r["start_ms"] / 1000.0 for r in done]
    ttft = _slope(xs, [r["_wait"] for r in done])
    # requests in flight at each start, among every record (failed ones occupied the server too)
    iv = _intervals(records)
    flight = [sum(1 for a, b in iv if a <= x * 1000.0 < b) for x in xs]
    fl = _slope(xs, flight)
    out.update(ttft=ttft, in_flight=fl)
    if ttft is None or fl is None:
        return out
    lo = ttft["intercept"] + ttft["slope"] * xs[0]
    hi = ttft["intercept"] + ttft["slope"] * xs[-1]
    growth = hi / lo if lo > 0 else None
    out["growth"] = growth
    out["oversaturated"] = bool(
        ttft["slope"] > 0
        and ttft["p_value"] < alpha
        and fl["slope"] > 0
        and fl["p_value"] < alpha
        and (growth is None or growth > min_growth)
    )
    return out


def reason(o: dict[str, Any]) -> str:
    """The stop reason a level records: the slopes and their p-values."""
    t, f = o["ttft"], o["in_flight"]
    return (
        f"oversaturated: TTFT +{t['slope']:.0f} ms/s (p={t['p_value']:.1g}), in flight +{f['slope']:.2f}/s "
        f"(p={f['p_value']:.1g}) over {o['n']} requests"
    )
