"""Each host against the fleet: linear in hosts, not in pairs of hosts.

A *workload* is one test of a board of the fact layer (pipelines.facts: the same work — model
identity, the test's work parameters, backend class — on several hosts). Every host on it stands
with the figure of its representative configuration (pipelines.facts.REPRESENTATIVE_RULE) and its
rank: exactly the Leaderboard's figure and rank, from the one fact layer. Each host is compared with
the workload's *median host* (hosts ordered by value, the middle one; for an even count the slower of
the two middle ones) by the comparison every verdict uses (core.stats.combine_sides): the ratio
host ÷ median host with its CI95 and the verdict from the host's side (win, loss, within noise, or
insufficient data with why). Ranks rest on the same comparison (pipelines.ranking), so a host that
loses to the median host is never ranked =1.

The cost is the fact layer's boards (computed once per build) and one comparison per host; any two
hosts are compared in the reader's browser from ``picker_data`` (each host's figure as a side estimate,
combined in docs/assets/js/fleet.js by the same arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.hostlabel import machine_summary
from core.metrics import Metric
from pipelines import facts as facts_mod
from pipelines.facts import Facts, Figure, Standing

METHOD = (
    "A workload is the same test definition, model file (sha256) and backend class run on several hosts. Each "
    "host stands with its figure on the Leaderboard: "
    + facts_mod.RULE
    + " "
    + facts_mod.REPRESENTATIVE_RULE
    + " The median host is the middle of the hosts ordered by value (for an even count, the slower of the two "
    "middle ones); a host's ratio to it is host ÷ median host with its CI95 (log scale: the two sides' variances "
    "added, Welch-Satterthwaite degrees of freedom), and the verdict is the host's: win, loss, or within noise "
    "(the interval contains 1). Ranks come from the same comparison between every two hosts. The picker compares "
    "any two hosts the same way, from each host's published figure."
)


@dataclass(frozen=True)
class HostStanding:
    """One host on one workload: its figure, rank, and comparison with the median host."""

    standing: Standing
    ratio: float | None  # host ÷ median host
    ratio_low: float | None
    ratio_high: float | None
    verdict: str  # win / loss / within noise / insufficient data / median host
    verdict_note: str
    is_median: bool

    @property
    def host_id(self) -> str:
        return self.standing.host_id

    @property
    def figure(self) -> Figure:
        return self.standing.figure

    @property
    def rank_label(self) -> str:
        return self.standing.rank_label


@dataclass(frozen=True)
class Workload:
    key: str  # the board's key and the test
    board: facts_mod.Board
    test: str
    metric: Metric
    standings: list[HostStanding]  # best rank first
    median: HostStanding

    @property
    def model(self) -> str:
        return self.board.model

    @property
    def label(self) -> str:
        return f"{self.board.model} · {self.test} · {self.board.backend_class}"


def workloads(fx: Facts) -> list[Workload]:
    """Every workload at least two hosts ran, each host's standing on it; ordered by how many hosts ran
    it (most first), then by label."""
    out = []
    for b in fx.boards:
        for t in b.tests:
            st = b.standings.get(t) or []
            if len(st) < 2:
                continue
            m = b.metrics[t]
            by_value = sorted(
                st,
                key=lambda s: (s.figure.side.log_mean or 0.0, s.host_id),
                reverse=not m.higher_is_better,
            )  # worst first
            median = by_value[(len(by_value) - 1) // 2]
            rows = []
            for s in st:
                if s is median:
                    c = stats.Comparison(
                        1.0,
                        None,
                        None,
                        "median host",
                        s.figure.runs,
                        s.figure.runs,
                        s.figure.basis,
                    )
                else:
                    c = fx.compare(median.figure, s.figure)
                rows.append(
                    HostStanding(
                        s,
                        c.ratio,
                        c.ci95_low,
                        c.ci95_high,
                        c.verdict,
                        c.note,
                        s is median,
                    )
                )
            med = next(r for r in rows if r.is_median)
            out.append(Workload(f"{b.key}:{t}", b, t, m, rows, med))
    out.sort(key=lambda w: (-len(w.standings), w.label, w.key))
    return out


#: The fields of each value in picker_data's workloads (one host on one workload), in order.
PICKER_FIELDS = (
    "host",
    "log_mean",
    "var",
    "df",
    "runs",
    "method",
    "why",
    "n",
    "spread",
    "run_id",
    "rank",
)


def picker_data(
    workloads_: list[Workload],
    hosts: dict[str, dict[str, Any]],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What the browser needs to compare any two hosts (or a host with each workload's median host) the way
    core.stats.combine_sides does: hosts, workloads, and per workload its median host and, per host, its
    figure's side estimate (the log of its value, the variance of that log and its degrees of freedom, the
    number of runs, what the variance rests on as an index into ``methods`` and, for a side without a
    variance, why, as an index into ``why``), then what the page shows beside it (repetitions, spread between
    runs, the newest run's id, the rank label). ``fields`` names them. Compact: hosts, methods and reasons by
    index; numbers at full precision (the browser's arithmetic is Python's)."""
    labels = labels or {}
    host_ids = sorted(
        {s.host_id for w in workloads_ for s in w.standings},
        key=lambda h: (len(hosts.get(h, {}).get("gpus") or []), h),
    )
    index = {h: i for i, h in enumerate(host_ids)}
    methods: dict[str, int] = {}
    whys: dict[str, int] = {}
    wl = []
    for w in workloads_:
        vals = []
        for s in w.standings:
            f = s.figure
            e = f.side
            why = None if e.why is None else whys.setdefault(e.why, len(whys))
            vals.append(
                [
                    index[s.host_id],
                    e.log_mean,
                    e.var,
                    e.df,
                    e.runs,
                    methods.setdefault(e.method, len(methods)),
                    why,
                    f.n,
                    f.spread,
                    f.newest_id,
                    s.rank_label,
                ]
            )
        wl.append(
            {
                "label": w.label,
                "metric": w.metric.label,
                "unit": w.metric.unit,
                "hib": w.metric.higher_is_better,
                "decimals": w.metric.decimals,
                "median": index[w.median.host_id],
                "values": vals,
            }
        )
    return {
        "hosts": [
            {"id": h, "label": labels.get(h, h), "about": host_about(hosts.get(h, {}))}
            for h in host_ids
        ],
        "fields": list(PICKER_FIELDS),
        "methods": list(methods),
        "why": list(whys),
        "workloads": wl,
    }


def host_about(h: dict[str, Any]) -> str:
    """A host's machine in a few words (CPU, threads, GPUs: core.hostlabel.machine_summary)."""
    return machine_summary(h) if h else ""
