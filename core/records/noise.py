"""The noise artifact: a host's run-to-run noise per kind of test (``invoke noise``: a small matrix
run again and again in fresh processes, the first run a warm-up that is stored but not counted, until
the estimate is useful or the budget ends; core.noise says what the estimate is, the rule, and why the
run is the unit of every verdict).

Built by :func:`new_noise` (runtime.execution.noise), read as :class:`NoiseRecord`: its per-class
estimates as core.stats.RunNoise (``rec.estimates``, with ``too_noisy`` and ``why``), everything the
A/A found per class as :class:`NoiseEstimate` (``rec.classes``) and how it stopped (``rec.stopping``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from core import noise, stats
from core.models.noise import Noise
from core.records.base import ArtifactRecord

ARTIFACT = "noise"
#: The largest run-to-run spread (sd of the log of run means) read as an estimate; beyond it an
#: artifact's figure is no estimate of noise (and its square would overflow the pooling).
MAX_SIGMA = 10.0
MAX_DF = 10**6  # degrees of freedom: more runs than any A/A makes

METHOD = (
    "the matrix run again and again, each run a fresh process, the first run (warm-up) stored but not counted; "
    "per kind of test, sigma is the sample standard deviation of the log of each run's mean about the mean of "
    "its configuration's runs (pooled over configurations: sum of squares over degrees of freedom); "
    "stopping rule: " + noise.RULE
)


def fixed_stopping(counted_runs: int) -> dict[str, Any]:
    """The stopping record of an A/A that ran a fixed count of runs (no rule applied)."""
    return {
        "rule": "a fixed count of runs",
        "useful_factor": noise.USEFUL_FACTOR,
        "min_df": noise.MIN_DF,
        "warmup_runs": 0,
        "counted_runs": counted_runs,
        "max_runs": None,
        "budget_s": None,
        "reason": "fixed",
    }


STOP_WORDS = {
    "useful": "every kind of test reached a useful estimate",
    "budget": "its time budget ended",
    "max_runs": "its largest number of runs was reached",
    "no_runs": "no run succeeded",
    "fixed": "it ran a fixed count of runs",
}


def new_noise(
    *,
    host: dict[str, Any],
    matrix: dict[str, Any],
    runs: list[dict[str, Any]],
    conditions: dict[str, Any],
    stopping: dict[str, Any] | None = None,
    created: datetime | None = None,
) -> dict[str, Any]:
    """A ``noise`` artifact from the runs of an A/A (each: id, created, test, class, metric, n, mean,
    stddev, group; ``warmup: true`` on the runs of the warm-up, which are kept but not counted) and
    how it stopped (``stopping``, default: a fixed count): the estimate per class is computed here,
    from the counted runs, with its verdict for a single run (core.noise.assess). Built as its
    model (core.models.noise)."""
    from core import artifacts

    created = created or datetime.now(UTC)
    runs = [{**r, "warmup": bool(r.get("warmup", False))} for r in runs]
    groups: dict[str, dict[str, list[float]]] = {}
    dropped: dict[str, int] = {}
    for r in runs:
        if r["warmup"]:
            dropped[r["class"]] = dropped.get(r["class"], 0) + 1
        else:
            groups.setdefault(r["class"], {}).setdefault(r["group"], []).append(
                r["mean"]
            )
    stopping = (
        dict(stopping)
        if stopping
        else fixed_stopping(
            max(
                (len(means) for g in groups.values() for means in g.values()), default=0
            )
        )
    )
    est = {}
    for c, e in noise.estimates(
        {c: list(g.values()) for c, g in groups.items()}
    ).items():
        if e["why"]:
            e["why"] += (
                f" after {e['runs']} counted runs ({STOP_WORDS.get(stopping['reason'], stopping['reason'])})"
            )
        est[c] = {**e, "warmup_dropped": dropped.get(c, 0)}
    return Noise.model_validate(
        {
            "artifact": ARTIFACT,
            "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
            "id": f"{host['id']}-noise-{created.strftime('%Y%m%dT%H%M%SZ')}",
            "created": created.isoformat(timespec="seconds"),
            "host": host,
            "matrix": matrix,
            "method": METHOD,
            "conditions": conditions,
            "runs": runs,
            "estimates": est,
            "stopping": stopping,
        }
    ).dump()


@dataclass(frozen=True)
class NoiseEstimate:
    """What one A/A found for one kind of test: ``sigma`` (sd of log run means) with ``df`` degrees
    of freedom from ``runs`` counted runs (``warmup_dropped`` more run first and not counted), the
    factor a single run's CI95 spans each way once widened by it (``ci95_factor``), and whether that
    is too wide to rank a single run (``too_noisy``, ``why``)."""

    kind: str
    sigma: float
    df: int
    runs: int
    groups: int
    warmup_dropped: int
    ci95_factor: float
    too_noisy: bool
    why: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class NoiseRecord(ArtifactRecord):
    """A loaded noise artifact: the host (``host_id``), when, and its per-class estimates."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def model(self) -> Noise:
        """The document read through its model (core.models.noise)."""
        return self._cached(
            "model", lambda: Noise.check(self.doc, self.path or self.id)
        )

    @property
    def classes(self) -> dict[str, NoiseEstimate]:
        """Per kind of test (core.noise.noise_class), everything the A/A found: sigma, df, runs
        counted, warm-up runs dropped, the CI95 factor of a single run widened by it, too noisy or not
        and why. A version 1 file (migrated on load) dropped no warm-up and is judged by the current
        rule; a class without degrees of freedom or beyond MAX_SIGMA is left out."""

        def read() -> dict[str, NoiseEstimate]:
            out = {}
            for c, e in (self.doc.get("estimates") or {}).items():
                sigma = e.get("sigma")
                # a log-scale spread beyond MAX_SIGMA (runs a factor e^10 apart) is no estimate of noise
                if not (
                    e.get("df")
                    and sigma is not None
                    and math.isfinite(float(sigma))
                    and 0 <= float(sigma) <= MAX_SIGMA
                    and int(e["df"]) <= MAX_DF
                ):
                    continue
                sigma, df = float(sigma), int(e["df"])
                verdict = (
                    e
                    if "too_noisy" in e and "ci95_factor" in e
                    else noise.assess(sigma, df)
                )
                out[c] = NoiseEstimate(
                    c,
                    sigma,
                    df,
                    int(e.get("runs") or df + 1),
                    int(e.get("groups") or 1),
                    int(e.get("warmup_dropped") or 0),
                    float(verdict["ci95_factor"]),
                    bool(verdict["too_noisy"]),
                    verdict.get("why") or None,
                )
            return out

        return self._cached("classes", read)

    @property
    def estimates(self) -> dict[str, stats.RunNoise]:
        """Per kind of test (core.noise.noise_class): sigma of the log of run means, its degrees of
        freedom, the source (this artifact), and whether it is too noisy to rank a single run (and
        why). A class without degrees of freedom is left out."""
        return self._cached(
            "estimates",
            lambda: {
                c: stats.RunNoise(
                    e.sigma, e.df, f"invoke noise {self.id}", e.too_noisy, e.why
                )
                for c, e in self.classes.items()
            },
        )

    @property
    def too_noisy(self) -> dict[str, str]:
        """The kinds of test this A/A found too noisy to rank a single run, each with why."""
        return {c: e.why or "too noisy" for c, e in self.classes.items() if e.too_noisy}

    @property
    def stopping(self) -> dict[str, Any]:
        """How the A/A stopped (rule, useful_factor, min_df, warmup_runs, counted_runs, max_runs,
        budget_s, reason); a fixed count for a version 1 file."""
        return dict(self.doc.get("stopping") or fixed_stopping(0))

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The A/A's runs (id, created, test, class, metric, n, mean, stddev, group, warmup: not
        counted), the warm-up included."""
        return list(self.doc.get("runs") or [])


def as_noise(doc: Any) -> NoiseRecord:
    return doc if isinstance(doc, NoiseRecord) else NoiseRecord(doc)
