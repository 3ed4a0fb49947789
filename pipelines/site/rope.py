"""The Optimization page's "Long context by RoPE scaling" table (seed 002, "Long Context Strategy": RoPE
scaling, linear / NTK / YaRN, an 8x extension): per factor of the trained context and scaling method, the
generation rate after a context filling it (mean with CI95), against no scaling at the same context (ratio of
means, CI95, verdict), and the perplexity column: on the embedded model where measured, else why not.

The factor is n_ctx ÷ the model's trained context (its GGUF ``context_length``, from the artifact's model
facts). A point whose scaling the backend could not honour (a context within the trained one) has no artifact
and is not listed. Every value from an artifact goes through ``cell()``/``num()``/``code()``.
"""

from __future__ import annotations

from typing import Any

from pipelines import optimization as opt
from pipelines.perplexity import rope_perplexity
from pipelines.site.markdown import cell, code, fold, link, num, run_link, table
from pipelines.site.quality_pages import perplexity_link

SETTING = "rope_scaling"
EMBEDDED = "gemma3-270m-q4_k_m"


def is_rope_sweep(sw: opt.Sweep) -> bool:
    return any(SETTING in p.swept for p in sw.points)


def _trained(doc: Any) -> int | None:
    facts = (doc.doc.get("model") or {}).get(
        "gguf"
    ) or {}  # the GGUF facts the run recorded
    v = facts.get("context_length")
    return int(v) if v else None


def _n_ctx(p: opt.Point) -> int | None:
    eff = (p.doc.doc.get("settings") or {}).get("effective") or {}
    v = eff.get("n_ctx") or p.requested.get("n_ctx")
    return int(v) if v else None


def _rate(p: opt.Point) -> str:
    if not p.ok or p.mean is None:
        return "—"
    lo, hi = p.ci95
    ci = (
        f"<br><small>{num(lo, 1)} – {num(hi, 1)}</small>"
        if lo is not None and hi is not None
        else ""
    )
    return f"{num(p.mean, 1)}{ci}"


def _ratio(p: opt.Point) -> str:
    if p.is_baseline:
        return "baseline (no scaling)"
    c = p.comparison
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" ({num(c['ci95_low'], 2)} – {num(c['ci95_high'], 2)})"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}<br><small>{cell(c.get('verdict'))}</small>"


def perplexity_cell(
    measured: dict[tuple[str, int], Any],
    scaling: str,
    factor: float | None,
    docs: list[Any],
) -> str:
    """The embedded model's perplexity with this scaling at this factor (a short window: the chunks of
    the text scored within the scaled context), beside its own RoPE's on the same windows; else why
    not measured."""
    key = ("none", 1) if scaling == "none" else (scaling, int(round(factor or 0)))
    d = measured.get(key)
    if d is None or factor is None:
        return perplexity_note(docs, factor or 0)
    r = d.results
    own = measured.get(("none", 1))
    alloc = d.context_allocated
    where = (
        f"{num(d.n_ctx, 0)}-token windows ({num(r.n_scored_tokens, 0)} tokens scored) in a "
        f"{num(alloc, 0)}-token context"
        if scaling != "none"
        else f"{num(d.n_ctx, 0)}-token windows ({num(r.n_scored_tokens, 0)} tokens scored), the model's own RoPE"
    )
    base = (
        f"<br><small>own RoPE, same windows: {num(own.results.ppl, 2)} ± {num(own.results.ppl_se, 2)} "
        f"({link(own.id[:12], perplexity_link(own.id))})</small>"
        if own is not None and scaling != "none"
        else ""
    )
    return (
        f"{num(r.ppl, 2)} ± {num(r.ppl_se, 2)} ({link(d.id[:12], perplexity_link(d.id))})"
        f"<br><small>{where}</small>{base}"
    )


def perplexity_note(docs: list[Any], factor: float) -> str:
    """Why the perplexity at this factor is not measured (the embedded model's trained context, from its runs)."""
    trained = next(
        (t for t in (_trained(d) for d in docs if d.model_name == EMBEDDED) if t),
        None,
    )
    if trained is None:
        return "not measured: no run of the embedded model says its trained context"
    return (
        f"not measured: the embedded model ({EMBEDDED}) was trained for {num(trained, 0)} tokens; "
        f"{num(factor, 0)}× is {num(trained * factor, 0)} tokens, beyond what this 2-core host evaluates in minutes"
    )


def rope_section(
    all_sweeps: list[opt.Sweep], docs: list[Any], ppl_docs: list[Any] | None = None
) -> list[str]:
    sweeps = [sw for sw in all_sweeps if is_rope_sweep(sw)]
    if not sweeps:
        return []
    measured = rope_perplexity(ppl_docs or [], EMBEDDED)
    out = [
        "## Long context by RoPE scaling",
        "",
        "Seed 002 extends a context 8× by RoPE scaling. Here 2×, 4× and 8× the trained context (its GGUF's), "
        "linear and YaRN against none, generating after a context that fills it: scaling changes frequencies, not "
        "work. Perplexity: the embedded model at the same factor, in short windows of its scaled context.",
        "",
    ]
    for host in sorted({sw.host_id for sw in sweeps}):
        rows = []
        pts = [p for sw in sweeps if sw.host_id == host for p in sw.points if p.ok]
        for p in sorted(
            pts,
            key=lambda p: (
                _n_ctx(p) or 0,
                not p.is_baseline,
                str(p.requested.get(SETTING)),
            ),
        ):
            trained, n_ctx = _trained(p.doc), _n_ctx(p)
            scaling = str(p.requested.get(SETTING) or "none")
            factor = n_ctx / trained if trained and n_ctx else None
            rows.append(
                [
                    f"{num(factor, 0)}×" if factor else "—",
                    f"{num(n_ctx, 0)} tokens<br><small>trained {num(trained, 0)}</small>"
                    if n_ctx
                    else "—",
                    cell(p.requested.get(SETTING) or "none"),
                    cell(p.doc.model_name)
                    + (
                        " <small>(synthetic: speed only)</small>"
                        if p.doc.synthetic
                        else ""
                    ),
                    code(p.doc.test_name),
                    _rate(p),
                    _ratio(p),
                    perplexity_cell(measured, scaling, factor, docs) if factor else "—",
                    link(p.id[:12], run_link(p.id)),
                ]
            )
        out += [
            f"### RoPE scaling on {code(host)}",
            "",
            fold(
                "Every extension factor and scaling: rate, against no scaling, perplexity, artifact",
                table(
                    [
                        "extension",
                        "context",
                        "scaling",
                        "model",
                        "test",
                        "rate (t/s)",
                        "vs no scaling (CI95)",
                        "perplexity (embedded model)",
                        "source",
                    ],
                    rows,
                    ["r", "r", "l", "l", "l", "r", "r", "l", "l"],
                ),
            ),
            "",
        ]
    return out
