"""The Optimization page's "Acceptance against sampling temperature" table (seed 001, "4. Temperature
Tuning": "Non-zero temperature can improve speculative decoding acceptance rates").

A speculative sweep whose generate tests differ only by their sampling ``temperature`` gives one row per
temperature: the share of drafted tokens accepted, plain decoding's and the speculative point's generation
rate, the speed-up (ratio of means, CI95, verdict: ``core.stats.compare`` through
``pipelines.optimization``, against plain decoding at the same temperature) and the text against plain
decoding (the same seeded draws: identical, or where they part). Artifacts alone; every value from an
artifact goes through ``cell()``/``num()``/``code()``.
"""

from __future__ import annotations

from pipelines import optimization as opt
from pipelines.site.markdown import cell, code, fold, link, num, run_link, table


def _temp(p: opt.Point) -> float:
    return float(p.doc.test_param("temperature", 0.0) or 0.0)


def _speculative(p: opt.Point) -> bool:
    return (p.requested.get("speculative") or "none") != "none"


def is_temperature_sweep(sw: opt.Sweep) -> bool:
    """A speculative sweep over generate tests at more than one sampling temperature."""
    gen = [p for p in sw.points if p.doc.test_kind == "generate"]
    return len({_temp(p) for p in gen}) > 1 and any(_speculative(p) for p in gen)


def _rate(p: opt.Point | None) -> str:
    if p is None or not p.ok or p.mean is None:
        return "—"
    lo, hi = p.ci95
    ci = (
        f"<br><small>{num(lo, 1)} – {num(hi, 1)}</small>"
        if lo is not None and hi is not None
        else ""
    )
    return f"{num(p.mean, 1)}{ci}"


def _speedup(p: opt.Point) -> str:
    c = p.comparison
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" ({num(c['ci95_low'], 2)} – {num(c['ci95_high'], 2)})"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}<br><small>{cell(c.get('verdict'))}</small>"


def _text(p: opt.Point) -> str:
    ll = p.lossless
    if ll is None:
        return "—"
    if ll["identical"]:
        return "identical to plain decoding"
    return f"differs at token {num(ll['first_diff'], 0)}; {num(100 * ll['agreement'], 0)}% of positions agree"


def temperature_section(sw: opt.Sweep) -> list[str]:
    gen = [p for p in sw.points if p.doc.test_kind == "generate"]
    rows = []
    for p in sorted(
        (p for p in gen if _speculative(p)), key=lambda p: (_temp(p), p.label)
    ):
        base = next(
            (
                b
                for b in gen
                if b.doc.test_name == p.doc.test_name and not _speculative(b)
            ),
            None,
        )
        acc = "—" if p.acceptance is None else f"{num(p.acceptance, 1)}%"
        src = " · ".join(
            link(x.id[:12], run_link(x.id)) for x in (base, p) if x is not None
        )
        rows.append(
            [
                num(_temp(p), 1) + (" (greedy)" if _temp(p) == 0 else ""),
                cell(p.label),
                acc,
                _rate(base),
                _rate(p),
                _speedup(p),
                _text(p),
                src,
            ]
        )
    return [
        f"#### Acceptance against sampling temperature · {cell(sw.matrix)} on {code(sw.host_id)}",
        "",
        "Seed 001: a non-zero temperature may raise acceptance. Per temperature: drafted tokens accepted, the rate "
        "of plain and speculative decoding (CI95), the speed-up, and the text (a seeded sampler: the same draws).",
        "",
        fold(
            "Per temperature: acceptance, plain and speculative rate, speed-up, text, artifacts",
            table(
                [
                    "temperature",
                    "point",
                    "acceptance",
                    "plain decoding (t/s)",
                    "speculative (t/s)",
                    "speedup (CI95)",
                    "text",
                    "source",
                ],
                rows,
                ["r", "l", "r", "r", "r", "r", "l", "l"],
            ),
        ),
        "",
    ]
