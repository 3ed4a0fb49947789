"""The What-if page's "Switching between models" table (seed 003, phase 2's "Estimated Performance
Gain": Scenario | Without Caching | With Caching | Speedup | Gain), from pipelines.switching. Every
value from an artifact goes through ``cell()``/``num()``."""

from __future__ import annotations

from core.errors import UserError
from core.records.run import RunRecord
from pipelines import switching as sw
from pipelines.site.markdown import cell, code, fold, link, nbytes, num, run_link, table


def _s(ms: tuple[float, float, float]) -> str:
    mean, lo, hi = (v / 1000.0 for v in ms)
    rng = f"<br><small>{num(lo, 1)} – {num(hi, 1)}</small>" if hi > lo else ""
    return f"{num(mean, 1)}{rng}"


def switching_section(docs: list[RunRecord]) -> list[str]:
    try:
        f = sw.load_switching()
    except UserError as exc:
        return ["## Switching between models", "", cell(str(exc)), ""]
    out = [
        "## Switching between models",
        "",
        "Seed 003's model cache: 10 and 100 model switches and a multi-tenant case, without and with a "
        f"cache. {cell(sw.RULE)} Scenarios: `data/switching.yaml`; measured parts: "
        f"`invoke bench --matrix {cell(f.matrix or 'model-switching')}`.",
        "",
    ]
    for host in sw.hosts(f, docs):
        results, missing = sw.evaluate(f, docs, host)
        rows = []
        for r in results:
            s = r.scenario
            sp, sp_lo, sp_hi = r.speedup
            per = r.load_per_switch_ms
            rows.append(
                [
                    f"**{cell(s.name)}**<br><small>{cell(s.description)}</small>",
                    num(len(set(s.models)), 0),
                    num(s.requests, 0),
                    num(s.switches, 0),
                    f"{num(per / 1000.0, 2)}" if per is not None else "no switch",
                    f"{_s(r.without_ms)}<br><small>{num(r.loads_without, 0)} loads</small>",
                    f"{_s(r.with_ms)}<br><small>{num(r.loads_with, 0)} loads, cache of "
                    f"{num(s.cache or len(set(s.models)), 0)}</small>",
                    f"{num(sp, 2)}×"
                    + (
                        f"<br><small>{num(min(sp_lo, sp_hi), 2)} – {num(max(sp_lo, sp_hi), 2)}</small>"
                        if sp_hi != sp_lo
                        else ""
                    ),
                    f"+{num(100 * (sp - 1), 0)}%",
                    nbytes(r.cache_bytes),
                    " · ".join(
                        link(
                            r.parts[m].run_ids[-1][:12],
                            run_link(r.parts[m].run_ids[-1]),
                        )
                        for m in dict.fromkeys(s.models)
                    ),
                ]
            )
        parts = {m: p for r in results for m, p in r.parts.items()}
        prow = [
            [
                cell(p.model),
                num(p.load.mean, 3)
                + (
                    f"<br><small>{num(p.load.ci95_low, 3)} – {num(p.load.ci95_high, 3)}</small>"
                    if p.load.has_interval
                    else ""
                ),
                num(p.request_ms / 1000.0, 3),
                nbytes(p.peak_bytes),
                " · ".join(link(i[:12], run_link(i)) for i in p.run_ids[-3:]),
            ]
            for _, p in sorted(parts.items())
        ]
        if not rows:
            out += [
                f"### Switching between models on {code(host)}",
                "",
                "Not put together (a model not measured here): "
                + "; ".join(cell(m) for m in missing),
                "",
            ]
            continue
        out += [
            f"### Switching between models on {code(host)}",
            "",
            table(
                [
                    "scenario",
                    "models",
                    "requests",
                    "model switches",
                    "load per switch (s)",
                    "without caching (s)",
                    "with caching (s)",
                    "speedup",
                    "gain",
                    "cache memory",
                    "source",
                ],
                rows,
                ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l"],
            ),
            "",
            fold(
                f"The measured parts on {host}: each model's load and request time, peak memory, artifacts",
                table(
                    [
                        "model",
                        "load (s, CI95)",
                        "one request (s)",
                        "peak memory",
                        "source",
                    ],
                    prow,
                    ["l", "r", "r", "r", "l"],
                ),
            ),
            "",
        ]
        if missing:
            out += [
                "Not put together (a model not measured here): "
                + "; ".join(cell(m) for m in missing),
                "",
            ]
    return out
