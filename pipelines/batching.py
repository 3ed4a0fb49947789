"""Request batching per workload type (seed 003, phase 1 "Estimated Performance Gain": Workload Type |
Current | With Batching | Speedup | Gain).

Tokenize-heavy rows are measured: the runs of the ``tokenize`` kind (core.kinds.tokenize), one text a
request against ``batch`` texts a request, per number of clients; the speed-up is the fact layer's
figure of the per-round ratio (the run as the unit). Rows batching cannot be measured for here (a
generation request is one sequence through llama-server) are the batching plan put together from the
per-request overhead measured apart (pipelines.overhead): batching ``k`` requests into one removes at
most the overhead outside the compute (serialization, transport, deserialization) of ``k - 1`` of them,
so a request's time becomes ``wall - (1 - 1/k) x overhead``. The mixed row adds the generation and the
one-client tokenize rows. Artifacts alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.records.run import RunRecord
from pipelines import facts as facts_mod
from pipelines import overhead
from pipelines.runs import latest_per_key

GENERATION_REQUESTS = 50  # seed 003's 50-question benchmark
OVERHEAD_STAGES = ("serialization", "transport", "deserialization")


@dataclass
class Row:
    workload: str
    current_s: float
    batched_s: float
    speedup: facts_mod.Figure | None  # measured rows: the figure with its CI95
    measured: bool  # False: the plan from the measured overhead
    runs: list[RunRecord]
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.current_s / self.batched_s if self.batched_s > 0 else float("inf")


def rows(docs: list[RunRecord], host: str) -> list[Row]:
    fx = facts_mod.of(docs)
    out: list[Row] = []
    tok = [
        r
        for r in latest_per_key(docs)
        if r.ok and r.host_id == host and r.test_kind == "tokenize"
    ]
    one_client = None
    for r in sorted(
        tok, key=lambda r: (int(r.test_param("clients", 1) or 1), r.test_name)
    ):
        clients = int(r.test_param("clients", 1) or 1)
        n = int(r.test_param("requests", 0) or 0)
        k = int(r.test_param("batch", 0) or 0)
        one = fx.figure_of(r, "tokenize_one_by_one_s")
        bat = fx.figure_of(r, "tokenize_batched_s")
        if one is None or bat is None:
            continue
        row = Row(
            f"{n:,} tokenize requests"
            + (f", {clients} clients at once" if clients > 1 else ""),
            one.mean,
            bat.mean,
            fx.figure_of(r, "batching_speedup"),
            True,
            [r],
            f"batches of {k}",
        )
        out.append(row)
        if clients == 1 and one_client is None:
            one_client = row
    gen = [b for b in overhead.breakdowns(docs) if b.run.host_id == host]
    batch = int(one_client.runs[0].test_param("batch", 10) or 10) if one_client else 10
    if gen:
        b = gen[0]
        over = sum(s.mean_ms for s in b.stages if s.name in OVERHEAD_STAGES)
        cur = GENERATION_REQUESTS * b.wall_ms / 1000.0
        new = GENERATION_REQUESTS * (b.wall_ms - (1 - 1 / batch) * over) / 1000.0
        g = Row(
            f"{GENERATION_REQUESTS}-question generation",
            cur,
            new,
            None,
            False,
            [b.run],
            f"plan: batches of {batch} remove the overhead outside the compute of {batch - 1} in {batch}",
        )
        out.insert(0, g)
        if one_client is not None:
            out.append(
                Row(
                    f"mixed: the {GENERATION_REQUESTS} questions and the {one_client.workload}",
                    cur + one_client.current_s,
                    new + one_client.batched_s,
                    None,
                    False,
                    [b.run, *one_client.runs],
                    "the two rows added",
                )
            )
    return out


def hosts(docs: list[RunRecord]) -> list[str]:
    return sorted(
        {r.host_id for r in latest_per_key(docs) if r.ok and r.test_kind == "tokenize"}
    )
