"""Run-to-run noise: how far two runs of the same configuration and build land apart on a host.

Two processes of the same build on a shared machine differ by more than the repetitions inside
one process suggest (model placement, frequency, neighbours), so every verdict on the site
treats the *run* as the unit (core.stats.compare_runs). Where a side has one run, its interval
is widened by the host's run-to-run noise for that kind of test, measured two ways:

* from the history itself: runs of one configuration (history key) and build, two or more,
  pooled per host and kind of test (pipelines.noise);
* by ``invoke noise``: a short A/A on the host (data/matrices/noise.yaml run again and again in
  fresh processes), stored as a ``noise`` artifact in ``data/hosts/<host>/`` (core.records.noise).

The *kind of test* is the test kind, split for rate tests by phase (prompt processing and
generation scatter differently): :func:`noise_class`.

An estimate is *useful* when it lets a single run say something: that run, widened by the estimate
(variance sigma², the estimate's degrees of freedom, as core.stats.side_estimate does), gets a CI95
no wider than ×USEFUL_FACTOR each way, i.e. ``t_{0.975}(df) · sigma <= ln(USEFUL_FACTOR)``
(:func:`ci95_factor`, :func:`too_noisy`). ``invoke noise`` runs until every kind of test it measures
has a useful estimate with at least MIN_DF degrees of freedom (its first, warm-up run not counted),
or its budget ends; a kind whose estimate is still wider is *too noisy to rank*, and says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from core import stats

ARTIFACT = "noise"

#: A noise estimate is useful when one run widened by it gets a CI95 no wider than this, each way.
USEFUL_FACTOR = 1.25
#: The A/A never stops on fewer degrees of freedom than this (counted runs, warm-up dropped).
MIN_DF = 3
#: Fresh-process runs of the A/A that are run first and not counted (stored, flagged ``warmup``).
WARMUP_RUNS = 1

RULE = (
    f"the first run (a fresh process, warm-up) is not counted; the A/A then runs until, for every kind of test "
    f"it measures, the estimate has at least {MIN_DF} degrees of freedom and a single run widened by it gets a "
    f"CI95 no wider than ×{USEFUL_FACTOR:g} each way (t(0.975, df) · sigma ≤ ln {USEFUL_FACTOR:g}), or until its "
    "budget (time or runs) ends: a kind of test whose estimate is still wider is too noisy to rank"
)


def noise_class(test: Mapping[str, Any]) -> str:
    """The kind of test whose run-to-run noise a run shares: ``rate:pp``, ``rate:tg``,
    ``rate:pp+tg`` (context depth aside), else the test kind (``chat``, ``serve``, ...)."""
    kind = str(test.get("kind") or "")
    if kind != "rate":
        return kind
    pp, tg = int(test.get("n_prompt") or 0), int(test.get("n_gen") or 0)
    return "rate:" + "+".join(p for p, on in (("pp", pp), ("tg", tg)) if on)


def estimates(
    groups: Mapping[str, Sequence[Sequence[float]]],
) -> dict[str, dict[str, Any]]:
    """Per noise class: sigma (sd of log run means), df, run and group count from groups of run means
    (each group: runs of one configuration and build), and what it means for a single run
    (:func:`assess`: ``ci95_factor``, ``too_noisy``, ``why``)."""
    out = {}
    for cls, gs in sorted(groups.items()):
        sigma, df = stats.pooled_log_spread(gs)
        if sigma is None:
            continue
        out[cls] = {
            "sigma": sigma,
            "df": df,
            "runs": sum(len(g) for g in gs),
            "groups": len(gs),
            **assess(sigma, df),
        }
    return out


def ci95_factor(sigma: float, df: int | float) -> float:
    """The factor a single run's CI95 spans each way once widened by a run-to-run noise estimate
    (sigma of log run means, ``df`` degrees of freedom): ``exp(t_{0.975}(df) · sigma)``."""
    if df < 1 or not math.isfinite(sigma) or sigma < 0:
        return math.inf
    return math.exp(
        min(stats.t_critical(df) * sigma, 700.0)
    )  # capped: stays a finite JSON number


def too_noisy(sigma: float, df: int | float) -> str | None:
    """Why one run widened by this estimate says nothing (its CI95 wider than ×USEFUL_FACTOR each
    way), or None when the estimate is useful that way."""
    f = ci95_factor(sigma, df)
    if f <= USEFUL_FACTOR:
        return None
    width = f"×{f:.2f}" if math.isfinite(f) and f < 1000 else "more than ×1000"
    return (
        f"run-to-run noise {100 * sigma:.1f}% with {int(df)} df: a single run widened by it gets a CI95 of "
        f"{width} each way, wider than ×{USEFUL_FACTOR:g}"
    )


def useful(sigma: float | None, df: int | float) -> bool:
    """The A/A's stopping rule for one kind of test: at least MIN_DF degrees of freedom and not too noisy."""
    return sigma is not None and df >= MIN_DF and too_noisy(sigma, df) is None


def assess(sigma: float, df: int) -> dict[str, Any]:
    """What an estimate means for a single run: ``ci95_factor``, ``too_noisy`` and ``why`` (None unless too noisy)."""
    why = too_noisy(sigma, df)
    f = ci95_factor(sigma, df)
    return {
        "ci95_factor": f if math.isfinite(f) else math.exp(700.0),
        "too_noisy": why is not None,
        "why": why,
    }
