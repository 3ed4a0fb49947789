"""The retrieval stack (seed 001, "Retrieval Stack": Index | Model | Params | Dim | Quantization |
Index Size | Benchmark) from the runs of the ``embed`` kind (core.kinds.embed): per host, one row per
configuration's newest run, with the embedding rate as the fact layer's figure (the run as the unit).
Artifacts alone."""

from __future__ import annotations

from dataclasses import dataclass

from core.kinds.embed import EmbedDetails
from core.records.run import RunRecord
from pipelines import facts as facts_mod
from pipelines.runs import latest_per_key


@dataclass
class Row:
    run: RunRecord
    rate: facts_mod.Figure | None  # embeddings per second
    build: facts_mod.Figure | None  # index build (ms)

    @property
    def details(self) -> EmbedDetails:
        d = self.run.details
        return d if isinstance(d, EmbedDetails) else EmbedDetails()

    @property
    def index_bytes(self) -> float | None:
        s = self.run.stat("index_bytes")
        return s.mean if s is not None else None


def rows(docs: list[RunRecord]) -> dict[str, list[Row]]:
    """host -> its embedding runs' rows (by model, then test)."""
    fx = facts_mod.of(docs)
    out: dict[str, list[Row]] = {}
    for r in latest_per_key(docs):
        if r.test_kind != "embed" or not r.ok:
            continue
        out.setdefault(r.host_id, []).append(
            Row(
                r,
                fx.figure_of(r, "embeddings_per_second"),
                fx.figure_of(r, "index_build_ms"),
            )
        )
    for v in out.values():
        v.sort(key=lambda x: (x.run.model_name, x.run.test_name))
    return out
