"""Scaling (issue 29): one model's prefill and decode on 1, 2, 4 … GPUs of one machine, with the
speed-up over one GPU and its CI95.

A *machine* is a host name (runtime.hosts.fingerprint names a lent machine from its GPUs, the
same whichever of them a run sees). Per (machine, model, test), every placement measured
(pipelines.placement: GPUs used and split) is one point; the baseline is the one-GPU placement,
taken from the same host id where it has one (the run that saw every GPU and used one: the same
environment but for the split), else from the machine's other host ids (a run that saw one GPU).
The speed-up is the ratio of the two sides as every comparison of the site makes it (the run as
the unit; a side of one run widened by the host's run-to-run noise, or the fleet's:
pipelines.compare, core.stats.combine_sides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.metrics import METRICS
from core.records.run import RunRecord
from pipelines import compare as compare_mod
from pipelines import facts as facts_mod
from pipelines import placement as placement_mod
from pipelines.runs import latest_per_key

TESTS = ("pp512", "tg128")


@dataclass(frozen=True)
class Point:
    machine: str
    model: str
    test: str
    placement: placement_mod.Placement
    host_id: str
    runs: tuple[RunRecord, ...]
    value: float
    baseline: Point | None = None
    speedup: stats.Comparison | None = None

    @property
    def label(self) -> str:
        return self.placement.text


def _machine(r: RunRecord) -> str:
    return str((r["host"] or {}).get("name") or r.host_id)


def points(docs: list[Any]) -> list[Point]:
    """Every (machine, model, test, placement) with a GPU, the one-GPU point first in each series."""
    runs = [r for r in list(docs) if r.ok and r.test_name in TESTS]
    fx = facts_mod.of(list(docs))
    metric = METRICS["tokens_per_second"]
    groups: dict[tuple[str, str, str, tuple[int, str], str], list[RunRecord]] = {}
    for r in runs:
        pl = placement_mod.of(r)
        if pl is None or pl.gpus_used == 0:
            continue
        groups.setdefault(
            (_machine(r), r.model_name, r.test_name, pl.key, r.host_id), []
        ).append(r)
    series: dict[tuple[str, str, str], list[tuple[Any, list[RunRecord]]]] = {}
    for key, rs in groups.items():
        series.setdefault(key[:3], []).append((key, latest_per_key(rs)))
    out: list[Point] = []
    for (machine, model, test), members in sorted(series.items()):
        if len({k[3] for k, _ in members}) < 2:
            continue  # one placement only: nothing scales
        made: list[Point] = []
        for key, rs in members:
            value = compare_mod._side_value(rs, metric.name)[0]
            placed = placement_mod.of(rs[-1])
            assert placed is not None  # grouped above only with a placement
            made.append(
                Point(
                    machine,
                    model,
                    test,
                    placed,
                    key[4],
                    tuple(rs),
                    value,
                )
            )
        ones = [p for p in made if p.placement.gpus_used == 1]
        for p in sorted(
            made, key=lambda p: (p.placement.gpus_used, p.placement.key[1], p.host_id)
        ):
            base: Point | None = None
            if p.placement.gpus_used > 1 and ones:
                same = [o for o in ones if o.host_id == p.host_id]
                base = (same or ones)[0]
            cmp = None
            if base is not None:
                a = compare_mod._side(fx, list(base.runs), metric, True)
                b = compare_mod._side(fx, list(p.runs), metric, True)
                if a is not None and b is not None:
                    cmp = stats.combine_sides(a, b, True)
            out.append(
                Point(
                    machine,
                    model,
                    test,
                    p.placement,
                    p.host_id,
                    p.runs,
                    p.value,
                    base,
                    cmp,
                )
            )
    return out
