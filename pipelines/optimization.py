"""Optimization tracks from artifacts alone: sweeps, their baselines, speedups, the lossless check.

A point of a sweep is a run artifact whose ``matrix.sweep`` names the sweep and whose
``matrix.baseline_key`` names the configuration it is compared with (the runner computes
that key before anything runs). For each point this module gives:

* its headline metric (rate tests: tokens/s; generate tests: generation rate; chat:
  decode rate) and its speedup over the baseline, a ratio of means with CI95 and a verdict
  (``core.stats.compare``);
* for generate tests, the lossless check: its greedy token ids against the baseline's on
  the same prompts (identical, or the first differing token and the share of positions that
  agree), and the degeneration detector on its text;
* the track it belongs to (speculative decoding, MoE expert reduction, threads, context
  depth, other settings), read from what the sweep varies.

The command lines that reproduce a point are its backend's knowledge (runtime: the backend's
``command_lines``); the site's composition root (docs/macros.py) hands them to the page builder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core import degeneration, stats
from core.kinds.chat import ChatSamples
from core.kinds.generate import GenerateDetails
from core.kinds.rate import RateTest
from core.records.run import RunRecord
from core.summary import Summary
from pipelines.memo import per_run
from pipelines.runs import latest_per_key

TRACKS = (
    "speculative",
    "experts",
    "moe-speculation",
    "adapters",
    "threads",
    "depth",
    "settings",
)
TRACK_TITLES = {
    "speculative": "Speculative decoding",
    "experts": "MoE expert reduction",
    "moe-speculation": "MoE expert reduction with speculation",
    "adapters": "LoRA adapters",
    "threads": "Threads",
    "depth": "Context depth",
    "settings": "Batch sizes, flash attention, KV cache",
}


# -- raw samples of a metric ----------------------------------------------------------------
def metric_values(doc: RunRecord, metric: str) -> list[float]:
    """The per-sample values behind one metric of a run's summary (what ``stats.compare`` needs):
    its kind knows where they are (core.kinds: Kind.values)."""
    return doc.values(metric)


# -- lossless check -------------------------------------------------------------------------
def compare_outputs(
    baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]
) -> dict[str, Any]:
    """Greedy outputs of a point against its baseline's, prompt by prompt (token ids).

    ``first_diff`` is the index of the first token that differs (None when identical; a
    shorter output that is a prefix of the other differs at its length). ``agreement`` is the
    share of token positions that hold the same token, over the longer output of each prompt.
    """
    base = {o["prompt_index"]: o for o in baseline}
    prompts = []
    same = total = 0
    for o in sorted(candidate, key=lambda o: o["prompt_index"]):
        b = base.get(o["prompt_index"])
        if b is None:
            continue
        x, y = list(b["token_ids"]), list(o["token_ids"])
        n = max(len(x), len(y))
        match = sum(1 for i in range(min(len(x), len(y))) if x[i] == y[i])
        first = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), None)
        if first is None and len(x) != len(y):
            first = min(len(x), len(y))
        prompts.append(
            {
                "prompt_index": o["prompt_index"],
                "identical": first is None,
                "first_diff": first,
                "agreement": match / n if n else 1.0,
                "baseline_tokens": len(x),
                "tokens": len(y),
            }
        )
        same += match
        total += n
    firsts = [p["first_diff"] for p in prompts if p["first_diff"] is not None]
    return {
        "identical": bool(prompts) and all(p["identical"] for p in prompts),
        "first_diff": min(firsts) if firsts else None,
        "agreement": same / total if total else (1.0 if prompts else None),
        "prompts": prompts,
    }


@per_run
def degeneration_of(doc: RunRecord) -> dict[str, Any] | None:
    """The degeneration detector over a point's stored outputs (generate: details.outputs;
    chat: the request texts). None when the artifact holds no text."""
    rec = doc
    texts: list[str] = []
    if isinstance(rec.details, GenerateDetails):
        texts = [o.text for o in rec.details.outputs or []]
    elif isinstance(rec.samples, ChatSamples):
        texts = [r.text for r in rec.samples.requests or [] if r.text is not None]
    if not texts:
        return None
    results = [degeneration.detect(t) for t in texts]
    flags = sorted({f for r in results for f in r["flags"]})
    reasons = [
        f"output {i + 1}: {reason}"
        for i, r in enumerate(results)
        for reason in r["reasons"]
    ]
    return {
        "degenerate": any(r["degenerate"] for r in results),
        "flags": flags,
        "reasons": reasons,
        "outputs": len(results),
        "degenerate_outputs": sum(r["degenerate"] for r in results),
    }


# -- points and sweeps ----------------------------------------------------------------------
def _label(values: dict[str, Any]) -> str:
    return (
        ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())
        or "(defaults)"
    )


def experts_requested(doc: RunRecord) -> int | None:
    """The experts per token a point asked for (n_expert_used or the kv override), or None."""
    arch = doc.architecture
    value = doc.kv_overrides.get(f"{arch}.expert_used_count") if arch else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def track_of(docs: list[RunRecord]) -> str:
    """The track a sweep belongs to, from what its points vary."""
    recs = [d for d in docs]
    req = [r.requested for r in recs]
    if any(r.lora_requested for r in recs):
        return "adapters"
    spec = any((r.get("speculative") or "none") != "none" for r in req)
    experts = any(
        r.get("n_expert_used") is not None
        or any(
            str(k).endswith(".expert_used_count") for k in (r.get("kv_overrides") or {})
        )
        for r in req
    )
    swept = {k for r in recs for k in r.swept}
    if spec and experts and "n_expert_used" in swept and "speculative" in swept:
        return "moe-speculation"
    if spec:
        return "speculative"
    if experts:
        return "experts"
    if swept & {"n_threads", "n_threads_batch"}:
        return "threads"
    depths = {r.spec.n_depth for r in recs if isinstance(r.spec, RateTest)}
    if len(depths) > 1:
        return "depth"
    return "settings"


@dataclass
class Point:
    doc: RunRecord
    sweep: str
    is_baseline: bool
    baseline: RunRecord | None
    metric: str | None
    mean: float | None
    stddev: float | None
    n: int
    ci95: tuple[float | None, float | None]
    comparison: dict[str, Any] | None
    acceptance: float | None
    lossless: dict[str, Any] | None
    degeneration: dict[str, Any] | None
    baseline_degeneration: dict[str, Any] | None

    @property
    def id(self) -> str:
        return self.doc.id

    @property
    def ok(self) -> bool:
        return self.doc.ok

    @property
    def swept(self) -> dict[str, Any]:
        return self.doc.swept

    @property
    def requested(self) -> dict[str, Any]:
        return self.doc.requested

    @property
    def label(self) -> str:
        return "baseline" if self.is_baseline else _label(self.swept)

    @property
    def verdict(self) -> str | None:
        return None if self.comparison is None else self.comparison["verdict"]


@dataclass
class Sweep:
    host_id: str
    matrix: str
    name: str
    track: str
    points: list[Point] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({p.doc.model_name for p in self.points})

    @property
    def tests(self) -> list[str]:
        return list(dict.fromkeys(p.doc.test_name for p in self.points))

    @property
    def synthetic(self) -> bool:
        return any(p.doc.synthetic for p in self.points)


def _summary(doc: RunRecord, metric: str | None) -> Summary:
    return (doc.stat(metric) if metric else None) or Summary()


def build_point(
    doc: RunRecord,
    by_key: dict[str, RunRecord],
    degen: dict[int, dict[str, Any] | None] | None = None,
) -> Point:
    """One point of a sweep. ``degen`` (kept by the caller across the points of a loaded set) holds each
    artifact's degeneration result, so that a baseline shared by many points is read once."""
    doc = doc

    def degeneration(d: RunRecord) -> dict[str, Any] | None:
        if degen is None:
            return degeneration_of(d)
        if id(d) not in degen:
            degen[id(d)] = degeneration_of(d)
        return degen[id(d)]

    bkey = doc.baseline_key
    base = by_key.get(bkey) if bkey else None
    is_base = bkey is not None and bkey == doc.key
    hm = doc.headline_metric
    metric = hm.name if hm else None
    s = _summary(doc, metric)
    comparison = None
    lossless = None
    base_degen = None
    if base is not None and base.ok and doc.ok and metric:
        comparison = stats.compare(
            metric_values(base, metric), metric_values(doc, metric), hm.higher_is_better
        ).to_dict()
        bo, co = _outputs(base), _outputs(doc)
        if bo and co and not is_base:
            lossless = compare_outputs(bo, co)
        base_degen = degeneration(base)
    acc = _summary(doc, "draft_acceptance").mean
    return Point(
        doc=doc,
        sweep=doc.sweep or doc.matrix_name,
        is_baseline=is_base,
        baseline=base,
        metric=metric,
        mean=s.mean,
        stddev=s.stddev,
        n=s.n,
        ci95=s.ci95,
        comparison=comparison,
        acceptance=acc,
        lossless=lossless,
        degeneration=degeneration(doc) if doc.ok else None,
        baseline_degeneration=base_degen,
    )


def greedy_outputs(rec: RunRecord) -> list[dict[str, Any]] | None:
    """A generate run's greedy outputs (prompt index, token ids) for the lossless check."""
    outputs = getattr(rec.details, "outputs", None)
    return [o.model_dump() for o in outputs] if outputs else None


_outputs = greedy_outputs


def compared_on_headline(rec: RunRecord) -> bool:
    """Whether a run can be a point of a sweep: a point is compared with its baseline on its kind's
    headline metric, which the kind declares (core/kinds/<kind>.py: ``Kind.headline``). A kind
    without one (agent loops, endpoint probes: success rates and latencies per case, on their own
    pages) has no speedup to show, so its sweeps are no optimization track."""
    return rec.headline_metric is not None


def sweeps(docs: list[RunRecord], track: str | None = None) -> list[Sweep]:
    """Every sweep found in the artifacts (the newest artifact per configuration), per host; with
    ``track``, only that track's sweeps (the others' points are not built)."""
    latest = latest_per_key(docs)
    by_key = {d.key: d for d in latest}
    degen: dict[
        int, dict[str, Any] | None
    ] = {}  # by id() of docs alive for the whole call
    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for d in latest:
        name = d.sweep
        if not name or not compared_on_headline(d):
            continue
        groups.setdefault((d.host_id, d.matrix_name, name), []).append(d)
    out = []
    for (host_id, matrix, name), group in sorted(groups.items()):
        if not any(d.swept for d in group):
            continue  # a plain matrix (or a sweep entry with nothing swept) is not a sweep
        sw = Sweep(host_id, matrix, name, track_of(group))
        if track is not None and sw.track != track:
            continue
        # a baseline measured under another matrix joins the sweep it is the baseline of
        keys = {d.key for d in group}
        extra = [
            by_key[k]
            for k in {d.baseline_key for d in group} - keys - {None}
            if k in by_key
        ]
        extra_ids = {id(d) for d in extra}
        for d in extra + group:
            p = build_point(d, by_key, degen)
            p.is_baseline = p.is_baseline or id(d) in extra_ids
            sw.points.append(p)
        sw.points.sort(
            key=lambda p: (
                p.doc.model_name,
                p.doc.test_name,
                not p.is_baseline,
                json.dumps(p.swept, sort_keys=True, default=str),
            )
        )
        judge_lossless(sw)
        out.append(sw)
    return out


SPECULATION_SETTINGS = frozenset(
    {"speculative", "draft_model", "draft_max", "lookup_ngram_max"}
)
LOSSLESS_RULE = (
    "Lossless means one thing wherever it is shown: a speculative point's greedy text against plain "
    "decoding with every other setting the same (the same expert count, context, threads), token for "
    "token. A point with no such plain point in its sweep is judged against its baseline only where the "
    "two differ in speculation alone. Where the plain text is degenerate (a synthetic model's random "
    "weights), the text judges nothing: no lossless verdict, speed only."
)


def _plain_twin(p: Point, points: list[Point]) -> Point | None:
    """The plain-decoding point of the same test with every other requested setting equal."""
    rest = {k: v for k, v in p.requested.items() if k not in SPECULATION_SETTINGS}
    for q in points:
        if q is p or not q.ok or (q.requested.get("speculative") or "none") != "none":
            continue
        if (
            q.doc.test_name == p.doc.test_name
            and q.doc.model_identity == p.doc.model_identity
            and {k: v for k, v in q.requested.items() if k not in SPECULATION_SETTINGS}
            == rest
        ):
            return q
    return None


def judge_lossless(sw: Sweep) -> None:
    """One lossless verdict per speculative point (``LOSSLESS_RULE``): set on ``Point.lossless``, read by every page."""
    for p in sw.points:
        if (p.requested.get("speculative") or "none") == "none" or not p.ok:
            continue
        twin = _plain_twin(p, sw.points)
        ref = (
            twin.doc
            if twin is not None
            else (
                p.baseline
                if p.baseline is not None and _differs_in_speculation_only(p)
                else None
            )
        )
        ref_degen = (
            (twin.degeneration if twin is not None else p.baseline_degeneration)
            if ref is not None
            else None
        )
        if ref is None or (ref_degen and ref_degen.get("degenerate")):
            p.lossless = None  # nothing to judge against, or a text that judges nothing
            continue
        bo, co = _outputs(ref), _outputs(p.doc)
        p.lossless = compare_outputs(bo, co) if bo and co else None


def _differs_in_speculation_only(p: Point) -> bool:
    b = p.baseline
    if b is None:
        return False
    strip = lambda d: {k: v for k, v in d.items() if k not in SPECULATION_SETTINGS}  # noqa: E731
    return strip(p.requested) == strip(b.requested)


def point_failures(p: Point, track: str) -> list[tuple[str, str]]:
    """Why a point is a failed approach, as (what, reason) pairs; none for a point that is not one.

    The one rule both the Failed approaches section and the best configuration read: a failed run
    (incompatible, crash, ...), an expert override llama.cpp did not apply, a loss to the baseline
    beyond noise, speculation that changed the greedy text, degenerate output where the baseline's is
    not (:func:`degenerate_by_itself`; where both are degenerate, as a synthetic model's random weights
    make them, the text judges nothing and the page says so). An adapter sweep's cost is no failure
    (the adapter table shows it)."""
    out: list[tuple[str, str]] = []
    if not p.ok:
        return [(p.doc.error_kind or "failed", p.doc.error_message or "")]
    asked = experts_requested(p.doc)
    used = p.doc.reported.get("n_expert_used")
    if asked is not None and used is not None and asked != used:
        out.append(
            (
                "override not applied",
                f"asked for {asked} experts per token, llama.cpp's log says it used {used}",
            )
        )
    if p.is_baseline:
        return out
    if (
        p.verdict == "loss" and track != "adapters"
    ):  # an adapter's cost is on its own table
        c = p.comparison
        out.append(
            (
                "slower",
                f"{c['ratio']:.2f}x the baseline (CI95 {c['ci95_low']:.2f}–{c['ci95_high']:.2f})",
            )
        )
    spec = (p.requested.get("speculative") or "none") != "none"
    if spec and p.lossless is not None and not p.lossless["identical"]:
        out.append(
            (
                "not lossless",
                f"greedy text differs from plain decoding's at token {p.lossless['first_diff']} "
                f"({p.lossless['agreement']:.0%} of positions agree)",
            )
        )
    if degenerate_by_itself(p):
        out.append(("degenerate", "; ".join(p.degeneration["reasons"][:2])))
    return out


def degenerate_by_itself(p: Point) -> bool:
    """Whether the point's text is degenerate where its baseline's is not: what the point broke.
    Where the baseline's text is degenerate too (a synthetic model's random weights), the text says
    nothing about the setting and judges nothing (the page says so beside the point)."""
    if not (p.degeneration and p.degeneration["degenerate"]):
        return False
    return not (p.baseline_degeneration and p.baseline_degeneration["degenerate"])


def text_not_judged(p: Point) -> bool:
    """The point's text and its baseline's are both degenerate: output quality cannot be judged here."""
    return bool(
        p.degeneration and p.degeneration["degenerate"] and not degenerate_by_itself(p)
    )


def best_per_model(all_sweeps: list[Sweep]) -> list[dict[str, Any]]:
    """Per host, model and test: the point with the largest speedup that is a win over its
    baseline and is no failed approach (:func:`point_failures`, the rule the Failed approaches
    section lists by); or the baseline when nothing beat it. ``excluded``: the wins left out
    because they are failed approaches, each with what it failed on (degenerate, not lossless, ...)."""
    cands: dict[tuple[str, str, str], list[tuple[Point, str]]] = {}
    for sw in all_sweeps:
        if (
            sw.track == "adapters"
        ):  # attaching adapters is a feature with a cost, not a speed optimization
            continue
        for p in sw.points:
            if p.ok:
                cands.setdefault(
                    (sw.host_id, p.doc.model_name, p.doc.test_name), []
                ).append((p, sw.track))
    rows = []
    for (host_id, model, test), pts in sorted(cands.items()):
        won = [
            (p, [kind for kind, _ in point_failures(p, track)])
            for p, track in pts
            if p.verdict == "win" and not p.is_baseline
        ]
        wins = [p for p, failed in won if not failed]
        best = max(wins, key=lambda p: p.comparison["ratio"]) if wins else None
        base = next((p for p, _ in pts if p.is_baseline), None)
        rows.append(
            {
                "host_id": host_id,
                "model": model,
                "test_name": test,
                "best": best,
                "baseline": base,
                "candidates": len([p for p, _ in pts if not p.is_baseline]),
                "excluded": [(p, failed) for p, failed in won if failed],
                "synthetic": any(p.doc.synthetic for p, _ in pts),
            }
        )
    return rows


def failures(all_sweeps: list[Sweep]) -> list[dict[str, Any]]:
    """Failed approaches with their reasons (:func:`point_failures`): failed points (incompatible,
    crash, ...), points slower than their baseline, speculation that changed the text, degenerate output."""
    out = []
    for sw in all_sweeps:
        for p in sw.points:
            base = {
                "sweep": sw.name,
                "track": sw.track,
                "host_id": sw.host_id,
                "point": p,
            }
            out += [
                {**base, "kind": kind, "reason": reason}
                for kind, reason in point_failures(p, sw.track)
            ]
    return out
