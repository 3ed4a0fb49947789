"""History and regressions (asv and github-action-benchmark are the anchors).

**Series.** One configuration's results over time: the same host, model file, backend, test
definition and requested settings (core.records.run's history key), on the test kind's
headline metric. Every result is one point; builds (llama.cpp commit, backend version, the
almanac's version, a build variant's label) change along it.

**Step detection (the stated method).** A series is ordered by time and cut into segments
where the build changes. At every boundary the window before (the up to ``WINDOW`` newest
results of the segment before) is compared with the window after (the up to ``WINDOW``
oldest results of the segment after) with the *run* as the unit (core.stats.compare_runs):
each result is one run, a window of two or more runs contributes the spread between its runs,
a window of one run the host's run-to-run noise for that kind of test (pipelines.noise). A
boundary is a *step* when the CI95 of the ratio excludes 1 and the change is at least
``MIN_STEP`` (2%); a loss is a regression, a win an improvement. Steps are only looked for
where the build changed: a drift within one build is not attributed to anything.

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
from core.summary import Summary
from core.metrics import Metric
from core.records.run import RunRecord

from pipelines import noise as noise_mod
from pipelines.memo import per_set
from pipelines.runs import records

WINDOW = 5
MIN_STEP = 0.02
METHOD = (f"Results of one configuration, ordered by time, are cut into segments where the build changes "
          f"(llama.cpp commit, backend version, almanac version or build variant). At each boundary the up to "
          f"{WINDOW} newest results before it are compared with the up to {WINDOW} oldest after it, each result "
          f"one run: the ratio of the geometric means of the run means, with a CI95 from the spread between the runs "
          f"of each side (or, for a side of one run, the host's run-to-run noise for that kind of test; see "
          f"Statistics). A step is a boundary whose interval excludes 1 and whose change is at least "
          f"{MIN_STEP:.0%}: a loss is a regression, a win an improvement.")


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
    series: "Series"
    before: list[Point]
    after: list[Point]
    pooled_before: dict[str, Any]  # the window as runs: runs, mean (geometric, of run means), spread, n (repetitions)
    pooled_after: dict[str, Any]
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None
    verdict: str  # "regression" or "improvement"
    build_change: dict[str, tuple[Any, Any]]  # field -> (before, after)
    settings_change: dict[str, tuple[Any, Any]]  # effective settings that changed with it
    method: str = "runs"  # what the interval rests on (core.stats.Comparison.method)

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0


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
    noise: stats.RunNoise | None = None  # the host's run-to-run noise for this kind of test

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
        v = r._cache["release"] = json.dumps({**ident, "almanac": r.almanac_version}, sort_keys=True)
    return v


def _line(r: RunRecord) -> tuple[str, str, str]:
    """What builds are versions of: a host's backend (and, over HTTP, the server software)."""
    return (r.host_id, r.backend, r.server)


def newest_releases(recs: list[RunRecord]) -> dict[tuple[str, str, str], tuple[str, dict[str, str]]]:
    """Per host, backend and server: the newest release build and each release's first-seen time."""
    first: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in recs:
        seen = first.setdefault(_line(r), {})
        rel = _release(r)
        if rel not in seen or r.created < seen[rel]:
            seen[rel] = r.created
    return {hb: (max(seen, key=lambda k: (seen[k], k)), seen) for hb, seen in first.items()}


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
    return {k: (a.get(k), b.get(k)) for k in keys
            if json.dumps(a.get(k), sort_keys=True, default=str) != json.dumps(b.get(k), sort_keys=True, default=str)}


@per_set
def series(docs: list[RunRecord]) -> list[Series]:
    """Every configuration's series (ok results with the headline metric), steps detected."""
    recs = [r for r in records(docs) if r.ok and headline(r.test_kind) is not None]
    stale = stale_ids(recs)
    noise = noise_mod.host_noise(recs)
    out: dict[str, Series] = {}
    for r in recs:
        metric = r.headline_metric
        s = r.headline
        if s is None:
            continue
        ser = out.get(r.history_key)
        if ser is None:
            ser = out[r.history_key] = Series(r.history_key, r.host_id, r.model_name, r.test_name, r.backend_name,
                                              r.requested, metric, noise=noise_mod.noise_for(noise, r))  # type: ignore[arg-type]
        ser.points.append(Point(r.id, r.created, {**r.build_identity, "almanac": r.almanac_version}, _short_build(r),
                                _release(r), s.n, float(s.mean), s.stddev, s.ci95_low, s.ci95_high, r.effective,
                                r.id in stale))
    for ser in out.values():
        ser.points.sort(key=lambda p: (p.created, p.id))
        ser.steps = detect_steps(ser)
    return sorted(out.values(), key=lambda s: (s.host_id, s.model, s.test, s.backend, s.key))


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
    return p.stddev / p.mean / p.n ** 0.5 if p.stddev is not None and p.n > 1 and p.mean > 0 else None


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
    return {"runs": len(points), "mean": mean, "spread": spread, "n": sum(p.n for p in points)}


def compare_windows(before: list[Point], after: list[Point], higher_is_better: bool,
                    noise: stats.RunNoise | None) -> stats.Comparison:
    """The run-level comparison of two windows (core.stats.compare_runs)."""
    return stats.compare_runs([p.mean for p in before], [p.mean for p in after], higher_is_better,
                              noise_a=noise, noise_b=noise, rel_se_a=rel_se(before[0]) if len(before) == 1 else None,
                              rel_se_b=rel_se(after[0]) if len(after) == 1 else None)


def detect_steps(ser: Series) -> list[Step]:
    segs = segments(ser.points)
    steps = []
    for prev, nxt in zip(segs, segs[1:]):
        before, after = prev[-WINDOW:], nxt[:WINDOW]
        cmp = compare_windows(before, after, ser.metric.higher_is_better, ser.noise)
        if cmp.verdict not in ("win", "loss") or cmp.ratio is None or abs(cmp.ratio - 1.0) < MIN_STEP:
            continue
        steps.append(Step(ser, before, after, window(before), window(after), cmp.ratio, cmp.ci95_low, cmp.ci95_high,
                          "regression" if cmp.verdict == "loss" else "improvement",
                          _diff(before[-1].build, after[0].build), _diff(before[-1].effective, after[0].effective),
                          cmp.method))
    return steps


def all_steps(sers: list[Series]) -> list[Step]:
    """Every step, regressions first, newest first within each kind."""
    steps = sorted((st for s in sers for st in s.steps), key=lambda st: st.after[0].created, reverse=True)
    return sorted(steps, key=lambda st: st.verdict != "regression")  # stable: newest first within each kind
