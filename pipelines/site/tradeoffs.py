"""The Quality page's "Quality vs speed" section (seed 002, "Trade-offs: Quality vs Speed": Priority |
Configuration | Quality | Speed | VRAM), from pipelines.tradeoffs: per host, the max quality, balanced and
max speed configurations with the configuration read from their artifacts, quality (pass rate, Wilson
CI95, and the paired difference from max quality), speed (generation rate per test, CI95, and the ratio
to max quality) and memory (the speed runs' peak RSS). Every value goes through ``cell()``/``num()``."""

from __future__ import annotations

from typing import Any

from pipelines import tradeoffs as tr
from pipelines.site.markdown import cell, code, link, nbytes, num, run_link, table
from pipelines.site.quality_pages import quality_link


def _rate_cell(t: tr.Tradeoff, test: str) -> str:
    r = t.runs.get(test)
    s = r.stat(tr.METRIC) if r else None
    if r is None or s is None or s.mean is None:
        return "—"
    text = link(f"{num(s.mean, 1)} t/s", run_link(r.id))
    if s.ci95_low is not None and s.ci95_high is not None:
        text += f"<br><small>CI95 {num(s.ci95_low, 1)}–{num(s.ci95_high, 1)}</small>"
    c = t.speed_vs_first.get(test)
    if c and c.get("ratio"):
        lo, hi = c.get("ci95_low"), c.get("ci95_high")
        text += f"<br><small>{num(c['ratio'], 2)}× max quality" + (
            f" [{num(lo, 2)}, {num(hi, 2)}]"
            if lo is not None and hi is not None
            else ""
        )
        text += f", {cell(c['verdict'])}</small>"
    return text


def _quality_cell(t: tr.Tradeoff) -> str:
    q = t.quality
    if q is None:
        return "not measured"
    r = q.rate
    text = link(
        f"{num(100 * (r.pass_rate or 0), 0)}% ({num(r.passed, 0)} of {num(r.n, 0)})",
        quality_link(q.id),
    )
    text += f"<br><small>CI95 {num(100 * (r.ci95_low or 0), 0)}–{num(100 * (r.ci95_high or 0), 0)}%</small>"
    p = t.quality_vs_first
    if p is not None and p.diff is not None:
        ci = (
            f" [{100 * p.ci95_low:+.1f}, {100 * p.ci95_high:+.1f}]"
            if p.ci95_low is not None and p.ci95_high is not None
            else ""
        )
        text += f"<br><small>{100 * p.diff:+.1f} pp vs max quality{ci}, {cell(p.verdict)}</small>"
    return text


def _configuration_cell(t: tr.Tradeoff) -> str:
    c = t.configuration()
    if not c:
        return "—"
    adapters = c["adapters"]
    return "<br>".join(
        [
            f"{cell(c['quantization'] or '?')} base ({cell(c['model'])})",
            f"KV {code(c['kv'])}",
            f"speculation: {cell(c['speculation'])}",
            f"adapters: {cell(', '.join(adapters)) if adapters else 'none'}",
        ]
    )


def tradeoffs_table(rows: list[tr.Tradeoff]) -> str:
    tests = sorted({test for t in rows for test in t.runs})
    out = []
    for t in rows:
        out.append(
            [
                f"**{cell(t.priority)}**",
                _configuration_cell(t),
                _quality_cell(t),
                *[_rate_cell(t, test) for test in tests],
                nbytes(t.peak_rss) if t.peak_rss else "—",
            ]
        )
    return table(
        [
            "priority",
            "configuration",
            "quality",
            *[f"speed · {cell(x)}" for x in tests],
            "memory (peak RSS)",
        ],
        out,
        ["l", "l", "r", *["r"] * len(tests), "r"],
    )


def tradeoffs_section(runs: list[Any], quality: list[Any]) -> str:
    hosts = tr.tradeoffs(runs, quality)
    if not hosts:
        return (
            "No configuration trade-off measured yet: `invoke bench --matrix config-tradeoffs` and "
            "`invoke quality --matrix config-tradeoffs-quality-<max-quality|balanced|max-speed>`."
        )
    out = [
        "Seed 002 trades whole configurations off: max quality, balanced, max speed, each combining the "
        "base quantization, adapters, the KV cache type and speculation. Here the three as the seed composes "
        "them, on the embedded model (llama.cpp has no DoRA or IA3: the balanced configuration's adapter is a "
        "synthetic rank-16 LoRA, random weights, so its quality cost is an untrained adapter's). Quality: "
        "basic_facts, all items, as completion prompts (greedy; speculation and adapters apply), with the "
        "paired difference from max quality on the same items (Agresti-Min CI95, exact McNemar verdict). "
        "Speed: the generation rate per generate test (texts to rework, free generation) with its CI95 and "
        "the ratio to max quality. Memory: the speed runs' peak resident set (CPU host: RAM, not VRAM).",
        "",
    ]
    for host, rows in hosts.items():
        out += [f"**Quality vs speed on {code(host)}**", "", tradeoffs_table(rows), ""]
    return "\n".join(out)


def tradeoffs_from_data() -> str:
    from pipelines import quality as quality_mod
    from pipelines.runs import load_runs

    return tradeoffs_section(load_runs(), quality_mod.load_quality())
