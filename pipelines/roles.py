"""Roles and recommendations: which configuration serves which role on which host, and why.

``data/roles.yaml`` states what each role needs (seed 001's role assignments): minimum
pass rates on named suites (optionally on one tag, e.g. tier T1), minimum or maximum
speed metrics from named tests on a host, a memory cap, required capabilities, and the
role it escalates to. The recommender joins quality artifacts and speed (run) artifacts
by configuration identity (backend, model file hash, and the settings that can change the
output: ``pipelines.quality.config_identity``), and for each role and host:

* checks every candidate against every requirement, from data only. A requirement without
  data is "no data", never a guess; a candidate that fails one is rejected with every
  reason (too slow, below the quality floor, degenerate, does not fit, missing
  capability, no data), each naming the figure, the threshold and the artifact;
* ranks the eligible ones (the tie-break below) and assigns the first; the rest, in
  order, are the fallback chain.

Ranking (``prefer: speed``, the default): the role's first speed requirement's metric
(better first, as the metric's declaration says), then the mean pass rate over the role's
quality requirements (higher first), then peak memory (lower first), then model name and
configuration label (alphabetical, so the order is deterministic). ``prefer: quality``
swaps the first two keys. **Ties within noise** (``TIE_RULE``): candidates whose first key is
within noise of the best remaining one's (speed: their run-level CI95s overlap; quality: the
exact McNemar test on the items both were scored on finds no difference) are tied, and the
second key, then memory, then name decide between them; the page says so.

Speed figures are the fact layer's (pipelines.facts): the figure of the group of the configuration's
newest run of the test on the host, the run as the unit: two or more runs give the spread between
them, one run is widened by the host's run-to-run noise for that kind of test (else the fleet's),
and where no noise was ever measured it has no interval and its mean decides (the page says which).
The same number the Leaderboard shows for that group.

Quality is taken from artifacts of any host (a greedy answer does not depend on the
host); speed and memory only from the host being assigned.
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

from core import stats
from core.errors import ConfigError
from core.metrics import METRICS
from core.paths import data_dir, relpath
from core.records.quality import QualityRecord, Verdict
from core.records.run import RunRecord
from core.summary import Summary
from core.yamlio import load_yaml, pydantic_error_line
from pipelines import facts as facts_mod
from pipelines import quality as quality_mod
from pipelines.runs import latest_per_key as latest_runs

REASONS = (
    "too slow",
    "below quality floor",
    "degenerate",
    "does not fit",
    "missing capability",
    "not resolved",
    "no data",
)
#: Most items / repetitions the page suggests adding to settle an unresolved decision.
SETTLE_CAP = 100_000
_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_bytes(value: Any) -> int:
    """An integer byte count or a string such as '24 GiB' / '500MB'."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as '24 GiB'")
    if isinstance(value, (int, float)):
        return int(value)
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?i?B)\s*", str(value), re.I)
    if not m:
        raise ValueError(f"{value!r} is not a size (e.g. 24 GiB, 500 MB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class QualityReq(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str = Field(..., description="Suite name (as in data/suites/).")
    min: float = Field(
        ...,
        ge=0,
        le=1,
        description="Minimum pass rate (0-1), checked against the Wilson CI95 lower bound.",
    )
    tag: str | None = Field(None, description="Only the items with this tag (e.g. T1).")
    prompt_style: str | None = Field(
        None,
        description="Only runs in this prompt style (chat, completion, "
        "loglikelihood); default: the style with the most scored items. Styles are never pooled.",
    )


class SpeedReq(BaseModel):
    model_config = ConfigDict(extra="forbid")
    test: str = Field(
        ..., description="Test name of the speed artifacts (tg128, chat-short, ...)."
    )
    metric: str = Field(
        ...,
        description="Registered metric (tokens_per_second, decode_tps, ttft_ms, ...).",
    )
    min: float | None = Field(None, description="Lowest acceptable mean.")
    max: float | None = Field(None, description="Highest acceptable mean.")

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, v: str) -> str:
        if v not in METRICS:
            import difflib

            close = difflib.get_close_matches(v, list(METRICS), n=1)
            raise ValueError(
                f"unknown metric {v!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
            )
        return v

    @model_validator(mode="after")
    def _bound(self) -> SpeedReq:
        if (self.min is None) == (self.max is None):
            raise ValueError("give exactly one of min or max")
        return self


class ServingReq(BaseModel):
    """What a role needs from a server on the host: users (or requests per second) at SLO, found by a
    capacity search (kind capacity, or a swept load test) of the model there, and probe cases that
    must succeed on every try (kind probe)."""

    model_config = ConfigDict(extra="forbid")
    users: float | None = Field(
        None,
        gt=0,
        description="Concurrent users the model must serve within its capacity "
        "search's SLOs (closed loop); checked against the capacity interval.",
    )
    rate: float | None = Field(
        None,
        gt=0,
        description="Requests per second the model must serve within the SLOs "
        "(open loop: constant or Poisson arrivals).",
    )
    probes: list[str] = Field(
        default_factory=list,
        description="Endpoint probe cases that must succeed on every "
        "try (chat, stream_usage, tool_call, tool_followup, json_mode, json_schema).",
    )

    @model_validator(mode="after")
    def _something(self) -> ServingReq:
        if self.users is None and self.rate is None and not self.probes:
            raise ValueError("a serving requirement needs users, rate or probes")
        if self.users is not None and self.rate is not None:
            raise ValueError("give users or rate, not both")
        from core.kinds.probe import CASES

        bad = [c for c in self.probes if c not in CASES]
        if bad:
            raise ValueError(
                f"unknown probe case {bad[0]!r} (known: {', '.join(CASES)})"
            )
        return self


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    tier: str = Field("", description="Grouping on the page (e.g. HOT, WARM).")
    prefer: Literal["speed", "quality"] = Field(
        "speed", description="What 'best' maximises first."
    )
    capabilities: list[str] = Field(
        default_factory=list,
        description="Capabilities the model must list in data/models.yaml.",
    )
    quality: list[QualityReq] = Field(default_factory=list)
    speed: list[SpeedReq] = Field(default_factory=list)
    memory_max: int | None = Field(
        None, description="Peak memory cap (bytes or '24 GiB')."
    )
    serving: ServingReq | None = Field(
        None,
        description="Users (or rate) at SLO and probe cases a server of the model "
        "must meet on the host (capacity searches and endpoint probes).",
    )
    host: str | None = Field(
        None,
        description="Assign on this host id only (default: every host with speed data).",
    )
    escalates_to: str | None = Field(
        None, description="The role a request goes to when this one cannot handle it."
    )
    max_degenerate_rate: float | None = Field(None, ge=0, le=1)
    min_items: int | None = Field(None, ge=1)

    @field_validator("memory_max", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return None if v is None else parse_bytes(v)


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_degenerate_rate: float = Field(
        0.10,
        ge=0,
        le=1,
        description="Share of degenerate outputs above which a configuration is rejected.",
    )
    min_items: int = Field(
        3,
        ge=1,
        description="Fewer scored items than this on a required suite counts as no data.",
    )


class RolesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    defaults: Defaults = Field(default_factory=Defaults)
    roles: dict[str, Role] = Field(..., min_length=1)


def roles_path() -> Path:
    """data/roles.yaml of the data dir in use, else the one shipped with the project (a data dir
    made only of artifacts, e.g. a fixture tree, still gets the project's roles)."""
    from core.paths import project_root

    own = data_dir() / "roles.yaml"
    return own if own.exists() else project_root() / "data" / "roles.yaml"


def load_roles(path: Path | None = None) -> RolesFile:
    path = path or roles_path()
    src = relpath(path)
    raw = load_yaml(path)
    try:
        reg = RolesFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=src) from None
    for name, role in reg.roles.items():
        if role.escalates_to and role.escalates_to not in reg.roles:
            raise ConfigError(
                f"escalates to unknown role {role.escalates_to!r}",
                file=src,
                field=f"roles.{name}.escalates_to",
            )
    for name in reg.roles:  # escalation must be a chain, not a loop
        seen, cur = [], name
        while cur:
            if cur in seen:
                raise ConfigError(
                    f"escalation loop: {' -> '.join(seen + [cur])}",
                    file=src,
                    field=f"roles.{name}.escalates_to",
                )
            seen.append(cur)
            cur = reg.roles[cur].escalates_to
    return reg


# -- evidence ------------------------------------------------------------------------------
@dataclass
class Evidence:
    kind: str  # quality | speed | memory | capability | degeneration
    requirement: str
    ok: bool | None  # None = no data
    value: str = "—"
    reason: str | None = None  # a REASONS entry when not ok
    message: str = ""
    artifacts: list[tuple[str, str]] = field(
        default_factory=list
    )  # (type "run"|"quality", id)
    ci: tuple[float | None, float | None] | None = None
    n: int | None = None
    note: str = (
        ""  # what the interval rests on (speed: runs, or one run and the host's noise)
    )
    items: dict[tuple[str, str, str], bool] = field(
        default_factory=dict, repr=False
    )  # quality: (suite, style, id) -> passed
    figure: Any = None  # speed: the fact layer's figure (pipelines.facts.Figure) the evidence reads


@dataclass
class Candidate:
    identity: str
    model: str
    config_label: str
    settings: dict[str, Any]
    evidence: list[Evidence] = field(default_factory=list)
    speed_key: float | None = None
    quality_key: float | None = None
    memory_bytes: int | None = None
    items: dict[tuple[str, str, str], bool] = field(
        default_factory=dict
    )  # (suite, style, item id) -> passed, as read
    backend: str = ""  # the configuration's backend as its runs on the host name it (with its server), or its backend
    peak_bytes: int | None = (
        None  # the highest peak memory its runs on the host measured (measured_peak)
    )
    peak_run: str | None = None  # the run that measured it

    @property
    def backing(self) -> list[Evidence]:
        """The evidence a pick rests on: every met requirement read from an artifact (all of them this
        configuration's own: the same backend, server, model and output settings)."""
        return [e for e in self.evidence if e.ok is True and e.artifacts]

    @property
    def reasons(self) -> list[str]:
        return sorted({e.reason for e in self.evidence if e.reason}, key=REASONS.index)

    @property
    def eligible(self) -> bool:
        return all(e.ok is True for e in self.evidence)

    @property
    def state(self) -> str:
        """eligible | rejected (a measured figure fails) | unresolved (an interval straddles a threshold,
        nothing fails) | partly measured (some requirement has no data) | not measured (no data at all)."""
        if self.eligible:
            return "eligible"
        if any(e.ok is False for e in self.evidence):
            return "rejected"
        if any(e.reason == "not resolved" for e in self.evidence):
            return "unresolved"
        if all(
            e.reason == "no data" for e in self.evidence if e.ok is not True
        ) and not any(e.ok is True for e in self.evidence):
            return "not measured"
        return "partly measured"

    @property
    def label(self) -> str:
        return f"{self.model} · {self.config_label}"


TIE_RULE = (
    "Candidates within noise of the best remaining one on the first key are tied: on speed, when their "
    "run-level CI95s of the first speed requirement overlap; on quality, when the exact McNemar test on the "
    "items both were scored on (the role's suites) finds no difference at 5%. A tie is broken by the second "
    "key (the other of speed and quality), then lower peak memory, then name. A candidate without an interval "
    "(one run on a host whose run-to-run noise was never measured) cannot be tied: its mean decides."
)


@dataclass
class Tie:
    """The assigned candidate was within noise of others on the first key: who, on what, and what decided."""

    requirement: str
    others: list[Candidate]
    decided_by: str


@dataclass
class Assignment:
    role: str
    spec: Role
    host_id: str | None
    chosen: Candidate | None
    fallbacks: list[Candidate]
    rejected: list[Candidate]
    tie: Tie | None = None

    def within_noise(self) -> tuple[str, Candidate] | None:
        """When the assigned configuration was within noise of others on what ranks them first
        (``TIE_RULE``): the requirement and the first of them. None when nothing was tied."""
        if self.tie is None or not self.tie.others:
            return None
        return self.tie.requirement, self.tie.others[0]

    @property
    def status(self) -> str:
        return status_of(self.chosen, [c.state for c in self.rejected])


def status_of(chosen: Candidate | None, states: list[str]) -> str:
    """An assignment's status from its pick and its rejected candidates' states (``Candidate.state``, in
    ``Assignment.rejected``'s order): a page that reads the states already passes them (``Assignment.status``
    reads them again)."""
    if chosen is not None:
        return "assigned"
    seen = set(states)
    if "unresolved" in seen:
        return "not resolved"  # a candidate fails nothing, but a figure's interval straddles its threshold
    if "rejected" in seen:
        return "no candidate meets every requirement"  # measured and rejected (others may lack data: counted apart)
    return "no data"  # nothing failed on measured data: runs could decide


# -- the join ------------------------------------------------------------------------------
@dataclass
class ConfigData:
    identity: str
    model: str
    model_sha256: str
    settings: dict[str, Any]
    size_bytes: int | None = None
    quality: list[QualityRecord] = field(
        default_factory=list
    )  # current quality artifacts (any host)
    runs: dict[str, list[RunRecord]] = field(
        default_factory=dict
    )  # host -> current ok run artifacts
    run_history: dict[str, list[RunRecord]] = field(
        default_factory=dict
    )  # run key -> every ok run of it
    backend: str = ""  # the backend of its artifacts (part of its identity)


def join(
    quality_docs: list[QualityRecord], run_docs: list[RunRecord]
) -> dict[str, ConfigData]:
    """Configurations seen in either kind of artifact, keyed by identity (current artifacts only)."""
    out: dict[str, ConfigData] = {}

    def get(
        backend: str,
        name: str,
        sha256: str | None,
        size_bytes: int | None,
        settings: dict[str, Any],
    ) -> ConfigData:
        ident = quality_mod.config_identity(backend, sha256, settings)
        if ident not in out:
            out[ident] = ConfigData(
                ident,
                name,
                sha256,
                quality_mod.output_settings(settings),
                size_bytes,
                backend=backend,
            )
        return out[ident]

    for q in quality_mod.latest_per_key([d for d in quality_docs]):
        if q.ok:
            get(
                q.backend,
                q.model_name,
                q.model_sha256,
                q.model.get("size_bytes"),
                q.requested,
            ).quality.append(q)
    every: dict[str, list[RunRecord]] = {}
    for r in list(run_docs):
        if r.ok:
            every.setdefault(r.key, []).append(r)
    for r in latest_runs(run_docs):
        if r.ok and not r.synthetic:
            # a file's identity is its sha256 (as quality artifacts key it); an endpoint model's is its own
            cfg = get(
                r.backend,
                r.model_name,
                r.model_identity,
                r.model_size_bytes,
                r.requested,
            )
            cfg.runs.setdefault(r.host_id, []).append(r)
            cfg.run_history[r.key] = sorted(
                every.get(r.key, [r]), key=lambda x: (x.created, x.id)
            )
    for cfg in out.values():  # per suite and prompt style, only runs of its newest content (an edited suite supersedes)
        newest: dict[tuple[str, str], QualityRecord] = {}

        def ss(q: QualityRecord) -> tuple[str, str]:
            return q.suite_name, q.prompt_style

        for q in sorted(cfg.quality, key=lambda q: (q.created, q.id)):
            newest[ss(q)] = q
        cfg.quality = [
            q
            for q in cfg.quality
            if q.suite.content_sha256 == newest[ss(q)].suite.content_sha256
        ]
    return out


def _fmt(v: float | None, decimals: int = 2) -> str:
    return (
        "—"
        if v is None or (isinstance(v, float) and math.isnan(v))
        else f"{v:,.{decimals}f}"
    )


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0%}"


def items_to_settle(passed: int, n: int, floor: float) -> int | None:
    """How many more items, at the observed pass rate, would put the Wilson CI95 wholly on one
    side of ``floor`` (None: the rate equals the floor, or more than SETTLE_CAP items)."""
    from core import stats

    p = passed / n if n else 0.0
    if n == 0 or abs(p - floor) < 1e-12:
        return None
    lo_n, hi_n = n, n
    while (
        hi_n - n <= SETTLE_CAP
    ):  # exponential search, then bisection on the total item count
        k = round(p * hi_n)
        lo, hi = stats.wilson_interval(k, hi_n)
        if (p > floor and lo >= floor) or (p < floor and hi < floor):
            break
        lo_n, hi_n = hi_n, hi_n * 2
    else:
        return None
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        lo, hi = stats.wilson_interval(round(p * mid), mid)
        if (p > floor and lo >= floor) or (p < floor and hi < floor):
            hi_n = mid
        else:
            lo_n = mid
    return hi_n - n


def _pick_style(
    docs: list[QualityRecord], wanted: str | None
) -> tuple[str | None, list[QualityRecord]]:
    """The runs of one prompt style: the one asked for, else the style with the most scored items."""
    by_style: dict[str, list[QualityRecord]] = {}
    for d in docs:
        by_style.setdefault(d.prompt_style, []).append(d)
    if wanted is not None:
        return wanted, by_style.get(wanted, [])
    if not by_style:
        return None, []
    style = max(by_style, key=lambda st: (sum(d.n_items for d in by_style[st]), st))
    return style, by_style[style]


def _quality_evidence(
    req: QualityReq, cfg: ConfigData, min_items: int
) -> tuple[Evidence, float | None]:
    style, docs = _pick_style(
        [d for d in cfg.quality if d.suite_name == req.suite], req.prompt_style
    )
    label = quality_mod.suite_style(req.suite, style) if style else req.suite
    what = f"{label}{' [' + req.tag + ']' if req.tag else ''} pass rate ≥ {req.min:.0%} (CI95 lower bound)"
    if not docs:
        return Evidence(
            "quality",
            what,
            None,
            reason="no data",
            message=f"no quality run of suite {req.suite}"
            + (f" in prompt style {req.prompt_style}" if req.prompt_style else ""),
        ), None
    # several current artifacts of one style (other samples, other hosts): pool their items, newest per item id
    items: dict[str, Verdict] = {}
    for d in sorted(docs, key=lambda d: (d.created, d.id)):
        for it in d.verdicts:
            if req.tag is None or req.tag in it.tags:
                items[it.id] = it
    read = {(req.suite, style or "", iid): bool(it.passed) for iid, it in items.items()}
    ids = [("quality", d.id) for d in docs]
    n, passed = len(items), sum(1 for it in items.values() if it.passed)
    r = quality_mod.rate(passed, n)
    if n < min_items:
        return Evidence(
            "quality",
            what,
            None,
            value=f"{passed}/{n}",
            reason="no data",
            artifacts=ids,
            n=n,
            message=f"only {n} scored item(s) (at least {min_items} needed)",
        ), None
    lo, hi = r["ci95_low"], r["ci95_high"]
    value = f"{_pct(r['pass_rate'])} ({passed}/{n})"
    common = dict(value=value, artifacts=ids, n=n, ci=(lo, hi), items=read)
    if (
        req.min >= 1.0
    ):  # no lower bound reaches 100%: a 100% floor means no failure at all
        ok = passed == n
        return Evidence(
            "quality",
            what.replace(" (CI95 lower bound)", " (every item)"),
            ok,
            **common,
            reason=None if ok else "below quality floor",
            message=""
            if ok
            else f"{n - passed} of {n} items failed; the floor allows none",
        ), r["pass_rate"]
    if lo >= req.min:
        return Evidence("quality", what, True, **common), r["pass_rate"]
    if hi < req.min:
        return Evidence(
            "quality",
            what,
            False,
            **common,
            reason="below quality floor",
            message=f"{label} pass rate {_pct(r['pass_rate'])}, CI95 {_pct(lo)}–{_pct(hi)} lies below "
            f"{req.min:.0%}",
        ), r["pass_rate"]
    more = items_to_settle(passed, n, req.min)
    settle = (
        f"about {more:,} more items at this rate would settle it"
        if more is not None
        else "the observed rate sits on the floor: more items alone may not settle it"
    )
    return Evidence(
        "quality",
        what,
        None,
        **common,
        reason="not resolved",
        message=f"CI95 {_pct(lo)}–{_pct(hi)} contains the floor {req.min:.0%}; {settle}",
    ), r["pass_rate"]


def _speed_evidence(
    req: SpeedReq, cfg: ConfigData, host: str | None, fx: facts_mod.Facts | None = None
) -> tuple[Evidence, float | None]:
    m = METRICS[req.metric]
    bound = (
        f"≥ {_fmt(req.min, m.decimals)}"
        if req.min is not None
        else f"≤ {_fmt(req.max, m.decimals)}"
    )
    what = f"{req.test} {m.label} {bound} {m.unit}" + (f" on {host}" if host else "")
    if host is None:
        return Evidence(
            "speed",
            what,
            None,
            reason="no data",
            message="no speed artifact on any host",
        ), None
    docs = [
        d
        for d in cfg.runs.get(host, [])
        if d.test_name == req.test
        and (d.stat(req.metric) or Summary()).mean is not None
    ]
    if not docs:
        return Evidence(
            "speed",
            what,
            None,
            reason="no data",
            message=f"no {req.test} run measuring {req.metric} on {host}",
        ), None
    d = max(docs, key=lambda d: (d.created, d.id))
    if fx is None:  # the configuration's own runs (a caller without the loaded set)
        fx = facts_mod.of([x for runs in cfg.run_history.values() for x in runs])
    # the run is the unit: the figure of the group of this configuration's newest run (pipelines.facts)
    fig = fx.figure_of(d.id, req.metric)
    if fig is None:
        return Evidence(
            "speed",
            what,
            None,
            reason="no data",
            message=f"no {req.test} run measuring {req.metric} on {host}",
        ), None
    value, lo, hi, note, k = fig.mean, fig.ci95_low, fig.ci95_high, fig.note, fig.runs
    if (
        lo is None or hi is None
    ):  # one run and no run-to-run noise known: no interval, the mean decides
        lo = hi = value
        note = f"{note}: the mean decides"
    shown = f"{_fmt(value, m.decimals)} {m.unit}" + (f" ({k} runs)" if k > 1 else "")
    common = dict(
        value=shown,
        artifacts=[("run", rid) for rid in reversed(fig.run_ids)],
        n=k,
        ci=(lo, hi),
        note=note,
        figure=fig,
    )
    # the bound is checked against the side of the CI95 that could fail it
    passes = lo >= req.min if req.min is not None else hi <= req.max
    fails = hi < req.min if req.min is not None else lo > req.max
    if passes:
        return Evidence("speed", what + " (CI95)", True, **common), value
    if fails:
        return Evidence(
            "speed",
            what + " (CI95)",
            False,
            **common,
            reason="too slow",
            message=f"{req.test} {m.label} {_fmt(value, m.decimals)} {m.unit} (CI95 {_fmt(lo, m.decimals)}–"
            f"{_fmt(hi, m.decimals)}, {note}), needs {bound}",
        ), value
    threshold = req.min if req.min is not None else req.max
    half = (hi - lo) / 2
    gap = abs(value - threshold)
    more = None
    if gap > 0 and half > 0:
        more = max(1, math.ceil(k * (half / gap) ** 2) - k)
    settle = (
        f"about {more:,} more runs would settle it"
        if more is not None and more <= SETTLE_CAP
        else "the mean sits on the threshold"
    )
    return Evidence(
        "speed",
        what + " (CI95)",
        None,
        **common,
        reason="not resolved",
        message=f"CI95 {_fmt(lo, m.decimals)}–{_fmt(hi, m.decimals)} ({note}) contains {bound}; {settle}",
    ), value


def nbytes(value: float) -> str:
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024:
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v:,.1f} TiB"


def measured_peak(cfg: ConfigData, host: str | None) -> tuple[int, RunRecord] | None:
    """The highest peak memory (RSS, or VRAM on a GPU host) the configuration's runs on the host
    measured, with the run that measured it; None without such a run."""
    docs = cfg.runs.get(host, []) if host else []
    peaks = [
        (
            max(
                filter(None, [d.resources.peak_rss_bytes, d.resources.peak_vram_bytes]),
                default=None,
            ),
            d,
        )
        for d in docs
    ]
    found = [(p, d) for p, d in peaks if p]
    return max(found, key=lambda x: x[0]) if found else None


def _memory_evidence(
    cap: int, cfg: ConfigData, host: str | None
) -> tuple[Evidence, int | None]:
    what = f"peak memory ≤ {nbytes(cap)}"
    found = measured_peak(cfg, host)
    if found:
        peak, d = found
        ok = peak <= cap
        return Evidence(
            "memory",
            what,
            ok,
            value=nbytes(peak),
            artifacts=[("run", d.id)],
            reason=None if ok else "does not fit",
            message="" if ok else f"peak {nbytes(peak)} measured > cap {nbytes(cap)}",
        ), peak
    if cfg.size_bytes and cfg.size_bytes > cap:
        return Evidence(
            "memory",
            what,
            False,
            value=f"file {nbytes(cfg.size_bytes)}",
            reason="does not fit",
            message=f"the model file alone ({nbytes(cfg.size_bytes)}) exceeds the cap",
        ), cfg.size_bytes
    return Evidence(
        "memory",
        what,
        None,
        reason="no data",
        message="no measured peak memory on this host"
        if host
        else "no speed artifact on any host",
    ), None


def _degeneration_evidence(
    cfg: ConfigData, max_rate: float, docs: list[QualityRecord] | None = None
) -> Evidence:
    """Share of degenerate outputs over the runs the role's quality requirements read (all runs
    of the configuration when none is given)."""
    docs = cfg.quality if docs is None else docs
    pooled: dict[tuple[str, str], Verdict] = {}  # newest verdict per (suite, item)
    for d in sorted(docs, key=lambda d: (d.created, d.id)):
        for it in d.verdicts:
            pooled[(d.suite_name, it.id)] = it
    items = list(pooled.values())
    what = f"degenerate outputs ≤ {max_rate:.0%}"
    if not items:
        return Evidence(
            "degeneration", what, None, reason="no data", message="no quality run"
        )
    bad = [it for it in items if it.degenerate]
    share = len(bad) / len(items)
    ok = share <= max_rate
    flags = sorted({f for it in bad for f in it.flags})
    return Evidence(
        "degeneration",
        what,
        ok,
        value=f"{_pct(share)} ({len(bad)}/{len(items)})",
        n=len(items),
        artifacts=[("quality", d.id) for d in docs],
        reason=None if ok else "degenerate",
        message=""
        if ok
        else f"{len(bad)} of {len(items)} outputs degenerate ({', '.join(flags)})",
    )


def _serving_evidence(
    req: ServingReq,
    cfg: ConfigData,
    host: str | None,
    index: dict[tuple[str, str], dict[str, list[dict[str, Any]]]],
) -> list[Evidence]:
    """The role's serving requirement against the capacity answers and probes of this configuration on
    the host: its own runs only (the same backend, server, model and output settings: a capacity search
    of llama-server says nothing about an in-process configuration of the same model file). The interval
    decides (its lower bound meets the need: ok; its upper bound is below it: too slow; it straddles:
    not resolved)."""
    out: list[Evidence] = []
    mine = {r.id for r in cfg.runs.get(host or "", [])}
    found = index.get((host or "", cfg.model_sha256)) or {"capacity": [], "probe": []}
    found = {
        part: [row for row in rows if row["id"] in mine] for part, rows in found.items()
    }
    what_runs = f"this configuration ({cfg.backend or 'its backend'})"
    need = req.users if req.users is not None else req.rate
    if need is not None:
        unit = "users" if req.users is not None else "req/s"
        what = f"{need:g} {unit} at SLO" + (f" on {host}" if host else "")
        rows = [r for r in found["capacity"] if r["unit"] == unit]
        if not rows:
            out.append(
                Evidence(
                    "serving",
                    what,
                    None,
                    reason="no data",
                    message=f"no capacity search in {unit} of {what_runs} on {host or 'any host'}",
                )
            )
        else:
            best = max(
                rows,
                key=lambda r: (r["answer"]["low"], r["answer"]["answer"], r["created"]),
            )
            a = best["answer"]
            common = dict(
                value=best["answer_text"] + f" ({best['endpoint']})",
                artifacts=[("run", best["id"])],
                ci=(a["low"], a["high"]),
            )
            if a["low"] >= need:
                out.append(Evidence("serving", what, True, **common))
            elif a["high"] < need and not a.get("open_above"):
                out.append(
                    Evidence(
                        "serving",
                        what,
                        False,
                        **common,
                        reason="too slow",
                        message=f"{best['endpoint']} takes {a['answer']:g} {unit} [{a['low']:g}, "
                        f"{a['high']:g}] at {best['slo'].describe()}; the role needs {need:g}",
                    )
                )
            else:
                out.append(
                    Evidence(
                        "serving",
                        what,
                        None,
                        **common,
                        reason="not resolved",
                        message=f"capacity interval [{a['low']:g}, {a['high']:g}] contains {need:g} {unit}: "
                        "more requests at the boundary levels would settle it",
                    )
                )
    for case in req.probes:
        what = f"endpoint probe: {case}" + (f" on {host}" if host else "")
        rows = [(p, p["cases"][case]) for p in found["probe"] if case in p["cases"]]
        if not rows:
            out.append(
                Evidence(
                    "serving",
                    what,
                    None,
                    reason="no data",
                    message=f"no probe of {case} of {what_runs} on {host or 'any host'}",
                )
            )
            continue
        p, c = max(
            rows, key=lambda x: (x[1]["succeeded"] / max(1, x[1]["n"]), x[0]["created"])
        )
        ok = c["succeeded"] == c["n"]
        out.append(
            Evidence(
                "serving",
                what,
                ok,
                value=f"{c['succeeded']}/{c['n']} ({p['endpoint']})",
                artifacts=[("run", p["id"])],
                reason=None if ok else "missing capability",
                message=""
                if ok
                else f"{case} succeeded {c['succeeded']} of {c['n']} times on "
                f"{p['endpoint']}: {'; '.join(c.get('reasons') or [])[:200]}",
            )
        )
    return out


@dataclass(frozen=True)
class HostFree:
    """What a role's judgement of a configuration reads from no host (``judge_host_free``): its label, the
    capability, quality and degeneration evidence (quality is read from any host's artifacts: a greedy answer
    does not depend on the host), the items those read and the quality values. The same on every host's
    page: a Pool figures it once per role and configuration and every host's candidate shares it (nothing
    mutates an Evidence once made; each Candidate gets its own list and items)."""

    config_label: str
    evidence: tuple[Evidence, ...]
    items: dict[tuple[str, str, str], bool]
    qualities: tuple[float | None, ...]


def judge_host_free(
    role: Role,
    cfg: ConfigData,
    defaults: Defaults,
    capabilities: dict[str, list[str]],
) -> HostFree:
    """The part of ``evaluate`` that does not depend on the host: capabilities, every quality requirement
    (which reads every quality artifact of the configuration) and the degeneration check."""
    evidence: list[Evidence] = []
    items: dict[tuple[str, str, str], bool] = {}
    if role.capabilities:
        have = capabilities.get(cfg.model)
        missing = [cap for cap in role.capabilities if cap not in (have or [])]
        what = "capabilities: " + ", ".join(role.capabilities)
        if have is None:
            evidence.append(
                Evidence(
                    "capability",
                    what,
                    None,
                    reason="no data",
                    message=f"{cfg.model} is not in data/models.yaml",
                )
            )
        else:
            evidence.append(
                Evidence(
                    "capability",
                    what,
                    not missing,
                    value=", ".join(have) or "none",
                    reason="missing capability" if missing else None,
                    message=f"lacks {', '.join(missing)}" if missing else "",
                )
            )
    qualities = []
    read: dict[str, QualityRecord] = {}  # the runs the quality requirements read
    for req in role.quality:
        ev, value = _quality_evidence(req, cfg, role.min_items or defaults.min_items)
        evidence.append(ev)
        items.update(ev.items)
        qualities.append(value)
        read.update(
            {
                aid: d
                for d in cfg.quality
                for kind, aid in ev.artifacts
                if kind == "quality" and d.id == aid
            }
        )
    if role.quality:  # a speed-only role does not read outputs: no degeneration check
        evidence.append(
            _degeneration_evidence(
                cfg,
                role.max_degenerate_rate
                if role.max_degenerate_rate is not None
                else defaults.max_degenerate_rate,
                list(read.values()),
            )
        )
    return HostFree(
        quality_mod.config_label(cfg.settings), tuple(evidence), items, tuple(qualities)
    )


def evaluate(
    role: Role,
    cfg: ConfigData,
    host: str | None,
    defaults: Defaults,
    capabilities: dict[str, list[str]],
    fx: facts_mod.Facts | None = None,
    serving: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] | None = None,
    host_free: HostFree | None = None,
) -> Candidate:
    """The role's judgement of a configuration on a host. ``host_free``: its host-independent part
    (``judge_host_free`` of the same role and configuration), when already figured (``Pool.host_free``)."""
    free = host_free or judge_host_free(role, cfg, defaults, capabilities)
    c = Candidate(
        cfg.identity,
        cfg.model,
        free.config_label,
        cfg.settings,
        list(free.evidence),
        items=dict(free.items),
    )
    c.backend = (
        ", ".join(sorted({r.backend_name for r in cfg.runs.get(host or "", [])}))
        or cfg.backend
    )
    qualities = free.qualities
    for i, req in enumerate(role.speed):
        ev, value = _speed_evidence(req, cfg, host, fx)
        c.evidence.append(ev)
        if i == 0 and value is not None:
            c.speed_key = value if METRICS[req.metric].higher_is_better else -value
    if role.serving is not None:
        c.evidence.extend(_serving_evidence(role.serving, cfg, host, serving or {}))
    if role.memory_max is not None:
        ev, peak = _memory_evidence(role.memory_max, cfg, host)
        c.evidence.append(ev)
        c.memory_bytes = peak
    found = measured_peak(cfg, host)
    if found:  # what keeping it resident costs (the tier budget), whether or not the role caps it
        c.peak_bytes, c.peak_run = found[0], found[1].id
    known = [q for q in qualities if q is not None]
    c.quality_key = (
        sum(known) / len(known) if known and len(known) == len(qualities) else None
    )
    return c


def rank_key(role: Role, c: Candidate) -> tuple:
    neg = lambda v: -v if v is not None else math.inf  # noqa: E731 - missing sorts last
    speed, qual = neg(c.speed_key), neg(c.quality_key)
    first, second = (speed, qual) if role.prefer == "speed" else (qual, speed)
    return (
        first,
        second,
        c.memory_bytes if c.memory_bytes is not None else math.inf,
        c.model,
        c.config_label,
    )


def _secondary_key(role: Role, c: Candidate) -> tuple:
    return rank_key(role, c)[1:]


def within_noise(role: Role, a: Candidate, b: Candidate) -> bool:
    """Whether two candidates are within noise on the role's first key (``TIE_RULE``)."""
    if role.prefer == "speed":
        if not role.speed:
            return False
        ea = next((e for e in a.evidence if e.kind == "speed"), None)
        eb = next((e for e in b.evidence if e.kind == "speed"), None)
        if (
            ea is None
            or eb is None
            or not ea.ci
            or not eb.ci
            or None in ea.ci
            or None in eb.ci
        ):
            return False
        if (
            ea.ci[0] == ea.ci[1] or eb.ci[0] == eb.ci[1]
        ):  # no interval: the mean decides
            return False
        return ea.ci[0] <= eb.ci[1] and eb.ci[0] <= ea.ci[1]
    shared = sorted(set(a.items) & set(b.items))
    if not shared:
        return False
    pc = stats.paired_rates([a.items[k] for k in shared], [b.items[k] for k in shared])
    return pc.verdict == "within noise"


def order_with_ties(
    role: Role, eligible: list[Candidate]
) -> tuple[list[Candidate], Tie | None]:
    """Eligible candidates in the order of ``TIE_RULE``: repeatedly, of the remaining ones, those within
    noise of the best on the first key are tied and the second key (then memory, then name) picks one.
    Also the tie of the first pick (None when it was not tied)."""
    remaining = sorted(eligible, key=lambda c: rank_key(role, c))
    out: list[Candidate] = []
    first_tie = None
    while remaining:
        best = remaining[0]
        tied = [c for c in remaining if c is best or within_noise(role, best, c)]
        pick = min(tied, key=lambda c: _secondary_key(role, c))
        if not out and len(tied) > 1:
            req = (
                next(
                    (e.requirement for e in best.evidence if e.kind == "speed"), "speed"
                )
                if role.prefer == "speed"
                else "mean pass rate over " + ", ".join(q.suite for q in role.quality)
            )
            second = "mean pass rate" if role.prefer == "speed" else "speed"
            first_tie = Tie(
                req,
                [c for c in tied if c is not pick],
                f"{second}, then peak memory, then name",
            )
        out.append(pick)
        remaining.remove(pick)
    return out, first_tie


def hosts_for(role: Role, configs: dict[str, ConfigData]) -> list[str | None]:
    if role.host:
        return [role.host]
    hosts = sorted({h for cfg in configs.values() for h in cfg.runs})
    return hosts or [None]


@dataclass
class Pool:
    """What every assignment reads, figured once for a set (``prepare``): the configurations (any host's
    runs and quality artifacts), the speed figures, the serving index, the configurations measured on each
    host and those measured nowhere. ``assign`` judges one role on one host from it."""

    reg: RolesFile
    configs: dict[str, ConfigData]
    capabilities: dict[str, list[str]]
    fx: facts_mod.Facts
    serving: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] | None
    on_host: dict[str, list[ConfigData]]
    unmeasured: list[ConfigData]
    # figured on first use, then read by every host's assignments
    _host_free: dict[tuple[str, str], HostFree] = field(
        default_factory=dict, repr=False, compare=False
    )
    _hosts: dict[str, list[str | None]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def host_free(self, name: str, cfg: ConfigData) -> HostFree:
        """Role ``name``'s host-independent judgement of ``cfg`` (``judge_host_free``), once per Pool: every
        host's page shares it, so the quality artifacts of a configuration (every host's reruns) are read once
        per role, not once per role and host."""
        key = (name, cfg.identity)
        found = self._host_free.get(key)
        if found is None:
            found = self._host_free[key] = judge_host_free(
                self.reg.roles[name], cfg, self.reg.defaults, self.capabilities
            )
        return found

    def hosts_for(self, name: str) -> list[str | None]:
        """``hosts_for`` of role ``name`` over this Pool's configurations, once per Pool."""
        if name not in self._hosts:
            self._hosts[name] = hosts_for(self.reg.roles[name], self.configs)
        return self._hosts[name]


def prepare(
    reg: RolesFile,
    quality_docs: list[QualityRecord],
    run_docs: list[RunRecord],
    capabilities: dict[str, list[str]],
    registry_models: list[str] | None = None,
) -> Pool:
    configs = join(quality_docs, run_docs)
    serving_idx = None
    if any(r.serving is not None for r in reg.roles.values()):
        from pipelines.serving import serving_index

        serving_idx = serving_index(run_docs)
    for name in (
        registry_models or []
    ):  # a registered model with no artifact at all is a candidate with no data
        if not any(c.model == name for c in configs.values()):
            configs[f"registry:{name}"] = ConfigData(f"registry:{name}", name, "", {})
    fx = facts_mod.of(run_docs)  # every speed figure, once per loaded set
    on_host: dict[str, list[ConfigData]] = {}  # configurations measured on each host
    unmeasured = [
        cfg for cfg in configs.values() if not cfg.runs
    ]  # quality-only or registry-only
    for cfg in configs.values():
        for h in cfg.runs:
            on_host.setdefault(h, []).append(cfg)
    return Pool(reg, configs, capabilities, fx, serving_idx, on_host, unmeasured)


def assign(pool: Pool, name: str, host: str | None) -> Assignment:
    """The role ``name`` on ``host``."""
    role = pool.reg.roles[name]
    # A role that reads speed or memory judges a configuration on a host by its runs there:
    # the candidates are those measured on it, plus those measured nowhere (rejected for it,
    # visibly). A configuration measured only on other hosts is judged on those hosts' pages,
    # which keeps the work per role linear in the number of configurations.
    if (
        role.speed or role.memory_max is not None or role.serving is not None
    ) and host is not None:
        candidates = pool.on_host.get(host, []) + pool.unmeasured
    else:
        candidates = list(pool.configs.values())
    cands = [
        evaluate(
            role,
            cfg,
            host,
            pool.reg.defaults,
            pool.capabilities,
            pool.fx,
            pool.serving,
            pool.host_free(name, cfg),
        )
        for cfg in candidates
    ]
    for c in cands:
        if c.identity.startswith("registry:"):
            c.config_label = "no artifacts"
    eligible, tie = order_with_ties(role, [c for c in cands if c.eligible])
    rejected = sorted(
        [c for c in cands if not c.eligible],
        key=lambda c: (c.model, c.config_label),
    )
    return Assignment(
        name,
        role,
        host,
        eligible[0] if eligible else None,
        eligible[1:],
        rejected,
        tie,
    )


def assignments_on(pool: Pool, host: str) -> list[Assignment]:
    """Every role's assignment on one host (roles in registry order): those ``recommend`` gives it."""
    return [
        assign(pool, name, host)
        for name in pool.reg.roles
        if host in pool.hosts_for(name)
    ]


def recommend(
    reg: RolesFile,
    quality_docs: list[QualityRecord],
    run_docs: list[RunRecord],
    capabilities: dict[str, list[str]],
    registry_models: list[str] | None = None,
) -> list[Assignment]:
    """One assignment per role and host (roles in registry order, hosts sorted)."""
    pool = prepare(reg, quality_docs, run_docs, capabilities, registry_models)
    return [
        assign(pool, name, host) for name in reg.roles for host in pool.hosts_for(name)
    ]


def escalation_chains(reg: RolesFile) -> list[list[str]]:
    """Every maximal chain a -> b -> c of escalates_to, starting at roles nothing escalates to."""
    targets = {r.escalates_to for r in reg.roles.values() if r.escalates_to}
    chains = []
    for name, role in reg.roles.items():
        if name in targets or not role.escalates_to:
            continue
        chain, cur = [name], role.escalates_to
        while cur:
            chain.append(cur)
            cur = reg.roles[cur].escalates_to
        chains.append(chain)
    return chains


def model_capabilities() -> tuple[dict[str, list[str]], list[str]]:
    """Capabilities per registry model, and the registry's model names (data/models.yaml).

    The registry is an input of the run stage (runtime.models.registry validates it before anything
    runs); the site only reads each entry's ``capabilities`` list, and ignores what it cannot read."""
    from core.paths import data_dir, project_root
    from core.yamlio import load_yaml

    path = data_dir() / "models.yaml"
    raw = load_yaml(path if path.exists() else project_root() / "data" / "models.yaml")
    models = (raw or {}).get("models") or {} if isinstance(raw, dict) else {}
    caps = {
        str(name): [str(c) for c in (e or {}).get("capabilities") or []]
        if isinstance(e, dict)
        else []
        for name, e in models.items()
    }
    return caps, list(caps)
