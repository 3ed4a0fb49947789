"""LoRA adapters from artifacts alone: the adapter table, the cost per adapter, memory predicted vs measured.

A sweep of the ``adapters`` track (``pipelines.optimization.track_of``: its points attach LoRA
adapters) gives, per model and test, one point per adapter count. For each point:

* the rate (prefill: pp tests, decode: tg tests) with its CI95, and its ratio to the point with
  no adapter (``core.stats.compare``: ratio of means, CI95, verdict);
* what attaching cost: the adapters' load time (llama_adapter_lora_init, timed per adapter),
  llama.cpp's own LoRA buffer sizes, the process's RSS growth on attaching, the run's peak RSS;
* the memory planner's prediction for the adapters (seed 002's formula with the model's real
  projection shapes, ``pipelines.memory.adapter_bytes``) beside llama.cpp's buffers.

**Cost per adapter.** The time per token of each point (1000 / mean rate, ms) is fitted against the
adapter count by least squares, one point per run (the run is the unit of a comparison: two
runs differ by more than the repetitions inside one), so the slope's CI95 has n − 2 degrees of
freedom; the slope is the milliseconds each adapter adds per token, and slope ÷ intercept the
share of the time without adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core import stats
from core.kinds.rate import RateTest
from core.records.run import RunRecord
from core.summary import Summary
from pipelines import optimization as opt
from pipelines.memory import ModelShape, adapter_bytes

MiB = 1024**2


@dataclass
class AdapterPoint:
    record: RunRecord
    count: int
    mean: float | None
    ci95: tuple[float | None, float | None]
    n: int
    comparison: dict[str, Any] | None  # against no adapter
    predicted_bytes: int | None
    buffer_bytes: int | None  # llama.cpp's LoRA buffers
    rss_growth_bytes: int | None
    load_time_s: float | None
    peak_rss_bytes: int | None

    @property
    def ms_per_token(self) -> float | None:
        return 1000.0 / self.mean if self.mean else None


@dataclass
class AdapterSeries:
    """One model and test of an adapter sweep on one host: a point per adapter count."""

    host_id: str
    sweep: str
    model: str
    synthetic: bool
    test: str
    stage: str  # "prefill" or "decode"
    points: list[AdapterPoint] = field(default_factory=list)
    failed: list[RunRecord] = field(default_factory=list)

    @property
    def fit(self) -> dict[str, Any] | None:
        """Time per token against the adapter count (least squares over the runs), or None."""
        pts = [(p.count, y) for p in self.points if (y := p.ms_per_token) is not None]
        fit = stats.linear_fit([x for x, _ in pts], [y for _, y in pts])
        if fit is None:
            return None
        base = fit["intercept"]
        lo, hi = fit["slope_ci95"]
        fit["relative"] = fit["slope"] / base if base else None
        fit["relative_ci95"] = (
            lo / base if lo is not None and base else None,
            hi / base if hi is not None and base else None,
        )
        return fit

    @property
    def baseline(self) -> AdapterPoint | None:
        return next((p for p in self.points if p.count == 0), None)


def _stage(rec: RunRecord) -> str:
    t = rec.spec
    if isinstance(t, RateTest):
        return (
            "prefill"
            if t.n_prompt and not t.n_gen
            else "decode"
            if t.n_gen and not t.n_prompt
            else "prefill + decode"
        )
    return "decode"


def _point(
    rec: RunRecord, base: RunRecord | None, shape: ModelShape | None
) -> AdapterPoint:
    s = rec.stat("tokens_per_second") or Summary()
    comparison = None
    if base is not None and base.ok and rec.ok and base.key != rec.key:
        comparison = stats.compare(
            base.values("tokens_per_second"), rec.values("tokens_per_second"), True
        ).to_dict()
    lora = rec.lora
    adapters = rec.lora_adapters
    buffers = rec.lora_buffer_mib
    return AdapterPoint(
        record=rec,
        count=len(rec.lora_requested),
        mean=s.mean,
        ci95=(s.ci95_low, s.ci95_high),
        n=int(s.n or 0),
        comparison=comparison,
        predicted_bytes=adapter_bytes(shape, adapters)
        if shape is not None and adapters
        else (0 if not rec.lora_requested else None),
        buffer_bytes=int(round(sum(buffers) * MiB))
        if buffers
        else (0 if not rec.lora_requested else None),
        rss_growth_bytes=lora.rss_growth_bytes,
        load_time_s=lora.load_time_s,
        peak_rss_bytes=rec.resources.peak_rss_bytes,
    )


def adapter_series(docs: list[RunRecord]) -> list[AdapterSeries]:
    """Every adapter sweep's series (host, sweep, model, test), points ordered by adapter count."""
    out: list[AdapterSeries] = []
    for sw in opt.sweeps(docs, track="adapters"):
        groups: dict[tuple[str, str], list[RunRecord]] = {}
        for p in sw.points:
            rec = p.doc
            groups.setdefault((rec.model_name, rec.test_name), []).append(rec)
        for (model, test), recs in groups.items():
            ok = [r for r in recs if r.ok and r.test_kind == "rate"]
            base = next((r for r in ok if not r.lora_requested), None)
            try:
                shape = ModelShape.from_facts(recs[0].gguf, model)
            except Exception:  # a model whose facts cannot be planned: no prediction
                shape = None
            series = AdapterSeries(
                sw.host_id,
                sw.name,
                model,
                any(r.synthetic for r in recs),
                test,
                _stage(recs[0]),
                failed=[r for r in recs if not r.ok],
            )
            series.points = sorted(
                (_point(r, base, shape) for r in ok), key=lambda p: p.count
            )
            out.append(series)
    return sorted(out, key=lambda s: (s.host_id, s.sweep, s.model, s.stage, s.test))


def memory_rows(series: list[AdapterSeries]) -> list[dict[str, Any]]:
    """Predicted against measured adapter memory, one row per host, model and adapter count
    (measured once per run: the prefill and decode runs of a count are two measurements)."""
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for s in series:
        for p in s.points:
            if not p.count:
                continue
            key = (s.host_id, s.model, p.count)
            row = rows.setdefault(
                key,
                {
                    "host_id": s.host_id,
                    "model": s.model,
                    "synthetic": s.synthetic,
                    "count": p.count,
                    "predicted": p.predicted_bytes,
                    "buffers": [],
                    "rss_growth": [],
                    "load_time_s": [],
                    "adapters": p.record.lora_adapters,
                    "ids": [],
                },
            )
            if p.buffer_bytes is not None:
                row["buffers"].append(p.buffer_bytes)
            if p.rss_growth_bytes is not None:
                row["rss_growth"].append(p.rss_growth_bytes)
            if p.load_time_s is not None:
                row["load_time_s"].append(p.load_time_s)
            row["ids"].append(p.record.id)
    out = []
    for row in rows.values():
        buf = max(row["buffers"]) if row["buffers"] else None
        row["buffer"] = buf
        row["error"] = (
            (row["predicted"] - buf) / buf
            if buf and row["predicted"] is not None
            else None
        )
        row["file_bytes"] = (
            sum(int(a.get("tensor_bytes") or 0) for a in row["adapters"]) or None
        )
        row["load"] = (
            stats.summarize(row["load_time_s"]) if row["load_time_s"] else None
        )
        row["rss"] = stats.summarize(row["rss_growth"]) if row["rss_growth"] else None
        out.append(row)
    return sorted(out, key=lambda r: (r["host_id"], r["model"], r["count"]))
