"""Projections: measured baselines per role, an optimization catalogue, composed and checked.

Inputs (all under data/):

* ``optimizations.yaml``: the catalogue. Each optimization has an expected effect (a factor,
  a range, or a factor the roofline model derives for each role), the stage it speeds up, the
  metric its source quotes, its source (a paper, a PR, an artifact, our own model), rules
  saying when it applies (model size, architecture, MoE, recurrent, draft of the same
  vocabulary, CPU or GPU), and where it can be run here, the backend settings that realise
  it (so a measured run can verify the projection).
* ``usage_mix.yaml``: roles, their weights, and for each the measured configuration that is
  its baseline (model, test, metric; optionally matrix and settings). ``data/roles.yaml``
  (the Roles page) picks models for roles from quality and speed; this file states which
  measured configuration each role's projection starts from.
* run artifacts: the baselines, and the measurements that verify projections.

**Composition rule.** A role's metric is made of stages (a tg rate is all decode, a pp rate
all prefill, a chat request's end-to-end time all its stages, measured per request). Each
optimization speeds one stage up (or every stage, ``stage: all``) by its factor. Within a
stage, factors multiply (each acts on the time the others left: independence assumed);
across stages, times add, so the metric's speed-up is Amdahl's ``1 / Σ_s p_s / S_s`` with
``p_s`` the stage's measured share of the baseline time. A rate is multiplied by the
speed-up; a time is divided by it. Ranges compose their low ends and their high ends; the
headline is the composition of the range mid-points.

**Weighted average.** Role weights are shares of the work (generated tokens, or requests for
a time metric). The mix's average rate is tokens over time, ``1 / Σ_i w_i / r_i`` (the
weighted harmonic mean); an average time is ``Σ_i w_i t_i``.

**Baselines** are read through the fact layer (pipelines.facts): a role's baseline is the figure of
its work's group on the host (:data:`BASELINE_RULE`), the same number the Leaderboard shows for it.

**Verification.** A projection names a configuration: the baseline's requested settings with
the settings of every optimization in the scenario. When a group of that configuration exists
(same host, model and test), the projection is VERIFIED or MISSED by its figure: the page shows
the measured value and the error ``projected ÷ measured − 1`` (:data:`VERDICT_RULE`). Where an
optimization alone was measured with the same backend on the same host and model on another test
(an Optimization track's sweep), its measured speed-up (the optimization's group figure ÷ its
baseline group's figure, pipelines.facts.Facts.compare) verifies or misses the projected speed-up
(:data:`RATIO_VERDICT_RULE`); an optimization measured slower than its projected range is held back
from "all applicable". ``invoke project`` writes a ``projection`` artifact with every figure, so
the accuracy of past projections stays on record.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core import artifacts, stats
from core.errors import ConfigError, ModelError
from core.kinds.rate import RateTest
from core.metrics import METRICS
from core.paths import data_dir, relpath
from core.records import projection as projection_record
from core.records.projection import ProjectionRecord
from core.records.quality import QualityRecord
from core.records.run import NEUTRAL_SETTINGS, RunRecord
from core.yamlio import load_yaml, pydantic_error_line
from pipelines import facts as facts_mod
from pipelines import gates as gates_mod
from pipelines.facts import Facts, Figure, Group
from pipelines.gates import Gate
from pipelines.memo import per_set
from pipelines.memory import (
    HYBRID_ARCHITECTURES,
    RECURRENT_ARCHITECTURES,
    ModelShape,
    kv_rows,
)
from pipelines.roofline import bytes_per_token, decode_point
from pipelines.whatif import STAGE_ORDER, compose_stages, stage_profile

STAGES = (*STAGE_ORDER, "all")  # what-if's stages (one owner), plus the whole request
# which stages make up each metric's time (for a chat request; rate tests follow their test)
METRIC_STAGES: dict[str, tuple[str, ...]] = {
    "decode_tps": ("decode", "sample", "detokenise"),
    "tpot_ms": ("decode", "sample", "detokenise"),
    "itl_ms": ("decode", "sample", "detokenise"),
    "ttft_ms": ("http", "tokenise", "prefill", "other"),
    "e2e_ms": (
        "http",
        "tokenise",
        "prefill",
        "decode",
        "sample",
        "detokenise",
        "other",
    ),
    "load_time_s": ("load",),
}
COMPOSITION_RULE = (
    "within a stage, factors multiply; across stages, times add: speed-up = 1 / Σ_s p_s / S_s, "
    "p_s the stage's measured share of the baseline time (Amdahl)"
)
WEIGHTING_RULE = "rates: tokens over time, 1 / Σ w_i / r_i (weighted harmonic mean); times: Σ w_i t_i"

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


# -- the catalogue ---------------------------------------------------------------------------
class Effect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str = Field(
        ...,
        description="The metric the source quotes the effect on (a registered metric).",
    )
    stage: Literal[
        "load",
        "http",
        "tokenise",
        "prefill",
        "decode",
        "sample",
        "detokenise",
        "other",
        "all",
    ] = Field(
        ...,
        description="The stage whose speed the factor multiplies ('all': every stage).",
    )
    factor: float | None = Field(
        None, gt=0, description="Speed-up of the stage (new speed ÷ old; 1.76 = +76%)."
    )
    range: tuple[float, float] | None = Field(
        None, description="Low and high speed-up of the stage."
    )
    roofline: bool = Field(
        False,
        description="Derive the factor per role from the decode roofline: bytes read per "
        "token with the baseline's settings ÷ with the optimization's settings (same efficiency assumed).",
    )

    @model_validator(mode="after")
    def _one(self) -> Effect:
        given = [
            x for x in (self.factor, self.range, self.roofline or None) if x is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of 'factor', 'range' or 'roofline'")
        if self.range is not None:
            lo, hi = self.range
            if not 0 < lo <= hi:
                raise ValueError(
                    f"range must be 0 < low <= high, got {list(self.range)}"
                )
        if self.roofline and self.stage != "decode":
            raise ValueError("a roofline effect acts on the decode stage")
        if self.metric not in METRICS:
            raise ValueError(
                f"unknown metric {self.metric!r} (known: {', '.join(sorted(METRICS))})"
            )
        return self


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["paper", "pr", "artifact", "url", "model"] = Field(
        ..., description="What kind of source."
    )
    ref: str = Field(
        ...,
        min_length=1,
        description="arXiv id, owner/repo#PR, artifact id, URL, or the model's name.",
    )
    url: str | None = Field(None, description="Where to read it.")
    note: str = Field(
        "", description="What the source measured and under which conditions."
    )


class Applicability(BaseModel):
    """Rules over model and host attributes; every rule given must hold."""

    model_config = ConfigDict(extra="forbid")
    min_model_bytes: int | None = Field(
        None, ge=0, description="Model file at least this large."
    )
    max_model_bytes: int | None = Field(
        None, ge=0, description="Model file at most this large."
    )
    architectures: list[str] | None = Field(
        None, description="Only these GGUF architectures."
    )
    exclude_architectures: list[str] = Field(
        default_factory=list, description="Not these architectures."
    )
    recurrent: bool | None = Field(
        None,
        description="false: not for recurrent/SSM or hybrid models; true: only for them.",
    )
    moe: bool | None = Field(
        None,
        description="true: only mixture-of-experts models; false: only dense ones.",
    )
    sliding_window: bool | None = Field(
        None, description="true: only models with sliding-window layers."
    )
    needs_draft_same_vocab: bool = Field(
        False, description="Needs a smaller measured model with the same vocabulary."
    )
    device: Literal["cpu", "gpu"] | None = Field(
        None, description="Only runs on the CPU, or only with layers on a GPU."
    )
    test_kinds: list[str] | None = Field(
        None, description="Only roles measured by these test kinds (e.g. chat)."
    )
    min_depth: int | None = Field(
        None,
        ge=0,
        description="Only roles whose tokens see at least this much context.",
    )


class Optimization(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., description="Short id (lowercase, digits, hyphens).")
    name: str = Field(..., min_length=1)
    status: str = Field(
        "", description="Where it stands (available, planned, research, ...)."
    )
    description: str = ""
    effect: Effect
    source: Source
    applies_when: Applicability = Field(default_factory=Applicability)
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Backend settings that realise it (for verification); empty = not runnable here.",
    )
    gates: list[Gate] = Field(
        default_factory=list,
        description="Go/no-go criteria checked against measurements (pipelines.gates).",
    )

    @model_validator(mode="after")
    def _id(self) -> Optimization:
        if not _SLUG.match(self.id):
            raise ValueError(
                f"id {self.id!r} must be lowercase letters, digits and hyphens"
            )
        if self.effect.roofline and not self.settings:
            raise ValueError(
                "a roofline effect needs 'settings' (the configuration whose bytes per token it compares)"
            )
        ids = [g.id for g in self.gates]
        dup = next((g for g in ids if ids.count(g) > 1), None)
        if dup:
            raise ValueError(f"gate id {dup!r} used twice")
        if self.gates and not self.settings:
            raise ValueError(
                "gates need 'settings': the configuration whose measurements they check"
            )
        return self


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    optimizations: list[Optimization] = Field(..., min_length=1)


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str = Field(
        ...,
        min_length=1,
        description="Role name (as in data/roles.yaml where it is defined).",
    )
    label: str = ""
    weight: float = Field(
        ..., gt=0, description="Share of the work (normalised over the roles)."
    )
    model: str = Field(..., description="Model name of the baseline run.")
    test: str = Field(..., description="Test name of the baseline run.")
    metric: str = Field(..., description="The metric projected (a registered metric).")
    matrix: str | None = Field(
        None,
        description="A hint: between equal configurations, the one measured in this matrix "
        "(never a filter: a measured configuration of the role's work counts whatever matrix ran it).",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Only configurations whose requested settings have these values.",
    )

    @model_validator(mode="after")
    def _metric(self) -> Role:
        if self.metric not in METRICS:
            raise ValueError(
                f"unknown metric {self.metric!r} (known: {', '.join(sorted(METRICS))})"
            )
        return self


class UsageMix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    name: str = Field(..., min_length=1)
    description: str = ""
    roles: list[Role] = Field(..., min_length=1)
    scenarios: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Named sets of optimization ids to project besides each one alone and all together.",
    )


def catalogue_path() -> Path:
    return data_dir() / "optimizations.yaml"


def usage_mix_path() -> Path:
    return data_dir() / "usage_mix.yaml"


def _validate(cls: type[BaseModel], path: Path) -> Any:
    raw = load_yaml(path)
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None


def load_catalogue(path: Path | None = None) -> Catalogue:
    path = path or catalogue_path()
    cat = _validate(Catalogue, path)
    ids = [o.id for o in cat.optimizations]
    for i, oid in enumerate(ids):
        if ids.index(oid) != i:
            raise ConfigError(
                f"optimization id {oid!r} used twice",
                file=relpath(path),
                field=f"optimizations.{i}.id",
            )
    return cat


def load_usage_mix(
    path: Path | None = None, catalogue: Catalogue | None = None
) -> UsageMix:
    path = path or usage_mix_path()
    mix = _validate(UsageMix, path)
    names = [r.role for r in mix.roles]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise ConfigError(
                f"role {n!r} listed twice", file=relpath(path), field=f"roles.{i}.role"
            )
    units = {
        (METRICS[r.metric].unit, METRICS[r.metric].higher_is_better) for r in mix.roles
    }
    if len(units) > 1:
        raise ConfigError(
            "every role's metric must share one unit and direction for a weighted average "
            f"(got {sorted(u for u, _ in units)})",
            file=relpath(path),
            field="roles",
        )
    if catalogue is not None:
        known = {o.id for o in catalogue.optimizations}
        for name, ids in mix.scenarios.items():
            for oid in ids:
                if oid not in known:
                    import difflib

                    close = difflib.get_close_matches(oid, sorted(known), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ConfigError(
                        f"unknown optimization {oid!r}{hint}",
                        file=relpath(path),
                        field=f"scenarios.{name}",
                    )
    return mix


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- attributes and applicability ----------------------------------------------------------------
@per_set
def _by_vocab(all_runs: list[RunRecord]) -> dict[str, list[tuple[str, Any]]]:
    """Vocabulary digest -> (model name, model bytes) of every run with it: the draft models a run's
    model could use, found without a scan of every run per baseline."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for d in all_runs:
        v = d.gguf.get("vocab_sha256")
        if v:
            out.setdefault(v, []).append((d.model_name, d.model_size_bytes))
    return out


def run_attributes(doc: RunRecord, all_runs: list[RunRecord]) -> dict[str, Any]:
    """Model and host attributes of a run that applicability rules test."""
    rec = doc
    g = rec.gguf
    eff = rec.reported
    arch = g.get("architecture") or ""
    vocab = g.get("vocab_sha256")
    drafts = sorted(
        {
            name
            for name, size in (_by_vocab(all_runs).get(vocab, []) if vocab else [])
            if name != rec.model_name and size < rec.model_size_bytes
        }
    )
    point = decode_point(rec)
    depth = None
    if isinstance(rec.spec, RateTest):
        depth = rec.spec.n_depth + rec.spec.n_prompt
    elif point:
        depth = point["depths"].min
    return {
        "model_bytes": int(rec.model_size_bytes),
        "architecture": arch,
        "recurrent": arch in RECURRENT_ARCHITECTURES or arch in HYBRID_ARCHITECTURES,
        "moe": bool(g.get("expert_count")),
        "sliding_window": bool(g.get("sliding_window")),
        "drafts": drafts,
        "device": "gpu" if (eff.get("n_gpu_layers") or 0) > 0 else "cpu",
        "host_gpus": [x.get("name") for x in rec.gpus],
        "test_kind": rec.test_kind,
        "depth": depth,
    }


def _gb(n: int) -> str:
    return f"{n / 1e9:.3g} GB"


def applicability(rules: Applicability, attrs: dict[str, Any]) -> list[str]:
    """Why the optimization does not apply (empty list: it applies)."""
    why = []
    if (
        rules.min_model_bytes is not None
        and attrs["model_bytes"] < rules.min_model_bytes
    ):
        why.append(
            f"model is {_gb(attrs['model_bytes'])}, needs at least {_gb(rules.min_model_bytes)}"
        )
    if (
        rules.max_model_bytes is not None
        and attrs["model_bytes"] > rules.max_model_bytes
    ):
        why.append(
            f"model is {_gb(attrs['model_bytes'])}, at most {_gb(rules.max_model_bytes)} allowed"
        )
    if (
        rules.architectures is not None
        and attrs["architecture"] not in rules.architectures
    ):
        why.append(
            f"architecture {attrs['architecture']} is not one of {', '.join(rules.architectures)}"
        )
    if attrs["architecture"] in rules.exclude_architectures:
        why.append(f"not for architecture {attrs['architecture']}")
    if rules.recurrent is False and attrs["recurrent"]:
        why.append(
            f"{attrs['architecture']} is recurrent/SSM (state cannot be rolled back)"
        )
    if rules.recurrent is True and not attrs["recurrent"]:
        why.append("only for recurrent/SSM models")
    if rules.moe is True and not attrs["moe"]:
        why.append("only for mixture-of-experts models; this one is dense")
    if rules.moe is False and attrs["moe"]:
        why.append("only for dense models")
    if rules.sliding_window is True and not attrs["sliding_window"]:
        why.append("only for models with sliding-window layers")
    if rules.sliding_window is False and attrs["sliding_window"]:
        why.append("not for models with sliding-window layers")
    if rules.needs_draft_same_vocab and not attrs["drafts"]:
        why.append(
            "no smaller measured model shares its vocabulary (a draft is needed)"
        )
    if rules.device is not None and attrs["device"] != rules.device:
        why.append(
            f"{rules.device.upper()} only; this role runs on the {attrs['device'].upper()}"
        )
    if rules.test_kinds is not None and attrs["test_kind"] not in rules.test_kinds:
        why.append(f"only for {', '.join(rules.test_kinds)} workloads")
    if rules.min_depth is not None and (attrs["depth"] or 0) < rules.min_depth:
        why.append(f"context depth {attrs['depth'] or 0} < {rules.min_depth}")
    return why


# -- composition ----------------------------------------------------------------------------------
def metric_stages(role_metric: str, doc: RunRecord) -> tuple[str, ...]:
    t = doc.spec
    if isinstance(t, RateTest) and role_metric == "tokens_per_second":
        return tuple(
            s for s, on in (("prefill", t.n_prompt), ("decode", t.n_gen)) if on
        )
    return METRIC_STAGES.get(role_metric, ("decode",))


def role_shares(role_metric: str, doc: RunRecord) -> tuple[dict[str, float], str]:
    """Each stage's share of the metric's time in the baseline run, and where it came from."""
    stages = metric_stages(role_metric, doc)
    prof = stage_profile(doc) or {}
    vals = {s: prof[s] for s in stages if s in prof}
    total = sum(vals.values())
    if total > 0:
        return {s: v / total for s, v in vals.items()}, "measured stage timings"
    if len(stages) == 1:
        return {stages[0]: 1.0}, "the metric is one stage"
    main = "decode" if "decode" in stages else stages[0]
    return {main: 1.0}, f"no stage timings in the artifact: all time assumed in {main}"


def compose(shares: dict[str, float], effects: list[tuple[str, float]]) -> float:
    """Speed-up of a metric whose time splits as ``shares`` under ``(stage, factor)`` effects."""
    per_stage: dict[str, float] = {}
    for stage, f in effects:
        targets = list(shares) if stage == "all" else [stage]
        for s in targets:
            per_stage[s] = per_stage.get(s, 1.0) * f
    return compose_stages(shares, per_stage)


def weighted_interval(
    values: list[tuple[float, float, float | None, float | None]],
    higher_is_better: bool,
) -> tuple[float | None, float | None]:
    """CI95 of :func:`weighted_average` from the inputs' own CI95s: (weight, value, low, high)
    tuples, first-order (delta method) propagation with independent inputs, each input's
    half-width taken as the larger side of its interval and the results added in quadrature.
    (None, None) when any input has no interval (a value without one cannot be bounded)."""
    vals = [v for v in values if v[1] is not None]
    if not vals or any(lo is None or hi is None for _, _, lo, hi in vals):
        return None, None
    mean = weighted_average([(w, v) for w, v, _, _ in vals], higher_is_better)
    if mean is None:
        return None, None
    tw = sum(w for w, *_ in vals)
    var = 0.0
    for w, v, lo, hi in vals:
        half = max(v - lo, hi - v, 0.0)
        # d mean / d v_i: rates (harmonic) H^2 w_i / (W v_i^2); times (arithmetic) w_i / W
        grad = (mean * mean * w / (tw * v * v)) if higher_is_better else w / tw
        var += (grad * half) ** 2
    half = var**0.5
    if mean <= 0:
        return None, None
    rel = (
        half / mean
    )  # a rate or a time stays positive: the half-width on the log scale (core.stats.mean_interval)
    return mean * math.exp(-rel), mean * math.exp(rel)


#: The largest error (projected ÷ measured − 1, either sign) a VERIFIED projection may have: a
#: range wide enough to hold "no effect" and "twice as fast" holds almost any measurement, and a
#: projection that was 47% off is not verified by it.
VERIFY_TOLERANCE = 0.10
VERDICT_RULE = (
    f"VERIFIED when the measured value lies within the projected range and the projection is within "
    f"±{VERIFY_TOLERANCE:.0%} of it (error = projected ÷ measured − 1); otherwise MISSED, with the signed error. "
    "Computed from the figures whenever a page is built, never read from a stored word."
)
RATIO_VERDICT_RULE = (
    f"An optimization measured on this host, model and backend on another test (an Optimization "
    f"track's sweep) verifies its projected speed-up by its measured one: the optimization's figure ÷ "
    f"its baseline's figure (the run as the unit, CI95 on the log scale). VERIFIED when that ratio's "
    f"CI95 (its value where it has none) overlaps the projected speed-up range and the projection's "
    f"mid-point is within ±{VERIFY_TOLERANCE:.0%} of it; otherwise MISSED, below or above the range. "
    "Where several measured points realise the optimization, the most favourable one decides (the "
    'page names it). An optimization MISSED below its range is held back from "all applicable".'
)


def verdict(low: float, high: float, measured: float, mid: float | None = None) -> str:
    """VERIFIED when the measured value lies within the projection's stated range and the
    projection (``mid``) is within ``VERIFY_TOLERANCE`` of it; MISSED otherwise."""
    if not measured or not low <= measured <= high:
        return "MISSED"
    if mid is not None and abs(mid / measured - 1.0) > VERIFY_TOLERANCE:
        return "MISSED"
    return "VERIFIED"


def ratio_verdict(
    low: float,
    mid: float,
    high: float,
    ratio: float | None,
    ci_low: float | None = None,
    ci_high: float | None = None,
) -> tuple[str, str]:
    """(VERIFIED | MISSED, where: "inside" | "below" | "above" | "off") of a measured speed-up ``ratio``
    (CI95 ``ci_low``..``ci_high``, or none) against a projected speed-up range (:data:`RATIO_VERDICT_RULE`).
    "below": measured slower than the range's low end; "off": it overlaps the range but the projection's
    mid-point is more than the tolerance away."""
    if not ratio:
        return "MISSED", "below"
    lo = ratio if ci_low is None else ci_low
    hi = ratio if ci_high is None else ci_high
    if hi < low:
        return "MISSED", "below"
    if lo > high:
        return "MISSED", "above"
    if abs(mid / ratio - 1.0) > VERIFY_TOLERANCE:
        return "MISSED", "off"
    return "VERIFIED", "inside"


def verification_verdict(low: float, high: float, mid: float, v: dict[str, Any]) -> str:
    """The verdict of a verification record: a measured value of the projected configuration on the role's
    own test (:func:`verdict`), or a measured speed-up of the optimization on another test (:func:`ratio_verdict`)."""
    if v.get("basis") == "speed-up":
        lo_sp, mid_sp, hi_sp = v["speedup_range"]
        return ratio_verdict(
            lo_sp,
            mid_sp,
            hi_sp,
            v["speedup"],
            v.get("speedup_ci95_low"),
            v.get("speedup_ci95_high"),
        )[0]
    return verdict(low, high, v["value"], mid)


def weighted_average(
    values: list[tuple[float, float]], higher_is_better: bool
) -> float | None:
    """(weight, value) pairs: the harmonic mean for rates, the arithmetic mean for times."""
    vals = [(w, v) for w, v in values if v is not None]
    if not vals:
        return None
    tw = sum(w for w, _ in vals)
    if higher_is_better:
        if any(v <= 0 for _, v in vals):
            return None
        return tw / sum(w / v for w, v in vals)
    return sum(w * v for w, v in vals) / tw


# -- projection -------------------------------------------------------------------------------------
@dataclass
class OptimizationOnRole:
    opt: Optimization
    applies: bool
    reasons: list[str]
    factor: tuple[float, float, float] | None  # low, mid, high speed-up of its stage
    in_metric: bool  # its stage is part of the metric's time


@dataclass
class Projection:
    role: Role
    scenario: str
    optimizations: list[str]
    baseline: float
    low: float
    mid: float
    high: float
    speedup: tuple[float, float, float]
    target_settings: dict[str, Any] | None  # None: not runnable here
    verification: dict[str, Any] | None = (
        None  # plain data (the projection record stores it)
    )
    no_effect: bool = False  # every optimization acts on a stage outside the metric
    measured: Figure | None = (
        None  # the verification's figure (the projected configuration on the role's test)
    )
    measured_speedup: MeasuredSpeedup | None = (
        None  # the optimization measured on another test (no verification above)
    )

    @property
    def status(self) -> str:
        """PROJECTED until its configuration (or, for one optimization, the optimization on another test)
        is measured; then VERIFIED or MISSED (:func:`verification_verdict`)."""
        if not self.verification:
            return "PROJECTED"
        return verification_verdict(self.low, self.high, self.mid, self.verification)

    @property
    def missed_below(self) -> bool:
        """MISSED because the measurement is slower than the projected range's low end, by more than the
        verification tolerance (a measurement within ±VERIFY_TOLERANCE of a range without width is no reason
        to hold an optimization back)."""
        if self.status != "MISSED" or not self.verification:
            return False
        v = self.verification
        if v.get("basis") == "speed-up":
            lo_sp, mid_sp, hi_sp = v["speedup_range"]
            below = (
                ratio_verdict(
                    lo_sp,
                    mid_sp,
                    hi_sp,
                    v["speedup"],
                    v.get("speedup_ci95_low"),
                    v.get("speedup_ci95_high"),
                )[1]
                == "below"
            )
            return below and v["speedup"] < lo_sp * (1.0 - VERIFY_TOLERANCE)
        hib = METRICS[self.role.metric].higher_is_better
        return (
            v["value"] < self.low * (1.0 - VERIFY_TOLERANCE)
            if hib
            else v["value"] > self.high * (1.0 + VERIFY_TOLERANCE)
        )


@dataclass
class MeasuredSpeedup:
    """An optimization measured on its own with the baseline's backend, host and model (any test): its
    group's figure ÷ its baseline group's figure (pipelines.facts.Facts.compare), the most favourable of
    ``points`` measured points."""

    opt_id: str
    metric: str
    ratio: float  # speed-up: new speed ÷ old (a time metric's ratio inverted)
    ci95_low: float | None
    ci95_high: float | None
    comparison: (
        stats.Comparison
    )  # candidate ÷ baseline on the metric, as Facts.compare gives it
    baseline: Figure
    candidate: Figure
    baseline_group: Group
    candidate_group: Group
    points: int  # measured points that realise the optimization (the best of them is this one)
    differs: dict[
        str, Any
    ]  # the candidate's requested settings that differ from its baseline's

    @property
    def test(self) -> str:
        return self.candidate_group.test

    @property
    def sweep(self) -> str | None:
        return self.candidate_group.newest.sweep

    def describe(self) -> str:
        """The measured point in words: test, sweep and the settings that set it apart from its baseline."""
        where = f"{self.test}" + (f" ({self.sweep} sweep)" if self.sweep else "")
        diff = ", ".join(f"{k}={v}" for k, v in sorted(self.differs.items()))
        return where + (f": {diff}" if diff else "")


@dataclass
class Baseline:
    """A role's baseline on one host: the representative group of its work there and its figure."""

    group: Group
    figure: Figure
    candidates: int  # groups of the role's work on the host that could have been the baseline (this one among them)
    verifications: list[Group] = field(
        default_factory=list
    )  # groups left out: they realise an optimization


@dataclass
class RoleResult:
    role: Role
    baseline_doc: (
        RunRecord | None
    )  # the baseline group's newest run (its facts: model, stages, test)
    problem: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    shares_source: str = ""
    opts: list[OptimizationOnRole] = field(default_factory=list)
    projections: dict[str, Projection] = field(default_factory=dict)
    base: Baseline | None = None
    missing_work: str = ""  # the role's work key where the fact layer has no group of it on the host ("" else)
    not_measured: bool = (
        False  # the fact layer has no group of the role's work on the host
    )

    @property
    def baseline_figure(self) -> Figure | None:
        return self.base.figure if self.base is not None else None

    @property
    def baseline(self) -> float | None:
        f = self.baseline_figure
        return f.mean if f is not None else None

    @property
    def baseline_ci95(self) -> tuple[float | None, float | None]:
        f = self.baseline_figure
        return (f.ci95_low, f.ci95_high) if f is not None else (None, None)


@dataclass
class ProjectionSet:
    host_id: str
    mix: UsageMix
    catalogue: Catalogue
    roles: list[RoleResult]
    scenarios: list[tuple[str, list[str]]]  # (name, optimization ids)
    inputs: list[RunRecord]  # run artifacts used (baselines, verifications)
    # applicable optimizations left out of "all applicable": (optimization id, why in a word): the gates'
    # decision where their go/no-go gates on this host do not say GO, "MISSED" where a measurement on this
    # host is slower than the projected range (``missed`` says which and by how much)
    held_back: list[tuple[str, str]] = field(default_factory=list)
    missed: dict[str, str] = field(
        default_factory=dict
    )  # optimization id -> what was measured, in words

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.mix.roles[0].metric].higher_is_better

    def last_updated(self) -> str | None:
        return max((d.created for d in self.inputs), default=None)

    def weighted(self) -> list[dict[str, Any]]:
        """Per scenario: the usage-weighted current, projected (low, mid, high) and measured values, the roles
        each covers (``roles``: those with a baseline; ``measured_roles``: those the measured value rests on)
        and whether it is partial (``partial``: it does not cover every role of the mix). A measured value
        needs every covered role measured (a projection checked on the role's own test, or the role untouched
        by the scenario); a speed-up measured on another test is no measurement of the role."""
        hib = self.higher_is_better
        out = []
        covered = [r for r in self.roles if r.baseline is not None]
        names = [r.role.role for r in covered]
        partial = len(covered) < len(self.roles)
        cur = [(r.role.weight, r.baseline) for r in covered]
        cur_ci = weighted_interval(
            [(r.role.weight, r.baseline, *r.baseline_ci95) for r in covered], hib
        )
        common = {
            "roles": names,
            "all_roles": [r.role.role for r in self.roles],
            "partial": partial,
            "complete": not partial,
        }
        out.append(
            {
                "scenario": "current",
                "ids": [],
                "current": weighted_average(cur, hib),
                "low": None,
                "mid": None,
                "high": None,
                "measured": None,
                "current_ci95": cur_ci,
                "measured_ci95": (None, None),
                "measured_roles": [],
                **common,
            }
        )
        for name, ids in self.scenarios:
            rows: dict[str, list[tuple[float, float]]] = {
                "low": [],
                "mid": [],
                "high": [],
                "measured": [],
            }
            measured_ci: list[tuple[float, float, float | None, float | None]] = []
            for r in covered:
                p = r.projections.get(name)
                w = r.role.weight
                for k in ("low", "mid", "high"):
                    rows[k].append((w, getattr(p, k) if p else r.baseline))
                if p is None:
                    rows["measured"].append((w, r.baseline))
                    measured_ci.append((w, r.baseline, *r.baseline_ci95))
                elif p.verification and p.verification.get("basis") != "speed-up":
                    v = p.verification
                    rows["measured"].append((w, v["value"]))
                    measured_ci.append(
                        (w, v["value"], v.get("ci95_low"), v.get("ci95_high"))
                    )
            full = len(rows["measured"]) == len(cur) and bool(cur)
            measured = weighted_average(rows["measured"], hib) if full else None
            out.append(
                {
                    "scenario": name,
                    "ids": ids,
                    "current": weighted_average(cur, hib),
                    "low": weighted_average(rows["low"], hib),
                    "mid": weighted_average(rows["mid"], hib),
                    "high": weighted_average(rows["high"], hib),
                    "measured": measured,
                    "current_ci95": cur_ci,
                    "measured_ci95": weighted_interval(measured_ci, hib)
                    if full
                    else (None, None),
                    "measured_roles": names if full else [],
                    **common,
                }
            )
        return out


def _effect_factor(
    opt: Optimization, doc: RunRecord
) -> tuple[float, float, float] | None:
    e = opt.effect
    if e.factor is not None:
        return (e.factor, e.factor, e.factor)
    if e.range is not None:
        lo, hi = e.range
        return (lo, (lo + hi) / 2, hi)
    # roofline: bytes per token, baseline settings vs the effect's settings
    point = decode_point(doc)
    if point is None:
        return None
    rec = doc
    eff = rec.reported
    req = rec.requested
    try:
        shape = ModelShape.from_facts(rec.gguf, rec.model_name)
        kv_rows(
            shape,
            eff.get("type_k") or req.get("type_k") or "f16",
            eff.get("type_v") or req.get("type_v") or "f16",
        )
    except (
        ModelError
    ):  # facts missing, or a cache type the planner cannot size: no roofline effect
        return None
    flash = rec.flash_attn_on
    base_kw = {
        "type_k": eff.get("type_k") or req.get("type_k") or "f16",
        "type_v": eff.get("type_v") or req.get("type_v") or "f16",
        "flash_attn": flash,
        "expert_used": eff.get("n_expert_used"),
    }
    new_kw = dict(base_kw)
    for k, v in opt.settings.items():
        if k in ("type_k", "type_v"):
            new_kw[k] = v
        elif k == "flash_attn":
            new_kw["flash_attn"] = v != "off"
    b0 = bytes_per_token(shape, point["depths"], **base_kw)["total"]
    b1 = bytes_per_token(shape, point["depths"], **new_kw)["total"]
    f = b0 / b1
    return (f, f, f)


BASELINE_RULE = (
    "a role's baseline is its work's figure on the host, read from the fact layer: among the host's "
    "configurations of the role's model and test (with the role's settings where it names them; the "
    "matrix only breaks a tie, it never hides a measured configuration), leaving out those whose "
    "requested settings realise an optimization of the catalogue beyond what the role's own settings pin "
    "(they verify projections, never a baseline), the representative one as the Leaderboard picks it (the "
    "best figure among ordinary builds); its value and CI95 are that configuration's figure (the run as "
    "the unit), the Leaderboard's number for it"
)


def realises(
    requested: dict[str, Any], opt_settings: dict[str, Any], pinned: dict[str, Any]
) -> bool:
    """Whether a run's requested settings carry an optimization (every one of its settings, not
    all of them pinned by the role itself)."""
    if not opt_settings:
        return False
    if all(k in pinned and pinned[k] == v for k, v in opt_settings.items()):
        return False
    return all(requested.get(k) == v for k, v in opt_settings.items())


def explicit(settings: dict[str, Any]) -> dict[str, Any]:
    """Requested settings without those left to the default (null) or at a later setting's neutral value:
    two configurations equal here are the same configuration (core.records.run.RunRecord.requested_explicit)."""
    return {
        k: v
        for k, v in settings.items()
        if v is not None and not (k in NEUTRAL_SETTINGS and v == NEUTRAL_SETTINGS[k])
    }


def _facts(runs: list[RunRecord] | Facts) -> Facts:
    return runs if isinstance(runs, Facts) else facts_mod.of(runs)


def work_groups(fx: Facts, role: Role, host_id: str | None = None) -> list[Group]:
    """The groups of a role's work (model and test, the role's settings where it names them) that measure
    its metric, on one host or every host: the matrix never filters."""
    out = []
    for g in fx.groups_of(host_id, test=role.test):
        if not any(
            r.model_name == role.model for r in g.runs
        ):  # a file renamed since still is the same work
            continue
        if any(
            g.newest.requested.get(k) != v for k, v in (role.settings or {}).items()
        ):
            continue
        if g.figure(role.metric) is None:
            continue
        out.append(g)
    return out


def select_baseline(
    role: Role,
    runs: list[RunRecord] | Facts,
    host_id: str,
    catalogue: Catalogue | None = None,
) -> tuple[Baseline | None, str | None]:
    """The role's baseline on ``host_id`` by :data:`BASELINE_RULE`, or None and why."""
    fx = _facts(runs)
    found = work_groups(fx, role, host_id)
    verifications: list[Group] = []
    if catalogue is not None:
        opts = [o for o in catalogue.optimizations if o.settings]
        verifications = [
            g
            for g in found
            if any(
                realises(g.newest.requested, o.settings, role.settings or {})
                for o in opts
            )
        ]
        found = [g for g in found if g not in verifications]
    if not found:
        if verifications:
            which = sorted(
                {
                    o.id
                    for g in verifications
                    for o in catalogue.optimizations
                    if realises(g.newest.requested, o.settings, role.settings or {})
                }
            )
            return None, (
                f"every measured configuration of {role.model} · {role.test} on this host realises an "
                f"optimization ({', '.join(which)}): those verify projections, never a baseline; measure it "
                "without them (`invoke bench`)"
            )
        return (
            None,
            f"no measured run of {role.model} · {role.test} with {role.metric} on this host",
        )
    rep = fx.representative(found, role.metric)
    assert rep is not None  # every group in ``found`` has a figure
    if role.matrix:  # the matrix breaks a tie between equal figures, nothing more
        top = rep.figure(role.metric).mean
        tied = [
            g
            for g in found
            if g.variant == rep.variant and g.figure(role.metric).mean == top
        ]
        rep = next(
            (g for g in tied if any(r.matrix_name == role.matrix for r in g.runs)), rep
        )
    if (
        rep.newest.is_endpoint
    ):  # projections read the model's GGUF facts (architecture, bytes per token)
        return (
            None,
            f"{role.model} is an endpoint model (no local file, no GGUF facts): not projected",
        )
    return Baseline(rep, rep.figure(role.metric), len(found), verifications), None


def find_baseline(
    role: Role, runs: list[RunRecord], host_id: str, catalogue: Catalogue | None = None
) -> tuple[RunRecord | None, str | None]:
    """The newest run of the role's baseline group (:func:`select_baseline`), or None and why."""
    b, problem = select_baseline(role, runs, host_id, catalogue)
    return (b.group.newest if b is not None else None), problem


def find_verification(
    base: Group, target: dict[str, Any], metric: str, runs: list[RunRecord] | Facts
) -> tuple[dict[str, Any], Figure] | None:
    """The group of the projected configuration and its figure: the baseline's work (model file, test,
    backend class) on the same host and backend, requested settings equal to ``target``. Where several
    groups are that configuration (builds), the one with most runs, then the newest."""
    fx = _facts(runs)
    best: tuple[Group, Figure] | None = None
    for g in fx.groups_of(base.host_id):
        if (
            g.key == base.key
            or g.work_key != base.work_key
            or g.backend != base.backend
        ):
            continue
        if g.requested != explicit(target):
            continue
        f = g.figure(metric)
        if f is None:
            continue
        if best is None or (f.runs, g.newest.created, g.key) > (
            best[1].runs,
            best[0].newest.created,
            best[0].key,
        ):
            best = (g, f)
    if best is None:
        return None
    g, f = best
    return (
        {
            "run_id": f.newest_id,
            "created": g.newest.created,
            "value": f.mean,
            "ci95_low": f.ci95_low,
            "ci95_high": f.ci95_high,
            "n": f.n,
            "runs": f.runs,
            "run_ids": list(f.run_ids),
            "group": g.key,
        },
        f,
    )


#: Rate metrics a speed-up may be measured on, in order of preference after the effect's and the role's own.
SPEED_METRICS = ("tokens_per_second", "decode_tps", "generation_tps")


def _speed_metric(g: Group, base: Group, preferred: list[str]) -> str | None:
    for m in list(
        dict.fromkeys(
            preferred + list(SPEED_METRICS) + ([g.headline.name] if g.headline else [])
        )
    ):
        if m in METRICS and g.figure(m) is not None and base.figure(m) is not None:
            return m
    return None


def measured_speedups(
    opt: Optimization, base: Group, role_metric: str, runs: list[RunRecord] | Facts
) -> list[MeasuredSpeedup]:
    """Every measured point of ``opt`` with the baseline's backend on its host and model (any test): a group
    that realises the optimization's settings, against its baseline group (the sweep's ``matrix.baseline_key``,
    else the group of the same work, host and backend whose requested settings differ only in the
    optimization's), most favourable first."""
    if not opt.settings:
        return []
    fx = _facts(runs)
    by_key = fx.newest_ok_by_key
    mine = [
        g
        for g in fx.groups_of(base.host_id)
        if g.newest.model_identity == base.newest.model_identity
        and g.backend == base.backend
    ]
    out: list[MeasuredSpeedup] = []
    for g in mine:
        req = g.newest.requested
        if not realises(req, opt.settings, {}):
            continue
        bg = None
        bkey = g.newest.baseline_key
        if bkey and bkey != g.newest.key and bkey in by_key:
            bg = fx.group_of(by_key[bkey])
        if bg is None:
            same = [
                h
                for h in mine
                if h.work_key == g.work_key
                and h.key != g.key
                and not realises(h.newest.requested, opt.settings, {})
                and {k: v for k, v in h.requested.items() if k not in opt.settings}
                == {k: v for k, v in g.requested.items() if k not in opt.settings}
            ]
            bg = (
                max(same, key=lambda h: (len(h.runs), h.newest.created, h.key))
                if same
                else None
            )
        if bg is None:
            continue
        metric = _speed_metric(g, bg, [opt.effect.metric, role_metric])
        if metric is None:
            continue
        bf, cf = bg.figure(metric), g.figure(metric)
        c = fx.compare(bf, cf)
        if c.ratio is None:
            continue
        hib = METRICS[metric].higher_is_better
        ratio = c.ratio if hib else 1.0 / c.ratio
        lo, hi = (
            (c.ci95_low, c.ci95_high)
            if hib
            else (
                1.0 / c.ci95_high if c.ci95_high else None,
                1.0 / c.ci95_low if c.ci95_low else None,
            )
        )
        breq = bg.requested
        differs = {k: v for k, v in g.requested.items() if breq.get(k) != v}
        out.append(
            MeasuredSpeedup(opt.id, metric, ratio, lo, hi, c, bf, cf, bg, g, 0, differs)
        )
    out.sort(key=lambda m: (-m.ratio, -m.candidate.runs, m.candidate_group.key))
    for m in out:
        m.points = len(out)
    return out


def _speedup_verification(
    p: Projection, m: MeasuredSpeedup, hib: bool
) -> dict[str, Any]:
    """A measured speed-up as a projection record's verification: the value it implies on the role's metric
    (the baseline times the measured speed-up), and the speed-up itself with the range it is judged by."""
    implied = p.baseline * m.ratio if hib else p.baseline / m.ratio
    lo_sp, mid_sp, hi_sp = p.speedup
    return {
        "basis": "speed-up",
        "run_id": m.candidate.newest_id,
        "created": m.candidate_group.newest.created,
        "value": implied,
        "error": mid_sp / m.ratio - 1.0,
        "inside_range": lo_sp <= m.ratio <= hi_sp,
        "within_ci95": (m.ci95_low <= mid_sp <= m.ci95_high)
        if m.ci95_low is not None and m.ci95_high is not None
        else None,
        "n": None,
        "ci95_low": None,
        "ci95_high": None,
        "speedup": m.ratio,
        "speedup_ci95_low": m.ci95_low,
        "speedup_ci95_high": m.ci95_high,
        "speedup_range": [lo_sp, mid_sp, hi_sp],
        "speedup_metric": m.metric,
        "test": m.test,
        "baseline_run_id": m.baseline.newest_id,
        "point": m.describe(),
        "points": m.points,
    }


def project(
    runs: list[RunRecord],
    catalogue: Catalogue,
    mix: UsageMix,
    host_id: str,
    quality_docs: list[QualityRecord] | None = None,
) -> ProjectionSet:
    """Project every role of the mix on one host.

    Each applicable optimization is projected on its own. The "all applicable" scenario combines
    those that declare no go/no-go gates and those whose gates on this host say GO
    (pipelines.gates, from ``runs`` and ``quality_docs``): an optimization still UNDECIDED, NO-GO or
    NOT MEASURED is held back from the combination (seed 000: "until its GO"), and so is one measured
    on this host slower than its projected range (MISSED below it); the page says which and why.
    Without ``quality_docs`` a quality gate is NOT MEASURED: held back."""
    fx = facts_mod.of(runs)
    results: list[RoleResult] = []
    inputs: dict[str, RunRecord] = {}
    applicable_any: list[str] = []
    for role in mix.roles:
        b, problem = select_baseline(role, fx, host_id, catalogue)
        rr = RoleResult(
            role, b.group.newest if b is not None else None, problem, base=b
        )
        results.append(rr)
        if b is None:
            if not work_groups(fx, role, host_id):
                rr.not_measured = True
                rr.missing_work = next(
                    (
                        g.work_key
                        for g in sorted(work_groups(fx, role), key=lambda g: g.key)
                    ),
                    "",
                )
            continue
        doc = b.group.newest
        for r in b.group.runs:
            inputs[r.id] = r
        rr.attrs = run_attributes(doc, runs)
        rr.shares, rr.shares_source = role_shares(role.metric, doc)
        for opt in catalogue.optimizations:
            reasons = applicability(opt.applies_when, rr.attrs)
            factor = None
            if not reasons:
                factor = _effect_factor(opt, doc)
                if factor is None:
                    reasons = [
                        "the roofline effect needs a decode measurement with model facts"
                    ]
            in_metric = opt.effect.stage == "all" or opt.effect.stage in rr.shares
            rr.opts.append(
                OptimizationOnRole(opt, not reasons, reasons, factor, in_metric)
            )
            if not reasons and opt.id not in applicable_any:
                applicable_any.append(opt.id)
    by_opt = {o.id: o for o in catalogue.optimizations}
    speedups: dict[str, list[MeasuredSpeedup]] = {}

    def project_scenario(rr: RoleResult, name: str, ids: list[str]) -> None:
        base = rr.baseline
        hib = METRICS[rr.role.metric].higher_is_better
        by_id = {o.opt.id: o for o in rr.opts}
        used = [by_id[i] for i in ids if i in by_id and by_id[i].applies]
        if not used or base is None or rr.base is None:
            return
        sp = [
            compose(rr.shares, [(o.opt.effect.stage, o.factor[k]) for o in used])
            for k in range(3)
        ]
        lo_sp, mid_sp, hi_sp = sp
        vals = [base * s if hib else base / s for s in sp]
        # the stated range carries the baseline's own CI95 too: the effect's low (high) end on
        # the baseline's low (high) end of the interval (its mean when it has none)
        b_lo, b_hi = rr.baseline_ci95
        b_lo = base if b_lo is None else b_lo
        b_hi = base if b_hi is None else b_hi
        ends = [b * s if hib else b / s for b in (b_lo, b_hi) for s in (lo_sp, hi_sp)]
        runnable = all(o.opt.settings for o in used)
        target = None
        if runnable:
            target = dict(rr.base.group.newest.requested)
            for o in used:
                target.update(o.opt.settings)
        p = Projection(
            rr.role,
            name,
            [o.opt.id for o in used],
            base,
            min(ends + vals),
            vals[1],
            max(ends + vals),
            (lo_sp, mid_sp, hi_sp),
            target,
            no_effect=not any(o.in_metric for o in used),
        )
        found = (
            find_verification(rr.base.group, target, rr.role.metric, fx)
            if target is not None
            else None
        )
        if found is not None:
            v, fig = found
            for r in fx.group_of(fig.newest_id).runs:
                inputs[r.id] = r
            v["error"] = p.mid / v["value"] - 1.0 if v["value"] else None
            v["inside_range"] = p.low <= v["value"] <= p.high
            v["verdict"] = verdict(p.low, p.high, v["value"], p.mid)
            v["within_ci95"] = (
                (v["ci95_low"] <= p.mid <= v["ci95_high"])
                if v.get("ci95_low") is not None
                else None
            )
            p.verification, p.measured = v, fig
        elif len(used) == 1 and not p.no_effect:
            oid = used[0].opt.id
            if oid not in speedups:
                speedups[oid] = measured_speedups(
                    by_opt[oid], rr.base.group, rr.role.metric, fx
                )
            if speedups[oid]:
                m = speedups[oid][0]
                p.measured_speedup = m
                p.verification = _speedup_verification(p, m, hib)
                p.verification["verdict"] = p.status
                for g in (m.baseline_group, m.candidate_group):
                    for r in g.runs:
                        inputs[r.id] = r
        rr.projections[name] = p

    singles: list[tuple[str, list[str]]] = [(oid, [oid]) for oid in applicable_any]
    for rr in results:
        for name, ids in singles:
            project_scenario(rr, name, ids)
    decided = {
        og.opt.id: og.decision
        for og in gates_mod.evaluate(catalogue, runs, list(quality_docs or []), host_id)
    }
    held_back = [
        (oid, decided[oid])
        for oid in applicable_any
        if oid in decided and decided[oid] != "GO"
    ]
    missed: dict[str, str] = {}
    for oid in applicable_any:
        below = [
            (rr, rr.projections[oid])
            for rr in results
            if oid in rr.projections and rr.projections[oid].missed_below
        ]
        if not below:
            continue
        rr, p = below[0]
        v = p.verification or {}
        if v.get("basis") == "speed-up":
            lo_sp, _, hi_sp = v["speedup_range"]
            ci = (
                f" [{v['speedup_ci95_low']:.2f}, {v['speedup_ci95_high']:.2f}]"
                if v.get("speedup_ci95_low") is not None
                and v.get("speedup_ci95_high") is not None
                else ""
            )
            missed[oid] = (
                f"measured ×{v['speedup']:.2f}{ci} on {v['point']} (the most favourable of "
                f"{v['points']} measured point{'s' if v['points'] != 1 else ''}), below the projected "
                f"×{lo_sp:.2f}–×{hi_sp:.2f}"
            )
        else:
            m = METRICS[rr.role.metric]
            missed[oid] = (
                f"measured {v['value']:,.{m.decimals}f} {m.unit} for {rr.role.role}, below the projected "
                f"{p.low:,.{m.decimals}f}–{p.high:,.{m.decimals}f}"
            )
        if oid not in dict(held_back):
            held_back.append((oid, "MISSED"))
    combined = [oid for oid in applicable_any if oid not in dict(held_back)]
    extra: list[tuple[str, list[str]]] = []
    if len(combined) > 1:
        extra.append(("all applicable", combined))
    for name, ids in mix.scenarios.items():
        extra.append((name, list(ids)))
    for rr in results:
        for name, ids in extra:
            project_scenario(rr, name, ids)
    return ProjectionSet(
        host_id,
        mix,
        catalogue,
        results,
        singles + extra,
        list(inputs.values()),
        held_back,
        missed,
    )


def projection_hosts(mix: UsageMix, runs: list[RunRecord]) -> list[str]:
    """Hosts with a measured configuration of any role's work (the fact layer's groups; any matrix)."""
    fx = facts_mod.of(runs)
    return sorted({g.host_id for role in mix.roles for g in work_groups(fx, role)})


# -- records -----------------------------------------------------------------------------------------
def record(
    ps: ProjectionSet,
    *,
    mix_file: Path | None = None,
    catalogue_file: Path | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A ``projection`` artifact: every figure of ``ps`` as it stands now."""
    created = now or datetime.now(UTC)
    entries = []
    for rr in ps.roles:
        if rr.baseline_doc is None:
            entries.append(
                {
                    "role": rr.role.role,
                    "model": rr.role.model,
                    "test": rr.role.test,
                    "metric": rr.role.metric,
                    "scenario": None,
                    "optimizations": [],
                    "baseline": None,
                    "projected": None,
                    "target_settings": None,
                    "verification": None,
                    "status": "NO DATA",
                    "note": rr.problem,
                }
            )
            continue
        b = rr.baseline_doc
        for name, p in rr.projections.items():
            entries.append(
                {
                    "role": rr.role.role,
                    "model": rr.role.model,
                    "test": rr.role.test,
                    "metric": rr.role.metric,
                    "scenario": name,
                    "optimizations": p.optimizations,
                    # the baseline group's figure, linked to its newest run
                    "baseline": {
                        "run_id": b.id,
                        "created": b.created,
                        "value": p.baseline,
                    },
                    "projected": {"low": p.low, "mid": p.mid, "high": p.high},
                    "target_settings": p.target_settings,
                    "verification": (
                        {k: v for k, v in p.verification.items()}
                        if p.verification
                        else None
                    ),
                    "status": p.status,
                    "note": None,
                }
            )
    weighted = [
        {
            "scenario": w["scenario"],
            "optimizations": w["ids"],
            "current": w["current"],
            "low": w["low"],
            "mid": w["mid"],
            "high": w["high"],
            "measured": w["measured"],
            "current_ci95_low": w["current_ci95"][0],
            "current_ci95_high": w["current_ci95"][1],
            "measured_ci95_low": w["measured_ci95"][0],
            "measured_ci95_high": w["measured_ci95"][1],
        }
        for w in ps.weighted()
    ]
    mix_file = mix_file or usage_mix_path()
    catalogue_file = catalogue_file or catalogue_path()
    return projection_record.new_projection(
        host_id=ps.host_id,
        created=created,
        mix={
            "name": ps.mix.name,
            "file": relpath(mix_file),
            "sha256": file_digest(mix_file) if mix_file.exists() else None,
        },
        catalogue={
            "file": relpath(catalogue_file),
            "sha256": file_digest(catalogue_file) if catalogue_file.exists() else None,
        },
        composition_rule=COMPOSITION_RULE,
        weighting_rule=WEIGHTING_RULE,
        inputs=[d.id for d in ps.inputs],
        entries=entries,
        weighted=weighted,
    )


def projections_dir() -> Path:
    return data_dir() / "projections"


def record_path(doc: dict[str, Any], root: Path | None = None) -> Path:
    return projection_record.artifact_path(doc, root or projections_dir())


def load_records(root: Path | None = None) -> list[ProjectionRecord]:
    """Every projection record (validated), oldest first."""
    from pipelines.runs import load_artifacts

    return load_artifacts("projection", root)


def accuracy_history(
    records: list[ProjectionRecord], runs: list[RunRecord]
) -> list[dict[str, Any]]:
    """Every recorded projection that a measurement checks: verified when recorded, or by a group of
    its configuration measured since (``later``; its figure, the run as the unit)."""
    fx = facts_mod.of(runs)
    by_conf: dict[tuple, Group] = {}
    for g in fx.groups.values():
        k = (g.host_id, g.model, g.test, repr(sorted(g.requested.items())))
        cur = by_conf.get(k)
        if cur is None or (g.newest.created, g.newest.id) > (
            cur.newest.created,
            cur.newest.id,
        ):
            by_conf[k] = g
    rows = []
    for rec in records:
        seen: set[tuple] = set()
        for e in rec.entries:
            if (
                e.projected is None or e.baseline is None
            ):  # nothing projected from a measurement
                continue
            ident = (e.role, tuple(sorted(e.optimizations)))
            if (
                ident in seen
            ):  # the same projection under another scenario name ("all applicable" of one)
                continue
            seen.add(ident)
            v = e.verification
            when = "at projection"
            if v is None and e.target_settings:
                g = by_conf.get(
                    (
                        rec.host_id,
                        e.model,
                        e.test,
                        repr(sorted(explicit(e.target_settings).items())),
                    )
                )
                f = (
                    g.figure(e.metric)
                    if g is not None and e.metric in METRICS
                    else None
                )
                if f is not None:
                    v = {
                        "run_id": f.newest_id,
                        "created": g.newest.created,
                        "value": f.mean,
                        "ci95_low": f.ci95_low,
                        "ci95_high": f.ci95_high,
                    }
                    when = "later"
            if v is None or not v.get("value"):
                continue
            mid = e.projected["mid"]
            rows.append(
                {
                    "record": rec.id,
                    "recorded": rec.created,
                    "host_id": rec.host_id,
                    "role": e.role,
                    "scenario": e.scenario,
                    "metric": e.metric,
                    "baseline": e.baseline["value"],
                    "projected": mid,
                    "low": e.projected["low"],
                    "high": e.projected["high"],
                    # the run a record names is linked only where it is a run of the set (a record is text)
                    "measured": v["value"],
                    "run_id": v["run_id"]
                    if fx.group_of(str(v.get("run_id")))
                    else None,
                    "error": mid / v["value"] - 1.0,
                    "inside_range": e.projected["low"]
                    <= v["value"]
                    <= e.projected["high"],
                    # recomputed from the stated range, whatever badge the record carried when written
                    "verdict": verification_verdict(
                        e.projected["low"], e.projected["high"], mid, v
                    ),
                    "basis": v.get("basis") or "measured",
                    "speedup": v.get("speedup"),
                    "recorded_status": e.status,
                    "within_ci95": (v["ci95_low"] <= mid <= v["ci95_high"])
                    if v.get("ci95_low") is not None and v.get("ci95_high") is not None
                    else None,
                    "when": when,
                }
            )
    return rows


def write_records(
    runs: list[RunRecord],
    *,
    quality_docs: list[QualityRecord] | None = None,
    root: Path | None = None,
    now: datetime | None = None,
) -> list[Path]:
    """Project every host with data for the usage mix and write one record per host (the go/no-go
    gates read ``quality_docs``: without them a gated optimization is held back from "all applicable")."""
    catalogue = load_catalogue()
    mix = load_usage_mix(catalogue=catalogue)
    paths = []
    for host_id in projection_hosts(mix, runs):
        ps = project(runs, catalogue, mix, host_id, quality_docs)
        doc = record(ps, now=now)
        paths.append(artifacts.write(record_path(doc, root), doc))
    return paths


def entry_status(e: dict[str, Any]) -> str:
    """A recorded entry's status from its figures (:func:`verdict`), whatever word it stored."""
    if e.get("projected") is None:
        return "NO DATA"
    v = e.get("verification")
    if not v or not v.get("value"):
        return "PROJECTED"
    p = e["projected"]
    return verification_verdict(p["low"], p["high"], p["mid"], v)


def entry_statuses(doc: dict[str, Any]) -> dict[str, int]:
    """How many entries of a projection record are PROJECTED, VERIFIED, MISSED or without data."""
    out = {"PROJECTED": 0, "VERIFIED": 0, "MISSED": 0, "NO DATA": 0}
    for e in doc["entries"]:
        out[entry_status(e)] += 1
    return out
