"""The What-if page's "Per-request overhead" table (seed 003, phase 1's "Breakdown": serialization,
transport, deserialization per request, beside the compute), from pipelines.overhead. Every value from
an artifact goes through ``cell()``/``num()``."""

from __future__ import annotations

from core.records.run import RunRecord
from pipelines import overhead
from pipelines.site.markdown import cell, code, link, num, run_link, table


def overhead_section(docs: list[RunRecord]) -> list[str]:
    found = overhead.breakdowns(docs)
    if not found:
        return []
    out = [
        "## Per-request overhead",
        "",
        "Seed 003 splits its per-request overhead into JSON serialization, the write and read, and JSON "
        "deserialization, beside the generation that dominates. Here each is measured apart on every warm "
        "request: the client times its serialisation of the body and its parsing of the streamed answer, "
        "the server reports its compute (llama-server's `timings`), and the rest of the request's wall time "
        "is transport with the server's own framing. Mean per request with its CI95 (Student t on the "
        "log scale, over the requests), and its share of the wall time. "
        "`invoke bench --matrix overhead-breakdown`.",
        "",
    ]
    for b in found:
        run = b.run
        src = link(run.id[:12], run_link(run.id))
        rows = [
            [
                cell(s.label),
                num(s.mean_ms, 3)
                + (
                    f"<br><small>{num(s.ci95[0], 3)} – {num(s.ci95[1], 3)}</small>"
                    if s.ci95[0] is not None
                    else ""
                ),
                f"{num(100 * s.share, 2)}%",
                src,
            ]
            for s in b.stages
        ]
        out += [
            f"### Per-request overhead on {code(run.host_id)} · {cell(run.model_name)} · "
            f"{code(run.test_name)}",
            "",
            f"{num(b.n, 0)} requests, {num(b.wall_ms, 1)} ms each on average.",
            "",
            table(
                ["stage", "ms per request (CI95)", "share of the request", "source"],
                rows,
                ["l", "r", "r", "l"],
            ),
            "",
        ]
    return out
