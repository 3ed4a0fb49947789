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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from core import stats

ARTIFACT = "noise"


def noise_class(test: Mapping[str, Any]) -> str:
    """The kind of test whose run-to-run noise a run shares: ``rate:pp``, ``rate:tg``,
    ``rate:pp+tg`` (context depth aside), else the test kind (``chat``, ``serve``, ...)."""
    kind = str(test.get("kind") or "")
    if kind != "rate":
        return kind
    pp, tg = int(test.get("n_prompt") or 0), int(test.get("n_gen") or 0)
    return "rate:" + "+".join(p for p, on in (("pp", pp), ("tg", tg)) if on)


def estimates(groups: Mapping[str, Sequence[Sequence[float]]]) -> dict[str, dict[str, Any]]:
    """Per noise class: sigma (sd of log run means), df and run count from groups of run means
    (each group: runs of one configuration and build)."""
    out = {}
    for cls, gs in sorted(groups.items()):
        sigma, df = stats.pooled_log_spread(gs)
        if sigma is None:
            continue
        out[cls] = {"sigma": sigma, "df": df, "runs": sum(len(g) for g in gs), "groups": len(gs)}
    return out
