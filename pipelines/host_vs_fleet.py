"""Each host against the fleet: linear in hosts, not in pairs of hosts.

A *workload* is the same work run on several hosts (``work_key``: test definition, model identity,
backend and requested settings; everything but the host). For each workload shared by at least
two hosts, every host's ok runs of it (all of them, not the newest only) are one side with the run
as the unit, exactly as `invoke compare -b host=A -c host=B` takes a side (pipelines.compare):

* its value is the geometric mean of its run means, with a CI95 on the log scale from the spread
  between its runs (two or more), or its one run widened by the host's run-to-run noise for that
  kind of test (pipelines.noise, the same lookup as compare) or by the run's own relative standard
  error when larger (core.stats.side_estimate);
* hosts are ranked by the leaderboard's rule (pipelines.ranking) on that interval;
* each host is compared with the workload's *median host* (hosts ordered by value, the middle one;
  for an even count the slower of the two middle ones) by core.stats.combine_sides, the combination
  core.stats.compare_runs makes: the ratio host ÷ median host with its CI95 (the two sides'
  variances of the log mean added, Welch-Satterthwaite degrees of freedom) and the verdict from
  the host's side (win, loss, within noise, or insufficient data with why).

The cost is one pass over the results (grouped once by history key, each group's work digested
once) and one sort per workload: at 200 hosts that is 200 rows a workload, where every pair of
hosts would be 19,900 comparisons. Any two hosts are compared in the reader's browser from
``picker_data`` (each host's side estimate per workload, combined in docs/assets/js/fleet.js by
the same arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.hostlabel import machine_summary
from core.kinds import headline
from core.metrics import Metric
from core.records.run import RunRecord, digest

from pipelines import compare as cmp
from pipelines import noise as noise_mod
from pipelines.ranking import Ranked, rank_label, rank_with_ci
from pipelines.runs import records

METHOD = ("A workload is the same test definition, model file (sha256), backend and requested settings run on "
          "several hosts. The run is the unit, as in `invoke compare -b host=A -c host=B`: every ok run of a host on "
          "the workload counts, and the host's value is the geometric mean of its run means, with a CI95 on the log "
          "scale from the spread between its runs when it has two or more, or, with one run, from the host's "
          "run-to-run noise for that kind of test (or the run's own relative standard error when larger); a host "
          "with one run and no measured noise has no interval. Rank: 1 + the number of hosts whose CI95 lies wholly "
          "on the better side of this host's CI95 (overlapping intervals share a rank, marked =; a host without an "
          "interval is not ranked). The median host is the middle of the hosts ordered by value (for an even count, "
          "the slower of the two middle ones); a host's ratio to it is host ÷ median host with its CI95 (log scale: "
          "the two sides' variances added, Welch-Satterthwaite degrees of freedom), and the verdict is the host's: "
          "win, loss, or within noise (the interval contains 1). The picker compares any two hosts the same way, "
          "from each host's published estimate.")


_HOST_PART = {"host"}


def work_key(r: RunRecord) -> str:
    """The work a result ran, apart from the host (what two hosts must share to be compared).

    The one place this page asks "same work?": the comparison's work parts minus the host
    (pipelines.compare.work_parts, which group by RunRecord.work: work apart from method and
    environment)."""
    return digest(cmp.work_parts(r, _HOST_PART))


@dataclass(frozen=True)
class Standing:
    """One host on one workload: its runs as one side (the run as the unit)."""

    host_id: str
    run_id: str  # the newest run (the figures link to it)
    run_ids: tuple[str, ...]  # every run behind the value, oldest first
    side: stats.SideEstimate  # log mean, its variance and df, runs, method
    mean: float  # geometric mean of the run means
    spread: float | None  # standard deviation between the run means (one run: its own stddev)
    n: int  # repetitions behind the value (all runs)
    ci95_low: float | None  # the value's CI95 (run unit), what the rank rests on
    ci95_high: float | None
    interval_note: str  # what the interval rests on, or why there is none
    rank: Ranked
    ratio: float | None  # host ÷ median host
    ratio_low: float | None
    ratio_high: float | None
    verdict: str  # win / loss / within noise / insufficient data / median host
    verdict_note: str  # why a comparison has no interval
    is_median: bool

    @property
    def runs(self) -> int:
        return len(self.run_ids)

    @property
    def rank_label(self) -> str:
        return rank_label(self.rank)


@dataclass(frozen=True)
class Workload:
    key: str
    model: str
    test: str
    backend: str
    requested: dict[str, Any]
    metric: Metric
    standings: list[Standing]  # best rank first
    median: Standing

    @property
    def label(self) -> str:
        return f"{self.model} · {self.test} · {self.backend}"


_Run = tuple[RunRecord, tuple[float, float | None]]  # a run and its headline (mean, relative standard error)


def _runs_per_host(recs: list[RunRecord]) -> dict[str, dict[str, list[_Run]]]:
    """work key -> host -> every ok run of that work on that host with a headline value (mean, relative
    standard error), oldest first. One pass over the results, grouped by history key (work, backend,
    requested settings and host: exactly a work key and a host), each group's work digested once."""
    by_history: dict[str, list[_Run]] = {}
    for r in recs:
        if not r.ok or headline(r.test_kind) is None:
            continue
        v = noise_mod.run_value(r)
        if v is None:
            continue
        by_history.setdefault(r.history_key, []).append((r, v))
    out: dict[str, dict[str, list[_Run]]] = {}
    for runs in by_history.values():
        r = runs[0][0]
        out.setdefault(work_key(r), {}).setdefault(r.host_id, []).extend(runs)
    for per in out.values():
        for runs in per.values():
            runs.sort(key=lambda x: (x[0].created, x[0].id))
    return out


def _spread(runs: list[_Run], metric: str) -> tuple[float | None, int]:
    """(spread, repetitions) of a side as `invoke compare` shows them: one run's own stddev, or the
    standard deviation between several runs' means; the repetitions of all its runs."""
    ss = [r.stat(metric) for r, _ in runs]
    n = sum(s.n for s in ss if s is not None)
    if len(runs) == 1:
        return ss[0].stddev if ss[0] is not None else None, n
    means = [v[0] for _, v in runs]
    c = sum(means) / len(means)
    return (sum((x - c) ** 2 for x in means) / (len(means) - 1)) ** 0.5, n


def workloads(docs: list[Any]) -> list[Workload]:
    """Every workload at least two hosts ran, each host's standing on it; ordered by how many hosts ran
    it (most first), then by label."""
    recs = [r for r in records(docs) if r.ok and headline(r.test_kind) is not None]
    noise = noise_mod.host_noise(recs)
    out = []
    for key, per in _runs_per_host(recs).items():
        if len(per) < 2:
            continue
        first = next(iter(per.values()))[-1][0]
        m = first.headline_metric
        assert m is not None
        sides: dict[str, stats.SideEstimate] = {}
        notes: dict[str, str] = {}
        for h, runs in per.items():
            values = [v for _, v in runs]
            hn = noise_mod.noise_for(noise, runs[-1][0])
            sides[h] = stats.side_estimate([v[0] for v in values], rel_se=values[0][1] if len(values) == 1 else None,
                                           noise=hn)
            notes[h] = stats.side_note(sides[h], hn)
        hosts = sorted(per, key=lambda h: (sides[h].log_mean, h), reverse=not m.higher_is_better)  # worst first
        median_host = hosts[(len(hosts) - 1) // 2]
        intervals = {h: sides[h].interval() for h in hosts}  # the run-unit CI95 (core.stats.run_interval's)
        ranks = dict(zip(hosts, rank_with_ci([intervals[h][0] for h in hosts], [intervals[h][1] for h in hosts],
                                             m.higher_is_better)))
        rows = []
        for h in hosts:
            runs, side = per[h], sides[h]
            spread, n = _spread(runs, m.name)
            lo, hi = intervals[h]
            if h == median_host:
                c = stats.Comparison(1.0, None, None, "median host", side.runs, side.runs, side.method)
            else:
                c = stats.combine_sides(sides[median_host], side, m.higher_is_better)
            rows.append(Standing(h, runs[-1][0].id, tuple(r.id for r, _ in runs), side, float(side.centre), spread, n,
                                 lo, hi, notes[h], ranks[h], c.ratio, c.ci95_low, c.ci95_high, c.verdict, c.note, h == median_host))
        big = float("inf")
        rows.sort(key=lambda s: (s.rank.rank if s.rank.rank is not None else big,
                                 -s.mean if m.higher_is_better else s.mean, s.host_id))
        med_row = next(s for s in rows if s.is_median)
        out.append(Workload(key, first.model_name, first.test_name, first.backend_name, first.requested, m, rows, med_row))
    out.sort(key=lambda w: (-len(w.standings), w.label, w.key))
    return out


#: The fields of each value in picker_data's workloads (one host on one workload), in order.
PICKER_FIELDS = ("host", "log_mean", "var", "df", "runs", "method", "why", "n", "spread", "run_id", "rank")


def picker_data(workloads_: list[Workload], hosts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the browser needs to compare any two hosts (or a host with each workload's median host) the way
    core.stats.compare_runs does: hosts, workloads, and per workload its median host and, per host, its
    side estimate (core.stats.SideEstimate: log of the geometric mean of its run means, the variance of
    that log mean and its degrees of freedom, the number of runs, the method as an index into ``methods``
    and, for a side without a variance, why, as an index into ``why``), then what the page shows beside
    it (repetitions, spread between runs, the newest run's id, the rank label). ``fields`` names them.
    Compact: hosts, methods and reasons by index; numbers at full precision (the browser's arithmetic is
    Python's)."""
    host_ids = sorted({s.host_id for w in workloads_ for s in w.standings},
                      key=lambda h: (len(hosts.get(h, {}).get("gpus") or []), h))
    index = {h: i for i, h in enumerate(host_ids)}
    methods: dict[str, int] = {}
    whys: dict[str, int] = {}
    wl = []
    for w in workloads_:
        vals = []
        for s in w.standings:
            e = s.side
            why = None if e.why is None else whys.setdefault(e.why, len(whys))
            vals.append([index[s.host_id], e.log_mean, e.var, e.df, e.runs, methods.setdefault(e.method, len(methods)), why,
                         s.n, s.spread, s.run_id, s.rank_label])
        wl.append({"label": w.label, "metric": w.metric.label, "unit": w.metric.unit, "hib": w.metric.higher_is_better,
                   "decimals": w.metric.decimals, "median": index[w.median.host_id], "values": vals})
    return {"hosts": [{"id": h, "about": host_about(hosts.get(h, {}))} for h in host_ids], "fields": list(PICKER_FIELDS),
            "methods": list(methods), "why": list(whys), "workloads": wl}


def host_about(h: dict[str, Any]) -> str:
    """A host's machine in a few words (CPU, threads, GPUs: core.hostlabel.machine_summary)."""
    return machine_summary(h) if h else ""
