"""Parallel slots (llama-server ``-np``) per role, from artifacts alone (seed 001, "Concurrent Inference
Sweep": per role, the recommended ``-np``, the aggregate t/s change and the p95 multiplier).

**Inputs**: ``data/slots.yaml`` names the slot sweep's matrix and model, the workload (a ``concurrency``
test) that stands for each role of ``data/roles.yaml``, and the rule; the sweep's artifacts are concurrency
runs of that test against llama-server with ``parallel`` = 1, 2, 4 ... slots, each sending 1, 2, 4 ...
clients at once (closed loop).

**Per role and slot count k** (k > 1), against one slot:

* *aggregate t/s change*: k slots under k clients against one slot under the same k clients, as the
  ratio of the mean per-request generation rate (output tokens ÷ request time: in a closed loop the
  aggregate is the clients times that mean), with its CI95 (``core.stats.compare``), minus one; the
  wall-clock aggregate of both levels is shown beside it;
* *p95 multiplier*: the p95 request time with k slots under k clients against one slot with one client
  alone: what a request costs when the slots are full.

**Recommended -np**: the largest k whose gain's CI95 low end clears ``min_gain`` and whose p95
multiplier stays within ``max_p95_multiplier``; otherwise 1 (keep one slot). A slot count the sweep did
not measure (the backend could not honour it: more slots than the context has room for) is listed as
not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core import stats
from core.errors import ConfigError
from core.kinds.request_stats import request_rates
from core.paths import data_dir, relpath
from core.yamlio import load_yaml, pydantic_error_line
from pipelines.runs import latest_per_key


class RoleWorkload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    test: str = Field(
        ...,
        min_length=1,
        description="The concurrency test of the slot sweep for this role.",
    )


class SlotsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    matrix: str = Field(..., min_length=1, description="The slot sweep's matrix.")
    model: str = Field(..., min_length=1, description="The model of the sweep.")
    min_gain: float = Field(
        0.10, ge=0, description="Aggregate gain whose CI95 low end must clear this."
    )
    max_p95_multiplier: float = Field(
        1.5, ge=1, description="Largest accepted p95 multiplier."
    )
    roles: dict[str, RoleWorkload] = Field(..., min_length=1)


def slots_path() -> Path:
    return data_dir() / "slots.yaml"


def load_slots(path: Path | None = None) -> SlotsFile | None:
    """The slot plan, or None where the file is absent. Bad input: one ConfigError naming the file and field."""
    path = path or slots_path()
    if not path.exists():
        return None
    try:
        return SlotsFile.model_validate(load_yaml(path))
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None


@dataclass
class SlotPoint:
    slots: int
    run: Any  # RunRecord of the sweep at this slot count
    agg_tps: float | None  # wall-clock aggregate at k clients
    base_agg_tps: float | None  # one slot, k clients
    gain: dict[str, Any] | None  # ratio - 1: mean, lo, hi, verdict
    p95_ms: float | None
    base_p95_ms: float | None  # one slot, one client
    p95_multiplier: float | None
    n: int = 0
    accepted: bool = False
    why: str = ""


@dataclass
class RoleSlots:
    role: str
    test: str
    baseline: Any | None  # RunRecord, one slot
    points: list[SlotPoint] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    recommended: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class LevelFigures:
    """What the slot plan reads of one level, over every request it sent: the level's summary (the
    run's sweep, pipelines.serving.sweep_of: stored when it ran, from all requests, even where the
    artifact keeps only a sample of them, core.request_records)."""

    requests: int
    agg_tps: float | None  # wall-clock aggregate output t/s
    p95_ms: float | None  # p95 E2E of the successful requests
    rates: Any  # per-request generation rates: their samples, or (n, mean, stddev)


def _level(run: Any, level: int) -> LevelFigures | None:
    from pipelines import serving

    lv = next((x for x in run.samples.levels or [] if int(x.level) == level), None)
    sweep = serving.sweep_of(run) if lv is not None else None
    row = next(
        (x for x in (sweep or {}).get("levels") or [] if int(x["level"]) == level),
        None,
    )
    if lv is None or row is None:
        return None
    rates = row.get("request_tps")  # absent: a run measured before it was stored
    if rates is None:
        rates = request_rates(r.model_dump() for r in lv.requests)
    return LevelFigures(
        row["requests"], row["aggregate_tps"], row["e2e_ms"]["p95"], rates
    )


def _compare(base: Any, cand: Any) -> stats.Comparison:
    """Candidate's per-request rate against the baseline's: from the samples where both levels have
    them, else from their summaries (the same ratio, CI95 and verdict)."""
    if isinstance(base, list) and isinstance(cand, list):
        return stats.compare(base, cand, True)
    return stats.compare_summaries(
        base if isinstance(base, dict) else stats.moments(base),
        cand if isinstance(cand, dict) else stats.moments(cand),
        True,
    )


def hosts(plan: SlotsFile, docs: list[Any]) -> list[str]:
    return sorted({r.host_id for r in _runs(plan, docs)})


def _runs(plan: SlotsFile, docs: list[Any], host_id: str | None = None) -> list[Any]:
    tests = {w.test for w in plan.roles.values()}
    return [
        r
        for r in latest_per_key(docs)
        if r.ok
        and r.test_kind == "concurrency"
        and r.matrix_name == plan.matrix
        and r.model_name == plan.model
        and r.test_name in tests
        and (host_id is None or r.host_id == host_id)
    ]


def role_slots(plan: SlotsFile, docs: list[Any], host_id: str) -> list[RoleSlots]:
    runs = _runs(plan, docs, host_id)
    out = []
    for role, w in plan.roles.items():
        mine = sorted(
            (r for r in runs if r.test_name == w.test),
            key=lambda r: (int(r.requested.get("parallel") or 1), r.created),
        )
        by_slots: dict[int, Any] = {
            int(r.requested.get("parallel") or 1): r for r in mine
        }
        rs = RoleSlots(role, w.test, by_slots.get(1))
        if rs.baseline is None:
            rs.missing.append("no run with one slot (the baseline)")
            out.append(rs)
            continue
        alone = _level(rs.baseline, 1)
        base_p95 = alone.p95_ms if alone is not None else None
        levels = [int(x) for x in rs.baseline.test_param("levels", [])]
        for k in [x for x in levels if x > 1]:
            run = by_slots.get(k)
            if run is None:
                rs.missing.append(
                    f"-np {k}: no run (the backend could not honour it, e.g. more slots than the context has room "
                    "for; or not run yet)"
                )
                continue
            lv, blv = _level(run, k), _level(rs.baseline, k)
            if lv is None or blv is None:
                rs.missing.append(f"-np {k}: no level of {k} clients in both runs")
                continue
            c = _compare(blv.rates, lv.rates)
            cd = c.to_dict()
            gain = (
                None
                if cd.get("ratio") is None
                else {
                    "mean": cd["ratio"] - 1,
                    "lo": None if cd.get("ci95_low") is None else cd["ci95_low"] - 1,
                    "hi": None if cd.get("ci95_high") is None else cd["ci95_high"] - 1,
                    "verdict": cd.get("verdict"),
                }
            )
            p95 = lv.p95_ms
            mult = p95 / base_p95 if p95 is not None and base_p95 else None
            pt = SlotPoint(
                k,
                run,
                lv.agg_tps,
                blv.agg_tps,
                gain,
                p95,
                base_p95,
                mult,
                n=lv.requests,
            )
            gain_ok = (
                gain is not None
                and gain["lo"] is not None
                and gain["lo"] > plan.min_gain
            )
            p95_ok = mult is not None and mult <= plan.max_p95_multiplier
            pt.accepted = gain_ok and p95_ok
            pt.why = (
                "accepted"
                if pt.accepted
                else "rejected: "
                + "; ".join(
                    x
                    for x in (
                        ""
                        if gain_ok
                        else f"gain's CI95 low end not above +{plan.min_gain:.0%}",
                        ""
                        if p95_ok
                        else f"p95 multiplier above {plan.max_p95_multiplier:g}",
                    )
                    if x
                )
            )
            rs.points.append(pt)
        best = max((p.slots for p in rs.points if p.accepted), default=1)
        rs.recommended = best
        rs.reason = (
            f"{best} slots: the largest count accepted"
            if best > 1
            else "1 (keep one slot): no larger count was accepted"
            if rs.points
            else "1 (keep one slot): nothing larger measured"
        )
        out.append(rs)
    return out
