"""Speculation combined with other choices, from artifacts alone: MoE experts x speculation, and
the draft-model Pareto front.

**MoE x speculation** (a sweep of the ``moe-speculation`` track: it varies both
``n_expert_used`` and ``speculative``). Every point is compared with the sweep's one baseline
(all experts, plain decoding): the ratio of generation rates with its CI95 and verdict. A
speculative point is also compared with plain decoding *at the same expert count*: that ratio
is what speculation adds on top of expert reduction (the seed's "combination benefit"), and
its greedy text must be the plain point's, token for token (the lossless check). Expert
reduction itself changes the text; how far, against the baseline, is shown beside it.

**Draft Pareto** (a sweep whose points swap the draft model): per draft, the acceptance rate,
the speed-up over plain decoding (CI95) and the draft's own quality score (a quality artifact
of the draft's file: a suite and prompt style measured for every draft, the largest such
sample; Wilson CI95). A draft is on the Pareto front when no other draft is at least as fast
and at least as good, and better in one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.records.quality import QualityRecord
from pipelines import optimization as opt

MODES = ("none", "prompt_lookup", "draft_model")
MODE_TITLES = {
    "none": "plain decoding",
    "prompt_lookup": "prompt lookup",
    "draft_model": "draft model",
}


# -- MoE x speculation -------------------------------------------------------------------------
@dataclass
class MoeSpecCell:
    point: opt.Point
    experts: int | None
    mode: str
    vs_plain: (
        dict[str, Any] | None
    )  # speculation over plain decoding at the same expert count
    lossless_vs_plain: (
        dict[str, Any] | None
    )  # greedy text against plain decoding at the same expert count

    @property
    def vs_baseline(self) -> dict[str, Any] | None:
        return self.point.comparison


def _experts(p: opt.Point) -> int | None:
    n = opt.experts_requested(p.doc)
    return n if n is not None else p.doc.gguf.get("expert_used_count")


def moe_speculation(sw: opt.Sweep) -> dict[str, list[MoeSpecCell]]:
    """Per test: one cell per (experts, mode) point of the sweep (baseline included)."""
    out: dict[str, list[MoeSpecCell]] = {}
    for test in sw.tests:
        pts = [p for p in sw.points if p.doc.test_name == test and p.ok]
        plain = {
            _experts(p): p
            for p in pts
            if (p.requested.get("speculative") or "none") == "none"
        }
        cells = []
        for p in pts:
            mode = p.requested.get("speculative") or "none"
            n = _experts(p)
            vs_plain = None
            base = plain.get(n)
            if mode != "none" and base is not None and p.metric:
                hib = True
                vs_plain = stats.compare(
                    opt.metric_values(base.doc, p.metric),
                    opt.metric_values(p.doc, p.metric),
                    hib,
                ).to_dict()
            # the point's one lossless verdict (pipelines.optimization.judge_lossless), the Failed approaches' too
            cells.append(
                MoeSpecCell(
                    p, n, mode, vs_plain, p.lossless if mode != "none" else None
                )
            )
        out[test] = sorted(
            cells,
            key=lambda c: (
                -(c.experts or 0),
                MODES.index(c.mode) if c.mode in MODES else 9,
            ),
        )
    return out


SPEED_ONLY = (
    "Synthetic weights: the text is noise (degenerate at every expert count), so this sweep is speed "
    "only. Degenerate text repeats itself, which flatters prompt lookup, and judges nothing about "
    "losslessness: no conclusion on the benefit of speculation or on quality is drawn from it."
)


def speed_only(cells: list[MoeSpecCell]) -> bool:
    """The sweep's text judges nothing: random weights, or degenerate output at plain decoding."""
    plain = [c for c in cells if c.mode == "none"]
    return any(c.point.doc.synthetic for c in cells) or (
        bool(plain)
        and all(
            c.point.degeneration and c.point.degeneration.get("degenerate")
            for c in plain
        )
    )


def moe_speculation_findings(cells: list[MoeSpecCell]) -> list[str]:
    """Plain sentences, from the verdicts: where speculation on top of expert reduction helps,
    hurts, or is within noise, and whether any combination beats expert reduction alone. From a
    synthetic model's (or degenerate) text, no conclusion: the sweep is speed only, and says so."""
    if speed_only(cells):
        return [SPEED_ONLY]
    lines = []
    for mode in MODES[1:]:
        mine = [c for c in cells if c.mode == mode and c.vs_plain]
        if not mine:
            continue
        groups: dict[str, list[str]] = {}
        for c in sorted(mine, key=lambda c: c.experts or 0):
            groups.setdefault(c.vs_plain["verdict"], []).append(str(c.experts))
        parts = []
        for verdict, word in (
            ("win", "helps"),
            ("loss", "hurts"),
            ("within noise", "changes nothing beyond noise"),
        ):
            ns = groups.get(verdict)
            if ns:
                counts = ", ".join(ns[:-1]) + (" and " if len(ns) > 1 else "") + ns[-1]
                parts.append(
                    f"{word} with {counts} {'expert' if ns == ['1'] else 'experts'} per token"
                )
        lines.append(
            f"{MODE_TITLES[mode].capitalize()} on top of expert reduction "
            + "; ".join(parts)
            + "."
        )
    best_plain = max(
        (
            c
            for c in cells
            if c.mode == "none" and c.vs_baseline and c.vs_baseline.get("ratio")
        ),
        key=lambda c: c.vs_baseline["ratio"],
        default=None,
    )
    best_combo = max(
        (
            c
            for c in cells
            if c.mode != "none" and c.vs_baseline and c.vs_baseline.get("ratio")
        ),
        key=lambda c: c.vs_baseline["ratio"],
        default=None,
    )
    if best_plain and best_combo:
        better = best_combo.vs_baseline["ratio"] > best_plain.vs_baseline["ratio"]
        # a speed statement: where the fastest combination fails the Optimization page's rule, say so here too
        failed = ", ".join(
            k for k, _ in opt.point_failures(best_combo.point, "moe-speculation")
        )
        lines.append(
            f"Fastest combination: {best_combo.experts} experts with {MODE_TITLES[best_combo.mode]} at "
            f"{best_combo.vs_baseline['ratio']:.2f}x the baseline; fastest expert "
            f"reduction alone: {best_plain.experts} "
            f"experts at {best_plain.vs_baseline['ratio']:.2f}x"
            + (
                " (the combination is ahead"
                if better
                else " (speculation adds nothing on top"
            )
            + (
                f"; the fastest combination is a failed approach there: {failed}"
                if failed
                else ""
            )
            + ")."
        )
    broken = [
        c
        for c in cells
        if c.lossless_vs_plain is not None and not c.lossless_vs_plain["identical"]
    ]
    if broken:
        lines.append(
            "Not lossless: "
            + "; ".join(
                f"{MODE_TITLES[c.mode]} at {c.experts} experts differs from plain decoding at token "
                f"{c.lossless_vs_plain['first_diff']}"
                for c in broken
            )
            + "."
        )
    return lines


# -- draft Pareto ---------------------------------------------------------------------------------
def is_draft_sweep(sw: opt.Sweep) -> bool:
    drafts = {
        p.requested.get("draft_model")
        for p in sw.points
        if p.ok and p.requested.get("speculative") == "draft_model"
    }
    return (
        sw.track == "speculative"
        and len(drafts) >= 2
        and any("draft_model" in p.doc.swept for p in sw.points)
    )


def quality_by_sha(
    quality_docs: list[QualityRecord],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Model file sha256 -> newest ok score per ``suite · style`` (pass rate with Wilson CI95)."""
    from pipelines.quality import latest_per_key, rate, style_of

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for d in sorted(
        latest_per_key([q for q in quality_docs]),
        key=lambda d: (d.created, d.id),
    ):
        if not d.ok or not d.model_sha256:
            continue
        r = rate(d.passed, d.n_items)
        out.setdefault(d.model_sha256, {})[f"{d.suite_name} · {style_of(d)}"] = {
            **r,
            "id": d.id,
        }
    return out


def pick_score(
    shas: list[str], scores: dict[str, dict[str, dict[str, Any]]]
) -> str | None:
    """The suite · style measured for every draft, the one with the most items (then by name)."""
    common = None
    for sha in shas:
        keys = set(scores.get(sha, {}))
        common = keys if common is None else common & keys
    if not common:
        return None
    return max(sorted(common), key=lambda k: min(scores[s][k]["n"] for s in shas))


@dataclass
class DraftRow:
    point: opt.Point
    draft: str
    draft_sha256: str | None
    acceptance: float | None
    speedup: dict[str, Any] | None
    quality: dict[str, Any] | None
    front: bool = False


def pareto_front(rows: list[DraftRow]) -> None:
    """Mark the rows no other row dominates on (speed-up, quality): at least as good on both, better on one."""

    def xy(r: DraftRow) -> tuple[float, float] | None:
        if not r.speedup or r.speedup.get("ratio") is None or not r.quality:
            return None
        return float(r.speedup["ratio"]), float(r.quality["pass_rate"])

    for r in rows:
        a = xy(r)
        r.front = a is not None and not any(
            (b := xy(o)) is not None
            and o is not r
            and b[0] >= a[0]
            and b[1] >= a[1]
            and (b[0] > a[0] or b[1] > a[1])
            for o in rows
        )


def draft_pareto(sw: opt.Sweep, quality_docs: list[QualityRecord]) -> dict[str, Any]:
    """Per test: a row per draft (the Pareto front marked) and the quality score used."""
    scores = quality_by_sha(quality_docs)
    out: dict[str, Any] = {"tests": {}, "score": None}
    drafts = [
        p for p in sw.points if p.ok and p.requested.get("speculative") == "draft_model"
    ]
    shas = list(
        dict.fromkeys(
            s for s in (p.doc.reported.get("draft_model_sha256") for p in drafts) if s
        )
    )
    key = pick_score(shas, scores)
    out["score"] = key
    for test in sw.tests:
        rows = []
        for p in drafts:
            if p.doc.test_name != test:
                continue
            sha = p.doc.reported.get("draft_model_sha256")
            q = scores.get(sha or "", {}).get(key) if key else None
            rows.append(
                DraftRow(
                    p,
                    p.requested.get("draft_model") or "?",
                    sha,
                    p.acceptance,
                    p.comparison,
                    q,
                )
            )
        pareto_front(rows)
        out["tests"][test] = sorted(
            rows, key=lambda r: -(r.speedup or {}).get("ratio", 0) if r.speedup else 0
        )
    return out


# -- best K per target size ----------------------------------------------------------------------
@dataclass
class KChoice:
    """One speculation mode on one sweep's target: every K measured and the fastest."""

    sweep: opt.Sweep
    mode: str  # "draft_model" or "prompt_lookup"
    baseline: opt.Point | None
    by_k: dict[
        int, opt.Point
    ]  # K -> the point (ok, compared with the sweep's baseline)

    @property
    def best(self) -> tuple[int, opt.Point] | None:
        """The K whose speed-up over plain decoding is the largest (ratio of means)."""
        rated = [
            (k, p)
            for k, p in self.by_k.items()
            if p.comparison and p.comparison.get("ratio") is not None
        ]
        return max(rated, key=lambda kp: kp[1].comparison["ratio"]) if rated else None

    @property
    def target(self) -> str:
        return self.sweep.models[0] if self.sweep.models else "?"

    @property
    def draft(self) -> str:
        if self.mode == "prompt_lookup":
            p = next(iter(self.by_k.values()), None)
            n = p.requested.get("lookup_ngram_max") if p else None
            return f"prompt lookup (n-grams up to {n})" if n else "prompt lookup"
        drafts = {p.requested.get("draft_model") for p in self.by_k.values()}
        return ", ".join(sorted(str(d) for d in drafts if d)) or "?"

    @property
    def n_params(self) -> int | None:
        p = self.baseline or next(iter(self.by_k.values()), None)
        return p.doc.n_params if p else None


def _k(p: opt.Point) -> int | None:
    v = p.requested.get("draft_max")
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def is_k_sweep(sw: opt.Sweep) -> bool:
    """A speculative sweep over K (draft_max) and nothing else but the mode: at least three K of
    one mode (a sweep that also varies the n-gram size or the draft is not one K per point)."""
    swept = {k for p in sw.points for k in p.doc.swept}
    if sw.track != "speculative" or "draft_max" not in swept:
        return False
    if swept - {"draft_max", "speculative"}:
        return False
    ks: dict[str, set[int]] = {}
    for p in sw.points:
        mode = p.requested.get("speculative") or "none"
        k = _k(p)
        if mode != "none" and k is not None:
            ks.setdefault(mode, set()).add(k)
    return any(len(v) >= 3 for v in ks.values())


def k_choices(sw: opt.Sweep) -> list[KChoice]:
    """Per speculation mode of a K sweep (its first test): the points by K and the best K."""
    test = sw.tests[0] if sw.tests else None
    pts = [p for p in sw.points if p.doc.test_name == test]
    base = next((p for p in pts if p.is_baseline and p.ok), None)
    out = []
    for mode in MODES[1:]:
        by_k = {
            k: p
            for p in pts
            if p.ok
            and (p.requested.get("speculative") or "none") == mode
            and (k := _k(p)) is not None
        }
        if by_k:
            out.append(KChoice(sw, mode, base, dict(sorted(by_k.items()))))
    return out
