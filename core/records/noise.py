"""The noise artifact: a host's run-to-run noise per kind of test (``invoke noise``: a small matrix
run again and again in fresh processes; core.noise says what the estimate is and why the run is
the unit of every verdict).

Built by :func:`new_noise` (runtime.execution.noise), read as :class:`NoiseRecord`: its per-class
estimates as core.stats.RunNoise (``rec.estimates``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from core import stats
from core.noise import estimates
from core.records.base import ArtifactRecord

ARTIFACT = "noise"
#: The largest run-to-run spread (sd of the log of run means) read as an estimate; beyond it an
#: artifact's figure is no estimate of noise (and its square would overflow the pooling).
MAX_SIGMA = 10.0
MAX_DF = 10**6  # degrees of freedom: more runs than any A/A makes


def new_noise(*, host: dict[str, Any], matrix: dict[str, Any], runs: list[dict[str, Any]],
              conditions: dict[str, Any], created: datetime | None = None) -> dict[str, Any]:
    """A ``noise`` artifact from the runs of an A/A (each: id, created, test, class, metric, n, mean,
    stddev, group): the estimate per class is computed here, from those runs."""
    from core import artifacts

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


class NoiseRecord(ArtifactRecord):
    """A loaded noise artifact: the host (``host_id``), when, and its per-class estimates."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def estimates(self) -> dict[str, stats.RunNoise]:
        """Per kind of test (core.noise.noise_class): sigma of the log of run means, its degrees of
        freedom, and the source (this artifact). A class without degrees of freedom is left out."""
        def read() -> dict[str, stats.RunNoise]:
            out = {}
            for c, e in (self.doc.get("estimates") or {}).items():
                sigma = e.get("sigma")
                # a log-scale spread beyond MAX_SIGMA (runs a factor e^10 apart) is no estimate of noise
                if e.get("df") and sigma is not None and math.isfinite(float(sigma)) and 0 <= float(sigma) <= MAX_SIGMA \
                        and int(e["df"]) <= MAX_DF:
                    out[c] = stats.RunNoise(float(e["sigma"]), int(e["df"]), f"invoke noise {self.id}")
            return out
        return self._cached("estimates", read)

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The A/A's runs (id, created, test, class, metric, n, mean, stddev, group)."""
        return list(self.doc.get("runs") or [])


def as_noise(doc: Any) -> NoiseRecord:
    return doc if isinstance(doc, NoiseRecord) else NoiseRecord(doc)
