"""Context length against throughput (seed 002, "Context Length vs Throughput": Context | KV Cache |
Batch Size | Throughput), from the runs of data/matrices/context-throughput.yaml.

One KV cache of n_ctx cells split among parallel sequences (n_seq_max; llama.cpp gives each
n_ctx ÷ n_seq_max cells): at a context of C tokens per sequence the largest batch that fits is
n_ctx ÷ C. Each run decodes that many sequences together (a rate test ``tg16@d{C-16}x{B}``), so a
row is: the context, the KV cache llama.cpp allocated (all sequences, and per sequence), the batch
and whether it is the largest that fits, and the aggregate rate (the fact layer's figure, the run as
the unit) with the rate per sequence. Artifacts alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.records.run import RunRecord
from pipelines import facts as facts_mod
from pipelines.gates import kv_bytes
from pipelines.runs import latest_per_key

MATRIX = "context-throughput"


@dataclass
class Row:
    run: RunRecord
    context: (
        int  # tokens each sequence holds when the timed steps end (depth + generated)
    )
    batch: int  # sequences decoded together
    n_ctx: int  # the KV cache's cells (all sequences)
    kv_bytes: float | None  # what llama.cpp allocated for the KV cache (all sequences)
    figure: facts_mod.Figure | None  # the aggregate rate (t/s)

    @property
    def largest_batch(self) -> int:
        """The most sequences of this context the KV cache holds (n_ctx ÷ context)."""
        return self.n_ctx // self.context if self.context else 0

    @property
    def kv_per_sequence(self) -> float | None:
        return None if self.kv_bytes is None else self.kv_bytes / self.batch

    @property
    def per_sequence_rate(self) -> float | None:
        return None if self.figure is None else self.figure.mean / self.batch


def tables(docs: list[RunRecord]) -> dict[tuple[str, str], list[Row]]:
    """(host, model) -> the rows of its context sweep, shortest context first."""
    fx = facts_mod.of(docs)
    out: dict[tuple[str, str], list[Row]] = {}
    for r in latest_per_key(docs):
        if r.matrix_name != MATRIX or not r.ok or r.test_kind != "rate":
            continue
        batch = int(r.test_param("n_seq", 1) or 1)
        context = int(r.test_param("n_depth", 0) or 0) + int(
            r.test_param("n_gen", 0) or 0
        )
        n_ctx = int(r.effective.get("n_ctx") or 0)
        out.setdefault((r.host_id, r.model_name), []).append(
            Row(r, context, batch, n_ctx, kv_bytes(r), fx.figure_of(r))
        )
    for rows in out.values():
        rows.sort(key=lambda x: (x.context, x.batch))
    return out
