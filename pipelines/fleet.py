"""The fleet view (issue 19): this workload, every machine.

A *workload* is work (core.records.run.RunRecord.work_key: the model's identity, the test's work
parameters, the backend class). Its board has one row per host x backend x configuration as asked
(the requested settings not left to the default, the backend build): the machines that ran it,
side by side. Method (repetitions, precision target, warm-up) never splits a row; what the
environment did differently (threads, layers offloaded, flash attention as resolved, extra buffer
types, ...) is a column where rows differ.

Where a model has both of llama-bench's headline rate tests (``PAIRED``: pp512 and tg128), the two
workloads are one board with prefill and decode side by side, as the llama.cpp scoreboards show
them; a row is then the same configuration measured on both tests.

Each column is ranked by pipelines.ranking (the rule the page states: ``ranking.RULE``) on the
row's statistic (pipelines.leaderboard.row_statistic: the run is the unit). Rows are ordered by
the last column's rank (decode, for the paired board). A workload measured by one row only is not
a ranking: :func:`boards` returns it with ``single=True`` and the page lists those apart.

No two rows may look alike: every setting asked for that differs between a board's rows is a column
too (``asked``: as asked, where the environment columns do not already tell those rows apart), so a
setting never silently makes two rows read the same. Energy per token (the kind's energy columns,
core.metrics.ENERGY_METRICS) is shown beside a test where a row on the board recorded it.

The reference workload is the work of the runs measured under the reference matrix
(data/matrices/reference.yaml): any row of the same work is on the reference board, whatever
matrix or almanac version measured it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from core.kinds import columns, headline
from core.metrics import ENERGY_METRICS, Metric
from core.records.run import RunRecord
from core.summary import Summary

from pipelines import hostnames
from pipelines.history import stale_ids
from pipelines.leaderboard import build_labels, row_statistic, runs_per_comparability
from pipelines.memo import per_set
from pipelines.noise import host_noise
from pipelines.ranking import rank_label, rank_with_ci
from pipelines.runs import records

REFERENCE_MATRIX = "reference"
PAIRED = ("pp512", "tg128")  # prefill and decode, side by side (llama-bench's headline tests)
# Effective settings that follow the test rather than the machine (the context and batch a
# test sizes for itself): never a reason to show an environment column.
TEST_SIZED = frozenset({"n_ctx", "n_batch", "n_ubatch"})
# The environment a board shows as columns where rows differ: what a host (or its build) makes of
# the same request. Other differences stay in each artifact (one click away).
ENV_COLUMNS = ("n_threads", "n_gpu_layers", "flash_attn", "use_extra_bufts", "type_k", "type_v", "speculative", "device",
               "dtype")


@dataclass
class Cell:
    """One row's figure on one test: the row statistic of its configuration's runs."""

    id: str  # the newest artifact (figures link to it)
    run_ids: list[str]
    data_path: str
    created: str
    mean: float
    stddev: float | None
    n: int
    runs: int
    ci95_low: float | None
    ci95_high: float | None
    note: str | None
    stale: bool
    method: dict[str, Any]
    rank: int | None = None
    rank_label: str = "—"
    energy: dict[str, Summary] = field(default_factory=dict)  # energy per token its newest run recorded, by metric


@dataclass
class Row:
    host_id: str
    host_label: str
    backend: str
    build: str
    requested: dict[str, Any]
    environment: dict[str, Any]  # effective settings of the row's newest run (test-sized ones left out)
    gpus: int
    cells: dict[str, Cell] = field(default_factory=dict)  # test name -> cell
    build_identity: dict[str, Any] = field(default_factory=dict)  # what keeps builds apart (RunRecord.build_identity)


@dataclass
class WorkloadBoard:
    key: str  # stable anchor: digest of the work keys
    work_keys: list[str]
    model: str
    model_identity: str
    quantization: str | None
    synthetic: bool
    backend_class: str
    kind: str
    tests: list[str]  # columns, in order
    metrics: dict[str, Metric]
    work_tests: dict[str, dict[str, Any]]  # test name -> its work parameters
    rows: list[Row]
    varying: list[str]  # environment settings that differ between rows (columns)
    build_varies: bool
    reference: bool
    endpoint: str | None = None  # an endpoint model's server (no local file), None for a file
    asked: list[str] = field(default_factory=list)  # requested settings that differ between rows (columns, as asked)
    energy: dict[str, list[str]] = field(default_factory=dict)  # test -> energy metrics some row recorded (columns)

    @property
    def single(self) -> bool:
        """One row: not a ranking."""
        return len(self.rows) < 2

    @property
    def hosts(self) -> list[str]:
        return sorted({r.host_id for r in self.rows})

    @property
    def backends(self) -> list[str]:
        return sorted({r.backend for r in self.rows})


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def reference_work(recs: list[RunRecord]) -> set[str]:
    """The work keys of the reference workload: those of every run measured under the reference matrix."""
    return {r.work_key for r in recs if r.matrix_name == REFERENCE_MATRIX}


def _row_key(r: RunRecord) -> str:
    return _json([r.host_id, r.backend_name, r.build_identity, r.requested_explicit])


def _cell(runs: list[RunRecord], metric: Metric, stale: set[str], noise: Any) -> Cell | None:
    st = row_statistic(runs, metric, noise)
    if st is None:
        return None
    newest = runs[-1]
    energy = {m: newest.stat(m) for m in columns(newest.test_kind)
              if m in ENERGY_METRICS and newest.stat(m) is not None and newest.stat(m).mean is not None}
    return Cell(newest.id, [x.id for x in runs], getattr(newest, "data_path", "") or "", newest.created, st["mean"],
                st["stddev"], st["n"], st["runs"], st["ci95_low"], st["ci95_high"], st["note"], newest.id in stale,
                newest.method, energy=energy)


def asked_columns(rows: list[Row], shown: list[str]) -> list[str]:
    """The requested settings that differ between rows of the same backend (a backend's settings are
    its own vocabulary: rows of two backends are told apart by the backend column), one column each,
    as asked. A setting whose environment column (``shown``) already tells apart every two rows that
    asked differently needs no second column. A row's requested settings are those not left to the
    default (RunRecord.requested_explicit)."""
    by_backend: dict[str, list[Row]] = {}
    for row in rows:
        by_backend.setdefault(row.backend, []).append(row)
    out = []
    for k in sorted({k for row in rows for k in row.requested}):
        for group in by_backend.values():
            if len({_json(row.requested.get(k)) for row in group}) < 2:
                continue
            if k in shown:
                asked_by_env: dict[str, str] = {}
                if all(asked_by_env.setdefault(_json(row.environment.get(k)), _json(row.requested.get(k)))
                       == _json(row.requested.get(k)) for row in group):
                    continue  # each environment value of k goes with one asked value: its column tells them apart
            out.append(k)
            break
    return out


@per_set
def boards(docs: list[Any]) -> list[WorkloadBoard]:
    """Every workload's board (single-row ones included, marked ``single``), the reference first."""
    recs = [r for r in records(docs) if r.ok and headline(r.test_kind) is not None]
    if not recs:
        return []
    stale = stale_ids(recs)
    noise = host_noise(recs)
    labels = hostnames.labels(docs)
    ref = reference_work(recs)
    # configurations (work + environment), each with all its runs; then by work
    by_work: dict[str, list[list[RunRecord]]] = {}
    for runs in runs_per_comparability(recs).values():
        by_work.setdefault(runs[-1].work_key, []).append(runs)
    # pair prefill and decode of the same model and backend class
    groups: dict[str, list[str]] = {}
    for wk, configs in by_work.items():
        r = configs[0][-1]
        if r.test_kind == "rate" and r.test_name in PAIRED:
            gid = _json(["paired", r.model_identity, r.backend_class, r.method_version])
        else:
            gid = wk
        groups.setdefault(gid, []).append(wk)
    out: list[WorkloadBoard] = []
    for gid, wks in groups.items():
        first = by_work[wks[0]][0][-1]
        by_test = {by_work[wk][0][-1].test_name: wk for wk in wks}
        tests = [t for t in PAIRED if t in by_test] if len(wks) > 1 or first.test_name in PAIRED else [first.test_name]
        tests = tests or sorted(by_test)
        metrics: dict[str, Metric] = {}
        rows: dict[str, Row] = {}
        for t in tests:
            wk = by_test[t]
            for runs in by_work[wk]:
                r = runs[-1]
                m = metrics.setdefault(t, headline(r.test_kind))
                c = _cell(runs, m, stale, noise)
                if c is None:
                    continue
                rk = _row_key(r)
                row = rows.get(rk)
                if row is None:
                    row = rows[rk] = Row(r.host_id, labels.get(r.host_id, r.host_id), r.backend_name, r.backend_build,
                                         r.requested_explicit,
                                         {k: v for k, v in r.effective.items() if k not in TEST_SIZED},
                                         len(r.host.get("gpus") or []), build_identity=r.build_identity)
                cur = row.cells.get(t)
                if cur is None or (c.created, c.id) > (cur.created, cur.id):
                    row.cells[t] = c
        row_list = list(rows.values())
        if not row_list:
            continue
        for row, label in zip(row_list, build_labels([(row.build, row.build_identity) for row in row_list])):
            row.build = label  # builds that read alike name what differs (libraries=..., ...)
        for t in tests:
            have = [row for row in row_list if t in row.cells]
            m = metrics[t]
            ranked = rank_with_ci([row.cells[t].ci95_low for row in have], [row.cells[t].ci95_high for row in have],
                                  m.higher_is_better)
            for row, rk in zip(have, ranked):
                row.cells[t].rank, row.cells[t].rank_label = rk.rank, rank_label(rk)
        last = tests[-1]

        def order(row: Row, last: str = last) -> tuple:
            c = row.cells.get(last)
            m = metrics[last]
            if c is None:
                return (2, 0.0, row.host_label)
            sign = -1 if m.higher_is_better else 1
            return (0 if c.rank is not None else 1, c.rank or 0, sign * c.mean, row.host_label, row.backend)

        row_list.sort(key=order)
        varying = [k for k in ENV_COLUMNS if len({_json(row.environment.get(k)) for row in row_list}) > 1]
        energy = {t: [m for m in ENERGY_METRICS if any(m in row.cells[t].energy for row in row_list if t in row.cells)]
                  for t in tests}
        key = hashlib.sha256(_json(sorted(wks)).encode()).hexdigest()[:12]
        out.append(WorkloadBoard(key, sorted(wks), first.model_name, first.model_identity, first.quantization,
                                 first.synthetic, first.backend_class, first.test_kind, tests, metrics,
                                 {t: by_work[by_test[t]][0][-1].work_test for t in tests}, row_list, varying,
                                 len({row.build for row in row_list}) > 1, any(wk in ref for wk in wks),
                                 first.model_server, asked=asked_columns(row_list, varying),
                                 energy={t: ms for t, ms in energy.items() if ms}))
    out.sort(key=lambda b: (not b.reference, b.single, b.synthetic is False and b.reference, b.model, b.tests))
    return out


def reference_boards(docs: list[Any]) -> list[WorkloadBoard]:
    return [b for b in boards(docs) if b.reference]


@dataclass(frozen=True)
class Speedup:
    """How many times faster one row is than another on one test, with the ratio's CI95."""

    test: str
    fast: Row
    slow: Row
    ratio: float
    ci95_low: float | None
    ci95_high: float | None


def speedup(board: WorkloadBoard, test: str, fast: Row, slow: Row) -> Speedup | None:
    """fast / slow on ``test`` (for a lower-is-better metric, slow / fast), with the CI95 of the
    ratio from the two cells' intervals (log scale: each interval's half-width over 1.96 as the
    standard error of its log, the two added in quadrature)."""
    a, b = fast.cells.get(test), slow.cells.get(test)
    if a is None or b is None or not a.mean or not b.mean:
        return None
    m = board.metrics[test]
    num, den = (a, b) if m.higher_is_better else (b, a)
    ratio = num.mean / den.mean
    ses = []
    for c in (num, den):
        if c.ci95_low is None or c.ci95_high is None or c.ci95_low <= 0:
            return Speedup(test, fast, slow, ratio, None, None)
        ses.append((math.log(c.ci95_high) - math.log(c.ci95_low)) / (2 * 1.96))
    half = 1.96 * math.sqrt(sum(x * x for x in ses))
    return Speedup(test, fast, slow, ratio, ratio * math.exp(-half), ratio * math.exp(half))


def host_summary(docs: list[Any], host_id: str) -> list[str]:
    """Where a host stands on the reference workload, in lines for a terminal (``invoke all`` ends
    with them): per reference board it is on, the hosts beside it and its rank per test."""
    out = []
    for b in reference_boards(docs):
        mine = [r for r in b.rows if r.host_id == host_id]
        if not mine:
            continue
        others = sorted({r.host_label for r in b.rows if r.host_id != host_id})
        figures = []
        for t in b.tests:
            c = mine[0].cells.get(t)
            if c is not None:
                m = b.metrics[t]
                have = sum(1 for r in b.rows if t in r.cells)
                figures.append(f"{t} {c.mean:,.{m.decimals}f} {m.unit} (rank {c.rank_label} of {have})")
        out.append(f"reference {b.model}: {', '.join(figures)}; beside " + (", ".join(others) if others else "no other host yet"))
    return out
