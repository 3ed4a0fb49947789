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

**Verification.** A projection names a configuration: the baseline's requested settings with
the settings of every optimization in the scenario. When a run of that configuration exists
(same host, model and test), the projection is VERIFIED: the page shows the measured value
and the error ``projected ÷ measured − 1``. ``invoke project`` writes a ``projection``
artifact with every figure, so the accuracy of past projections stays on record.
"""

from __future__ import annotations

import math

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core import artifacts
from core.errors import ConfigError, ModelError
from core.kinds.rate import RateTest
from core.metrics import METRICS
from core.records import projection as projection_record
from core.records.projection import ProjectionRecord, as_projection
from core.records.quality import QualityRecord
from core.records.run import RunRecord, as_record
from core.summary import Summary
from core.paths import data_dir, relpath
from core.yamlio import load_yaml, pydantic_error_line

from pipelines import gates as gates_mod
from pipelines.gates import Gate
from pipelines.memory import ModelShape, kv_rows, RECURRENT_ARCHITECTURES, HYBRID_ARCHITECTURES
from pipelines.roofline import bytes_per_token, decode_point
from pipelines.runs import latest_per_key
from pipelines.whatif import compose_stages, select_runs, stage_profile

STAGES = ("load", "http", "tokenise", "prefill", "decode", "sample", "detokenise", "other", "all")
# which stages make up each metric's time (for a chat request; rate tests follow their test)
METRIC_STAGES: dict[str, tuple[str, ...]] = {
    "decode_tps": ("decode", "sample", "detokenise"),
    "tpot_ms": ("decode", "sample", "detokenise"),
    "itl_ms": ("decode", "sample", "detokenise"),
    "ttft_ms": ("http", "tokenise", "prefill", "other"),
    "e2e_ms": ("http", "tokenise", "prefill", "decode", "sample", "detokenise", "other"),
    "load_time_s": ("load",),
}
COMPOSITION_RULE = ("within a stage, factors multiply; across stages, times add: speed-up = 1 / Σ_s p_s / S_s, "
                    "p_s the stage's measured share of the baseline time (Amdahl)")
WEIGHTING_RULE = "rates: tokens over time, 1 / Σ w_i / r_i (weighted harmonic mean); times: Σ w_i t_i"

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


# -- the catalogue ---------------------------------------------------------------------------
class Effect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str = Field(..., description="The metric the source quotes the effect on (a registered metric).")
    stage: Literal["load", "http", "tokenise", "prefill", "decode", "sample", "detokenise", "other", "all"] = Field(
        ..., description="The stage whose speed the factor multiplies ('all': every stage).")
    factor: float | None = Field(None, gt=0, description="Speed-up of the stage (new speed ÷ old; 1.76 = +76%).")
    range: tuple[float, float] | None = Field(None, description="Low and high speed-up of the stage.")
    roofline: bool = Field(False, description="Derive the factor per role from the decode roofline: bytes read per "
                           "token with the baseline's settings ÷ with the optimization's settings (same efficiency assumed).")

    @model_validator(mode="after")
    def _one(self) -> "Effect":
        given = [x for x in (self.factor, self.range, self.roofline or None) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'factor', 'range' or 'roofline'")
        if self.range is not None:
            lo, hi = self.range
            if not 0 < lo <= hi:
                raise ValueError(f"range must be 0 < low <= high, got {list(self.range)}")
        if self.roofline and self.stage != "decode":
            raise ValueError("a roofline effect acts on the decode stage")
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r} (known: {', '.join(sorted(METRICS))})")
        return self


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["paper", "pr", "artifact", "url", "model"] = Field(..., description="What kind of source.")
    ref: str = Field(..., min_length=1, description="arXiv id, owner/repo#PR, artifact id, URL, or the model's name.")
    url: str | None = Field(None, description="Where to read it.")
    note: str = Field("", description="What the source measured and under which conditions.")


class Applicability(BaseModel):
    """Rules over model and host attributes; every rule given must hold."""

    model_config = ConfigDict(extra="forbid")
    min_model_bytes: int | None = Field(None, ge=0, description="Model file at least this large.")
    max_model_bytes: int | None = Field(None, ge=0, description="Model file at most this large.")
    architectures: list[str] | None = Field(None, description="Only these GGUF architectures.")
    exclude_architectures: list[str] = Field(default_factory=list, description="Not these architectures.")
    recurrent: bool | None = Field(None, description="false: not for recurrent/SSM or hybrid models; true: only for them.")
    moe: bool | None = Field(None, description="true: only mixture-of-experts models; false: only dense ones.")
    sliding_window: bool | None = Field(None, description="true: only models with sliding-window layers.")
    needs_draft_same_vocab: bool = Field(False, description="Needs a smaller measured model with the same vocabulary.")
    device: Literal["cpu", "gpu"] | None = Field(None, description="Only runs on the CPU, or only with layers on a GPU.")
    test_kinds: list[str] | None = Field(None, description="Only roles measured by these test kinds (e.g. chat).")
    min_depth: int | None = Field(None, ge=0, description="Only roles whose tokens see at least this much context.")


class Optimization(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., description="Short id (lowercase, digits, hyphens).")
    name: str = Field(..., min_length=1)
    status: str = Field("", description="Where it stands (available, planned, research, ...).")
    description: str = ""
    effect: Effect
    source: Source
    applies_when: Applicability = Field(default_factory=Applicability)
    settings: dict[str, Any] = Field(default_factory=dict, description="Backend settings that realise it (for verification); empty = not runnable here.")
    gates: list[Gate] = Field(default_factory=list, description="Go/no-go criteria checked against measurements (pipelines.gates).")

    @model_validator(mode="after")
    def _id(self) -> "Optimization":
        if not _SLUG.match(self.id):
            raise ValueError(f"id {self.id!r} must be lowercase letters, digits and hyphens")
        if self.effect.roofline and not self.settings:
            raise ValueError("a roofline effect needs 'settings' (the configuration whose bytes per token it compares)")
        ids = [g.id for g in self.gates]
        dup = next((g for g in ids if ids.count(g) > 1), None)
        if dup:
            raise ValueError(f"gate id {dup!r} used twice")
        if self.gates and not self.settings:
            raise ValueError("gates need 'settings': the configuration whose measurements they check")
        return self


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    optimizations: list[Optimization] = Field(..., min_length=1)


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str = Field(..., min_length=1, description="Role name (as in data/roles.yaml where it is defined).")
    label: str = ""
    weight: float = Field(..., gt=0, description="Share of the work (normalised over the roles).")
    model: str = Field(..., description="Model name of the baseline run.")
    test: str = Field(..., description="Test name of the baseline run.")
    metric: str = Field(..., description="The metric projected (a registered metric).")
    matrix: str | None = Field(None, description="Only runs of this matrix.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Only runs whose requested settings have these values.")

    @model_validator(mode="after")
    def _metric(self) -> "Role":
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r} (known: {', '.join(sorted(METRICS))})")
        return self


class UsageMix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    name: str = Field(..., min_length=1)
    description: str = ""
    roles: list[Role] = Field(..., min_length=1)
    scenarios: dict[str, list[str]] = Field(default_factory=dict,
                                            description="Named sets of optimization ids to project besides each one alone and all together.")


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
            raise ConfigError(f"optimization id {oid!r} used twice", file=relpath(path), field=f"optimizations.{i}.id")
    return cat


def load_usage_mix(path: Path | None = None, catalogue: Catalogue | None = None) -> UsageMix:
    path = path or usage_mix_path()
    mix = _validate(UsageMix, path)
    names = [r.role for r in mix.roles]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise ConfigError(f"role {n!r} listed twice", file=relpath(path), field=f"roles.{i}.role")
    units = {(METRICS[r.metric].unit, METRICS[r.metric].higher_is_better) for r in mix.roles}
    if len(units) > 1:
        raise ConfigError("every role's metric must share one unit and direction for a weighted average "
                          f"(got {sorted(u for u, _ in units)})", file=relpath(path), field="roles")
    if catalogue is not None:
        known = {o.id for o in catalogue.optimizations}
        for name, ids in mix.scenarios.items():
            for oid in ids:
                if oid not in known:
                    import difflib

                    close = difflib.get_close_matches(oid, sorted(known), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ConfigError(f"unknown optimization {oid!r}{hint}", file=relpath(path), field=f"scenarios.{name}")
    return mix


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- attributes and applicability ----------------------------------------------------------------
def run_attributes(doc: RunRecord, all_runs: list[RunRecord]) -> dict[str, Any]:
    """Model and host attributes of a run that applicability rules test."""
    rec = as_record(doc)
    g = rec.gguf
    eff = rec.reported
    arch = g.get("architecture") or ""
    vocab = g.get("vocab_sha256")
    drafts = sorted({d.model_name for d in map(as_record, all_runs)
                     if vocab and d.model_name != rec.model_name
                     and d.gguf.get("vocab_sha256") == vocab
                     and d.model_size_bytes < rec.model_size_bytes})
    point = decode_point(rec)
    depth = None
    if isinstance(rec.spec, RateTest):
        depth = rec.spec.n_depth + rec.spec.n_prompt
    elif point:
        depth = int(min(point["depths"]))
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
    if rules.min_model_bytes is not None and attrs["model_bytes"] < rules.min_model_bytes:
        why.append(f"model is {_gb(attrs['model_bytes'])}, needs at least {_gb(rules.min_model_bytes)}")
    if rules.max_model_bytes is not None and attrs["model_bytes"] > rules.max_model_bytes:
        why.append(f"model is {_gb(attrs['model_bytes'])}, at most {_gb(rules.max_model_bytes)} allowed")
    if rules.architectures is not None and attrs["architecture"] not in rules.architectures:
        why.append(f"architecture {attrs['architecture']} is not one of {', '.join(rules.architectures)}")
    if attrs["architecture"] in rules.exclude_architectures:
        why.append(f"not for architecture {attrs['architecture']}")
    if rules.recurrent is False and attrs["recurrent"]:
        why.append(f"{attrs['architecture']} is recurrent/SSM (state cannot be rolled back)")
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
        why.append("no smaller measured model shares its vocabulary (a draft is needed)")
    if rules.device is not None and attrs["device"] != rules.device:
        why.append(f"{rules.device.upper()} only; this role runs on the {attrs['device'].upper()}")
    if rules.test_kinds is not None and attrs["test_kind"] not in rules.test_kinds:
        why.append(f"only for {', '.join(rules.test_kinds)} workloads")
    if rules.min_depth is not None and (attrs["depth"] or 0) < rules.min_depth:
        why.append(f"context depth {attrs['depth'] or 0} < {rules.min_depth}")
    return why


# -- composition ----------------------------------------------------------------------------------
def metric_stages(role_metric: str, doc: RunRecord) -> tuple[str, ...]:
    t = as_record(doc).spec
    if isinstance(t, RateTest) and role_metric == "tokens_per_second":
        return tuple(s for s, on in (("prefill", t.n_prompt), ("decode", t.n_gen)) if on)
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


def weighted_interval(values: list[tuple[float, float, float | None, float | None]],
                      higher_is_better: bool) -> tuple[float | None, float | None]:
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
    half = var ** 0.5
    if mean <= 0:
        return None, None
    rel = half / mean  # a rate or a time stays positive: the half-width on the log scale (core.stats.mean_interval)
    return mean * math.exp(-rel), mean * math.exp(rel)


#: The largest error (projected ÷ measured − 1, either sign) a VERIFIED projection may have: a
#: range wide enough to hold "no effect" and "twice as fast" holds almost any measurement, and a
#: projection that was 47% off is not verified by it.
VERIFY_TOLERANCE = 0.10
VERDICT_RULE = (f"VERIFIED when the measured value lies within the projected range and the projection is within "
                f"±{VERIFY_TOLERANCE:.0%} of it (error = projected ÷ measured − 1); otherwise MISSED, with the signed error. "
                "Computed from the figures whenever a page is built, never read from a stored word.")


def verdict(low: float, high: float, measured: float, mid: float | None = None) -> str:
    """VERIFIED when the measured value lies within the projection's stated range and the
    projection (``mid``) is within ``VERIFY_TOLERANCE`` of it; MISSED otherwise."""
    if not measured or not low <= measured <= high:
        return "MISSED"
    if mid is not None and abs(mid / measured - 1.0) > VERIFY_TOLERANCE:
        return "MISSED"
    return "VERIFIED"


def weighted_average(values: list[tuple[float, float]], higher_is_better: bool) -> float | None:
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
    verification: dict[str, Any] | None = None
    no_effect: bool = False  # every optimization acts on a stage outside the metric

    @property
    def status(self) -> str:
        """PROJECTED until a run of its configuration exists; then VERIFIED when the measured mean
        lies within [low, high], MISSED (with the signed error) when it does not."""
        if not self.verification:
            return "PROJECTED"
        return verdict(self.low, self.high, self.verification["value"], self.mid)


@dataclass
class RoleResult:
    role: Role
    baseline_doc: RunRecord | None
    problem: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    shares_source: str = ""
    opts: list[OptimizationOnRole] = field(default_factory=list)
    projections: dict[str, Projection] = field(default_factory=dict)

    @property
    def baseline_stat(self) -> Summary | None:
        """The baseline run's statistic of the role's metric."""
        return self.baseline_doc.stat(self.role.metric) if self.baseline_doc is not None else None

    @property
    def baseline(self) -> float | None:
        s = self.baseline_stat
        return s.mean if s is not None else None

    @property
    def baseline_ci95(self) -> tuple[float | None, float | None]:
        s = self.baseline_stat
        return s.ci95 if s is not None else (None, None)


@dataclass
class ProjectionSet:
    host_id: str
    mix: UsageMix
    catalogue: Catalogue
    roles: list[RoleResult]
    scenarios: list[tuple[str, list[str]]]  # (name, optimization ids)
    inputs: list[RunRecord]  # run artifacts used (baselines, verifications)
    # applicable optimizations left out of "all applicable" because their go/no-go gates on this host
    # do not say GO: (optimization id, the gates' decision)
    held_back: list[tuple[str, str]] = field(default_factory=list)

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.mix.roles[0].metric].higher_is_better

    def last_updated(self) -> str | None:
        return max((d.created for d in self.inputs), default=None)

    def weighted(self) -> list[dict[str, Any]]:
        """Per scenario: the usage-weighted current, projected (low, mid, high) and measured values."""
        hib = self.higher_is_better
        out = []
        cur = [(r.role.weight, r.baseline) for r in self.roles if r.baseline is not None]
        cur_ci = weighted_interval([(r.role.weight, r.baseline, *r.baseline_ci95) for r in self.roles
                                    if r.baseline is not None], hib)
        out.append({"scenario": "current", "ids": [], "current": weighted_average(cur, hib), "low": None, "mid": None,
                    "high": None, "measured": None, "current_ci95": cur_ci, "measured_ci95": (None, None),
                    "complete": len(cur) == len(self.roles)})
        for name, ids in self.scenarios:
            rows = {"low": [], "mid": [], "high": [], "measured": []}
            measured_ci: list[tuple[float, float, float | None, float | None]] = []
            for r in self.roles:
                if r.baseline is None:
                    continue
                p = r.projections.get(name)
                w = r.role.weight
                for k in ("low", "mid", "high"):
                    rows[k].append((w, getattr(p, k) if p else r.baseline))
                if p is None:
                    rows["measured"].append((w, r.baseline))
                    measured_ci.append((w, r.baseline, *r.baseline_ci95))
                elif p.verification:
                    v = p.verification
                    rows["measured"].append((w, v["value"]))
                    measured_ci.append((w, v["value"], v.get("ci95_low"), v.get("ci95_high")))
            full = len(rows["measured"]) == len(cur) and bool(cur)
            measured = weighted_average(rows["measured"], hib) if full else None
            out.append({"scenario": name, "ids": ids, "current": weighted_average(cur, hib),
                        "low": weighted_average(rows["low"], hib), "mid": weighted_average(rows["mid"], hib),
                        "high": weighted_average(rows["high"], hib), "measured": measured,
                        "current_ci95": cur_ci,
                        "measured_ci95": weighted_interval(measured_ci, hib) if full else (None, None),
                        "complete": len(cur) == len(self.roles)})
        return out


def _effect_factor(opt: Optimization, doc: RunRecord) -> tuple[float, float, float] | None:
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
    rec = as_record(doc)
    eff = rec.reported
    req = rec.requested
    try:
        shape = ModelShape.from_facts(rec.gguf, rec.model_name)
        kv_rows(shape, eff.get("type_k") or req.get("type_k") or "f16", eff.get("type_v") or req.get("type_v") or "f16")
    except ModelError:  # facts missing, or a cache type the planner cannot size: no roofline effect
        return None
    flash = rec.flash_attn_on
    base_kw = {"type_k": eff.get("type_k") or req.get("type_k") or "f16", "type_v": eff.get("type_v") or req.get("type_v") or "f16",
               "flash_attn": flash, "expert_used": eff.get("n_expert_used")}
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


BASELINE_RULE = ("a role's baseline is the newest ok run of its model and test on the host (in its matrix and with "
                 "its settings where the role names them) whose requested settings realise no optimization of the "
                 "catalogue beyond what the role's own settings pin: a run that sets every setting of an optimization "
                 "is that optimization's verification, never a baseline; several configurations left is an "
                 "ambiguity the role must resolve by naming settings")


def realises(requested: dict[str, Any], opt_settings: dict[str, Any], pinned: dict[str, Any]) -> bool:
    """Whether a run's requested settings carry an optimization (every one of its settings, not
    all of them pinned by the role itself)."""
    if not opt_settings:
        return False
    if all(k in pinned and pinned[k] == v for k, v in opt_settings.items()):
        return False
    return all(requested.get(k) == v for k, v in opt_settings.items())


def find_baseline(role: Role, runs: list[RunRecord], host_id: str,
                  catalogue: Catalogue | None = None) -> tuple[RunRecord | None, str | None]:
    """The role's baseline by :data:`BASELINE_RULE`, or None and why."""
    found = select_runs(runs, model=role.model, test=role.test, host_id=host_id, matrix=role.matrix, settings=role.settings)
    found = [d for d in found if (d.stat(role.metric) or Summary()).mean is not None]
    if catalogue is not None:
        opts = [o.settings for o in catalogue.optimizations if o.settings]
        found = [d for d in found if not any(realises(d.requested, o, role.settings or {}) for o in opts)]
    if not found:
        return None, f"no measured run of {role.model} · {role.test} with {role.metric} on this host"
    if found[0].is_endpoint:  # projections read the model's GGUF facts (architecture, bytes per token)
        return None, f"{role.model} is an endpoint model (no local file, no GGUF facts): not projected"
    keys = {d.key for d in found}
    if len(keys) > 1:
        return None, (f"{len(keys)} configurations of {role.model} · {role.test} match; name a matrix or settings "
                      "in data/usage_mix.yaml to pick one")
    return found[0], None


def find_verification(base: RunRecord, target: dict[str, Any], metric: str,
                      runs: list[RunRecord]) -> dict[str, Any] | None:
    """The newest ok run of the projected configuration: same host, model file, backend and test
    definition as the baseline, requested settings equal to ``target``."""
    base = as_record(base)
    best = None
    for d in latest_per_key(runs):
        if not d.ok or d.key == base.key:
            continue
        if (d.host_id, d.model_identity, d.backend) != (base.host_id, base.model_identity, base.backend):
            continue
        if d.test_definition != base.test_definition:  # the same test, not only the same name
            continue
        if d.requested != target:
            continue
        s = d.stat(metric)
        if s is None or s.mean is None:
            continue
        if best is None or (d.created, d.id) > (best.created, best.id):
            best = d
    if best is None:
        return None
    s = best.stat(metric)
    return {"run_id": best.id, "created": best.created, "value": s.mean, "ci95_low": s.ci95_low,
            "ci95_high": s.ci95_high, "n": s.n, "doc": best}


def project(runs: list[RunRecord], catalogue: Catalogue, mix: UsageMix, host_id: str,
            quality_docs: list[QualityRecord] | None = None) -> ProjectionSet:
    """Project every role of the mix on one host.

    Each applicable optimization is projected on its own. The "all applicable" scenario combines
    those that declare no go/no-go gates and those whose gates on this host say GO
    (pipelines.gates, from ``runs`` and ``quality_docs``): an optimization still UNDECIDED, NO-GO or
    NOT MEASURED is held back from the combination (seed 000: "until its GO"), and the page says
    which and why. Without ``quality_docs`` a quality gate is NOT MEASURED: held back."""
    results: list[RoleResult] = []
    inputs: dict[str, RunRecord] = {}
    applicable_any: list[str] = []
    for role in mix.roles:
        doc, problem = find_baseline(role, runs, host_id, catalogue)
        rr = RoleResult(role, doc, problem)
        results.append(rr)
        if doc is None:
            continue
        inputs[doc.id] = doc
        rr.attrs = run_attributes(doc, runs)
        rr.shares, rr.shares_source = role_shares(role.metric, doc)
        for opt in catalogue.optimizations:
            reasons = applicability(opt.applies_when, rr.attrs)
            factor = None
            if not reasons:
                factor = _effect_factor(opt, doc)
                if factor is None:
                    reasons = ["the roofline effect needs a decode measurement with model facts"]
            in_metric = opt.effect.stage == "all" or opt.effect.stage in rr.shares
            rr.opts.append(OptimizationOnRole(opt, not reasons, reasons, factor, in_metric))
            if not reasons and opt.id not in applicable_any:
                applicable_any.append(opt.id)
    scenarios: list[tuple[str, list[str]]] = [(oid, [oid]) for oid in applicable_any]
    decided = {og.opt.id: og.decision for og in gates_mod.evaluate(catalogue, runs, list(quality_docs or []), host_id)}
    held_back = [(oid, decided[oid]) for oid in applicable_any if oid in decided and decided[oid] != "GO"]
    combined = [oid for oid in applicable_any if oid not in dict(held_back)]
    if len(combined) > 1:
        scenarios.append(("all applicable", combined))
    for name, ids in mix.scenarios.items():
        scenarios.append((name, list(ids)))
    for rr in results:
        if rr.baseline_doc is None:
            continue
        base = rr.baseline
        hib = METRICS[rr.role.metric].higher_is_better
        by_id = {o.opt.id: o for o in rr.opts}
        for name, ids in scenarios:
            used = [by_id[i] for i in ids if i in by_id and by_id[i].applies]
            if not used:
                continue
            sp = []
            for k in range(3):
                sp.append(compose(rr.shares, [(o.opt.effect.stage, o.factor[k]) for o in used]))
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
                target = dict(rr.baseline_doc.requested)
                for o in used:
                    target.update(o.opt.settings)
            p = Projection(rr.role, name, [o.opt.id for o in used], base, min(ends + vals), vals[1], max(ends + vals),
                           (lo_sp, mid_sp, hi_sp), target, no_effect=not any(o.in_metric for o in used))
            if target is not None:
                v = find_verification(rr.baseline_doc, target, rr.role.metric, runs)
                if v is not None:
                    doc = v.pop("doc")
                    inputs[doc.id] = doc
                    v["error"] = p.mid / v["value"] - 1.0 if v["value"] else None
                    v["inside_range"] = p.low <= v["value"] <= p.high
                    v["verdict"] = verdict(p.low, p.high, v["value"], p.mid)
                    v["within_ci95"] = (v["ci95_low"] <= p.mid <= v["ci95_high"]) if v.get("ci95_low") is not None else None
                    p.verification = v
            rr.projections[name] = p
    return ProjectionSet(host_id, mix, catalogue, results, scenarios, list(inputs.values()), held_back)


def projection_hosts(mix: UsageMix, runs: list[RunRecord]) -> list[str]:
    hosts = set()
    for role in mix.roles:
        for d in select_runs(runs, model=role.model, test=role.test, matrix=role.matrix, settings=role.settings):
            hosts.add(d.host_id)
    return sorted(hosts)


# -- records -----------------------------------------------------------------------------------------
def record(ps: ProjectionSet, *, mix_file: Path | None = None, catalogue_file: Path | None = None,
           now: datetime | None = None) -> dict[str, Any]:
    """A ``projection`` artifact: every figure of ``ps`` as it stands now."""
    created = now or datetime.now(timezone.utc)
    entries = []
    for rr in ps.roles:
        if rr.baseline_doc is None:
            entries.append({"role": rr.role.role, "model": rr.role.model, "test": rr.role.test, "metric": rr.role.metric,
                            "scenario": None, "optimizations": [], "baseline": None, "projected": None,
                            "target_settings": None, "verification": None, "status": "NO DATA", "note": rr.problem})
            continue
        b = rr.baseline_doc
        for name, p in rr.projections.items():
            entries.append({
                "role": rr.role.role, "model": rr.role.model, "test": rr.role.test, "metric": rr.role.metric,
                "scenario": name, "optimizations": p.optimizations,
                "baseline": {"run_id": b.id, "created": b.created, "value": p.baseline},
                "projected": {"low": p.low, "mid": p.mid, "high": p.high},
                "target_settings": p.target_settings,
                "verification": ({k: v for k, v in p.verification.items()} if p.verification else None),
                "status": p.status, "note": None})
    weighted = [{"scenario": w["scenario"], "optimizations": w["ids"], "current": w["current"], "low": w["low"],
                 "mid": w["mid"], "high": w["high"], "measured": w["measured"],
                 "current_ci95_low": w["current_ci95"][0], "current_ci95_high": w["current_ci95"][1],
                 "measured_ci95_low": w["measured_ci95"][0], "measured_ci95_high": w["measured_ci95"][1]}
                for w in ps.weighted()]
    mix_file = mix_file or usage_mix_path()
    catalogue_file = catalogue_file or catalogue_path()
    return projection_record.new_projection(
        host_id=ps.host_id, created=created,
        mix={"name": ps.mix.name, "file": relpath(mix_file), "sha256": file_digest(mix_file) if mix_file.exists() else None},
        catalogue={"file": relpath(catalogue_file), "sha256": file_digest(catalogue_file) if catalogue_file.exists() else None},
        composition_rule=COMPOSITION_RULE, weighting_rule=WEIGHTING_RULE, inputs=[d.id for d in ps.inputs],
        entries=entries, weighted=weighted)


def projections_dir() -> Path:
    return data_dir() / "projections"


def record_path(doc: dict[str, Any], root: Path | None = None) -> Path:
    return projection_record.artifact_path(doc, root or projections_dir())


def load_records(root: Path | None = None) -> list[ProjectionRecord]:
    """Every projection record (validated), oldest first."""
    from pipelines.runs import load_artifacts

    return load_artifacts("projection", root)


def accuracy_history(records: list[ProjectionRecord], runs: list[RunRecord]) -> list[dict[str, Any]]:
    """Every recorded projection that a measurement checks: verified when recorded, or by a run of
    its configuration measured since (``later``)."""
    by_conf: dict[tuple, RunRecord] = {}
    for d in latest_per_key(runs):
        if d.ok:
            k = (d.host_id, d.model_name, d.test_name, repr(sorted(d.requested.items())))
            cur = by_conf.get(k)
            if cur is None or (d.created, d.id) > (cur.created, cur.id):
                by_conf[k] = d
    rows = []
    for rec in map(as_projection, records):
        seen: set[tuple] = set()
        for e in rec.entries:
            if e.projected is None or e.baseline is None:  # nothing projected from a measurement
                continue
            ident = (e.role, tuple(sorted(e.optimizations)))
            if ident in seen:  # the same projection under another scenario name ("all applicable" of one)
                continue
            seen.add(ident)
            v = e.verification
            when = "at projection"
            if v is None and e.target_settings:
                d = by_conf.get((rec.host_id, e.model, e.test, repr(sorted(e.target_settings.items()))))
                s = d.stat(e.metric) if d is not None else None
                if s is not None and s.mean is not None:
                    v = {"run_id": d.id, "created": d.created, "value": s.mean, "ci95_low": s.ci95_low,
                         "ci95_high": s.ci95_high}
                    when = "later"
            if v is None or not v.get("value"):
                continue
            mid = e.projected["mid"]
            rows.append({"record": rec.id, "recorded": rec.created, "host_id": rec.host_id, "role": e.role,
                         "scenario": e.scenario, "metric": e.metric, "baseline": e.baseline["value"],
                         "projected": mid, "low": e.projected["low"], "high": e.projected["high"],
                         "measured": v["value"], "run_id": v["run_id"], "error": mid / v["value"] - 1.0,
                         "inside_range": e.projected["low"] <= v["value"] <= e.projected["high"],
                         # recomputed from the stated range, whatever badge the record carried when written
                         "verdict": verdict(e.projected["low"], e.projected["high"], v["value"], mid),
                         "recorded_status": e.status,
                         "within_ci95": (v["ci95_low"] <= mid <= v["ci95_high"])
                         if v.get("ci95_low") is not None and v.get("ci95_high") is not None else None,
                         "when": when})
    return rows


def write_records(runs: list[RunRecord], *, quality_docs: list[QualityRecord] | None = None, root: Path | None = None,
                  now: datetime | None = None) -> list[Path]:
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
    return verdict(p["low"], p["high"], v["value"], p["mid"])


def entry_statuses(doc: dict[str, Any]) -> dict[str, int]:
    """How many entries of a projection record are PROJECTED, VERIFIED, MISSED or without data."""
    out = {"PROJECTED": 0, "VERIFIED": 0, "MISSED": 0, "NO DATA": 0}
    for e in doc["entries"]:
        out[entry_status(e)] += 1
    return out
