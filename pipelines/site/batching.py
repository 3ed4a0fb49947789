"""The What-if page's "Request batching" table (seed 003, phase 1's "Estimated Performance Gain":
Workload Type | Current | With Batching | Speedup | Gain), from pipelines.batching. Every value from an
artifact goes through ``cell()``/``num()``/``figures``."""

from __future__ import annotations

from core.records.run import RunRecord
from pipelines import batching
from pipelines.site import figures
from pipelines.site.markdown import cell, code, link, num, run_link, table


def batching_section(docs: list[RunRecord]) -> list[str]:
    hosts = batching.hosts(docs)
    if not hosts:
        return []
    out = [
        "## Request batching",
        "",
        "Seed 003 batches requests: dramatic gains for tokenize-heavy work, next to none where "
        "generation dominates. The tokenize rows are measured: the same texts sent to llama-server's "
        "/tokenize one a request and in batches (a list of texts a request), the two alternating over "
        "rounds; the speed-up is the ratio per round (CI95, the run as the unit). A generation request is "
        "one sequence through the server, so its row is the batching plan from the per-request overhead "
        "measured above: batching removes at most the time outside the compute (serialization, transport, "
        "deserialization) of all but one request in a batch. `invoke bench --matrix request-batching`.",
        "",
    ]
    for host in hosts:
        body = []
        for r in batching.rows(docs, host):
            speed = (
                figures.cell_html(r.speedup)
                if r.speedup is not None
                else f"{num(r.ratio, 4)}× <small>(plan)</small>"
            )
            gain = (r.speedup.mean if r.speedup is not None else r.ratio) - 1
            body.append(
                [
                    f"**{cell(r.workload)}**<br><small>{cell(r.note)}</small>",
                    num(r.current_s, 3),
                    num(r.batched_s, 3),
                    speed,
                    f"+{num(100 * gain, 2)}%",
                    "measured" if r.measured else "plan from measured overhead",
                    " · ".join(link(x.id[:12], run_link(x.id)) for x in r.runs),
                ]
            )
        out += [
            f"### Request batching on {code(host)}",
            "",
            table(
                [
                    "workload type",
                    "current (s)",
                    "with batching (s)",
                    "speedup",
                    "gain",
                    "how",
                    "source",
                ],
                body,
                ["l", "r", "r", "r", "r", "l", "l"],
            ),
            "",
        ]
    return out
