"""``invoke noise``: this host's run-to-run noise, measured by a short A/A.

The noise matrix (data/matrices/noise.yaml: the embedded model's pp64 and tg16) runs again and
again, every configuration in its own fresh process, into a temporary folder (these runs are a
measurement of the host, not results for the leaderboard); the spread of the run means per kind
of test becomes a ``noise`` artifact in data/hosts/<host>/ (core.noise). The pages use it to
widen the interval of a configuration measured once (core.stats.compare_runs).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import artifacts, noise
from core.records.noise import new_noise
from core.errors import ConfigError
from core.kinds import headline
from core.paths import data_dir, relpath
from core.records import run as record
from runtime.execution import matrix as matrix_mod
from runtime.execution import runner
from runtime.hosts import fingerprint as hostinfo

MATRIX = "noise"
MIN_RUNS = 3


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
        rows.append({"id": r.id, "created": r.created, "test": r.test_name, "class": noise.noise_class(r.test),
                     "metric": m.name, "n": s.n, "mean": float(s.mean), "stddev": s.stddev,
                     "group": r.key[:16], "loadavg_1m_before": r.resources.loadavg_1m_before,
                     "wall_s": r.resources.wall_s})
    return rows


def measure(runs: int = 10, budget_s: float = 900.0, matrix: str = MATRIX,
            on_run: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Run ``matrix`` ``runs`` times (stopping early when ``budget_s`` is spent, after at least
    MIN_RUNS) and return the noise artifact (not written)."""
    if runs < MIN_RUNS:
        raise ConfigError(f"{runs} is too few: the spread between runs needs at least {MIN_RUNS}", field="--runs")
    m = matrix_mod.load(matrix)
    fp = hostinfo.fingerprint()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="almanac-noise-") as td:
        done = 0
        while done < runs:
            if done >= MIN_RUNS and time.perf_counter() - t0 > budget_s:
                break
            t = time.perf_counter()
            runner.run_matrix(matrix, force=True, root=Path(td))
            done += 1
            if on_run:
                on_run(done, time.perf_counter() - t)
        rows = run_rows(record.read_all(Path(td)))
    return new_noise(host=fp, matrix={"name": m.name, "file": relpath(m.path)}, runs=rows,
                           conditions={"loadavg_1m_before": load_before, "loadavg_1m_after": os.getloadavg()[0],
                                       "matrix_runs": done, "wall_s": round(time.perf_counter() - t0, 1),
                                       "logical_cores": fp["cpu"].get("logical_cores")})


def run_noise(runs: int = 10, budget_s: float = 900.0, on_run: Callable[[int, float], None] | None = None) -> Path:
    doc = measure(runs, budget_s, on_run=on_run)
    return artifacts.write(artifact_path(doc), doc)
