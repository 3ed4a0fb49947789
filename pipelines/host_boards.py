"""Leaderboards: like with like, ranked on the test kind's headline metric with CI95.

A board holds results that ran the same work apart from what the board compares on purpose
(the model, the settings and the backend build): same host, backend, test definition (every
parameter but the repetition count) and method. Its rows are the configurations (full
comparability key, core.records.run), one row and one chart mark each, linked to the newest
artifact. The run is the unit: a configuration measured in two or more runs shows the
geometric mean of its run means with a CI95 from the spread between them; one measured once
shows its run's mean with a CI95 widened by the host's run-to-run noise for that kind of test
(core.stats.run_interval, pipelines.noise), or none when that noise was never measured.
Settings equal on every row are stated once above the board; settings that differ, and the
backend build when it differs, are columns. Ranks follow pipelines.ranking (RULE).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.kinds import columns, headline
from core.metrics import ENERGY_METRICS, Metric
from core.records.run import RunRecord
from pipelines.history import stale_ids
from pipelines.memo import per_set
from pipelines.ranking import rank_label, rank_sides

# What a leaderboard compares on purpose (everything else must be equal on a board).
COMPARED = ("model", "build", "settings")
# Declared table columns (core.kinds) that boards show beside the headline, where a row measured them.
BOARD_EXTRA = ENERGY_METRICS


@dataclass
class HostBoard:
    host_id: str
    host_name: str
    test: str
    test_kind: str
    backend: str
    metric: Metric
    definition: dict[str, Any]  # the test's every parameter (repetitions aside)
    varying: list[str]  # effective settings that differ between rows
    constant: dict[str, Any]  # effective settings equal on every row (stated once)
    builds: list[str]  # distinct backend builds on the board
    rows: pd.DataFrame  # ranked best first
    key: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def build_varies(self) -> bool:
        return len(self.builds) > 1


def _same(values: list[Any]) -> bool:
    first = json.dumps(values[0], sort_keys=True, default=str)
    return all(json.dumps(v, sort_keys=True, default=str) == first for v in values[1:])


def split_settings(settings: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """(keys whose values differ between rows, the settings equal on every row)."""
    keys = sorted({k for s in settings for k in s})
    varying, constant = [], {}
    for k in keys:
        vals = [s.get(k) for s in settings]
        if _same(vals):
            constant[k] = vals[0]
        else:
            varying.append(k)
    return varying, constant


def build_labels(builds: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each row's backend build in words (``RunRecord.backend_build``), with the identity fields that
    tell apart rows whose words are the same (``libraries=...`` of a build loaded from another
    library, ``almanac=...`` of a result measured by another almanac and stats method:
    ``environment_of``): two builds a board keeps apart never read alike. ``builds``: (words, build
    identity) per row."""
    by_text: dict[str, list[dict[str, Any]]] = {}
    for text, ident in builds:
        by_text.setdefault(text, []).append(ident)
    extra = sorted(
        {
            k
            for idents in by_text.values()
            for k in {
                k for i in idents for k in i
            }  # each key once per group (was once per row)
            if not _same([x.get(k) for x in idents])
        }
    )
    return [
        text + "".join(f" · {k}={_setting_text(ident.get(k))}" for k in extra)
        for text, ident in builds
    ]


def environment_of(r: RunRecord) -> dict[str, Any]:
    """A row's build identity with the almanac (version and stats method) that measured it: what tells two
    rows of one board apart when their builds read alike (core.records.run.STATS_METHODS)."""
    return {**r.build_identity, "almanac": r.almanac_method}


def _setting_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def varying_settings(settings: list[dict[str, Any]]) -> list[str]:
    return split_settings(settings)[0]


def newest_per_comparability(recs: list[RunRecord]) -> list[RunRecord]:
    """One result per full comparability key: the newest (older ones are history)."""
    return [runs[-1] for runs in runs_per_comparability(recs).values()]


def runs_per_comparability(recs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """Every run of each full comparability key, oldest first (the runs of one board row)."""
    out: dict[str, list[RunRecord]] = {}
    for r in recs:
        out.setdefault(r.comparability_key(), []).append(r)
    for runs in out.values():
        runs.sort(key=lambda r: (r.created, r.id))
    return out


def _mean(m: Any) -> float:
    """A row's centre as its frame column holds it (a missing one is NaN)."""
    return math.nan if m is None else float(m)


@per_set
def of(docs: list[RunRecord]) -> list[HostBoard]:
    """Leaderboards from run artifacts (failed runs excluded)."""
    from pipelines import facts as facts_mod

    return _boards(docs, facts_mod.of(docs))


def of_host(runs: list[RunRecord], fleet: list[RunRecord]) -> list[HostBoard]:
    """The boards of the one host whose runs are ``runs`` (all of them, in ``fleet``'s order), as ``of(fleet)``
    has them: a board is one host's (its comparability key holds the host), and what reaches across hosts
    (a figure widened by the fleet's pooled noise where its host has none) comes from the fact layer of all
    of ``fleet`` (pipelines.facts, once per set). One host's boards page then costs its host's runs, not the
    fleet's (one more host's run made every host's boards again)."""
    from pipelines import facts as facts_mod

    return _boards(runs, facts_mod.of(fleet))


def _boards(docs: list[RunRecord], fx: Any) -> list[HostBoard]:
    """The boards of ``docs``, their figures read from the fact layer ``fx`` (of ``docs`` or a superset)."""
    recs = [r for r in list(docs) if r.ok and headline(r.test_kind) is not None]
    # a run's line (host, backend, server) is one host's: its staleness is the same from its host's runs
    stale = stale_ids(recs)
    per_key = runs_per_comparability(recs)
    groups: dict[str, list[RunRecord]] = {}
    for runs in per_key.values():
        r = runs[-1]
        groups.setdefault(r.comparability_key(exclude=COMPARED), []).append(r)
    out: list[HostBoard] = []
    for gkey, group in groups.items():
        first = group[0]
        metric = headline(first.test_kind)
        assert metric is not None
        rows: list[dict[str, Any]] = []
        for r in group:
            s = r.headline
            if s is None:
                continue
            fig = fx.figure_of(r, metric)
            if fig is None:
                continue
            centre, lo, hi, note = fig.mean, fig.ci95_low, fig.ci95_high, fig.note
            spread, n, runs = fig.spread, fig.n, per_key[r.comparability_key()]
            rows.append(
                {
                    "id": r.id,
                    "path": r.path,
                    "created": r.created,
                    "model": r.model_name,
                    "quantization": r.quantization,
                    "synthetic": r.synthetic,
                    "endpoint": r.model_server,
                    "backend": r.backend_name,
                    "build_identity": r.build_identity,
                    "environment": environment_of(r),
                    "backend_build": r.backend_build,
                    "effective": r.effective,
                    "settings": r.requested,
                    "s_mean": centre if centre is not None else s.mean,
                    "s_stddev": spread,
                    "s_n": n,
                    "s_ci95_low": lo,
                    "s_ci95_high": hi,
                    "runs": len(runs),
                    "run_ids": [x.id for x in runs],
                    "interval_note": note,
                    "stale": r.id in stale,
                    "figure": fig,
                    # the kind's other table columns this result measured (e.g. energy per token)
                    "extra": {
                        c: r.stat(c)
                        for c in columns(r.test_kind)
                        if c != metric.name and r.stat(c)
                    },
                }
            )
        if not rows:
            continue
        for row, label in zip(
            rows,
            build_labels([(x["backend_build"], x["environment"]) for x in rows]),
        ):
            row["backend_build"] = label
        ranked = rank_sides([x["figure"].side for x in rows], metric.higher_is_better)
        sign = -1 if metric.higher_is_better else 1
        # best first: the rows put in order before the one frame is made (sorting, dropping a helper
        # column and re-indexing a frame per board was most of a fleet's boards)
        order = sorted(
            range(len(rows)),
            key=lambda i: (
                ranked[i].rank if ranked[i].rank is not None else 10**9,
                sign * _mean(rows[i]["s_mean"]),
            ),
        )
        rows = [rows[i] for i in order]
        ranked = [ranked[i] for i in order]
        g = pd.DataFrame(
            {
                **{c: [x[c] for x in rows] for c in rows[0]},
                "rank": [r.rank for r in ranked],
                "tied": [r.tied for r in ranked],
                "rank_label": [rank_label(r) for r in ranked],
            }
        )
        varying, constant = split_settings([x["effective"] for x in rows])
        builds = sorted({x["backend_build"] for x in rows})
        out.append(
            HostBoard(
                first.host_id,
                first.host_name,
                first.test_name,
                first.test_kind,
                first.backend_name,
                metric,
                first.test_definition,
                varying,
                constant,
                builds,
                g,
                gkey,
            )
        )
    out.sort(key=lambda b: (b.host_id, b.test, b.backend, b.key))
    return out


def board_records(board: HostBoard) -> list[dict[str, Any]]:
    """Plain rows for rendering: rank (with tie marker), model, build, settings that differ,
    statistics, source."""
    # the frame's values as Python objects in one pass (what iterrows reads them from): a Series per row
    # was most of a fleet's boards pages
    names = list(board.rows.columns)
    recs = []
    for r in (dict(zip(names, v)) for v in board.rows.values.tolist()):
        recs.append(
            {
                "rank": None if pd.isna(r["rank"]) else int(r["rank"]),
                "rank_label": r["rank_label"],
                "tied": bool(r["tied"]),
                "model": r["model"],
                "quantization": r["quantization"],
                "synthetic": bool(r["synthetic"]),
                "endpoint": r["endpoint"]
                if isinstance(r["endpoint"], str)
                else None,  # an endpoint model's server
                "backend": r["backend"],
                "backend_build": r["backend_build"],
                "settings": {k: r["effective"].get(k) for k in board.varying},
                "mean": r["s_mean"],
                "stddev": None if pd.isna(r["s_stddev"]) else r["s_stddev"],
                "n": int(r["s_n"]),
                "ci95_low": None if pd.isna(r["s_ci95_low"]) else r["s_ci95_low"],
                "ci95_high": None if pd.isna(r["s_ci95_high"]) else r["s_ci95_high"],
                "id": r["id"],
                "stale": bool(r["stale"]),
                "extra": r["extra"],
                "runs": int(r["runs"]),
                "run_ids": list(r["run_ids"]),
                "interval_note": r["interval_note"],
                "figure": r["figure"],
            }
        )
    return recs


def extra_columns(board: HostBoard) -> list[str]:
    """The kind's table columns beside the headline that at least one row of the board measured
    and that boards show (BOARD_EXTRA: energy per token for now)."""
    present = {c for extra in board.rows["extra"] for c in extra}
    return [
        c
        for c in columns(board.test_kind)
        if c != board.metric.name and c in present and c in BOARD_EXTRA
    ]
