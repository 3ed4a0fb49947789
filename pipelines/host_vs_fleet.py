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

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core import stats
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


#: The fields of each value of a decoded picker (``decode_picker``: one host on one workload), in order.
PICKER_FIELDS = (
    "host",
    "log_mean",
    "var",
    "df",
    "runs",
    "method",
    "why",
    "n",
    "run_id",
    "rank",
)

#: Digits after the point of a side's log mean in the picker, at least: its value and ratios move by at most
#: 5e-10 relative, a million times less than the 3 decimals of a ratio the picker shows. A value whose
#: shown digits would change keeps more (``_log_mean``).
LOG_DECIMALS = 9


def _log_mean(lm: float | None, decimals: int) -> float | int | None:
    """A side's log mean rounded for the picker: LOG_DECIMALS digits after the point, more where the value
    the picker shows (its exp at the metric's ``decimals``) would read otherwise, all of them at worst."""
    if lm is None:
        return None
    shown = f"{math.exp(lm):.{decimals}f}"
    for k in range(LOG_DECIMALS, 17):
        r = round(lm, k)
        if f"{math.exp(r):.{decimals}f}" == shown:
            return _num(r)
    return lm


_RUN_ID = re.compile(r"([0-9a-f]{12})-(\d{8}T\d{6}\.\d{3}Z)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _stamp_ms(stamp: str) -> int:
    t = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)
    return (t - _EPOCH) // timedelta(milliseconds=1)


def _stamp_text(ms: int) -> str:
    """The run id's time as core.records.run.run_id writes it (the browser: Date.toISOString without - and :)."""
    t = _EPOCH + timedelta(milliseconds=ms)
    return f"{t.strftime('%Y%m%dT%H%M%S')}.{t.microsecond // 1000:03d}Z"


def _num(x: float | None) -> float | int | None:
    """A number as short as JSON writes it: an integral float as an int (JSON.parse reads both alike)."""
    return int(x) if x is not None and float(x).is_integer() and abs(x) < 2**53 else x


def picker_data(
    workloads_: list[Workload],
    hosts: dict[str, dict[str, Any]],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What the browser needs to compare any two hosts (or a host with each workload's median host) the way
    core.stats.combine_sides does, inline in the page and bounded (a page stays under 1 MB): columns, not
    records, and every repeated string or tuple once in a table.

    ``hosts``: ids; ``labels``: each host's label as indices into ``parts`` (the label split at " · "), or
    [] where the label is the id. ``workloads``: label, metric, unit, higher is better, decimals, its median
    host and ``size``, the number of its hosts; their values follow one another in ``values``, whose columns
    are per host on a workload: ``host`` (index), ``log_mean`` (the log of its figure's value, to
    LOG_DECIMALS or as many more as keep the value the picker shows), ``side`` (index into ``sides``: the
    variance of that log at full precision, its degrees of freedom, the number of runs, what the variance
    rests on as an index into ``methods`` and, for a side without a variance, why, as an index into
    ``why``; few distinct, as the noise they rest on),
    ``n`` (repetitions), ``run`` and ``at`` (the newest run's id: its key prefix and its time in ms after
    ``at0``; ``at`` null where ``run`` is the whole id) and ``rank`` (index into ``ranks``).
    ``decode_picker`` reads it back as records, as docs/assets/js/fleet.js does."""
    labels = labels or {}
    host_ids = sorted(
        {s.host_id for w in workloads_ for s in w.standings},
        key=lambda h: (len(hosts.get(h, {}).get("gpus") or []), h),
    )
    index = {h: i for i, h in enumerate(host_ids)}
    parts: dict[str, int] = {}
    host_labels = []
    for h in host_ids:
        label = labels.get(h, h)
        host_labels.append(
            []
            if label == h
            else [parts.setdefault(p, len(parts)) for p in label.split(" · ")]
        )
    methods: dict[str, int] = {}
    whys: dict[str, int] = {}
    sides: dict[tuple[Any, ...], int] = {}
    ranks: dict[str, int] = {}
    ids: list[tuple[str, int | None]] = []
    cols: dict[str, list[Any]] = {
        k: [] for k in ("host", "log_mean", "side", "n", "run", "at", "rank")
    }
    wl = []
    for w in workloads_:
        for s in w.standings:
            f = s.figure
            e = f.side
            side = (
                _num(e.var),
                _num(e.df),
                e.runs,
                methods.setdefault(e.method, len(methods)),
                None if e.why is None else whys.setdefault(e.why, len(whys)),
            )
            m = _RUN_ID.fullmatch(f.newest_id)
            run: tuple[str, int | None] = (f.newest_id, None)
            if m and _stamp_text(ms := _stamp_ms(m.group(2))) == m.group(2):
                run = (m.group(1), ms)
            ids.append(run)
            cols["host"].append(index[s.host_id])
            cols["log_mean"].append(_log_mean(e.log_mean, w.metric.decimals))
            cols["side"].append(sides.setdefault(side, len(sides)))
            cols["n"].append(f.n)
            cols["rank"].append(ranks.setdefault(s.rank_label, len(ranks)))
        wl.append(
            {
                "label": w.label,
                "metric": w.metric.label,
                "unit": w.metric.unit,
                "hib": w.metric.higher_is_better,
                "decimals": w.metric.decimals,
                "median": index[w.median.host_id],
                "size": len(w.standings),
            }
        )
    at0 = min((ms for _, ms in ids if ms is not None), default=0)
    cols["run"] = [r for r, _ in ids]
    cols["at"] = [None if ms is None else ms - at0 for _, ms in ids]
    return {
        "hosts": host_ids,
        "labels": host_labels,
        "parts": list(parts),
        "methods": list(methods),
        "why": list(whys),
        "sides": [list(x) for x in sides],
        "ranks": list(ranks),
        "at0": at0,
        "workloads": wl,
        "values": cols,
    }


def decode_picker(data: dict[str, Any]) -> dict[str, Any]:
    """``picker_data`` read back as records, as docs/assets/js/fleet.js reads it: hosts as {id, label} and
    per workload its values, each a list in PICKER_FIELDS' order (method and why as text, df a float)."""
    cols = data["values"]
    hosts = [
        {"id": h, "label": " · ".join(data["parts"][i] for i in lab) if lab else h}
        for h, lab in zip(data["hosts"], data["labels"])
    ]
    out, k = [], 0
    for w in data["workloads"]:
        vals = []
        for j in range(k, k + w["size"]):
            var, df, runs, method, why = data["sides"][cols["side"][j]]
            at = cols["at"][j]
            run = cols["run"][j]
            vals.append(
                [
                    cols["host"][j],
                    None if cols["log_mean"][j] is None else float(cols["log_mean"][j]),
                    None if var is None else float(var),
                    None if df is None else float(df),
                    runs,
                    data["methods"][method],
                    None if why is None else data["why"][why],
                    cols["n"][j],
                    run if at is None else f"{run}-{_stamp_text(data['at0'] + at)}",
                    data["ranks"][cols["rank"][j]],
                ]
            )
        k += w["size"]
        out.append({**{x: y for x, y in w.items() if x != "size"}, "values": vals})
    return {"hosts": hosts, "fields": list(PICKER_FIELDS), "workloads": out}
