"""The Quality page's "Retrieval stack" table (seed 001, "Retrieval Stack"), from pipelines.retrieval.
Every value from an artifact goes through ``cell()``/``num()``/``figures``."""

from __future__ import annotations

from core.records.run import RunRecord
from pipelines import retrieval
from pipelines.site import figures
from pipelines.site.markdown import cell, code, link, nbytes, num, run_link, table


def retrieval_section(docs: list[RunRecord]) -> str:
    found = retrieval.rows(docs)
    if not found:
        return (
            "No embedding runs yet: `invoke bench --matrix retrieval` embeds a committed corpus and "
            "builds an index from it."
        )
    out = []
    for host, rows in sorted(found.items()):
        body = []
        for r in rows:
            d, run = r.details, r.run
            body.append(
                [
                    f"{cell(d.corpus)}: {num(d.passages, 0)} passages, "
                    f"{num(d.tokens, 0)} tokens",
                    cell(run.model_name)
                    + " <small>(a generative model in embedding mode, mean pooling)</small>",
                    num(run.model_n_params, 0),
                    num(d.dim, 0),
                    cell(run.quantization or "—"),
                    nbytes(r.index_bytes),
                    figures.cell_html(r.rate),
                    figures.cell_html(r.build),
                    cell(d.quality or "—"),
                    link(run.id[:12], run_link(run.id)),
                ]
            )
        out += [
            f"### Retrieval stack on {code(host)}",
            "",
            table(
                [
                    "index",
                    "model",
                    "params",
                    "dim",
                    "quantization",
                    "index size",
                    "embeddings/s",
                    "index build (ms)",
                    "benchmark",
                    "source",
                ],
                body,
                ["l", "l", "r", "r", "l", "r", "r", "r", "l", "l"],
            ),
            "",
        ]
    return "\n".join(out)
