"""History and regressions (asv and github-action-benchmark are the anchors).

**Series.** One configuration's results over time: the same host, model file, backend, test
definition and requested settings (core.records.run's history key), on the test kind's
headline metric. Every result is one point; builds (llama.cpp commit, backend version, the
almanac's version, a build variant's label) change along it.

**Step detection (the stated method).** A series holds one group of the fact layer per build
(pipelines.facts: the runs of one build and environment, the run as the unit), ordered by when
each build was first measured. Every two consecutive builds are compared by their figures, the
same figures the Leaderboard shows (pipelines.facts.Facts.compare: the ratio of the two
run-unit values with its CI95). A boundary is a *step* when that interval excludes 1 and the
change is at least ``MIN_STEP`` (2%); a loss is a regression, a win an improvement. Steps are
only looked for where the build changed: a drift within one build is not attributed to
anything, and the same build measured twice is one group, never a step. A step into or out of a
build variant (a build with a label: deliberately changed, e.g. threads halved) is a *variant*
step: shown apart from the release line's regressions.

**Stale.** Per host, backend and server software (llama_cpp.server and llama-server are
different software, not versions of one), release builds (the build without a variant label) are
ordered by when they were first seen; a result measured with a build older than the newest
one on its host, backend and server is stale.

Linear in the number of results: one grouping pass, one sort per series.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.kinds import headline
from core.metrics import Metric
from core.records.run import RunRecord
from pipelines import noise as noise_mod
from pipelines.memo import per_set
from pipelines.runs import records

WINDOW = 5  # runs per side where a series is cut into segments by time (benchmarks/aa_calibration.py)
MIN_STEP = 0.02
METHOD = (
    f"Results of one configuration (same host, model file, backend, test and requested settings) form one "
    f"figure per build, the run as the unit (the figure the Leaderboard shows for that build). Builds are "
    f"ordered by when each was first measured and every two consecutive ones are compared: the ratio of their "
    f"figures with a CI95 on the log scale (the two figures' variances added, Welch-Satterthwaite degrees of "
    f"freedom). A step is a boundary whose interval excludes 1 and whose change is at least {MIN_STEP:.0%}: a "
    f"loss is a regression, a win an improvement. The same build measured again is the same figure, never a "
    f"step; a step into or out of a deliberately changed build (a variant label) is listed apart from the "
    f"regressions of the release line."
)


def build_text(build: dict[str, Any], almanac: str) -> str:
    parts = [f"{k}={v}" for k, v in sorted(build.items())]
    return ", ".join(parts + [f"almanac={almanac}"])


@dataclass
class Point:
    id: str
    created: str
    build: dict[str, Any]  # build identity (label included) + almanac version
    build_label: str  # short text for legends
    release: str  # the build without its variant label (for staleness)
    n: int
    mean: float
    stddev: float | None
    ci95_low: float | None
    ci95_high: float | None
    effective: dict[str, Any]
    stale: bool = False

    def __post_init__(self) -> None:
        self.build_key = json.dumps(self.build, sort_keys=True, default=str)


@dataclass
class Step:
    series: Series
    before: list[Point]  # the runs of the build before (oldest first)
    after: list[Point]  # the runs of the build after
    pooled_before: dict[
        str, Any
    ]  # the build's figure as the page shows it: runs, mean, spread, n
    pooled_after: dict[str, Any]
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None
    verdict: str  # "regression" or "improvement"
    build_change: dict[str, tuple[Any, Any]]  # field -> (before, after)
    settings_change: dict[
        str, tuple[Any, Any]
    ]  # effective settings that changed with it
    method: str = "runs"  # what the interval rests on (the figures' bases)
    before_figure: Any = None  # pipelines.facts.Figure of the build before
    after_figure: Any = None

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    @property
    def variant(self) -> bool:
        """A step into or out of a deliberately changed build (a variant label), not the release line's."""
        return "label" in self.build_change


@dataclass
class Series:
    key: str
    host_id: str
    model: str
    test: str
    backend: str
    requested: dict[str, Any]
    metric: Metric
    points: list[Point] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    noise: stats.RunNoise | None = (
        None  # the host's run-to-run noise for this kind of test
    )

    @property
    def builds(self) -> list[str]:
        return list(dict.fromkeys(p.build_label for p in self.points))

    @property
    def stale(self) -> bool:
        return bool(self.points) and self.points[-1].stale

    @property
    def label(self) -> str:
        return f"{self.model} · {self.test} · {self.backend} · {self.host_id}"


def _short_build(r: RunRecord) -> str:
    return f"{r.backend_build} · almanac {r.almanac_version}"


def _release(r: RunRecord) -> str:
    """The build without its variant label, as a canonical string (cached on the record)."""
    v = r._cache.get("release")
    if v is None:
        ident = {k: v for k, v in r.build_identity.items() if k != "label"}
        v = r._cache["release"] = json.dumps(
            {**ident, "almanac": r.almanac_version}, sort_keys=True
        )
    return v


def _line(r: RunRecord) -> tuple[str, str, str]:
    """What builds are versions of: a host's backend (and, over HTTP, the server software)."""
    return (r.host_id, r.backend, r.server)


def newest_releases(
    recs: list[RunRecord],
) -> dict[tuple[str, str, str], tuple[str, dict[str, str]]]:
    """Per host, backend and server: the newest release build and each release's first-seen time."""
    first: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in recs:
        seen = first.setdefault(_line(r), {})
        rel = _release(r)
        if rel not in seen or r.created < seen[rel]:
            seen[rel] = r.created
    return {
        hb: (max(seen, key=lambda k: (seen[k], k)), seen) for hb, seen in first.items()
    }


def stale_ids(docs: list[RunRecord]) -> set[str]:
    """Ids of ok results measured with an older build than the newest on their host, backend and server."""
    recs = [r for r in records(docs) if r.ok]
    newest = newest_releases(recs)
    out = set()
    for r in recs:
        top, seen = newest[_line(r)]
        rel = _release(r)
        if rel != top and seen[rel] < seen[top]:
            out.add(r.id)
    return out


def _diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    keys = sorted(set(a) | set(b))
    return {
        k: (a.get(k), b.get(k))
        for k in keys
        if json.dumps(a.get(k), sort_keys=True, default=str)
        != json.dumps(b.get(k), sort_keys=True, default=str)
    }


@per_set
def series(docs: list[RunRecord]) -> list[Series]:
    """Every configuration's series (ok results with the headline metric), steps detected between its builds."""
    from pipelines import facts as facts_mod

    fx = facts_mod.of(docs)
    recs = [r for r in fx.records if r.ok and headline(r.test_kind) is not None]
    stale = stale_ids(recs)
    out: dict[str, Series] = {}
    groups: dict[str, list[Any]] = {}
    for r in recs:
        metric = r.headline_metric
        s = r.headline
        if s is None:
            continue
        ser = out.get(r.history_key)
        if ser is None:
            ser = out[r.history_key] = Series(
                r.history_key,
                r.host_id,
                r.model_name,
                r.test_name,
                r.backend_name,
                r.requested,
                metric,
                noise=noise_mod.noise_for(fx.noise, r),
            )
        ser.points.append(
            Point(
                r.id,
                r.created,
                {**r.build_identity, "almanac": r.almanac_version},
                _short_build(r),
                _release(r),
                s.n,
                float(s.mean),
                s.stddev,
                s.ci95_low,
                s.ci95_high,
                r.effective,
                r.id in stale,
            )
        )
        g = fx.group_of(r)
        if g is not None and all(
            x is not g for x in groups.setdefault(r.history_key, [])
        ):
            groups[r.history_key].append(g)
    for key, ser in out.items():
        ser.points.sort(key=lambda p: (p.created, p.id))
        ser.steps = detect_steps(ser, groups.get(key, []), fx)
    return sorted(
        out.values(), key=lambda s: (s.host_id, s.model, s.test, s.backend, s.key)
    )


def segments(points: list[Point]) -> list[list[Point]]:
    segs: list[list[Point]] = []
    for p in points:
        if segs and segs[-1][-1].build_key == p.build_key:
            segs[-1].append(p)
        else:
            segs.append([p])
    return segs


def rel_se(p: Point) -> float | None:
    """A run's own relative standard error of its mean (None without a spread)."""
    return (
        p.stddev / p.mean / p.n**0.5
        if p.stddev is not None and p.n > 1 and p.mean > 0
        else None
    )


def window(points: list[Point]) -> dict[str, Any]:
    """A window of runs as the page shows it: run count, geometric mean of the run means, the
    relative spread between runs (None for one run) and the repetitions behind them."""
    import math

    logs = [math.log(p.mean) for p in points if p.mean > 0]
    mean = math.exp(sum(logs) / len(logs)) if logs else None
    spread = None
    if len(logs) > 1:
        c = sum(logs) / len(logs)
        spread = math.sqrt(sum((x - c) ** 2 for x in logs) / (len(logs) - 1))
    return {
        "runs": len(points),
        "mean": mean,
        "spread": spread,
        "n": sum(p.n for p in points),
    }


def compare_windows(
    before: list[Point],
    after: list[Point],
    higher_is_better: bool,
    noise: stats.RunNoise | None,
) -> stats.Comparison:
    """The run-level comparison of two windows (core.stats.compare_runs)."""
    return stats.compare_runs(
        [p.mean for p in before],
        [p.mean for p in after],
        higher_is_better,
        noise_a=noise,
        noise_b=noise,
        rel_se_a=rel_se(before[0]) if len(before) == 1 else None,
        rel_se_b=rel_se(after[0]) if len(after) == 1 else None,
    )


def _figure_window(fig: Any) -> dict[str, Any]:
    """A build's figure as the page shows a side: runs, value, relative spread between runs, repetitions."""

    spread = None
    if fig.runs > 1 and fig.spread is not None and fig.mean:
        spread = fig.spread / fig.mean
    return {"runs": fig.runs, "mean": fig.mean, "spread": spread, "n": fig.n}


def detect_steps(ser: Series, groups: list[Any], fx: Any) -> list[Step]:
    """Steps between consecutive builds of a series: each build's group of the fact layer (several groups of
    one build, e.g. settings resolved differently, are compared only where the build changed)."""
    by_id = {p.id: p for p in ser.points}
    ordered = sorted(groups, key=lambda g: (g.runs[0].created, g.runs[0].id))
    steps = []
    for prev, nxt in zip(ordered, ordered[1:]):
        if (
            prev.build_identity == nxt.build_identity
            and prev.newest.almanac_version == nxt.newest.almanac_version
        ):
            continue
        fa, fb = prev.figure(), nxt.figure()
        if fa is None or fb is None:
            continue
        cmp = fx.compare(fa, fb)
        if (
            cmp.verdict not in ("win", "loss")
            or cmp.ratio is None
            or abs(cmp.ratio - 1.0) < MIN_STEP
        ):
            continue
        before = [by_id[i] for i in fa.run_ids if i in by_id]
        after = [by_id[i] for i in fb.run_ids if i in by_id]
        steps.append(
            Step(
                ser,
                before,
                after,
                _figure_window(fa),
                _figure_window(fb),
                cmp.ratio,
                cmp.ci95_low,
                cmp.ci95_high,
                "regression" if cmp.verdict == "loss" else "improvement",
                _diff(before[-1].build, after[0].build),
                _diff(before[-1].effective, after[0].effective),
                f"{fa.basis} / {fb.basis}",
                fa,
                fb,
            )
        )
    return steps


def all_steps(sers: list[Series]) -> list[Step]:
    """Every step, regressions first, newest first within each kind (variant steps included: ``Step.variant``)."""
    steps = sorted(
        (st for s in sers for st in s.steps),
        key=lambda st: st.after[0].created,
        reverse=True,
    )
    return sorted(
        steps, key=lambda st: st.verdict != "regression"
    )  # stable: newest first within each kind
