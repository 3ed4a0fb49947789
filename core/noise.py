"""Run-to-run noise: how far two runs of the same configuration and build land apart on a host.

Two processes of the same build on a shared machine differ by more than the repetitions inside
one process suggest (model placement, frequency, neighbours), so every verdict on the site
treats the *run* as the unit (core.stats.compare_runs). Where a side has one run, its interval
is widened by the host's run-to-run noise for that kind of test, measured two ways:

* from the history itself: runs of one configuration (history key) and build, two or more,
  pooled per host and kind of test (pipelines.noise);
* by ``invoke noise``: a short A/A on the host (data/matrices/noise.yaml run again and again in
  fresh processes), stored as a ``noise`` artifact in ``data/hosts/<host>/``.

The *kind of test* is the test kind, split for rate tests by phase (prompt processing and
generation scatter differently): :func:`noise_class`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from core import artifacts, stats

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


def new_noise(*, host: dict[str, Any], matrix: dict[str, Any], runs: list[dict[str, Any]],
              conditions: dict[str, Any], created: datetime | None = None) -> dict[str, Any]:
    """A ``noise`` artifact from the runs of an A/A (each: id, created, test, class, metric, n, mean,
    stddev, group): the estimate per class is computed here, from those runs."""
    created = created or datetime.now(timezone.utc)
    groups: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        groups.setdefault(r["class"], {}).setdefault(r["group"], []).append(r["mean"])
    est = estimates({c: list(g.values()) for c, g in groups.items()})
    return {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": f"{host['id']}-noise-{created.strftime('%Y%m%dT%H%M%SZ')}",
        "created": created.isoformat(timespec="seconds"),
        "host": host,
        "matrix": matrix,
        "method": ("the matrix run again and again, each run a fresh process; per kind of test, sigma is the sample "
                   "standard deviation of the log of each run's mean about the mean of its configuration's runs "
                   "(pooled over configurations: sum of squares over degrees of freedom)"),
        "conditions": conditions,
        "runs": runs,
        "estimates": est,
    }


def from_artifact(doc: Mapping[str, Any]) -> dict[str, stats.RunNoise]:
    """The per-class estimates a noise artifact holds."""
    return {c: stats.RunNoise(float(e["sigma"]), int(e["df"]), f"invoke noise {doc['id']}")
            for c, e in (doc.get("estimates") or {}).items() if e.get("df") and math.isfinite(float(e["sigma"]))}
