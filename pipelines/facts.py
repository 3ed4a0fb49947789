"""The fact layer: every measured figure, computed once per loaded set, read by every page.

A *group* is one piece of work measured in one environment: the runs that share a comparability
key (core.records.run.RunRecord.comparability_key: the work — model identity, the test's work
parameters, the backend class, the method version — and the environment — host, backend and its
server software, build identity including a library loaded from elsewhere, effective settings).
Builds and library setups are environment: two of them are two groups, never pooled.

A group's *figure* on a metric treats the run as the unit (core.stats.side_estimate): the
geometric mean of its run means, with a CI95 from the spread between its runs when it has two or
more, or its one run widened by run-to-run noise: the host's own estimate for that kind of test
(pipelines.noise), else the fleet's pooled estimate for that kind of test (labelled so), else no
interval. Beside it, what a reader must know about the runs behind it: a run that missed its
precision target or whose repetitions drifted says so (``Figure.flags``).

A *board* is one workload (RunRecord.work_key; prefill pp512 and decode tg128 of one model side
by side) on every host that ran it. Hosts are ranked on it, each by its *representative* group
(the best figure among its ordinary builds; a deliberately varied build, one with a variant label,
represents a host only where it has nothing else), its other groups listed under it. Ranks come
from the same pairwise comparisons as verdicts (core.stats.combine_sides; pipelines.ranking), so
no host is ranked =1 beside a host that beats it.

Everything here is computed once per loaded set of artifacts (pipelines.memo.per_set) and is
read-only for callers: Home, Leaderboard, per-host boards, Host vs host, History, Regressions,
Projections, Roles, What-if and Serving read their figures here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from core import noise as noise_core
from core import stats
from core.kinds import headline
from core.metrics import METRICS, Metric
from core.records.run import RunRecord, resolve_baselines
from pipelines import hostnames
from pipelines import noise as noise_mod
from pipelines.memo import per_run, per_set
from pipelines.ranking import Ranked, rank_sides

PAIRED = (
    "pp512",
    "tg128",
)  # prefill and decode, side by side (llama-bench's headline tests)
REFERENCE_MATRIX = "reference"
# Effective settings that follow the test rather than the machine (the context and batch a test sizes
# for itself): never part of what a row shows as its environment.
TEST_SIZED = frozenset({"n_ctx", "n_batch", "n_ubatch"})

BASIS_RUNS = "runs"
BASIS_HOST = "host noise"
BASIS_FLEET = "fleet noise"
BASIS_NONE = "none"

RULE = (
    "A figure is one configuration's value on one host with the run as the unit: the geometric mean of its run "
    "means, with a CI95 on the log scale from the spread between its runs (two or more), or its one run widened "
    "by the host's run-to-run noise for that kind of test, or, where the host has none yet, by the fleet's pooled "
    "run-to-run noise for that kind of test (labelled *fleet noise*). Builds, library setups and settings are "
    "environment: each is its own figure, never pooled."
)

REPRESENTATIVE_RULE = (
    "A host is ranked by its best configuration on the workload among its ordinary builds (a build "
    "with a variant label, deliberately changed, represents a host only where it has no other); its "
    "other configurations are listed under it, unranked."
)


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


@dataclass(frozen=True)
class Figure:
    """One group's value on one metric, the run as the unit."""

    group: str  # the group's key
    metric: Metric
    mean: float
    ci95_low: float | None
    ci95_high: float | None
    runs: int
    n: int  # repetitions (samples) behind it, all runs
    spread: (
        float | None
    )  # standard deviation between the run means (one run: its own stddev)
    basis: str  # BASIS_*: what the interval rests on
    note: str  # the same in words, or why there is no interval
    side: stats.SideEstimate
    run_ids: tuple[str, ...]  # oldest first
    flags: tuple[
        str, ...
    ] = ()  # what a reader must know about the runs (missed target, drift)

    @property
    def newest_id(self) -> str:
        return self.run_ids[-1]

    @property
    def key(self) -> str:
        """What identifies this figure wherever it appears (the consistency check's key)."""
        return f"{self.group}:{self.metric.name}"

    @property
    def has_interval(self) -> bool:
        return self.ci95_low is not None and self.ci95_high is not None

    @property
    def half_width_factor(self) -> float | None:
        """How far the interval reaches each way as a factor (×1.08: 8% either side)."""
        if not self.has_interval or self.ci95_low <= 0:
            return None
        return math.sqrt(self.ci95_high / self.ci95_low)


@dataclass
class Group:
    """One piece of work in one environment: every run of it, oldest first."""

    key: str
    runs: list[RunRecord]
    facts: Facts = field(repr=False)

    @property
    def newest(self) -> RunRecord:
        return self.runs[-1]

    @cached_property
    def work_key(self) -> str:
        return self.newest.work_key

    @property
    def history_key(self) -> str:
        return self.newest.history_key

    @property
    def host_id(self) -> str:
        return self.newest.host_id

    @property
    def host_label(self) -> str:
        return self.facts.labels.get(self.host_id, self.host_id)

    @property
    def backend(self) -> str:
        return self.newest.backend_name

    @property
    def build(self) -> str:
        return self.newest.backend_build

    @property
    def build_identity(self) -> dict[str, Any]:
        return self.newest.build_identity

    @property
    def variant(self) -> str | None:
        """The build's variant label (a deliberately changed build), None for an ordinary one."""
        return self.newest.build_label

    @property
    def requested(self) -> dict[str, Any]:
        return self.newest.requested_explicit

    @cached_property
    def environment(self) -> dict[str, Any]:
        return {k: v for k, v in self.newest.effective.items() if k not in TEST_SIZED}

    @property
    def model(self) -> str:
        return self.newest.model_name

    @property
    def test(self) -> str:
        return self.newest.test_name

    @property
    def kind(self) -> str:
        return self.newest.test_kind

    @property
    def headline(self) -> Metric | None:
        return headline(self.kind)

    def figure(self, metric: str | Metric | None = None) -> Figure | None:
        """This group's figure on ``metric`` (default: its kind's headline), None where no run measured it."""
        m = (
            metric
            if isinstance(metric, Metric)
            else (METRICS.get(metric) if metric else self.headline)
        )
        if m is None:
            return None
        cache = self.facts._figures
        k = (self.key, m.name)
        if k not in cache:
            cache[k] = self.facts._figure(self, m)
        return cache[k]


@dataclass
class Row:
    """One host's configuration on a board: its group per test (a paired board's prefill and decode of
    the same configuration), the configuration's environment and build."""

    host_id: str
    key: str
    groups: dict[str, Group]  # test -> group

    @property
    def any(self) -> Group:
        return next(iter(self.groups.values()))

    @property
    def variant(self) -> str | None:
        return self.any.variant

    def figure(self, test: str) -> Figure | None:
        g = self.groups.get(test)
        return g.figure() if g is not None else None


@dataclass
class Standing:
    """One host on one test of a board: the figure of its representative configuration, its rank."""

    host_id: str
    host_label: str
    row: Row
    figure: Figure
    rank: Ranked

    @property
    def group(self) -> Group:
        return self.row.groups[self.test]

    @property
    def test(self) -> str:
        return next(t for t, g in self.row.groups.items() if g.key == self.figure.group)

    @property
    def rank_label(self) -> str:
        from pipelines.ranking import rank_label

        return rank_label(self.rank)


@dataclass
class HostRows:
    """One host on a board: its representative configuration first, then its others."""

    host_id: str
    host_label: str
    rows: list[Row]  # representative first

    @property
    def representative(self) -> Row:
        return self.rows[0]

    @property
    def others(self) -> list[Row]:
        return self.rows[1:]


@dataclass
class Board:
    """One workload on every host that ran it (prefill and decode side by side where paired)."""

    key: str
    work_keys: dict[str, str]  # test name -> work key
    tests: list[str]
    metrics: dict[str, Metric]
    hosts_rows: list[HostRows]  # ordered by the last test's rank
    standings: dict[str, list[Standing]]  # test -> hosts, best rank first
    reference: bool
    model: str
    model_identity: str
    quantization: str | None
    synthetic: bool
    backend_class: str
    kind: str
    endpoint: str | None
    work_tests: dict[str, dict[str, Any]]
    # test -> host -> its standing (the first in ``standings``), built when first asked
    _standing_of: dict[str, dict[str, Standing]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def hosts(self) -> list[str]:
        return sorted(h.host_id for h in self.hosts_rows)

    @property
    def rows(self) -> list[Row]:
        return [r for h in self.hosts_rows for r in h.rows]

    @property
    def single(self) -> bool:
        """One configuration on one host: nothing to rank it against."""
        return len(self.rows) < 2

    def standing(self, test: str, host_id: str) -> Standing | None:
        # from an index per test: a scan of the test's standings for each row made a board quadratic in hosts
        if test not in self._standing_of:
            index: dict[str, Standing] = {}
            for s in self.standings.get(test, []):
                index.setdefault(s.host_id, s)
            self._standing_of[test] = index
        return self._standing_of[test].get(host_id)

    @property
    def label(self) -> str:
        return f"{self.model} · {' + '.join(self.tests)}"


class Facts:
    """Every group of a loaded set, its figures, the noise they rest on and the workload boards."""

    def __init__(self, recs: list[RunRecord]):
        self.records = resolve_baselines(recs)
        self.labels = hostnames.labels(recs)
        self.noise = noise_mod.host_noise(recs)
        hosts = {r.host_id for r in recs}
        self.fleet_noise = _fleet_noise(
            {k: v for k, v in self.noise.items() if k[0] in hosts}
        )
        self._figures: dict[tuple[str, str], Figure | None] = {}
        groups: dict[str, list[RunRecord]] = {}
        # runs that never got a quiet slot (core.quiet): kept on disk and listed, in no figure or verdict
        self.disturbed = [r for r in recs if r.ok and r.disturbed]
        for r in recs:
            if r.ok and not r.disturbed:
                groups.setdefault(r.comparability_key(), []).append(r)
        self.groups: dict[str, Group] = {}
        for k, runs in groups.items():
            runs.sort(key=lambda r: (r.created, r.id))
            self.groups[k] = Group(k, runs, self)
        self._group_of = {r.id: g for g in self.groups.values() for r in g.runs}
        self.by_work: dict[str, list[Group]] = {}
        # a host's groups and a test's, for groups_of(host_id) and groups_of(test=...)
        self._by_host: dict[str, list[Group]] = {}
        self._by_test: dict[str, list[Group]] = {}
        for g in self.groups.values():
            self.by_work.setdefault(g.work_key, []).append(g)
            self._by_host.setdefault(g.host_id, []).append(g)
            self._by_test.setdefault(g.test, []).append(g)
        self.reference_work = {
            r.work_key for r in recs if r.ok and r.matrix_name == REFERENCE_MATRIX
        }

    # -- lookups ------------------------------------------------------------------------------
    @cached_property
    def newest_ok_by_key(self) -> dict[str, RunRecord]:
        """Each configuration key's newest ok run (by created, then id)."""
        by_key: dict[str, RunRecord] = {}
        for r in self.records:
            if r.ok and (
                r.key not in by_key
                or (r.created, r.id) > (by_key[r.key].created, by_key[r.key].id)
            ):
                by_key[r.key] = r
        return by_key

    def group_of(self, run: RunRecord | str) -> Group | None:
        """The group a run belongs to (by record or id); None for a failed or unknown run."""
        return self._group_of.get(run if isinstance(run, str) else run.id)

    def figure_of(
        self, run: RunRecord | str, metric: str | Metric | None = None
    ) -> Figure | None:
        g = self.group_of(run)
        return g.figure(metric) if g is not None else None

    def work_hosts(self) -> set[tuple[str, str]]:
        """The (work, host) pairs this layer has a group of."""
        return {(g.work_key, g.host_id) for g in self.groups.values()}

    def groups_of(
        self,
        host_id: str | None = None,
        *,
        model: str | None = None,
        test: str | None = None,
        backend: str | None = None,
    ) -> list[Group]:
        out = []
        # one host's groups from the host index (pages ask per host: a scan of the fleet's groups each time
        # made the per-host pages quadratic in the fleet)
        pool = (
            self._by_host.get(host_id, [])
            if host_id is not None
            else self._by_test.get(test, [])
            if test is not None
            else self.groups.values()
        )
        for g in pool:
            if model is not None and g.model != model:
                continue
            if test is not None and g.test != test:
                continue
            if (
                backend is not None
                and g.backend != backend
                and g.newest.backend != backend
            ):
                continue
            out.append(g)
        return out

    def representative(
        self, groups: Iterable[Group], metric: str | Metric | None = None
    ) -> Group | None:
        """The group that stands for a host among ``groups`` (one host's groups of one work): the best
        figure among ordinary builds, else among variant builds (REPRESENTATIVE_RULE)."""
        scored = [(g, g.figure(metric)) for g in groups]
        scored = [(g, f) for g, f in scored if f is not None]
        if not scored:
            return None
        ordinary = [(g, f) for g, f in scored if g.variant is None] or scored
        m = ordinary[0][1].metric
        sign = 1 if m.higher_is_better else -1
        return max(
            ordinary,
            key=lambda gf: (
                sign * gf[1].mean,
                gf[1].runs,
                gf[0].newest.created,
                gf[0].key,
            ),
        )[0]

    def compare(self, baseline: Figure, candidate: Figure) -> stats.Comparison:
        """candidate ÷ baseline with the run as the unit, exactly as every verdict on the site compares."""
        return stats.combine_sides(
            baseline.side, candidate.side, candidate.metric.higher_is_better
        )

    # -- noise --------------------------------------------------------------------------------
    def _figure(self, g: Group, m: Metric) -> Figure | None:
        runs = [
            r
            for r in g.runs
            if (s := r.stat(m.name)) is not None and s.mean is not None and s.mean > 0
        ]
        if not runs:
            return None
        values = [
            v for v in (noise_mod.run_value(r, m.name) for r in runs) if v is not None
        ]
        means = [v[0] for v in values]
        own = noise_mod.noise_for(self.noise, runs[-1])
        fleet = self.fleet_noise.get(noise_core.noise_class(runs[-1].test))
        side = stats.pooled_side(
            means,
            noise=own,
            fallback=fleet,
            rel_se=values[0][1] if len(values) == 1 else None,
        )
        lo, hi = side.interval()
        k = len(runs)
        if side.var is None:
            basis, note = BASIS_NONE, side.why or "no interval"
        elif side.method == "host noise":
            basis = BASIS_HOST
            note = (
                (f"{k} runs; " if k > 1 else "one run; ")
                + f"the host's run-to-run noise for this kind of test ({100 * own.sigma:.1f}%, {own.df} df: "
                f"{own.source})"
            )
        elif side.method == "fleet noise":
            basis = BASIS_FLEET
            note = (
                f"one run; this host has no run-to-run noise estimate yet, so the fleet's pooled noise for this "
                f"kind of test ({100 * fleet.sigma:.1f}%, {fleet.df} df; {fleet.source})"
            )
        else:
            basis, note = BASIS_RUNS, f"{k} runs; the spread between them"
        stat = runs[-1].stat(m.name)
        if k > 1:
            c = sum(means) / len(means)
            spread = (sum((x - c) ** 2 for x in means) / (len(means) - 1)) ** 0.5
        else:
            spread = stat.stddev if stat is not None else None
        n = sum(int(r.stat(m.name).n or 0) for r in runs)
        return Figure(
            g.key,
            m,
            float(side.centre if side.centre is not None else stat.mean),
            lo,
            hi,
            k,
            n,
            spread,
            basis,
            note,
            side,
            tuple(r.id for r in runs),
            run_flags(runs, m.name),
        )

    # -- boards -------------------------------------------------------------------------------
    @cached_property
    def boards(self) -> list[Board]:
        """Every workload's board, the reference workloads first."""
        pairs: dict[str, list[str]] = {}
        for wk, groups in self.by_work.items():
            r = groups[0].newest
            if headline(r.test_kind) is None:
                continue
            if r.test_kind == "rate" and r.test_name in PAIRED:
                gid = _json(
                    ["paired", r.model_identity, r.backend_class, r.method_version]
                )
            else:
                gid = wk
            pairs.setdefault(gid, []).append(wk)
        out = [self._board(wks) for wks in pairs.values()]
        out = [b for b in out if b is not None]
        out.sort(
            key=lambda b: (
                not b.reference,
                b.single,
                not b.synthetic and b.reference,
                b.model,
                b.tests,
            )
        )
        return out

    def board_of(self, work_key: str) -> Board | None:
        return self._board_index.get(work_key)

    @cached_property
    def _board_index(self) -> dict[str, Board]:
        return {wk: b for b in self.boards for wk in b.work_keys.values()}

    @property
    def reference_boards(self) -> list[Board]:
        return [b for b in self.boards if b.reference]

    def standing(self, work_key: str, host_id: str) -> Standing | None:
        b = self.board_of(work_key)
        if b is None:
            return None
        test = next(t for t, wk in b.work_keys.items() if wk == work_key)
        return b.standing(test, host_id)

    def _board(self, wks: list[str]) -> Board | None:
        by_test = {self.by_work[wk][0].test: wk for wk in wks}
        paired = all(t in PAIRED for t in by_test) and all(
            self.by_work[wk][0].kind == "rate" for wk in wks
        )
        tests = [t for t in PAIRED if t in by_test] if paired else sorted(by_test)
        metrics = {
            t: m
            for t in tests
            if (m := headline(self.by_work[by_test[t]][0].kind)) is not None
        }
        tests = [t for t in tests if t in metrics]
        if not tests:
            return None
        # configurations: a host's groups of the same environment on each test are one row
        rows: dict[str, Row] = {}
        for t in tests:
            for g in self.by_work[by_test[t]]:
                if g.figure(metrics[t]) is None:
                    continue
                rk = _json(
                    [g.host_id, g.backend, g.build_identity, g.requested, g.environment]
                )
                row = rows.setdefault(rk, Row(g.host_id, rk, {}))
                cur = row.groups.get(t)
                if cur is None or (len(g.runs), g.newest.created) > (
                    len(cur.runs),
                    cur.newest.created,
                ):
                    row.groups[t] = g
        if not rows:
            return None
        last = tests[-1]
        per_host: dict[str, list[Row]] = {}
        for row in rows.values():
            per_host.setdefault(row.host_id, []).append(row)

        def score(row: Row, t: str) -> tuple:
            f = row.figure(t)
            if f is None:
                return (0, 0.0)
            return (1, f.mean if f.metric.higher_is_better else -f.mean)

        hosts_rows = []
        for h, hrows in per_host.items():
            # the representative: the best on the last test (decode) among ordinary builds
            ordered = sorted(
                hrows,
                key=lambda r: (
                    r.variant is None,
                    score(r, last),
                    *(score(r, t) for t in tests),
                ),
                reverse=True,
            )
            hosts_rows.append(HostRows(h, self.labels.get(h, h), ordered))
        standings: dict[str, list[Standing]] = {}
        for t in tests:
            m = metrics[t]
            cands = []
            for hr in hosts_rows:
                # the representative's figure on this test, else the host's best configuration that has one
                row = next((r for r in hr.rows if r.figure(t) is not None), None)
                if row is not None:
                    cands.append((hr, row, row.figure(t)))
            ranks = rank_sides([f.side for _, _, f in cands], m.higher_is_better)
            sign = -1 if m.higher_is_better else 1
            st = [
                Standing(hr.host_id, hr.host_label, row, f, rk)
                for (hr, row, f), rk in zip(cands, ranks)
            ]
            st.sort(
                key=lambda s: (
                    s.rank.rank if s.rank.rank is not None else 10**9,
                    sign * s.figure.mean,
                    s.host_label,
                )
            )
            standings[t] = st
        order = {s.host_id: i for i, s in enumerate(standings[last])}
        hosts_rows.sort(key=lambda hr: (order.get(hr.host_id, 10**9), hr.host_label))
        first = self.by_work[by_test[tests[0]]][0].newest
        key = hashlib.sha256(_json(sorted(wks)).encode()).hexdigest()[:12]
        return Board(
            key,
            {t: by_test[t] for t in tests},
            tests,
            metrics,
            hosts_rows,
            standings,
            any(wk in self.reference_work for wk in wks),
            first.model_name,
            first.model_identity,
            first.quantization,
            first.synthetic,
            first.backend_class,
            first.test_kind,
            first.model_server,
            {t: self.by_work[by_test[t]][0].newest.work_test for t in tests},
        )


def _fleet_noise(
    table: dict[tuple[str, str], stats.RunNoise],
) -> dict[str, stats.RunNoise]:
    """Per kind of test: every host's run-to-run noise pooled (sums of squares over degrees of freedom)."""
    pooled: dict[str, list[tuple[float, int, str]]] = {}
    for (host, cls), n in table.items():
        pooled.setdefault(cls, []).append((n.sigma, n.df, host))
    out = {}
    for cls, items in pooled.items():
        df = sum(d for _, d, _ in items)
        if not df:
            continue
        ss = sum(s * s * d for s, d, _ in items)
        out[cls] = stats.RunNoise(
            math.sqrt(ss / df), df, f"fleet: {len(items)} host(s) pooled"
        )
    return out


def run_flags(runs: list[RunRecord], metric: str) -> tuple[str, ...]:
    """What a reader must know about the runs behind a figure: a run that missed its precision target
    (the half-width it reached), a run whose repetitions drifted (a monotonic trend, Mann-Kendall)."""
    return tuple(dict.fromkeys(f for r in runs for f in _run_flags(r, metric)))


@per_run
def precision(r: RunRecord) -> Any:
    """How a run's repetition stopped (its details' precision record), once per run: kept with it."""
    return r.precision


@per_run
def _run_flags(r: RunRecord, metric: str) -> tuple[str, ...]:
    """:func:`run_flags` of one run (once per run and metric: its details are read for it once)."""
    out: list[str] = []
    p = precision(r)
    if p is not None and p.met is False and p.target_rel and p.metric == metric:
        reached = (
            f"±{100 * p.half_width_rel:.1f}%"
            if p.half_width_rel is not None
            else "no interval"
        )
        out.append(f"missed its ±{100 * p.target_rel:g}% target ({reached})")
    s = r.stat(metric)
    if s is not None and s.trend is not None and s.trend.monotonic:
        vals = r.values(metric)
        span = f" ({vals[0]:,.1f} → {vals[-1]:,.1f})" if len(vals) >= 2 else ""
        out.append(f"drifted across its repetitions{span}")
    return tuple(out)


@per_set
def _facts(docs: list[Any]) -> Facts:
    return Facts(list(docs))


def of(docs: list[Any]) -> Facts:
    """The fact layer of a set of run artifacts (computed once per loaded set)."""
    return _facts(docs)


def of_loaded() -> Facts:
    """The fact layer of the loaded set's runs (pipelines.dataset); its (work, host) pairs are kept with the
    set (``loaded_work_hosts``), the layer itself only as long as ``of``'s memo keeps it."""
    from pipelines import dataset
    from pipelines.runs import load_runs

    fx = of(list(load_runs()))
    dataset.load().derived("fact_work_hosts", lambda ds: fx.work_hosts())
    return fx


def loaded_work_hosts() -> set[tuple[str, str]]:
    """The (work, host) pairs the loaded set's fact layer has a group of (as the pages' layer had them)."""
    from pipelines import dataset

    return dataset.load().derived(
        "fact_work_hosts", lambda ds: of_loaded().work_hosts()
    )


# -- the glanceable score ------------------------------------------------------------------------
SCORE_RULE = (
    "score = ∛(prefill × decode × 1000 ÷ TTFT): the geometric mean of the prefill rate (pp512, t/s), "
    "the decode rate (tg128, t/s) and 1000 ÷ the time to first token (ms) of a 512-token prompt, that time "
    "from the same two figures: TTFT = 1000 × (512 ÷ prefill + 1 ÷ decode) ms. Its CI95 comes from the "
    "two figures' intervals (the delta method on the log scale, Welch-Satterthwaite degrees of freedom). "
    "One number to glance at, never instead of the rates beside it."
)


@dataclass(frozen=True)
class Score:
    """One host's score on a paired board (SCORE_RULE), from its prefill and decode figures."""

    host_id: str
    value: float
    ci95_low: float | None
    ci95_high: float | None
    side: stats.SideEstimate
    prefill: Figure
    decode: Figure
    ttft_ms: float
    rank: Ranked

    @property
    def key(self) -> str:
        return f"score:{self.prefill.group}+{self.decode.group}"

    @property
    def rank_label(self) -> str:
        from pipelines.ranking import rank_label

        return rank_label(self.rank)


def _score_side(p: Figure, d: Figure) -> tuple[float, float, stats.SideEstimate]:
    """(score, TTFT ms, the score's side on the log scale) from a prefill and a decode figure."""
    n_prompt = 512
    t_s = n_prompt / p.mean + 1.0 / d.mean
    value = (p.mean * d.mean / t_s) ** (1.0 / 3.0)
    share_p = (n_prompt / p.mean) / t_s
    a, b = (1.0 + share_p) / 3.0, (1.0 + (1.0 - share_p)) / 3.0
    sp, sd = p.side, d.side
    if sp.var is None or sd.var is None or sp.df is None or sd.df is None:
        side = stats.SideEstimate(
            math.log(value),
            None,
            None,
            min(sp.runs, sd.runs),
            "runs",
            "a figure without an interval",
        )
    else:
        va, vb = a * a * sp.var, b * b * sd.var
        var = va + vb
        den = va * va / sp.df + vb * vb / sd.df
        df = var * var / den if den > 0 else sp.df + sd.df
        side = stats.SideEstimate(
            math.log(value), var, df, min(sp.runs, sd.runs), "delta method"
        )
    return value, 1000.0 * t_s, side


def scores(board: Board) -> list[Score]:
    """Every host's score on a paired board (prefill pp512 and decode tg128 of one model), best rank first."""
    if board.tests != list(PAIRED):
        return []
    pre = {s.host_id: s.figure for s in board.standings.get(PAIRED[0], [])}
    dec = {s.host_id: s.figure for s in board.standings.get(PAIRED[1], [])}
    hosts = [h for h in pre if h in dec]
    parts = [(h, *_score_side(pre[h], dec[h])) for h in hosts]
    ranks = rank_sides([side for *_, side in parts], True)
    out = []
    for (h, value, ttft, side), rk in zip(parts, ranks):
        lo, hi = side.interval()
        out.append(Score(h, value, lo, hi, side, pre[h], dec[h], ttft, rk))
    out.sort(
        key=lambda s: (
            s.rank.rank if s.rank.rank is not None else 10**9,
            -s.value,
            s.host_id,
        )
    )
    return out


def host_summary(fx: Facts, host_id: str) -> list[str]:
    """Where a host stands on the reference workload, in lines for a terminal (``invoke all`` ends with them)."""
    out = []
    for b in fx.reference_boards:
        if host_id not in b.hosts:
            continue
        figures = []
        for t in b.tests:
            st = b.standing(t, host_id)
            if st is None:
                continue
            f, m = st.figure, b.metrics[t]
            ci = (
                f"[{f.ci95_low:,.{m.decimals}f}, {f.ci95_high:,.{m.decimals}f}]"
                if f.has_interval
                else "(no CI95)"
            )
            figures.append(
                f"{t} {f.mean:,.{m.decimals}f} {ci} {m.unit} (rank {st.rank_label} of {len(b.standings[t])})"
            )
        others = sorted({hr.host_label for hr in b.hosts_rows if hr.host_id != host_id})
        out.append(
            f"reference {b.model}: {', '.join(figures)}; beside "
            + (", ".join(others) if others else "no other host yet")
        )
    return out
