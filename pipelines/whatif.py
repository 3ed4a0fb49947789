"""What-if: Amdahl's law over measured stage timings.

A *stage profile* is the mean time one unit of work spends in each stage, read from a run
artifact: for a chat request, the stages the llama.cpp backend times (tokenise, prefill,
decode, sample, detokenise, other; ``stages_ms`` of each request record, with HTTP overhead
where a server backend records it) plus the model load; for a rate test, prefill (pp) and
decode (tg) from llama.cpp's own counters.

A *workload mix* (data/whatif.yaml) weights units of measured work: each entry names a
model and a test (optionally settings, and a matrix as a hint), a weight (share of requests) and how
many model loads each request pays (0 for a warm server, 1 for a one-shot command). An entry is
read through the fact layer (pipelines.facts, :data:`ENTRY_RULE`): the host's configuration of that
work, its stage timings from the runs the fact layer groups under it, its model load time that
configuration's figure of ``load_time_s`` (the run as the unit). Its
time per request is ``T = Σ_i w_i (Σ_s t_is + loads_i × t_load,i)``; stage ``s`` takes the
share ``p_s`` of it. Cutting that stage's time by ``r`` (a fraction) gives

    T' = T × (1 − r·p_s),  speed-up = 1 / (1 − r·p_s),  time saved = r·p_s,

and removing the stage entirely (r = 1) is Amdahl's limit ``1 / (1 − p_s)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import ConfigError
from core.kinds.rate import RateTest
from core.paths import data_dir, relpath
from core.records.run import RunRecord
from core.yamlio import load_yaml, pydantic_error_line
from pipelines import facts as facts_mod
from pipelines.facts import Facts, Figure, Group
from pipelines.memo import per_set
from pipelines.runs import latest_per_key

STAGE_ORDER = (
    "load",
    "http",
    "tokenise",
    "prefill",
    "decode",
    "sample",
    "detokenise",
    "other",
)
STAGE_LABELS = {
    "load": "model load",
    "http": "HTTP / server overhead",
    "tokenise": "tokenise",
    "prefill": "prefill (prompt)",
    "decode": "decode (generation)",
    "sample": "sampling",
    "detokenise": "detokenise",
    "other": "other (template, streaming)",
}


def _mean(values: list[float]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _requests(rec: RunRecord) -> list[Any]:
    """The request records of a run whose kind sends requests (chat, generate): its timed requests."""
    return list(getattr(rec.samples, "requests", None) or [])


def _staged(rec: RunRecord) -> list[dict[str, float]]:
    """The stage split of each timed request (in process: tokenise, prefill, decode, ...)."""
    return [
        r.stages_ms
        for r in _requests(rec)
        if isinstance(getattr(r, "stages_ms", None), dict)
    ]


def stage_profile(rec: RunRecord) -> dict[str, float] | None:
    """Mean milliseconds per unit of work in each stage (load: per load), or None when the
    artifact does not record stages (a chat run from before stage timing, a failed run)."""
    rec = rec
    if not rec.ok:
        return None
    out: dict[str, float] = {}
    load = rec.stat("load_time_s")
    if load is not None and load.mean is not None:
        out["load"] = load.mean * 1000.0
    if isinstance(rec.spec, RateTest):
        test = rec.spec
        perf = rec.details.perf_counters or []
        if perf:
            if test.n_prompt:
                out["prefill"] = _mean([p.t_p_eval_ms for p in perf]) or 0.0
            if test.n_gen:
                out["decode"] = _mean([p.t_eval_ms for p in perf]) or 0.0
        else:  # only the timer: a pure pp or tg test is one stage
            ns = _mean(rec.samples.ns or [])
            if ns is None or (test.n_prompt and test.n_gen):
                return None
            out["prefill" if test.n_prompt else "decode"] = ns / 1e6
        return out
    staged = _staged(rec)
    if not staged:
        return None
    names = sorted({k for s in staged for k in s})
    for name in names:
        out[name] = _mean([s.get(name, 0.0) for s in staged]) or 0.0
    return out


def unit_totals(rec: RunRecord) -> list[float]:
    """Milliseconds of each measured unit of work (a repetition, a request), all stages but the
    load: the samples behind :func:`stage_profile`'s sum, for its interval."""
    rec = rec
    if isinstance(rec.spec, RateTest):
        test = rec.spec
        perf = rec.details.perf_counters or []
        if perf:
            return [
                (p.t_p_eval_ms or 0.0) * bool(test.n_prompt)
                + (p.t_eval_ms or 0.0) * bool(test.n_gen)
                for p in perf
            ]
        return [ns / 1e6 for ns in rec.samples.ns or []]
    return [sum(s.values()) for s in _staged(rec)]


def stage_shares(
    profile: dict[str, float], stages: tuple[str, ...] | None = None
) -> dict[str, float]:
    """Share of each stage in the time of ``stages`` (all but load when None)."""
    keys = [s for s in profile if (s in stages if stages is not None else s != "load")]
    total = sum(profile[s] for s in keys)
    if total <= 0:
        return {}
    return {s: profile[s] / total for s in keys}


def amdahl(share: float, reduction: float) -> dict[str, float]:
    """Cut a stage holding ``share`` of the time by ``reduction`` (0..1): the new time's ratio,
    the speed-up and the share of time saved."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if not 0 <= reduction <= 1:
        raise ValueError(f"reduction must be in [0, 1], got {reduction}")
    ratio = 1.0 - reduction * share
    return {
        "time_ratio": ratio,
        "speedup": (1.0 / ratio) if ratio > 0 else float("inf"),
        "saved": reduction * share,
    }


def compose_stages(shares: dict[str, float], speedups: dict[str, float]) -> float:
    """Overall speed-up when stage ``s`` (share ``p_s`` of the time) runs ``speedups[s]`` times
    faster: ``1 / Σ_s p_s / S_s`` (stages not named keep their speed)."""
    if not shares:
        return 1.0
    total = sum(shares.values())
    new = sum(p / speedups.get(s, 1.0) for s, p in shares.items())
    return total / new if new > 0 else float("inf")


# -- mixes ---------------------------------------------------------------------------------------
class MixEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = Field(
        ..., description="Model name (data/models.yaml) of the measured run."
    )
    test: str = Field(
        ..., description="Test name of the measured run (e.g. chat-short, tg128)."
    )
    matrix: str | None = Field(
        None,
        description="A hint: the configuration measured in this matrix is preferred "
        "(never a filter: measured work of any matrix counts).",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Only configurations whose requested settings have these values.",
    )
    weight: float = Field(
        ...,
        gt=0,
        description="Share of the mix's requests (normalised over the entries).",
    )
    loads_per_request: float = Field(
        0.0,
        ge=0,
        description="Model loads each request pays (0 = warm server, 1 = one-shot command).",
    )


class Mix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., min_length=1)
    description: str = ""
    entries: list[MixEntry] = Field(..., min_length=1)


class ErrorRuns(BaseModel):
    """The serving test whose runs measure error rates and retry costs (pipelines.retries)."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(..., description="Model name of the serving runs.")
    test: str = Field(..., description="Test name of the serving runs (a chat test).")
    matrix: str | None = Field(None, description="Only runs of this matrix.")


class Planned(BaseModel):
    """A planned optimization, judged by whether its projected gain clears its measured cost."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str = Field(..., min_length=1)
    source: str = Field(
        "", description="Where the plan comes from (e.g. seed 003's phase)."
    )
    kind: Literal["retry", "stage"] = Field(
        ...,
        description="retry: automatic retry against the measured error runs; "
        "stage: a stage of a mix made faster.",
    )
    resend_after_s: tuple[float, float] = Field(
        (0.5, 2.0),
        description="retry: seconds after which a caller who sees a "
        "failure re-sends it (an assumption, low and high).",
    )
    mix: str | None = Field(None, description="stage: the what-if mix.")
    stage: str | None = Field(None, description="stage: the stage made faster.")
    reduction: tuple[float, float] = Field(
        (0.5, 0.5), description="stage: share of the stage's time removed (low, high)."
    )
    min_gain: float = Field(
        0.01,
        ge=0,
        description="The smallest gain worth implementing (a fraction of the time).",
    )

    @model_validator(mode="after")
    def _check(self) -> Planned:
        if self.kind == "stage" and (not self.mix or not self.stage):
            raise ValueError("a stage plan needs mix and stage")
        lo, hi = self.reduction
        if not 0 <= lo <= hi <= 1:
            raise ValueError(
                f"reduction must be 0 <= low <= high <= 1, got {list(self.reduction)}"
            )
        if not 0 <= self.resend_after_s[0] <= self.resend_after_s[1]:
            raise ValueError(
                f"resend_after_s must be 0 <= low <= high, got {list(self.resend_after_s)}"
            )
        return self


class WhatIfFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    reductions: list[float] = Field(
        default_factory=lambda: [0.1, 0.25, 0.5, 0.9],
        description="Stage time reductions explored (fractions).",
    )
    mixes: list[Mix] = Field(..., min_length=1)
    errors: ErrorRuns | None = Field(
        None, description="The serving runs that measure error rates and retry costs."
    )
    error_rates: ErrorRuns | None = Field(
        None,
        description="The serving runs that sweep the injected error rate (seed 003's 5%, 10%, 20%), "
        "retry off and on: the retry plan per error rate.",
    )
    planned: list[Planned] = Field(
        default_factory=list, description="Planned optimizations to recommend or not."
    )

    @field_validator("reductions")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        for x in v:
            if not 0 < x <= 1:
                raise ValueError(f"a reduction is a fraction in (0, 1], got {x}")
        return v


def whatif_path() -> Path:
    return data_dir() / "whatif.yaml"


def load_whatif(path: Path | None = None) -> WhatIfFile:
    path = path or whatif_path()
    raw = load_yaml(path)
    try:
        f = WhatIfFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None
    names = [m.name for m in f.mixes]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(
            f"mix name {sorted(dup)[0]!r} used twice", file=relpath(path), field="mixes"
        )
    for i, plan in enumerate(f.planned):
        if plan.kind == "stage" and plan.mix not in names:
            raise ConfigError(
                f"unknown mix {plan.mix!r} (known: {', '.join(names)})",
                file=relpath(path),
                field=f"planned.{i}.mix",
            )
        if plan.kind == "stage" and plan.stage not in STAGE_ORDER:
            raise ConfigError(
                f"unknown stage {plan.stage!r} (known: {', '.join(STAGE_ORDER)})",
                file=relpath(path),
                field=f"planned.{i}.stage",
            )
        if plan.kind == "retry" and f.errors is None:
            raise ConfigError(
                "a retry plan needs the errors: block (the serving runs with injected errors)",
                file=relpath(path),
                field=f"planned.{i}",
            )
    return f


@per_set
def _latest_ok_by_work(docs: list[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    """The newest ok artifact of every configuration by (model, test), once per loaded set (the pages ask
    select_runs for a dozen selectors: a scan of the fleet's runs each)."""
    out: dict[tuple[str, str], list[RunRecord]] = {}
    for r in latest_per_key(docs):
        if r.ok:
            out.setdefault((r.model_name, r.test_name), []).append(r)
    return out


def select_runs(
    docs: list[RunRecord],
    *,
    model: str,
    test: str,
    host_id: str | None = None,
    matrix: str | None = None,
    settings: dict[str, Any] | None = None,
) -> list[RunRecord]:
    """The newest ok artifact of every configuration matching a selector, newest first."""
    out = []
    for r in _latest_ok_by_work(docs).get((model, test), ()):
        if host_id and r.host_id != host_id:
            continue
        if matrix and r.matrix_name != matrix:
            continue
        if any(r.requested.get(k) != v for k, v in (settings or {}).items()):
            continue
        out.append(r)
    return sorted(out, key=lambda r: (r.created, r.id), reverse=True)


ENTRY_RULE = (
    "A mix entry is read through the fact layer: among the host's configurations of the entry's model and "
    "test (with its settings where it names them) that recorded stage timings, those measured in the entry's "
    "matrix first (a hint, never a filter), then the representative one as the Leaderboard picks it (the "
    "best figure among ordinary builds); the page names its settings. Its stage timings are the mean over that "
    "configuration's runs that recorded them; its model load time is the configuration's figure of "
    "load_time_s (the run as the unit), or, where its runs did not record one, the figure of the host's "
    "configuration of the same model file and backend with the most runs that did."
)


def group_profile(g: Group) -> dict[str, float] | None:
    """Mean milliseconds per unit of work in each stage over the group's runs that recorded stages (load
    aside: :func:`load_figure`), or None when none did."""
    profiles = [
        p
        for p in (stage_profile(r) for r in g.runs)
        if p and any(k != "load" for k in p)
    ]
    if not profiles:
        return None
    names = sorted({k for p in profiles for k in p if k != "load"})
    return {k: sum(p.get(k, 0.0) for p in profiles) / len(profiles) for k in names}


def load_figure(fx: Facts, g: Group) -> Figure | None:
    """The model load time of a configuration (:data:`ENTRY_RULE`): its own figure of load_time_s, else the
    figure of the host's configuration of the same model file and backend with the most runs that recorded one."""
    f = g.figure("load_time_s")
    if f is not None:
        return f
    same = [
        (h, h.figure("load_time_s"))
        for h in fx.groups_of(g.host_id)
        if h.newest.model_identity == g.newest.model_identity and h.backend == g.backend
    ]
    same = [(h, lf) for h, lf in same if lf is not None]
    if not same:
        return None
    return max(same, key=lambda x: (x[1].runs, x[0].newest.created, x[0].key))[1]


def entry_groups(fx: Facts, e: MixEntry, host_id: str | None = None) -> list[Group]:
    """The groups of an entry's work (model, test, its settings) on one host or every host (any matrix)."""
    return [
        g
        for g in fx.groups_of(host_id, test=e.test)
        if any(r.model_name == e.model for r in g.runs)
        and not any(
            g.newest.requested.get(k) != v for k, v in (e.settings or {}).items()
        )
    ]


def entry_group(
    fx: Facts, e: MixEntry, host_id: str
) -> tuple[Group | None, str | None]:
    """The configuration an entry reads on a host by :data:`ENTRY_RULE`, or None and why."""
    found = entry_groups(fx, e, host_id)
    if not found:
        return None, "no measured run"
    staged = [g for g in found if group_profile(g) is not None]
    if not staged:
        return None, "no stage timings in its artifacts"
    if e.matrix:
        staged = [
            g for g in staged if any(r.matrix_name == e.matrix for r in g.runs)
        ] or staged
    rep = facts_mod.Facts.representative(fx, staged)
    return (rep or staged[0]), None


@dataclass
class MixResult:
    mix: Mix
    host_id: str
    per_request_ms: dict[str, float]  # stage -> weighted ms per request
    entries: list[
        dict[str, Any]
    ]  # the configurations used: entry, group, its newest run, profile, load, weight
    missing: list[str] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return sum(self.per_request_ms.values())

    def total_ci95(self) -> tuple[float | None, float | None]:
        """CI95 of the time per request, propagated from each entry's per-unit CI95 (Student t on
        its repetitions or requests, every run of its configuration), weighted and added in quadrature
        (entries independent). (None, None) when an entry has fewer than two units or pays model loads
        (one load sample)."""
        from core import stats

        half2 = 0.0
        for u in self.entries:
            if u["entry"].loads_per_request and "load" in u["profile"]:
                return None, None
            units = [x for r in (u.get("runs") or [u["run"]]) for x in unit_totals(r)]
            s = stats.summary(units)
            if s.ci95_low is None or s.ci95_high is None or s.mean is None:
                return None, None
            half2 += (
                u["weight"] * stats.t_critical(s.n - 1) * s.stddev / math.sqrt(s.n)
            ) ** 2
        if not self.entries:
            return None, None
        half = half2**0.5
        if self.total_ms <= 0:
            return None, None
        # a time stays positive: the propagated half-width applied on the log scale (core.stats.mean_interval)
        rel = half / self.total_ms
        return self.total_ms * math.exp(-rel), self.total_ms * math.exp(rel)

    def shares(self) -> dict[str, float]:
        t = self.total_ms
        return {s: v / t for s, v in self.per_request_ms.items()} if t > 0 else {}

    def grid(self, reductions: list[float]) -> list[dict[str, Any]]:
        """One row per stage (largest share first): share, each reduction's gain, the limit."""
        rows = []
        for stage, share in sorted(self.shares().items(), key=lambda kv: -kv[1]):
            rows.append(
                {
                    "stage": stage,
                    "share": share,
                    "ms": self.per_request_ms[stage],
                    "gains": {r: amdahl(share, r) for r in reductions},
                    "limit": amdahl(share, 1.0),
                }
            )
        return rows


def evaluate_mix(mix: Mix, docs: list[RunRecord], host_id: str) -> MixResult:
    """The mix's stage time per request on one host, each entry read through the fact layer (:data:`ENTRY_RULE`)."""
    fx = facts_mod.of(docs)
    total_w = sum(e.weight for e in mix.entries)
    per: dict[str, float] = {}
    used: list[dict[str, Any]] = []
    missing: list[str] = []
    for e in mix.entries:
        g, why = entry_group(fx, e, host_id)
        if g is None:
            missing.append(f"{e.model} · {e.test}: {why}")
            continue
        prof = dict(group_profile(g) or {})
        lf = load_figure(fx, g)
        if lf is not None:
            prof["load"] = lf.mean * 1000.0
        elif e.loads_per_request:
            missing.append(
                f"{e.model} · {e.test}: no measured load time (load_time_s) of this model on this host"
            )
        w = e.weight / total_w
        for stage, ms in prof.items():
            mult = e.loads_per_request if stage == "load" else 1.0
            if mult:
                per[stage] = per.get(stage, 0.0) + w * mult * ms
        runs = [r for r in g.runs if stage_profile(r)]
        used.append(
            {
                "entry": e,
                "group": g,
                "run": g.newest,
                "runs": runs,
                "profile": prof,
                "load": lf,
                "weight": w,
            }
        )
    return MixResult(mix, host_id, per, used, missing)


def mix_hosts(mix: Mix, docs: list[RunRecord]) -> list[str]:
    """Hosts that have a measured configuration of at least one entry of the mix (any matrix)."""
    fx = facts_mod.of(docs)
    return sorted({g.host_id for e in mix.entries for g in entry_groups(fx, e)})
