"""The Optimization page's "Flash attention against context depth" table (seed 002, "6. Flash
Attention": "Speedup: 1.5-2x for long contexts", "No quality loss").

A sweep that varies ``flash_attn`` alone over rate tests at several context depths (``tg32@d4096``:
llama-bench's method, the context prefilled outside the timer) gives one row per test: the depth, the
rate with flash attention off and on, the speed-up (ratio of means, CI95, verdict: ``core.stats.compare``
through ``pipelines.optimization``) and the quality check: the sweep's greedy generate test, its token ids
with flash attention on against off (``pipelines.optimization.compare_outputs``). Artifacts alone; every
value from an artifact goes through ``cell()``/``num()``/``code()``.
"""

from __future__ import annotations

from pipelines import optimization as opt
from pipelines.site.markdown import cell, code, fold, link, num, run_link, table

SETTING = "flash_attn"


def is_flash_depth_sweep(sw: opt.Sweep) -> bool:
    """A sweep of flash attention alone with rate tests at more than one context depth."""
    keys = {k for p in sw.points for k in p.swept}
    depths = {_depth(p) for p in sw.points if p.doc.test_kind == "rate"}
    return keys == {SETTING} and len(depths) > 1


def _depth(p: opt.Point) -> int:
    return int(p.doc.test_param("n_depth", 0) or 0)


def _on(p: opt.Point) -> bool:
    return str(p.requested.get(SETTING, "")).lower() in ("on", "true", "1", "enabled")


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


def _speedup(p: opt.Point | None) -> str:
    c = p.comparison if p is not None else None
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" ({num(c['ci95_low'], 2)} – {num(c['ci95_high'], 2)})"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}<br><small>{cell(c.get('verdict'))}</small>"


def quality_check(sw: opt.Sweep) -> tuple[str, opt.Point | None]:
    """The greedy text with flash attention on against off (the sweep's generate test)."""
    for p in sw.points:
        if p.doc.test_kind == "generate" and _on(p) and p.lossless is not None:
            ll = p.lossless
            if ll["identical"]:
                text = f"none: greedy text identical to flash off ({cell(p.doc.test_name)})"
            else:
                text = (
                    f"text differs from flash off at token {num(ll['first_diff'], 0)}; "
                    f"{num(100 * ll['agreement'], 0)}% of positions agree ({cell(p.doc.test_name)})"
                )
            return text, p
    return "not measured: no greedy generate test in this sweep", None


def flash_depth_section(sw: opt.Sweep) -> list[str]:
    rate = [p for p in sw.points if p.doc.test_kind == "rate"]
    tests = list(
        dict.fromkeys(
            p.doc.test_name
            for p in sorted(rate, key=lambda p: (_depth(p), p.doc.test_name))
        )
    )
    quality, qpoint = quality_check(sw)
    qsrc = link(qpoint.id[:12], run_link(qpoint.id)) if qpoint is not None else ""
    rows = []
    for t in tests:
        pts = [p for p in rate if p.doc.test_name == t]
        off = next((p for p in pts if not _on(p)), None)
        on = next((p for p in pts if _on(p)), None)
        if off is None and on is None:
            continue
        pick = on or off
        assert pick is not None  # one of them, checked just above
        d = _depth(pick)
        src = " · ".join(
            link(p.id[:12], run_link(p.id)) for p in (off, on) if p is not None
        )
        rows.append(
            [
                f"{num(d, 0)} tokens" if d else "0 (empty context)",
                code(t),
                _rate(off),
                _rate(on),
                _speedup(on),
                quality,
                src + (f" · text: {qsrc}" if qsrc else ""),
            ]
        )
    unit = "t/s"
    return [
        f"#### Flash attention against context depth · {cell(sw.matrix)} on {code(sw.host_id)}",
        "",
        "Seed 002: 1.5–2× for long contexts, no quality loss. Per depth (prefilled outside the timer): the rate "
        "off and on (CI95), the speed-up, and the greedy text with it on against off.",
        "",
        fold(
            "Per context length: flash off and on, speed-up, quality loss, artifacts",
            table(
                [
                    "context length",
                    "test",
                    f"flash off ({unit})",
                    f"flash on ({unit})",
                    "speedup (CI95)",
                    "quality loss",
                    "source",
                ],
                rows,
                ["r", "l", "r", "r", "r", "l", "l"],
            ),
        ),
        "",
    ]
