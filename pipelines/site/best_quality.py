"""The quality beside each best configuration (seed 001, "Best Results" / "Coder Model Selection":
Model | Baseline | Optimized | Method | Quality): the model's measured quality score and the best point's
own output check (its greedy text against its baseline's), for the Optimization page's best table.

The score is the model's quality artifact on the same host where there is one (else on another host, named):
its plain configuration, the suite with the most items, pass rate with its Wilson CI95. The output check says
whether the optimization keeps that score: a speculative point must reproduce the baseline's greedy text
token for token (lossless); a setting that changes the text on purpose says where it parts; a rate test
decodes random tokens, so there is no text to check. Every value goes through ``cell()``/``num()``."""

from __future__ import annotations

from typing import Any

from pipelines import optimization as opt
from pipelines.site.markdown import cell, code, link, num


def _plain(q: Any) -> bool:
    return (q.requested.get("speculative") or "none") == "none" and not q.requested.get(
        "lora_adapters"
    )


def model_quality(model: str, host_id: str, quality_docs: list[Any]) -> Any | None:
    """The quality artifact standing for a model: same host first, plain configuration, most items, newest."""
    mine = [
        q
        for q in quality_docs
        if q.ok and q.model_name == model and _plain(q) and q.rate.n
    ]
    if not mine:
        return None
    same = [q for q in mine if q.host_id == host_id] or mine
    return max(same, key=lambda q: (q.rate.n, q.created))


def quality_cell(model: str, host_id: str, quality_docs: list[Any]) -> str:
    from pipelines.site.quality_pages import quality_link

    q = model_quality(model, host_id, quality_docs)
    if q is None:
        return "not measured: no quality run of this model"
    r = q.rate
    where = "" if q.host_id == host_id else f", on {code(q.host_id)}"
    return (
        f"{link(f'{num(100 * (r.pass_rate or 0), 0)}%', quality_link(q.id))} {cell(q.suite_name)} "
        f"<small>({num(100 * (r.ci95_low or 0), 0)}–{num(100 * (r.ci95_high or 0), 0)}%, "
        f"{num(r.passed, 0)}/{num(r.n, 0)}{where})</small>"
    )


def output_check(p: opt.Point) -> str:
    if p.doc.test_kind == "rate":
        return "no text: a rate test decodes random tokens"
    if opt.text_not_judged(p):
        return "not judged: the baseline's text is degenerate too"
    ll = p.lossless
    if ll is None:
        return "no text compared"
    if ll["identical"]:
        return "lossless: greedy text identical to the baseline's"
    return f"text differs at token {num(ll['first_diff'], 0)}; {num(100 * ll['agreement'], 0)}% of positions agree"
