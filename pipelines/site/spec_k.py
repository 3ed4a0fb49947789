"""The Optimization page's "Best K per target size" table (seed 001, "Corrected K-sweep benchmarks": Model +
Draft | Quality | Baseline | Optimized | Speedup | Best K, and "K-Value Tuning" per model size).

From pipelines.speculation.k_choices: per K sweep (one target model) and speculation mode, plain decoding's
rate, the rate at the best K (the largest speed-up over plain decoding, a ratio of means), that speed-up
with its CI95 and verdict, the acceptance there, and the speed-up at every K measured. Artifacts alone;
every value from an artifact goes through ``cell()``/``num()``/``code()``."""

from __future__ import annotations

from collections.abc import Callable

from pipelines import optimization as opt
from pipelines import speculation
from pipelines.site.markdown import cell, fold, link, num, run_link, table


def _rate(p: opt.Point | None) -> str:
    if p is None or p.mean is None:
        return "—"
    lo, hi = p.ci95
    ci = (
        f"<br><small>CI95 {num(lo, 1)}–{num(hi, 1)}</small>"
        if lo is not None and hi is not None
        else ""
    )
    return link(f"{num(p.mean, 1)} t/s", run_link(p.id)) + ci


def _speedup(p: opt.Point) -> str:
    c = p.comparison or {}
    if c.get("ratio") is None:
        return "—"
    ci = (
        f"<br><small>CI95 {num(c['ci95_low'], 2)}–{num(c['ci95_high'], 2)}, {cell(c.get('verdict'))}</small>"
        if c.get("ci95_low") is not None and c.get("ci95_high") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}"


def _text(p: opt.Point) -> str:
    """The quality statement of a lossless method: its greedy text against plain decoding's."""
    ll = p.lossless
    if ll is None:
        return (
            "random weights: text not judged"
            if p.doc.synthetic
            else "not checked (no plain twin)"
        )
    if ll["identical"]:
        return "identical to plain decoding"
    return f"differs at token {num(ll['first_diff'], 0)}"


def _size(n: int | None) -> str:
    if not n:
        return "—"
    return f"{num(n / 1e9, 2)}B" if n >= 1e9 else f"{num(n / 1e6, 0)}M"


def k_section(
    all_sweeps: list[opt.Sweep], points_fold: Callable[[opt.Sweep], str] | None = None
) -> list[str]:
    """``points_fold``: a sweep's every point in one fold (the Optimization page's own), shown under the table."""
    sweeps = [sw for sw in all_sweeps if speculation.is_k_sweep(sw)]
    if not sweeps:
        return []
    out = [
        "## Best K per target size",
        "",
        "Seed 001 tunes K, the tokens drafted per step, per model size. Here K is swept for a draft model (a "
        "smaller model of the same vocabulary) and for prompt lookup, per target; the best K is the one with the "
        "largest speed-up over plain decoding (ratio of mean generation rates, CI95): where its interval "
        "overlaps another K's, that K is as good within noise (the every-K column shows them). Quality: speculation "
        "is lossless, so the best point's greedy text is checked against plain decoding's, token for token (the "
        "target's own score is on the Quality page). Synthetic targets have random weights: speed only, their "
        "acceptance is what random weights give.",
        "",
    ]
    for host in sorted({sw.host_id for sw in sweeps}):
        rows = []
        for sw in sorted(
            (s for s in sweeps if s.host_id == host),
            key=lambda s: (
                (speculation.k_choices(s)[0].n_params or 0)
                if speculation.k_choices(s)
                else 0
            ),
        ):
            for ch in speculation.k_choices(sw):
                best = ch.best
                every = " · ".join(
                    f"K={k}: {num(p.comparison['ratio'], 2)}×"
                    for k, p in ch.by_k.items()
                    if p.comparison and p.comparison.get("ratio") is not None
                )
                if best is None:
                    rows.append(
                        [
                            f"{cell(ch.target)} + {cell(ch.draft)}",
                            _size(ch.n_params),
                            _rate(ch.baseline),
                            "—",
                            "—",
                            "no K compared",
                            "—",
                            "—",
                            every or "—",
                        ]
                    )
                    continue
                k, p = best
                rows.append(
                    [
                        f"{cell(ch.target)} + {cell(ch.draft)}"
                        + (
                            " <small>(synthetic: speed only)</small>"
                            if sw.synthetic
                            else ""
                        ),
                        _size(ch.n_params),
                        _rate(ch.baseline),
                        _rate(p),
                        _speedup(p),
                        f"K={num(k, 0)}",
                        "—" if p.acceptance is None else f"{num(p.acceptance, 0)}%",
                        _text(p),
                        every,
                    ]
                )
        out += [
            fold(
                f"Best K per target size on {host}: model + draft, size, baseline, best K, speed-up (CI95), "
                "acceptance, text, every K",
                table(
                    [
                        "model + draft",
                        "target size",
                        "baseline",
                        "optimized (best K)",
                        "speedup",
                        "best K",
                        "acceptance at best K",
                        "quality (text at best K)",
                        "speed-up at every K",
                    ],
                    rows,
                    ["l", "r", "r", "r", "r", "r", "r", "l", "l"],
                ),
                "abstract",
            ),
            "",
        ]
        if points_fold is not None:
            out += [points_fold(sw) for sw in sweeps if sw.host_id == host] + [""]
    return out
