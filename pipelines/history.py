"""History and regressions (asv and github-action-benchmark are the anchors).

**Series.** One configuration's results over time: the same host, model file, backend, test
definition and requested settings (core.records.run's history key), on the test kind's
headline metric. Every result is one point; builds (llama.cpp commit, backend version, the
almanac's version, a build variant's label) change along it.

**Step detection (the stated method).** A series holds one group of the fact layer per build
(pipelines.facts: the runs of one build and environment, the run as the unit), in release order
(llama-cpp-python's version, where the build names it), else by when each build was first measured.
Every two consecutive builds are compared by their figures, the same figures the Leaderboard shows
(pipelines.facts.Facts.compare: the ratio of the two run-unit values with its CI95). A boundary is a
*step* when that interval excludes 1 and the change is at least ``MIN_STEP`` (2%); a loss is a
regression, a win an improvement. Steps are only looked for where the build changed: a drift within
one build is not attributed to anything, and the same build measured twice is one group, never a
step. A step into or out of a build variant (a build with a label: deliberately changed, e.g.
threads halved) is a *variant* step: shown apart from the release line's regressions.

**Stale.** Per host, backend and server software (llama_cpp.server and llama-server are different
software, not versions of one), release builds (the build without a variant label) are in release
order (the binding's version where the build names it), else by when they were first seen; a result
measured with a build older than the newest one on its host, backend and server is stale.

Linear in the number of results: one grouping pass, one sort per series.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.kinds import headline
from core.metrics import Metric
from core.records.run import RunRecord
from pipelines import noise as noise_mod
from pipelines.memo import per_set

WINDOW = 5  # runs per side where a series is cut into segments by time (benchmarks/aa_calibration.py)
MIN_STEP = 0.02
METHOD = (
    f"Results of one configuration (same host, model file, backend, test and requested settings) form one "
    f"figure per build, the run as the unit (the figure the Leaderboard shows for that build). Builds are "
    f"in release order (the binding's version, where the build names it: an older release measured later "
    f"still comes first), else by when each was first measured, and every two consecutive ones are compared: "
    f"the ratio of their "
    f"figures with a CI95 on the log scale (the two figures' variances added, Welch-Satterthwaite degrees of "
    f"freedom). A step is a boundary whose interval excludes 1 and whose change is at least {MIN_STEP:.0%}: a "
    f"loss is a regression, a win an improvement. All boundaries of a view are one family: a step must also "
    f"survive the false discovery rate over them ({stats.FDR_Q:g}, {stats.FDR_NAME}), and the page says how "
    f"many boundaries were tested. The same build measured again is the same figure, never a "
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


@dataclass(eq=False)
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
    comparison: Any = (
        None  # core.stats.Comparison, its q-value set over the family (flag_steps)
    )

    @property
    def q_value(self) -> float | None:
        return None if self.comparison is None else self.comparison.q_value

    @property
    def sure_change(self) -> float:
        """The smallest relative change the interval allows (its end nearest 1, on the log scale): ranks steps
        by size and confidence at once (a large change known roughly beside a smaller one known well)."""
        import math

        if self.ci95_low is None or self.ci95_high is None or self.ci95_low <= 0:
            return 0.0
        lo, hi = math.log(self.ci95_low), math.log(self.ci95_high)
        return 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))

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
    steps: list[Step] = field(
        default_factory=list
    )  # the boundaries flagged (flag_steps)
    boundaries: list[Step] = field(default_factory=list)  # every boundary tested
    span: Step | None = (
        None  # the earliest release build against the newest (build_to_build)
    )
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


def _almanac(r: RunRecord) -> str:
    """The almanac that measured, with its stats method where that is not the first
    (core.records.run.STATS_METHODS): part of a history point's build, so a method change is a boundary."""
    m = r.stats_method
    return r.almanac_version + (f" (stats method {m})" if m != 1 else "")


def _short_build(r: RunRecord) -> str:
    return f"{r.backend_build} · almanac {_almanac(r)}"


def _release(r: RunRecord) -> str:
    """The build without its variant label, as a canonical string (cached on the record)."""
    v = r._cache.get("release")
    if v is None:
        ident = {k: v for k, v in r.build_identity.items() if k != "label"}
        v = r._cache["release"] = json.dumps(
            {**ident, "almanac": _almanac(r)}, sort_keys=True
        )
    return v


_VERSION = re.compile(r"^llama-cpp-python (\d+(?:\.\d+)+)")


def release_key(r: RunRecord) -> tuple[int, ...]:
    """Where a run's release build stands in its line: llama-cpp-python's version where the build names it
    (releases measured out of order, e.g. an older release measured later by `invoke bisect`, still stand in
    release order, as asv orders by commit, not by when it measured), else () (then the order is when each
    build was first measured)."""
    m = _VERSION.match(str(r.doc["build"].get("backend_version") or ""))
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def _build_order(g: Any) -> tuple[Any, ...]:
    """A group's place among the builds of one series: release order, then when first measured."""
    return (release_key(g.newest), g.runs[0].created, g.runs[0].id)


def _line(r: RunRecord) -> tuple[str, str, str]:
    """What builds are versions of: a host's backend (and, over HTTP, the server software)."""
    return (r.host_id, r.backend, r.server)


def newest_releases(
    recs: list[RunRecord],
) -> dict[tuple[str, str, str], tuple[str, dict[str, str]]]:
    """Per host, backend and server: the newest release build and each release's first-seen time."""
    first: dict[tuple[str, str, str], dict[str, str]] = {}
    order: dict[str, tuple[int, ...]] = {}
    for r in recs:
        seen = first.setdefault(_line(r), {})
        rel = _release(r)
        order.setdefault(rel, release_key(r))
        if rel not in seen or r.created < seen[rel]:
            seen[rel] = r.created
    return {
        hb: (max(seen, key=lambda k: (order[k], seen[k], k)), seen)
        for hb, seen in first.items()
    }


def stale_ids(docs: list[RunRecord]) -> set[str]:
    """Ids of ok results measured with an older build than the newest on their host, backend and server."""
    recs = [r for r in list(docs) if r.ok]
    newest = newest_releases(recs)
    out = set()
    for r in recs:
        top, seen = newest[_line(r)]
        rel = _release(r)
        if rel != top and (release_key(r), seen[rel]) < (
            _release_key_of(top),
            seen[top],
        ):
            out.add(r.id)
    return out


def _release_key_of(rel: str) -> tuple[int, ...]:
    """release_key of a release as _release writes it (its build identity as JSON)."""
    m = _VERSION.match(str(json.loads(rel).get("backend_version") or ""))
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


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
    recs = [
        r
        for r in fx.records
        if r.ok and not r.disturbed and headline(r.test_kind) is not None
    ]
    stale = stale_ids(recs)
    out: dict[str, Series] = {}
    groups: dict[str, list[Any]] = {}
    for r in recs:
        metric = r.headline_metric
        s = r.headline
        # (recs have a headline metric; an ok run's headline summary has a mean)
        if s is None or s.mean is None or metric is None:
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
                {**r.build_identity, "almanac": _almanac(r)},
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
        ser.boundaries = detect_steps(ser, groups.get(key, []), fx)
        ser.span = _span(ser, groups.get(key, []), fx)
    sers = sorted(
        out.values(), key=lambda s: (s.host_id, s.model, s.test, s.backend, s.key)
    )
    flag_steps(sers)
    return sers


def tested(sers: list[Series]) -> int:
    """How many boundaries (build changes with a figure on both sides) the family of a view holds."""
    return sum(len(s.boundaries) for s in sers)


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
    """Every *tested boundary* of a series, as a Step candidate: consecutive builds (each build's group of the
    fact layer; several groups of one build, e.g. settings resolved differently, are compared only where the
    build changed) whose two figures both exist. Which of them are steps is decided over the whole family of
    boundaries at once (``flag_steps``), never one at a time."""
    by_id = {p.id: p for p in ser.points}
    ordered = sorted(groups, key=_build_order)
    steps = []
    for prev, nxt in zip(ordered, ordered[1:]):
        if prev.build_identity == nxt.build_identity and _almanac(
            prev.newest
        ) == _almanac(nxt.newest):
            continue
        fa, fb = prev.figure(), nxt.figure()
        if fa is None or fb is None:
            continue
        cmp = fx.compare(fa, fb)
        before = [by_id[i] for i in fa.run_ids if i in by_id]
        after = [by_id[i] for i in fb.run_ids if i in by_id]
        if not before or not after:
            continue
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
                cmp,
            )
        )
    return steps


def _span(ser: Series, groups: list[Any], fx: Any) -> Step | None:
    """The series' earliest release build against its newest (builds without a variant label, in release
    order, else by when each was first measured), as a Step whose verdict is not yet judged; None with fewer
    than two release builds."""
    release = [g for g in groups if not g.build_identity.get("label")]
    release.sort(key=_build_order)
    if (
        len(
            {json.dumps(g.build_identity, sort_keys=True, default=str) for g in release}
        )
        < 2
    ):
        return None
    first, last = release[0], release[-1]
    if first.build_identity == last.build_identity:
        return None
    one = detect_steps(ser, [first, last], fx)
    return one[0] if one else None


def build_to_build(sers: list[Series]) -> list[Step]:
    """Every series' earliest release build against its newest (the seed's "Early vs clean4" table, living):
    the rows form one family held to the false discovery rate (core.stats.fleet_fdr), like the steps; a
    row's ``verdict`` is "regression", "improvement" or "within noise". Largest change first."""
    spans = [s.span for s in sers if s.span is not None]
    for st, c in zip(spans, stats.fleet_fdr([st.comparison for st in spans])):
        st.comparison = c
        st.verdict = (
            ("regression" if c.verdict == "loss" else "improvement")
            if c.verdict in ("win", "loss")
            and c.ratio is not None
            and abs(c.ratio - 1.0) >= MIN_STEP
            else "within noise"
        )
    return sorted(
        spans, key=lambda st: (st.series.model, st.series.test, st.series.host_id)
    )


def flag_steps(sers: list[Series]) -> int:
    """Decide the steps of every series at once: all tested boundaries form one family, held to a false
    discovery rate of core.stats.FDR_Q (core.stats.FDR_NAME, core.stats.fleet_fdr); a boundary is a step when
    its verdict survives that and its change is at least MIN_STEP. Sets each series' ``steps`` and
    ``tested``; returns the number of boundaries tested."""
    cands = [st for s in sers for st in s.boundaries]
    adjusted = stats.fleet_fdr([st.comparison for st in cands])
    for s in sers:
        s.steps = []
    for st, c in zip(cands, adjusted):
        st.comparison = c
        if (
            c.verdict in ("win", "loss")
            and c.ratio is not None
            and abs(c.ratio - 1.0) >= MIN_STEP
        ):
            st.verdict = "regression" if c.verdict == "loss" else "improvement"
            st.series.steps.append(st)
    return len(cands)


def all_steps(sers: list[Series]) -> list[Step]:
    """Every step, regressions first, then by size and confidence (the smallest change its interval allows,
    largest first; newest first among equals). Variant steps included: ``Step.variant``."""
    steps = sorted(
        (st for s in sers for st in s.steps),
        key=lambda st: st.after[0].created,
        reverse=True,
    )
    steps.sort(key=lambda st: -st.sure_change)
    return sorted(steps, key=lambda st: st.verdict != "regression")  # stable


@dataclass
class Finding:
    """One build change seen on many hosts: the boundaries of one test across hosts where the release build
    changed the same way (``change``: field -> (before, after)), how many were tested and flagged, and the
    change across the hosts tested: the geometric mean of their ratios with a t interval from the spread
    between hosts (one host: its own interval)."""

    change: dict[str, tuple[Any, Any]]
    test: str
    metric: Metric
    verdict: (
        str  # "regression" or "improvement": the direction of the flagged boundaries
    )
    tested: list[Step]
    flagged: list[Step]
    ratio: float | None
    ci95_low: float | None
    ci95_high: float | None

    @property
    def hosts_flagged(self) -> int:
        return len({st.series.host_id for st in self.flagged})

    @property
    def hosts_tested(self) -> int:
        return len({st.series.host_id for st in self.tested})


def change_text(change: dict[str, tuple[Any, Any]]) -> str:
    """ "llama_cpp_commit: 4df29be4f → 0c1e57098; llama_cpp_python: 0.3.35 → 0.3.36" (fields sorted)."""
    return "; ".join(
        f"{k}: {'—' if a is None else a} → {'—' if b is None else b}"
        for k, (a, b) in sorted(change.items())
    )


def pct_interval(ratio: float | None, low: float | None, high: float | None) -> str:
    """ "−8.0% [−10.1, −6.0]": a ratio and its CI95 as percent changes ("—" where missing)."""

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{(x - 1.0) * 100.0:+.1f}".replace("-", "−")

    return f"{pct(ratio)}% [{pct(low)}, {pct(high)}]"


def findings(sers: list[Series]) -> list[Finding]:
    """Flagged release-line steps grouped by build change and test: a drop seen on 37 hosts at the same build
    change is one finding ("on 37 of 40 hosts"), ranked like steps (regressions first, by size and confidence)."""
    import math

    tested_by: dict[tuple[str, str, str], list[Step]] = {}
    for s in sers:
        for st in s.boundaries:
            if st.variant:
                continue
            key = (change_text(st.build_change), s.test, s.metric.name)
            tested_by.setdefault(key, []).append(st)
    out = []
    for (_, test, _), boundaries in tested_by.items():
        for verdict in ("regression", "improvement"):
            flagged = [
                st
                for st in boundaries
                if any(x is st for x in st.series.steps) and st.verdict == verdict
            ]
            if not flagged:
                continue
            logs = [
                math.log(st.ratio) for st in boundaries if st.ratio and st.ratio > 0
            ]
            ratio = lo = hi = None
            if len(logs) >= 2:
                mean = sum(logs) / len(logs)
                sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
                half = stats.t_critical(len(logs) - 1) * sd / math.sqrt(len(logs))
                ratio, lo, hi = (
                    math.exp(mean),
                    math.exp(mean - half),
                    math.exp(mean + half),
                )
            elif logs:
                ratio, lo, hi = (
                    boundaries[0].ratio,
                    boundaries[0].ci95_low,
                    boundaries[0].ci95_high,
                )
            out.append(
                Finding(
                    boundaries[0].build_change,
                    test,
                    boundaries[0].series.metric,
                    verdict,
                    boundaries,
                    flagged,
                    ratio,
                    lo,
                    hi,
                )
            )
    out.sort(
        key=lambda f: (
            f.verdict != "regression",
            -len(f.flagged),
            -abs(math.log(f.ratio or 1.0)),
        )
    )
    return out
