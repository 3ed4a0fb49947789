"""``invoke noise``: this host's run-to-run noise, measured by a short A/A.

The noise matrix (data/matrices/noise.yaml: the embedded model's pp64 and tg16) runs again and
again, every configuration in its own fresh process, into a temporary folder (these runs are a
measurement of the host, not results for the leaderboard); the spread of the run means per kind
of test becomes a ``noise`` artifact in data/hosts/<host>/ (core.noise). The pages use it to
widen the interval of a configuration measured once (core.stats.compare_runs).

How many runs (:func:`run_until_useful`, core.noise.RULE): the first run of the matrix is a warm-up,
stored with ``warmup: true`` and not counted (a fresh host's first run can land far from the
others); then at least MIN_COUNTED counted runs (MIN_DF degrees of freedom: one configuration per
kind of test), and after each one the A/A stops as soon as every kind of test it measured has a
useful estimate (core.noise.useful: a single run widened by it gets a CI95 no wider than
×USEFUL_FACTOR each way). Otherwise it stops at ``max_runs`` counted runs, or before a run that would
end past ``budget_s``; a kind still too wide is recorded ``too_noisy`` with why.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import artifacts, noise
from core.errors import ConfigError
from core.kinds import headline
from core.paths import data_dir, relpath
from core.records import run as record
from core.records.noise import new_noise
from runtime.execution import matrix as matrix_mod
from runtime.execution import runner
from runtime.hosts import fingerprint as hostinfo

MATRIX = "noise"
#: The fewest counted runs (after the warm-up): MIN_DF degrees of freedom with one configuration per kind.
MIN_COUNTED = noise.MIN_DF + 1
DEFAULT_MAX_RUNS = 30  # `invoke noise`: at most this many counted runs ...
DEFAULT_BUDGET_S = 900.0  # ... and no run started that would end past this


def artifact_path(doc: dict[str, Any], root: Path | None = None) -> Path:
    root = root or data_dir() / "hosts"
    return root / doc["host"]["id"] / f"noise-{doc['id'].rsplit('-', 1)[1]}.json"


def run_rows(recs: list[record.RunRecord]) -> list[dict[str, Any]]:
    """One row per ok run: its headline mean, its kind of test and its group (configuration + build)."""
    rows = []
    for r in recs:
        m = headline(r.test_kind)
        s = r.stat(m.name) if r.ok and m is not None else None
        if s is None or not s.mean or s.mean <= 0:
            continue
        rows.append(
            {
                "id": r.id,
                "created": r.created,
                "test": r.test_name,
                "class": noise.noise_class(r.test),
                "metric": m.name,
                "n": s.n,
                "mean": float(s.mean),
                "stddev": s.stddev,
                "group": r.key[:16],
                "loadavg_1m_before": r.resources.loadavg_1m_before,
                "wall_s": r.resources.wall_s,
            }
        )
    return rows


def _check_max_runs(max_runs: int) -> None:
    if max_runs < MIN_COUNTED:
        raise ConfigError(
            f"{max_runs} is too few: the rule needs at least {MIN_COUNTED} runs after the warm-up "
            f"({noise.MIN_DF} degrees of freedom)",
            field="--runs",
        )


def _estimates(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if not r["warmup"]:
            groups.setdefault(r["class"], {}).setdefault(r["group"], []).append(
                r["mean"]
            )
    return noise.estimates({c: list(g.values()) for c, g in groups.items()})


def run_until_useful(
    run_round: Callable[[int], list[dict[str, Any]]],
    *,
    max_runs: int = DEFAULT_MAX_RUNS,
    budget_s: float = DEFAULT_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
    on_run: Callable[[int, float, dict[str, dict[str, Any]]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the A/A by core.noise.RULE: ``run_round(i)`` runs the matrix once (round i, from 0) and
    returns its rows (class, group, mean, ...). Round 0 is the warm-up (its rows kept, flagged
    ``warmup: true``, never counted); then at least MIN_COUNTED counted rounds whatever the budget;
    after each counted round, stop when every kind of test measured has a useful estimate
    (``useful``), at ``max_runs`` counted rounds (``max_runs``), or when the next round, taking as
    long as the median counted round so far, would end past ``budget_s`` (``budget``); ``no_runs``
    when the minimum gave no row at all. Returns the rows (``round``, ``warmup`` added) and the
    stopping record. ``on_run(counted, seconds, estimates so far)`` after each round (0: the warm-up)."""
    _check_max_runs(max_runs)
    t0 = clock()
    rows: list[dict[str, Any]] = []
    walls: list[float] = []
    counted = rnd = 0
    while True:
        t = clock()
        new = run_round(rnd)
        wall = clock() - t
        warm = rnd < noise.WARMUP_RUNS
        rows += [{**r, "round": rnd + 1, "warmup": warm} for r in new]
        rnd += 1
        if not warm:
            counted += 1
            walls.append(wall)
        est = _estimates(rows)
        if on_run:
            on_run(counted, wall, est)
        if warm or counted < MIN_COUNTED:
            continue
        if not est:
            reason = "no_runs"
            break
        if all(noise.useful(e["sigma"], e["df"]) for e in est.values()):
            reason = "useful"
            break
        if counted >= max_runs:
            reason = "max_runs"
            break
        if clock() - t0 + statistics.median(walls) > budget_s:
            reason = "budget"
            break
    stopping = {
        "rule": noise.RULE,
        "useful_factor": noise.USEFUL_FACTOR,
        "min_df": noise.MIN_DF,
        "warmup_runs": noise.WARMUP_RUNS,
        "counted_runs": counted,
        "max_runs": int(max_runs),
        "budget_s": float(budget_s),
        "reason": reason,
    }
    return rows, stopping


def measure(
    max_runs: int = DEFAULT_MAX_RUNS,
    budget_s: float = DEFAULT_BUDGET_S,
    matrix: str = MATRIX,
    on_run: Callable[[int, float, dict[str, dict[str, Any]]], None] | None = None,
) -> dict[str, Any]:
    """Run ``matrix`` by :func:`run_until_useful` (``max_runs`` counted runs at most, ``budget_s``
    seconds) and return the noise artifact (not written)."""
    _check_max_runs(max_runs)
    m = matrix_mod.load(matrix)
    fp = hostinfo.fingerprint()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="almanac-noise-") as td:

        def run_round(i: int) -> list[dict[str, Any]]:
            root = Path(td) / f"round-{i + 1:03d}"
            runner.run_matrix(matrix, force=True, root=root)
            return run_rows(record.read_all(root)) if root.exists() else []

        rows, stopping = run_until_useful(
            run_round, max_runs=max_runs, budget_s=budget_s, on_run=on_run
        )
    return new_noise(
        host=fp,
        matrix={"name": m.name, "file": relpath(m.path)},
        runs=rows,
        stopping=stopping,
        conditions={
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": os.getloadavg()[0],
            "matrix_runs": stopping["counted_runs"] + stopping["warmup_runs"],
            "wall_s": round(time.perf_counter() - t0, 1),
            "logical_cores": fp["cpu"].get("logical_cores"),
        },
    )


def run_noise(
    max_runs: int = DEFAULT_MAX_RUNS,
    budget_s: float = DEFAULT_BUDGET_S,
    on_run: Callable[[int, float, dict[str, dict[str, Any]]], None] | None = None,
) -> Path:
    doc = measure(max_runs, budget_s, on_run=on_run)
    return artifacts.write(artifact_path(doc), doc)


def too_noisy_line(doc: dict[str, Any]) -> str | None:
    """One line for the user when the A/A found this host too noisy to rank a kind of test, else None."""
    bad = [
        f"{c}: {e['why']}"
        for c, e in sorted(doc["estimates"].items())
        if e.get("too_noisy")
    ]
    if not bad:
        return None
    return (
        "this host is too noisy to rank single runs ("
        + "; ".join(bad)
        + "): its pages widen them by this noise"
    )
