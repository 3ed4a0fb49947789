"""Serving statistics: pure functions over per-request records.

A request record (written by the HTTP backend, kept verbatim in the artifact's samples) has
``ok``, ``error`` ({reason, message} or null), ``ttft_ms``, ``tpot_ms``, ``e2e_ms``,
``itl_ms`` (list), ``output_tokens``, and the offsets ``start_ms``, ``first_token_ms``,
``last_token_ms`` and ``end_ms`` from the start of its phase. The backend computes a sweep's
figures with these functions when it measures; the pipelines compute them again from the
raw records when they render, so both always agree.

Definitions (the Methodology page repeats them):

* aggregate throughput: output tokens of the level's successful requests / the level's wall
  time (first request sent to last response finished);
* goodput: requests that succeeded and met every SLO / wall time (requests/s);
* SLO attainment: that count / all requests of the level (errors count as misses);
* a level meets the SLOs when its attainment is at least the target (default 0.9); the
  highest level meeting them is the highest level L such that every level up to L meets;
* p95 multiplier: p95 of E2E latency at a level / p95 at the lowest level;
* effective parallelism: the summed generation phases (first to last token) of all requests
  / the time during which at least one was generating: 1.0 means the server produced one
  stream at a time (serialised), N means N streams advanced together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from core import stats


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must meet to count towards goodput."""

    ttft_ms: float | None = 500.0
    tpot_ms: float | None = 30.0
    attainment: float = 0.9  # share of a level's requests that must meet them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Slo:
        d = d or {}
        return cls(
            d.get("ttft_ms", 500.0), d.get("tpot_ms", 30.0), d.get("attainment", 0.9)
        )


def meets_slo(record: dict[str, Any], slo: Slo) -> bool:
    """A successful request whose TTFT and TPOT are within the limits (a one-token answer has
    no TPOT and meets that limit by definition)."""
    if not record.get("ok"):
        return False
    ttft, tpot = record.get("ttft_ms"), record.get("tpot_ms")
    if slo.ttft_ms is not None and (ttft is None or ttft > slo.ttft_ms):
        return False
    if slo.tpot_ms is not None and tpot is not None and tpot > slo.tpot_ms:
        return False
    return True


def effective_parallelism(intervals: Iterable[tuple[float, float]]) -> float | None:
    """Sum of interval lengths / length of their union (1.0 = never overlapping)."""
    total, union = _busy(intervals)
    return total / union if union > 0 else None


def batched_parallelism(
    records: Sequence[dict[str, Any]], batches: int
) -> float | None:
    """Effective parallelism of a level sent in ``batches`` batches one after another: each batch's
    request times start from its own origin, so intervals of different batches must never be
    overlaid. Busy time summed over batches / union summed over batches. A request's batch is its
    round // (rounds per batch): the runner numbers rounds on across batches."""
    rounds = [r.get("round") for r in records]
    if batches <= 1 or any(x is None for x in rounds) or not rounds:
        return effective_parallelism(
            (r.get("first_token_ms"), r.get("last_token_ms")) for r in records
        )
    per = max(1, (max(rounds) + 1) // batches)
    groups: dict[int, list[tuple[Any, Any]]] = {}
    for r in records:
        groups.setdefault(int(r["round"]) // per, []).append(
            (r.get("first_token_ms"), r.get("last_token_ms"))
        )
    total = union = 0.0
    for spans in groups.values():
        t, u = _busy(spans)
        total += t
        union += u
    return total / union if union > 0 else None


def _busy(intervals: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(sum of interval lengths, length of their union)."""
    spans = sorted(
        (a, b) for a, b in intervals if a is not None and b is not None and b > a
    )
    if not spans:
        return 0.0, 0.0
    total = sum(b - a for a, b in spans)
    union = 0.0
    cur_a, cur_b = spans[0]
    for a, b in spans[1:]:
        if a > cur_b:
            union += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    union += cur_b - cur_a
    return total, union


def _dist(values: Sequence[float]) -> dict[str, Any]:
    s = stats.summarize(values)
    s["p90"] = stats.percentile(values, 90)
    return s


def level_stats(
    records: Sequence[dict[str, Any]],
    wall_s: float,
    slo: Slo,
    level: int | None = None,
    batches: int = 1,
) -> dict[str, Any]:
    """Throughput, latency distributions, errors and goodput of one phase (one level)."""
    ok = [r for r in records if r.get("ok")]
    reasons = Counter(
        (r.get("error") or {}).get("reason", "unknown")
        for r in records
        if not r.get("ok")
    )
    out_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    met = sum(1 for r in records if meets_slo(r, slo))
    n = len(records)
    wall = wall_s if wall_s and wall_s > 0 else None
    return {
        "level": level,
        "requests": n,
        "ok": len(ok),
        "errors": n - len(ok),
        "error_reasons": dict(sorted(reasons.items())),
        "retried": sum(1 for r in records if (r.get("attempts") or 1) > 1),
        "output_tokens": out_tokens,
        "wall_s": wall_s,
        "aggregate_tps": out_tokens / wall if wall else None,
        "request_rate_rps": len(ok) / wall if wall else None,
        "ttft_ms": _dist([r["ttft_ms"] for r in ok if r.get("ttft_ms") is not None]),
        "tpot_ms": _dist([r["tpot_ms"] for r in ok if r.get("tpot_ms") is not None]),
        "e2e_ms": _dist([r["e2e_ms"] for r in ok if r.get("e2e_ms") is not None]),
        "itl_ms": _dist([g for r in ok for g in (r.get("itl_ms") or [])]),
        "slo_met": met,
        "slo_attainment": met / n if n else None,
        "goodput_rps": met / wall if wall else None,
        "meets_slo": bool(n) and met / n >= slo.attainment,
        "effective_parallelism": batched_parallelism(ok, batches),
        # totals and moments the readers of a level need beside the figures above, over every request,
        # so a level whose records were bounded (core.request_records) is read from here, not its sample
        "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in ok),
        "request_tps": stats.moments(request_rates(ok)),
    }


def request_rates(records: Iterable[dict[str, Any]]) -> list[float]:
    """Each successful request's own generation rate: output tokens / its end-to-end time (tokens/s);
    in a closed loop a level's aggregate is its clients times their mean (pipelines.slots)."""
    return [
        float(r["output_tokens"]) * 1000.0 / float(r["e2e_ms"])
        for r in records
        if r.get("ok") and r.get("output_tokens") and r.get("e2e_ms")
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def sweep_stats(levels: Sequence[dict[str, Any]], slo: Slo) -> dict[str, Any]:
    """Per-level statistics of a sweep plus what the sweep shows.

    ``levels``: [{"level": L, "wall_s": s, "requests": [records]}], lowest level first.
    """
    rows = [
        level_stats(
            lv["requests"], lv["wall_s"], slo, lv["level"], int(lv.get("batches") or 1)
        )
        for lv in sorted(levels, key=lambda x: x["level"])
    ]
    base = rows[0] if rows else None
    for r in rows:
        r["speedup"] = (
            _ratio(r["aggregate_tps"], base["aggregate_tps"]) if base else None
        )
        r["scaling_efficiency"] = (
            (r["speedup"] / (r["level"] / base["level"]))
            if base and r["speedup"] is not None
            else None
        )
        r["p95_multiplier"] = (
            _ratio(r["e2e_ms"]["p95"], base["e2e_ms"]["p95"]) if base else None
        )
        r["ttft_p95_multiplier"] = (
            _ratio(r["ttft_ms"]["p95"], base["ttft_ms"]["p95"]) if base else None
        )
    max_level = 0
    for r in rows:
        if not r["meets_slo"]:
            break
        max_level = r["level"]
    peak = max(
        (r for r in rows if r["aggregate_tps"] is not None),
        key=lambda r: r["aggregate_tps"],
        default=None,
    )
    top = rows[-1] if rows else None
    return {
        "version": SWEEP_STATS_VERSION,
        "slo": slo.to_dict(),
        "levels": rows,
        "max_level_meeting_slo": max_level,
        "peak_aggregate_tps": peak["aggregate_tps"] if peak else None,
        "peak_level": peak["level"] if peak else None,
        "serialised": serialised(rows),
        "top_level": top["level"] if top else None,
        "top_effective_parallelism": top["effective_parallelism"] if top else None,
        "top_speedup": top["speedup"] if top else None,
    }


# Bumped whenever sweep_stats computes anything differently: a sweep stored by a run with another
# version is recomputed from its samples (2: parallelism per batch of a repeat-to-precision level).
SWEEP_STATS_VERSION = 2
#: A level's keys added without changing any figure (totals for readers of a bounded level): a stored
#: sweep without them is still today's; a reader that needs one takes it from the records instead.
ADDED_LEVEL_KEYS = frozenset({"prompt_tokens", "request_tps"})


def serialised(rows: Sequence[dict[str, Any]], threshold: float = 1.25) -> bool | None:
    """True when, at every level above 1 with overlap data, generation never really overlapped
    (effective parallelism below ``threshold``): the server produced one stream at a time.
    None when no level above 1 ran."""
    seen = [
        r["effective_parallelism"]
        for r in rows
        if (r["level"] or 0) > 1 and r["effective_parallelism"] is not None
    ]
    if not seen:
        return None
    return all(p < threshold for p in seen)


@lru_cache(maxsize=1)
def _shape() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The keys sweep_stats writes today: of the sweep, of a level, of a latency distribution."""
    rec = {
        "ok": True,
        "ttft_ms": 1.0,
        "tpot_ms": 1.0,
        "e2e_ms": 2.0,
        "itl_ms": [1.0],
        "output_tokens": 2,
        "first_token_ms": 0.0,
        "last_token_ms": 1.0,
    }
    sw = sweep_stats([{"level": 1, "wall_s": 1.0, "requests": [rec]}], Slo())
    lv = sw["levels"][0]
    return frozenset(sw), frozenset(lv) - ADDED_LEVEL_KEYS, frozenset(lv["e2e_ms"])


def stored_sweep(stored: Any) -> dict[str, Any] | None:
    """The sweep a run stored (``details.sweep``, computed by :func:`sweep_stats` when it ran) if it
    was computed by today's version and has today's shape; None when it is missing or older (the
    caller recomputes it from the samples)."""
    if (
        not isinstance(stored, dict)
        or not isinstance(stored.get("levels"), list)
        or not stored["levels"]
    ):
        return None
    if stored.get("version") != SWEEP_STATS_VERSION:  # computed by other arithmetic
        return None
    top, level, dist = _shape()
    if not top <= stored.keys():
        return None
    for lv in stored["levels"]:
        if not isinstance(lv, dict) or not level <= lv.keys():
            return None
        for name in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"):
            if not isinstance(lv[name], dict) or not dist <= lv[name].keys():
                return None
    return stored
