"""Each host against the fleet: linear in hosts, not in pairs of hosts.

A *workload* is the same work run on several hosts (``work_key``: test definition, model identity,
backend and requested settings; everything but the host). For each workload shared by at least
two hosts, every host's newest result on it is

* ranked by the leaderboard's rule (pipelines.ranking: a host's rank is 1 + the number of hosts
  whose CI95 lies wholly on the better side of its own; overlapping intervals share a rank);
* compared with the workload's *median host* (hosts ordered by mean, the middle one; for an even
  count the slower of the two middle ones) by core.stats.compare_summaries: the ratio host ÷
  median host on the headline metric with its CI95 (log scale, Welch-Satterthwaite) and the
  verdict from the host's side (win, loss, within noise).

The cost is one digest per result and one sort per workload: at 200 hosts that is 200 rows a
workload, where every pair of hosts would be 19,900 comparisons. Any two hosts are compared in the
reader's browser from ``picker_data`` (the same formula, docs/assets/js/fleet.js).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.kinds import headline
from core.metrics import Metric
from core.records.run import RunRecord, digest
from core.summary import Summary

from pipelines import compare as cmp
from pipelines.ranking import Ranked, rank_label, rank_with_ci
from pipelines.runs import records

METHOD = ("A workload is the same test definition, model file (sha256), backend and requested settings run on "
          "several hosts. Each host's newest result on it counts. Rank: 1 + the number of hosts whose CI95 lies "
          "wholly on the better side of this host's CI95 (overlapping intervals share a rank, marked =; a result "
          "without an interval is not ranked). The median host is the middle of the hosts ordered by mean (for an "
          "even count, the slower of the two middle ones); a host's ratio to it is host ÷ median host on the "
          "headline metric with its CI95 (log scale, Welch-Satterthwaite), and the verdict is the host's: win, "
          "loss, or within noise (the interval contains 1).")


_HOST_PART = {"host"}


def work_key(r: RunRecord) -> str:
    """The work a result ran, apart from the host (what two hosts must share to be compared).

    The one place this page asks "same work?": the comparison's work parts minus the host
    (pipelines.compare.work_parts, which group by RunRecord.work: work apart from method and
    environment)."""
    return digest(cmp.work_parts(r, _HOST_PART))


@dataclass(frozen=True)
class Standing:
    """One host on one workload."""

    host_id: str
    run_id: str
    summary: Summary
    rank: Ranked
    ratio: float | None  # host ÷ median host
    ci95_low: float | None
    ci95_high: float | None
    verdict: str  # win / loss / within noise / insufficient data / median host
    is_median: bool

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


def _newest_per_host(recs: list[RunRecord]) -> dict[str, dict[str, RunRecord]]:
    """work key -> host -> the host's newest result of that work (headline metric measured)."""
    newest: dict[str, RunRecord] = {}  # per configuration key first (a plain string): its work is digested once
    for r in recs:
        if not r.ok or headline(r.test_kind) is None:
            continue
        cur = newest.get(r.key)
        if cur is None or (r.created, r.id) > (cur.created, cur.id):
            newest[r.key] = r
    out: dict[str, dict[str, RunRecord]] = {}
    for r in newest.values():  # a key names one host; several keys of a host may share work (other builds)
        m = r.headline_metric
        s = r.stat(m.name) if m is not None else None
        if s is None or s.mean is None:
            continue
        per = out.setdefault(work_key(r), {})
        cur = per.get(r.host_id)
        if cur is None or (r.created, r.id) > (cur.created, cur.id):
            per[r.host_id] = r
    return out


def workloads(docs: list[Any]) -> list[Workload]:
    """Every workload at least two hosts ran, each host's standing on it; ordered by how many hosts ran
    it (most first), then by label."""
    out = []
    for key, per in _newest_per_host(records(docs)).items():
        if len(per) < 2:
            continue
        first = next(iter(per.values()))
        m = first.headline_metric
        assert m is not None
        hosts = sorted(per, key=lambda h: (per[h].stat(m.name).mean, h), reverse=not m.higher_is_better)  # worst first
        median_host = hosts[(len(hosts) - 1) // 2]
        med = per[median_host].stat(m.name)
        sums = {h: per[h].stat(m.name) for h in hosts}
        ranks = dict(zip(hosts, rank_with_ci([sums[h].ci95_low for h in hosts], [sums[h].ci95_high for h in hosts],
                                             m.higher_is_better)))
        rows = []
        for h in hosts:
            if h == median_host:
                rows.append(Standing(h, per[h].id, sums[h], ranks[h], 1.0, None, None, "median host", True))
                continue
            c = stats.compare_summaries(med, sums[h], m.higher_is_better)
            rows.append(Standing(h, per[h].id, sums[h], ranks[h], c.ratio, c.ci95_low, c.ci95_high, c.verdict, False))
        big = float("inf")
        rows.sort(key=lambda s: (s.rank.rank if s.rank.rank is not None else big,
                                 -s.summary.mean if m.higher_is_better else s.summary.mean, s.host_id))
        med_row = next(s for s in rows if s.is_median)
        out.append(Workload(key, first.model_name, first.test_name, first.backend_name, first.requested, m, rows, med_row))
    out.sort(key=lambda w: (-len(w.standings), w.label, w.key))
    return out


def picker_data(workloads_: list[Workload], hosts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the browser needs to compare any two hosts (or a host with each workload's median host): hosts,
    workloads, and per workload its median host and each host's (n, mean, stddev), run id and rank label.
    Compact: hosts by index."""
    host_ids = sorted({s.host_id for w in workloads_ for s in w.standings},
                      key=lambda h: (len(hosts.get(h, {}).get("gpus") or []), h))
    index = {h: i for i, h in enumerate(host_ids)}
    wl = []
    for w in workloads_:
        vals = [[index[s.host_id], s.summary.n, s.summary.mean, s.summary.stddev, s.run_id, s.rank_label]
                for s in w.standings]
        wl.append({"label": w.label, "metric": w.metric.label, "unit": w.metric.unit, "hib": w.metric.higher_is_better,
                   "decimals": w.metric.decimals, "median": index[w.median.host_id], "values": vals})
    return {"hosts": [{"id": h, "about": host_about(hosts.get(h, {}))} for h in host_ids], "workloads": wl}


def host_about(h: dict[str, Any]) -> str:
    """A host's machine in a few words (CPU, cores, GPUs)."""
    if not h:
        return ""
    cpu = h.get("cpu") or {}
    gpus = h.get("gpus") or []
    parts = [str(cpu.get("model") or "?"), f"{cpu.get('logical_cores', '?')} threads"]
    if gpus:
        names = sorted({str(g.get("name")) for g in gpus})
        parts.append(f"{len(gpus)}× " + "/".join(names))
    return " · ".join(parts)
