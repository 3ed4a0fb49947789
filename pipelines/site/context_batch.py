"""The Optimization page's "Context length against throughput" table (seed 002, "Context Length vs
Throughput": Context | KV Cache | Batch Size | Throughput), from pipelines.context_batch. Every value
from an artifact goes through ``cell()``/``num()``/``figures``."""

from __future__ import annotations

from core.records.run import RunRecord
from pipelines import context_batch as cb
from pipelines.site import figures
from pipelines.site.markdown import code, fold, link, nbytes, num, run_link, table


def _batch(r: cb.Row) -> str:
    largest = r.largest_batch
    if r.batch == largest:
        return f"{num(r.batch, 0)}<br><small>the largest that fits</small>"
    return f"{num(r.batch, 0)}<br><small>{num(largest, 0)} would fit</small>"


def context_section(docs: list[RunRecord]) -> list[str]:
    found = cb.tables(docs)
    if not found:
        return []
    intro = (
        "Seed 002: the longer each sequence's context, the fewer fit in one KV cache, and the lower the "
        "throughput. Here one KV cache of n_ctx cells is split among parallel sequences (llama.cpp gives "
        "each n_ctx ÷ n_seq_max cells, llama-server `-np`'s rule), so the largest batch at a context is "
        "n_ctx ÷ context. At each context the model decodes that many sequences together, each after its "
        "own random context (prefilled outside the timer): the rate is every sequence's tokens over the "
        "time (CI95, the run as the unit), the KV cache is what llama.cpp allocated. "
        f"`invoke bench --matrix {cb.MATRIX}`."
    )
    out = ["## Context length against throughput", ""]
    for (host, model), rows in sorted(found.items()):
        body = [
            [
                f"{num(r.context, 0)} tokens",
                f"{nbytes(r.kv_per_sequence)} a sequence<br><small>{nbytes(r.kv_bytes)} for all "
                f"(n_ctx {num(r.n_ctx, 0)})</small>"
                if r.kv_bytes is not None
                else "not reported",
                _batch(r),
                figures.cell_html(r.figure),
                num(r.per_sequence_rate, 1) if r.per_sequence_rate is not None else "—",
                code(r.run.test_name),
                link(r.run.id[:12], run_link(r.run.id)),
            ]
            for r in rows
        ]
        out += [
            fold(
                f"Context against batch and throughput · {model} on {host}",
                intro
                + "\n\n"
                + table(
                    [
                        "context",
                        "KV cache",
                        "batch size",
                        "throughput (t/s, all sequences)",
                        "t/s per sequence",
                        "test",
                        "source",
                    ],
                    body,
                    ["r", "r", "r", "r", "r", "l", "l"],
                ),
                "almanac-fold",
            ),
            "",
        ]
    return out
