"""Each host's run-to-run noise per kind of test, from the artifacts (core.noise).

Two sources, pooled: the history itself (every configuration measured two or more times with one
build: its runs' spread), and the newest ``noise`` artifact of the host (``invoke noise``). Pooling
adds their sums of squares and degrees of freedom, so the estimate with more runs weighs more.

Each pooled estimate carries its verdict for a single run (core.noise.too_noisy on the pooled sigma
and df, the figure every page widens a single run by): ``RunNoise.too_noisy`` when that run's CI95
would be wider than ×core.noise.USEFUL_FACTOR each way, and ``RunNoise.why`` with the figures, so a
page can say "this host is too noisy to rank (…)" instead of a rank that turns on noise.
"""

from __future__ import annotations

import json
import math
from typing import Any

from core import noise as noise_mod
from core import stats
from core.kinds import headline
from core.records.noise import NoiseRecord
from core.records.run import RunRecord
from pipelines.memo import per_run, per_set

METHOD = (
    "Run-to-run noise of a host and kind of test (test kind; rate tests split into prompt processing and "
    "generation) is the standard deviation of the log of a run's mean between runs of one configuration and "
    "build, pooled over every configuration measured two or more times on that host (the history) and the "
    "host's newest `invoke noise` A/A (sums of squares over degrees of freedom). The A/A does not count its "
    "first run (a fresh process, warm-up) and runs until, for every kind of test, the estimate has at least "
    f"{noise_mod.MIN_DF} degrees of freedom and a single run widened by it gets a CI95 no wider than "
    f"×{noise_mod.USEFUL_FACTOR:g} each way (t(0.975, df) · sigma ≤ ln {noise_mod.USEFUL_FACTOR:g}), or until its "
    'budget of time and runs ends. An estimate (pooled) still wider than that marks the host "too noisy to '
    'rank" that kind of test, with the noise, the degrees of freedom and the width that results. Stopping on '
    "the estimate is sequential, so a host that stops early may read slightly quieter than it is."
)


def run_value(
    r: RunRecord, metric: str | None = None
) -> tuple[float, float | None] | None:
    """(mean, relative standard error) of one metric of a run (default: its headline), or None."""
    if metric is None:
        m = headline(r.test_kind)
        metric = m.name if m is not None else None
    s = r.stat(metric) if metric is not None else None
    if s is None or s.mean is None or s.mean <= 0:
        return None
    n, sd = s.n, s.stddev
    rel = sd / math.sqrt(n) / s.mean if sd is not None and n > 1 else None
    return float(s.mean), rel


def cell_key(r: RunRecord) -> str:
    """Runs of one configuration and build: the history key and the build."""
    return r.history_key + json.dumps(
        {**r.build_identity, "almanac": r.almanac_version}, sort_keys=True
    )


def _noise_docs() -> list[NoiseRecord]:
    from pipelines.runs import load_artifacts

    try:
        return load_artifacts("noise")
    except Exception:
        return []


@per_run
def history_cell(r: RunRecord) -> tuple[str, tuple[str, str], float] | None:
    """A run's part of its host's noise from the history: its cell (:func:`cell_key`), its host and kind of
    test, and its mean; None when it has none (not ok, no headline value). Kept with the run
    (pipelines.run_answers: between builds, with its file)."""
    if not r.ok:
        return None
    v = run_value(r)
    if v is None or (r.test_kind == "rate" and v[1] is None):
        # a rate run of one repetition (e.g. the load-time matrix's pp8, run once after the load) times one
        # cold pass: its spread is not the run-to-run noise of rate runs that repeat
        return None
    return cell_key(r), (r.host_id, noise_mod.noise_class(r.test)), v[0]


@per_set
def _from_history(docs: list[Any]) -> dict[tuple[str, str], tuple[float, int, int]]:
    cells: dict[str, list[float]] = {}
    cls: dict[str, tuple[str, str]] = {}
    for r in list(docs):
        got = history_cell(r)
        if got is None:
            continue
        k, cls[k], mean = got
        cells.setdefault(k, []).append(mean)
    out: dict[tuple[str, str], tuple[float, int, int]] = {}
    for k, means in cells.items():
        sigma, df = stats.pooled_log_spread([means])
        if sigma is None:
            continue
        ss, d, g = out.get(cls[k], (0.0, 0, 0))
        out[cls[k]] = (ss + sigma * sigma * df, d + df, g + 1)
    return out


def host_noise(
    docs: list[Any], noise_docs: list[Any] | None = None
) -> dict[tuple[str, str], stats.RunNoise]:
    """(host, kind of test) -> its run-to-run noise, from the history of ``docs`` and the newest
    noise artifact of each host (``noise_docs``; default: those of the loaded data folder), with
    ``too_noisy`` and ``why`` judged on the pooled estimate (core.noise.too_noisy)."""
    pooled = dict(_from_history(docs))
    sources = {
        k: f"history: {g} configuration(s) measured more than once"
        for k, (_, _, g) in pooled.items()
    }
    newest: dict[str, NoiseRecord] = {}
    for d in _noise_docs() if noise_docs is None else noise_docs:
        h = d.host_id
        if h not in newest or (d.created, d.id) > (newest[h].created, newest[h].id):
            newest[h] = d
    for h, d in newest.items():
        for c, est in d.estimates.items():
            ss, df, g = pooled.get((h, c), (0.0, 0, 0))
            pooled[(h, c)] = (ss + est.sigma**2 * est.df, df + est.df, g)
            sources[(h, c)] = (
                sources[(h, c)] + " + " if (h, c) in sources else ""
            ) + est.source
    out = {}
    for k, (ss, df, _) in pooled.items():
        if df:
            sigma = math.sqrt(ss / df)
            why = noise_mod.too_noisy(sigma, df)
            out[k] = stats.RunNoise(
                sigma,
                df,
                sources[k],
                why is not None,
                f"this host is too noisy to rank a single {k[1]} run: {why} ({sources[k]})"
                if why
                else None,
            )
    return out


def too_noisy(
    table: dict[tuple[str, str], stats.RunNoise],
) -> dict[tuple[str, str], str]:
    """(host, kind of test) -> why, for the estimates of ``table`` (host_noise) too noisy to rank a single run."""
    return {k: n.why or "too noisy" for k, n in table.items() if n.too_noisy}


def noise_for(
    table: dict[tuple[str, str], stats.RunNoise], r: RunRecord
) -> stats.RunNoise | None:
    return table.get((r.host_id, noise_mod.noise_class(r.test)))


def missing_classes(
    docs: list[Any],
    host_id: str,
    classes: tuple[str, ...],
    noise_docs: list[Any] | None = None,
) -> list[str]:
    """The kinds of test among ``classes`` for which ``host_id`` has no run-to-run noise estimate
    (from the history of ``docs`` or a noise artifact: ``noise_docs``, default those of the data folder)."""
    table = host_noise(list(docs), noise_docs)
    return [c for c in classes if (host_id, c) not in table]
