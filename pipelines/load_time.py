"""Model load time between builds and with weight repacking on and off (seed 001's "Parallel Tensor
Repacking" table: Model Size | Before | After | Speedup), from the runs of data/matrices/load-time.yaml.

Every run artifact records the model's load time (``load_time_s``); each (host, model, repack setting,
build) is a group of the fact layer (pipelines.facts), its figure on ``load_time_s`` the run as the unit.
Two families of comparisons, held together to the false discovery rate (core.stats.fleet_fdr):

* **build changes**: per configuration (host, model, repack setting) its builds in the order they were
  first measured, each against the next (before → after);
* **repacking**: per host, model and build, ``extra_bufts: false`` (weights as stored) against ``true``
  (llama.cpp's default: Q4_0/Q4_K weights repacked into its CPU extra buffer types at load).

The speed-up is before ÷ after (above 1: the load got faster), with its CI95.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core import stats
from core.metrics import METRICS
from pipelines import facts as facts_mod
from pipelines.history import MIN_STEP

MATRIX = "load-time"
METRIC = METRICS["load_time_s"]


@dataclass(frozen=True)
class Pair:
    """One comparison of load time: ``before`` against ``after`` (two groups' figures)."""

    kind: str  # "build" or "repack"
    host_id: str
    model: str
    size_bytes: int | None
    repack: str  # "on", "off" (build pairs) or "off → on" (repack pairs)
    before_label: str
    after_label: str
    before: facts_mod.Figure
    after: facts_mod.Figure
    comparison: stats.Comparison
    build: str  # the (before) group's build in words

    @property
    def speedup(self) -> tuple[float | None, float | None, float | None]:
        """before ÷ after and its CI95 (above 1: faster to load)."""
        c = self.comparison
        inv = lambda x: None if not x else 1.0 / x  # noqa: E731
        return inv(c.ratio), inv(c.ci95_high), inv(c.ci95_low)

    @property
    def verdict(self) -> str:
        c = self.comparison
        if (
            c.verdict in ("win", "loss")
            and c.ratio is not None
            and abs(c.ratio - 1) >= MIN_STEP
        ):
            return "faster" if c.verdict == "win" else "slower"
        return "within noise"


def _repack(g: facts_mod.Group) -> str:
    v = g.newest.requested_explicit.get("extra_bufts")
    if v is None:
        v = g.newest.effective.get("extra_bufts")
    return "default" if v is None else ("on" if v else "off")


def pairs(docs: list[Any]) -> list[Pair]:
    """Every build change and every repack on/off pair of the load-time matrix's runs, the family's
    verdicts at the false discovery rate; build pairs first, then by model size."""
    fx = facts_mod.of(docs)
    groups = [
        g
        for g in fx.groups.values()
        if g.newest.matrix_name == MATRIX and g.figure(METRIC) is not None
    ]
    out: list[Pair] = []

    def pair(kind: str, a: facts_mod.Group, b: facts_mod.Group, repack: str) -> Pair:
        fa, fb = a.figure(METRIC), b.figure(METRIC)
        assert fa is not None and fb is not None
        r = a.newest
        return Pair(
            kind,
            a.host_id,
            a.model,
            r.doc["model"].get("size_bytes"),
            repack,
            a.build if kind == "build" else "extra_bufts: false",
            b.build if kind == "build" else "extra_bufts: true",
            fa,
            fb,
            fx.compare(fa, fb),
            a.build,
        )

    by_config: dict[str, list[facts_mod.Group]] = {}
    for g in groups:
        by_config.setdefault(g.history_key, []).append(g)
    for gs in by_config.values():
        gs.sort(key=lambda g: (g.runs[0].created, g.runs[0].id))
        for a, b in zip(gs, gs[1:]):
            if a.build != b.build:
                out.append(pair("build", a, b, _repack(a)))
    by_build: dict[tuple[str, str, str], dict[str, facts_mod.Group]] = {}
    for g in groups:
        k = (g.host_id, g.newest.model_identity, g.build)
        by_build.setdefault(k, {})[_repack(g)] = g
    for sides in by_build.values():
        if "off" in sides and "on" in sides:
            out.append(pair("repack", sides["off"], sides["on"], "off → on"))
    adjusted = stats.fleet_fdr([p.comparison for p in out])
    out = [replace(p, comparison=c) for p, c in zip(out, adjusted)]
    out.sort(
        key=lambda p: (
            p.kind != "build",
            p.size_bytes or 0,
            p.model,
            p.repack,
            p.host_id,
        )
    )
    return out
