"""Go/no-go gates (seed 000's "GO/NO-GO criteria"): thresholds an optimization must clear, checked
against measurements, and the decisions they lead to, recorded with their evidence.

An optimization of ``data/optimizations.yaml`` may declare ``gates``. A gate names what it
measures (its ``quantity`` on a ``model`` and ``test``), which side is better (``direction``),
a ``target`` and a ``no_go`` threshold. Its candidate is the newest successful run (or quality
run) that realises the optimization's settings (plus the gate's own ``settings`` pins); its
comparison point is the run whose requested settings are the candidate's with the gate's
``baseline`` settings (else the candidate's sweep baseline).

Quantities:

* ``ratio``: candidate mean ÷ baseline mean of ``metric``, CI95 on the log scale (``core.stats.compare``);
* ``difference``: candidate mean − baseline mean of ``metric``, Welch CI95;
* ``value``: the candidate's own ``metric`` (mean and CI95 where it has several samples);
* ``kv_cache_ratio``: llama.cpp's KV buffer of the candidate ÷ the baseline's (its load log: exact);
* ``text_agreement``: share of greedy token positions equal to the baseline's (exact);
* ``quality_delta``: pass rate of the candidate minus the baseline on the same items of a
  ``suite`` in a ``prompt_style`` (paired; Agresti-Min adjusted Wald CI95 of a paired difference).

**Verdict** (:func:`gate_verdict`, kept apart from the comparison verdicts elsewhere): with
``direction: higher``, GO when the whole CI95 is at or above the target, NO-GO when the whole
CI95 is below the no-go threshold; with ``lower``, GO when it is at or below the target and
NO-GO when it is above the no-go threshold. Anything else is UNDECIDED, with the reason; no
measurement is NOT MEASURED. An optimization is NO-GO when any gate is, GO when all are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core import artifacts, stats
from core.metrics import METRICS
from core.paths import data_dir, relpath
from core.records.decision import DecisionRecord, artifact_path, new_decision, signature
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines.memo import per_set

QUANTITIES = (
    "ratio",
    "difference",
    "value",
    "kv_cache_ratio",
    "text_agreement",
    "quality_delta",
)
VERDICTS = ("GO", "NO-GO", "UNDECIDED", "NOT MEASURED")


class Gate(BaseModel):
    """One go/no-go criterion of an optimization."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(
        ..., pattern=r"^[a-z0-9][a-z0-9-]*$", description="Short id of the gate."
    )
    name: str = Field(..., min_length=1, description="What the gate checks, in words.")
    concern: Literal["overhead", "memory", "quality", "speed"] = Field(
        ..., description="Which of seed 000's concerns it answers."
    )
    quantity: Literal[
        "ratio",
        "difference",
        "value",
        "kv_cache_ratio",
        "text_agreement",
        "quality_delta",
    ] = Field(..., description="What is measured (see pipelines.gates).")
    metric: str | None = Field(
        None,
        description="The metric of ratio, difference and value gates (a registered metric).",
    )
    model: str = Field(..., description="Model name of the evidence runs.")
    test: str | None = Field(
        None, description="Test name of the evidence runs (run quantities)."
    )
    matrix: str | None = Field(None, description="Only runs of this matrix.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra requested settings the candidate must have.",
    )
    baseline: dict[str, Any] | None = Field(
        None,
        description="Settings of the comparison point over the candidate's (default: its sweep baseline).",
    )
    suite: str | None = Field(None, description="quality_delta: the suite.")
    prompt_style: str | None = Field(
        None, description="quality_delta: the prompt style."
    )
    direction: Literal["higher", "lower"] = Field(
        ..., description="Which side of the thresholds is better."
    )
    target: float = Field(
        ..., description="GO when the whole CI95 is on the good side of this."
    )
    no_go: float = Field(
        ..., description="NO-GO when the whole CI95 is on the bad side of this."
    )
    unit: str = Field(
        "",
        description="Unit of the quantity, for the page (default: from the metric or the quantity).",
    )

    @model_validator(mode="after")
    def _check(self) -> Gate:
        if self.quantity in ("ratio", "difference", "value"):
            if not self.metric or self.metric not in METRICS:
                raise ValueError(
                    f"a {self.quantity} gate needs metric, a registered metric (got {self.metric!r})"
                )
        if self.quantity == "quality_delta":
            if not self.suite or not self.prompt_style:
                raise ValueError("a quality_delta gate needs suite and prompt_style")
        elif not self.test:
            raise ValueError(f"a {self.quantity} gate needs test")
        if self.direction == "higher" and self.no_go > self.target:
            raise ValueError(
                f"direction higher needs no_go <= target (got no_go {self.no_go}, target {self.target})"
            )
        if self.direction == "lower" and self.no_go < self.target:
            raise ValueError(
                f"direction lower needs no_go >= target (got no_go {self.no_go}, target {self.target})"
            )
        return self

    @property
    def display_unit(self) -> str:
        if self.unit:
            return self.unit
        if self.quantity in ("ratio", "kv_cache_ratio"):
            return "×"
        if self.quantity in ("text_agreement", "quality_delta"):
            return "share"
        return METRICS[self.metric].unit if self.metric else ""


@dataclass
class GateResult:
    gate: Gate
    verdict: str
    reason: str
    value: float | None = None
    ci95: tuple[float | None, float | None] = (None, None)
    exact: bool = (
        False  # no sampling error: the value is what llama.cpp or the text says
    )
    n: tuple[int, int] | None = None  # samples (baseline, candidate), or items
    evidence: dict[str, Any] = field(default_factory=dict)  # run / quality ids


def gate_verdict(
    gate: Gate, value: float | None, low: float | None, high: float | None
) -> tuple[str, str]:
    """GO, NO-GO or UNDECIDED from a value and its CI95 (an exact value: low = high = value)."""
    if value is None:
        return "NOT MEASURED", "no value"
    lo = value if low is None else low
    hi = value if high is None else high
    what = "the value" if low is None and high is None else "the CI95"
    t, ng = gate.target, gate.no_go
    if gate.direction == "higher":
        if lo >= t:
            return "GO", f"{what} lies at or above the target {t:g}"
        if hi < ng:
            return "NO-GO", f"{what} lies below the no-go threshold {ng:g}"
        if hi < t and lo >= ng:
            return (
                "UNDECIDED",
                f"{what} lies between the no-go threshold {ng:g} and the target {t:g}",
            )
        return (
            "UNDECIDED",
            f"the CI95 straddles {'the target' if hi >= t else 'the no-go threshold'} (target {t:g}, no-go {ng:g})",
        )
    if hi <= t:
        return "GO", f"{what} lies at or below the target {t:g}"
    if lo > ng:
        return "NO-GO", f"{what} lies above the no-go threshold {ng:g}"
    if lo > t and hi <= ng:
        return (
            "UNDECIDED",
            f"{what} lies between the target {t:g} and the no-go threshold {ng:g}",
        )
    return (
        "UNDECIDED",
        f"the CI95 straddles {'the target' if lo <= t else 'the no-go threshold'} (target {t:g}, no-go {ng:g})",
    )


def decision(results: list[GateResult]) -> str:
    verdicts = [r.verdict for r in results]
    if not verdicts:
        return "NOT MEASURED"
    if "NO-GO" in verdicts:
        return "NO-GO"
    if all(v == "GO" for v in verdicts):
        return "GO"
    if all(v == "NOT MEASURED" for v in verdicts):
        return "NOT MEASURED"
    return "UNDECIDED"


# -- statistics ------------------------------------------------------------------------------------
def welch_difference(
    a: list[float], b: list[float]
) -> tuple[float | None, float | None, float | None]:
    """mean(b) − mean(a) with a Welch CI95."""
    if not a or not b:
        return None, None, None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    d = mb - ma
    if len(a) < 2 or len(b) < 2:
        return d, None, None
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se2 = va / len(a) + vb / len(b)
    if se2 <= 0:
        return d, d, d
    df = se2**2 / (
        (va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1)
    )
    h = stats.t_critical(df) * math.sqrt(se2)
    return d, d - h, d + h


def paired_difference(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Pass-rate difference (candidate − baseline) on paired items, with the Agresti-Min adjusted
    Wald CI95 (0.5 added to each cell of the 2x2 table), which stays sound when no item changed."""
    n = len(pairs)
    b = sum(1 for base, cand in pairs if base and not cand)  # lost
    c = sum(1 for base, cand in pairs if cand and not base)  # gained
    if n == 0:
        return {"n": 0, "delta": None, "ci95": (None, None), "lost": 0, "gained": 0}
    delta = (c - b) / n
    n2, b2, c2 = n + 2, b + 0.5, c + 0.5
    d2 = (c2 - b2) / n2
    var = ((b2 + c2) - (c2 - b2) ** 2 / n2) / n2**2
    z = 1.959963984540054
    h = z * math.sqrt(max(var, 0.0))
    return {
        "n": n,
        "delta": delta,
        "ci95": (max(-1.0, d2 - h), min(1.0, d2 + h)),
        "lost": b,
        "gained": c,
    }


# -- finding the evidence ---------------------------------------------------------------------------
def _realises(requested: dict[str, Any], settings: dict[str, Any]) -> bool:
    return all(requested.get(k) == v for k, v in settings.items())


@dataclass(frozen=True)
class Current:
    """The newest run of each configuration (pipelines.runs.latest_per_key) by host, the ok ones by key, and
    the newest quality run of each configuration by host: what every gate of every host looks in, made once
    per set (a gate looks at its own host's runs, not at the fleet's)."""

    runs_by_host: dict[str, list[Any]]
    ok_by_key: dict[str, Any]
    quality_by_host: dict[str, list[Any]]


@per_set
def _current_runs(runs: list[Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    from pipelines.runs import latest_per_key

    by_host: dict[str, list[Any]] = {}
    ok_by_key: dict[str, Any] = {}
    for r in latest_per_key(runs):
        by_host.setdefault(r.host_id, []).append(r)
        if r.ok:
            ok_by_key.setdefault(r.key, r)
    return by_host, ok_by_key


@per_set
def _current_quality(quality_docs: list[Any]) -> dict[str, list[Any]]:
    from pipelines.quality import latest_per_key

    by_host: dict[str, list[Any]] = {}
    for d in latest_per_key([q for q in quality_docs]):
        by_host.setdefault(d.host_id, []).append(d)
    return by_host


def current(runs: list[Any], quality_docs: list[Any]) -> Current:
    return Current(*_current_runs(runs), _current_quality(quality_docs))


def find_pair(
    gate: Gate,
    opt_settings: dict[str, Any],
    runs: list[Any],
    host_id: str,
    cur: Current | None = None,
) -> tuple[Any, Any, str | None]:
    """(candidate, baseline, problem) run records of a run-based gate on one host (``cur``: the set's
    Current, when the caller has it)."""
    by_host, ok_by_key = (
        (cur.runs_by_host, cur.ok_by_key) if cur else _current_runs(runs)
    )
    here = by_host.get(host_id, [])
    pins = {**opt_settings, **gate.settings}
    cands = [
        r
        for r in here
        if r.ok
        and r.model_name == gate.model
        and r.test_name == gate.test
        and (gate.matrix is None or r.matrix_name == gate.matrix)
        and _realises(r.requested, pins)
    ]
    if not cands:
        return (
            None,
            None,
            (
                f"no run of {gate.model} · {gate.test} with {', '.join(f'{k}={v}' for k, v in pins.items())}"
                + (f" in matrix {gate.matrix}" if gate.matrix else "")
                + " on this host"
            ),
        )
    cand = max(cands, key=lambda r: (r.created, r.id))
    base = None
    if gate.baseline is not None:
        want = {**cand.requested, **gate.baseline}
        same = [
            r
            for r in here
            if r.ok
            and r.key != cand.key
            and r.model_sha256 == cand.model_sha256
            and r.backend_name == cand.backend_name
            and r.test_definition == cand.test_definition
            and r.requested == want
        ]
        base = max(same, key=lambda r: (r.created, r.id)) if same else None
    if base is None and cand.baseline_key and cand.baseline_key != cand.key:
        base = ok_by_key.get(cand.baseline_key)
    if base is None and gate.quantity != "value":
        return (
            cand,
            None,
            f"no comparison run for {cand.id} ("
            + (
                f"requested settings with {', '.join(f'{k}={v}' for k, v in gate.baseline.items())}"
                if gate.baseline is not None
                else "its sweep names no baseline"
            )
            + ")",
        )
    return cand, base, None


def _metric_values(rec: RunRecord, metric: str) -> list[float]:
    """The per-sample values of one metric (its kind knows where they are: core.kinds)."""
    return rec.values(metric)


def kv_bytes(rec: Any) -> float | None:
    """The KV cache llama.cpp reported allocating for the run (bytes, every buffer); None when not reported."""
    kv = (rec.reported.get("llama_memory_mib") or {}).get("kv") or {}
    return sum(kv.values()) * 1024 * 1024 if kv else None


def evaluate_gate(
    gate: Gate,
    opt_settings: dict[str, Any],
    runs: list[RunRecord],
    quality_docs: list[QualityRecord],
    host_id: str,
    cur: Current | None = None,
) -> GateResult:
    if gate.quantity == "quality_delta":
        return _quality_gate(gate, opt_settings, quality_docs, host_id, cur)
    cand, base, problem = find_pair(gate, opt_settings, runs, host_id, cur)
    if problem:
        return GateResult(
            gate,
            "NOT MEASURED",
            problem,
            evidence={"candidate": cand.id if cand else None},
        )
    ev = {"candidate": cand.id, "baseline": base.id if base else None}
    value = lo = hi = None
    exact = False
    n = None
    # a ratio, difference or value gate has a registered metric (Gate._check)
    metric = gate.metric or ""
    if gate.quantity == "ratio":
        hib = METRICS[metric].higher_is_better
        c = stats.compare(
            _metric_values(base, metric), _metric_values(cand, metric), hib
        )
        value, lo, hi, n = (
            c.ratio,
            c.ci95_low,
            c.ci95_high,
            (c.n_baseline, c.n_candidate),
        )
    elif gate.quantity == "difference":
        a, b = _metric_values(base, metric), _metric_values(cand, metric)
        value, lo, hi = welch_difference(a, b)
        n = (len(a), len(b))
    elif gate.quantity == "value":
        s = cand.stat(metric)
        value, lo, hi = (
            (s.mean, s.ci95_low, s.ci95_high) if s is not None else (None, None, None)
        )
        n = (0, int(s.n or 0) if s is not None else 0)
        exact = lo is None
    elif gate.quantity == "kv_cache_ratio":
        kb, kc = kv_bytes(base), kv_bytes(cand)
        if not kb or kc is None:
            return GateResult(
                gate,
                "NOT MEASURED",
                "llama.cpp's log gives no KV buffer size for these runs",
                evidence=ev,
            )
        value, exact = kc / kb, True
        ev["kv_bytes"] = {"baseline": kb, "candidate": kc}
    elif gate.quantity == "text_agreement":
        from pipelines.optimization import compare_outputs, greedy_outputs

        bo, co = greedy_outputs(base), greedy_outputs(cand)
        if not bo or not co:
            return GateResult(
                gate,
                "NOT MEASURED",
                "these runs keep no greedy outputs (a generate test does)",
                evidence=ev,
            )
        cmp = compare_outputs(bo, co)
        value, exact = cmp["agreement"], True
        ev["first_diff"] = cmp["first_diff"]
    verdict, reason = gate_verdict(
        gate, value, None if exact else lo, None if exact else hi
    )
    if value is not None and not exact and lo is None:
        verdict, reason = "UNDECIDED", "no CI95: too few samples to decide"
    return GateResult(
        gate,
        verdict,
        reason,
        value,
        (lo, hi) if not exact else (value, value),
        exact,
        n,
        ev,
    )


def _quality_gate(
    gate: Gate,
    opt_settings: dict[str, Any],
    quality_docs: list[QualityRecord],
    host_id: str,
    cur: Current | None = None,
) -> GateResult:
    from pipelines.quality import output_settings

    by_host = cur.quality_by_host if cur else _current_quality(quality_docs)
    docs = [
        d
        for d in by_host.get(host_id, [])
        if d.ok
        and d.model_name == gate.model
        and d.suite_name == gate.suite
        and (d.prompt_style or "chat") == gate.prompt_style
    ]
    pins = {**opt_settings, **gate.settings}
    cands = [d for d in docs if _realises(d.requested, pins)]
    if not cands:
        return GateResult(
            gate,
            "NOT MEASURED",
            f"no quality run of {gate.model} on {gate.suite} ({gate.prompt_style}) "
            f"with {', '.join(f'{k}={v}' for k, v in pins.items())} on this host",
        )
    cand = max(cands, key=lambda d: (d.created, d.id))
    # the same output-relevant settings but the gate's baseline ones (threads and other speed-only settings aside)
    want = output_settings({**cand.requested, **(gate.baseline or {})})
    bases = [
        d for d in docs if d.id != cand.id and output_settings(d.requested) == want
    ]
    if not bases:
        return GateResult(
            gate,
            "NOT MEASURED",
            f"no quality run of the same items with {gate.baseline} to compare with",
            evidence={"candidate": cand.id},
        )
    base = max(bases, key=lambda d: (d.created, d.id))
    bi = base.verdicts.by_id()
    pairs = [(bi[it.id], it.passed) for it in cand.verdicts if it.id in bi]
    pd_ = paired_difference(pairs)
    ev = {
        "candidate": cand.id,
        "baseline": base.id,
        "lost": pd_["lost"],
        "gained": pd_["gained"],
        "baseline_passed": sum(1 for b, _ in pairs if b),
        "candidate_passed": sum(1 for _, c in pairs if c),
    }
    if not pd_["n"]:
        return GateResult(
            gate, "NOT MEASURED", "the two quality runs share no item", evidence=ev
        )
    verdict, reason = gate_verdict(gate, pd_["delta"], *pd_["ci95"])
    return GateResult(
        gate,
        verdict,
        reason,
        pd_["delta"],
        pd_["ci95"],
        False,
        (pd_["n"], pd_["n"]),
        ev,
    )


# -- per host ---------------------------------------------------------------------------------------
@dataclass
class OptimizationGates:
    opt: Any  # pipelines.projections.Optimization
    results: list[GateResult]

    @property
    def decision(self) -> str:
        return decision(self.results)


def evaluate(
    catalogue: Any, runs: list[Any], quality_docs: list[QualityRecord], host_id: str
) -> list[OptimizationGates]:
    """Every optimization that declares gates, its gates evaluated on one host."""
    cur = current(runs, quality_docs)
    return [
        OptimizationGates(
            o,
            [
                evaluate_gate(g, o.settings, runs, quality_docs, host_id, cur)
                for g in o.gates
            ],
        )
        for o in catalogue.optimizations
        if o.gates
    ]


def gate_hosts(
    catalogue: Any, runs: list[Any], quality_docs: list[QualityRecord]
) -> list[str]:
    """Hosts with any evidence for any gate."""
    models = {g.model for o in catalogue.optimizations for g in o.gates}
    hosts = {d.host_id for d in runs if d.model_name in models}
    hosts |= {q.host_id for q in quality_docs if q.model_name in models}
    return sorted(
        h
        for h in hosts
        if any(
            r.verdict != "NOT MEASURED"
            for og in evaluate(catalogue, runs, quality_docs, h)
            for r in og.results
        )
    )


# -- decisions on record ------------------------------------------------------------------------------
def decisions_dir() -> Path:
    return data_dir() / "decisions"


def decision_record(
    og: OptimizationGates,
    host_id: str,
    catalogue_file: Path,
    now: datetime | None = None,
) -> dict[str, Any]:
    (
        """A ``decision`` artifact (core.records.decision): the optimization's """
        """decision on one host and every gate's evidence."""
    )
    import hashlib

    return new_decision(
        host_id=host_id,
        created=now or datetime.now(UTC),
        optimization={
            "id": og.opt.id,
            "name": og.opt.name,
            "settings": og.opt.settings,
        },
        catalogue={
            "file": relpath(catalogue_file),
            "sha256": hashlib.sha256(catalogue_file.read_bytes()).hexdigest()
            if catalogue_file.exists()
            else None,
        },
        decision=og.decision,
        gates=[
            {
                "id": r.gate.id,
                "name": r.gate.name,
                "concern": r.gate.concern,
                "quantity": r.gate.quantity,
                "metric": r.gate.metric,
                "direction": r.gate.direction,
                "target": r.gate.target,
                "no_go": r.gate.no_go,
                "verdict": r.verdict,
                "reason": r.reason,
                "value": r.value,
                "ci95_low": r.ci95[0],
                "ci95_high": r.ci95[1],
                "exact": r.exact,
                "n": list(r.n) if r.n else None,
                "evidence": {k: v for k, v in r.evidence.items() if v is not None},
            }
            for r in og.results
        ],
    )


def load_decisions(root: Path | None = None) -> list[DecisionRecord]:
    from pipelines.runs import load_artifacts

    return (
        load_artifacts("decision", root)
        if root is not None
        else load_artifacts("decision")
    )


def write_decisions(
    catalogue: Any,
    runs: list[Any],
    quality_docs: list[QualityRecord],
    *,
    catalogue_file: Path,
    root: Path | None = None,
    now: datetime | None = None,
) -> list[Path]:
    """Record each optimization's decision per host when it differs from the newest one on record
    (a new verdict or new evidence); an unchanged decision is not written again."""
    existing = load_decisions(root) if root is None or root.exists() else []
    root = root or decisions_dir()
    newest: dict[tuple[str, str], DecisionRecord] = {}
    for d in existing:  # oldest first: the newest of each optimization and host stays
        newest[(d.optimization_id, d.host_id)] = d
    paths = []
    for host in gate_hosts(catalogue, runs, quality_docs):
        for og in evaluate(catalogue, runs, quality_docs, host):
            doc = decision_record(og, host, catalogue_file, now)
            prev = newest.get((og.opt.id, host))
            if prev is not None and prev.signature == signature(doc):
                continue
            paths.append(artifacts.write(artifact_path(doc, root), doc))
    return paths
