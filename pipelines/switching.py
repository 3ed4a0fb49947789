"""Switching between models (seed 003, phase 2 "Model Caching Strategy": single model, 10 and 100 model
switches, multi-tenant; without and with a model cache), put together from measured parts.

A scenario (data/switching.yaml) sends ``requests`` requests over its models in turn, switching model
``switches`` times: ``switches + 1`` segments of consecutive requests, segment k served by model
k mod M. Each model's request time (its stage timings, load aside) and load time (load_time_s, the
fact layer's figure) are read as a What-if mix entry is (pipelines.whatif.ENTRY_RULE) from the runs of
the named test on the host. Without a cache every segment loads its model (the first load included);
with a cache of C models (least recently used evicted first) a segment whose model is cached loads
nothing. Time = loads + requests. The range beside each time takes every load time at the low and at
the high end of its CI95 (request times at their means: the loads are what differs). The cache's
memory is the sum of the C largest measured peak memories of its models. Artifacts alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError
from core.paths import data_dir, relpath
from core.records.run import RunRecord
from core.yamlio import load_yaml, pydantic_error_line
from pipelines import facts as facts_mod
from pipelines import whatif as wi

RULE = (
    "A scenario's requests go to its models in turn, in switches + 1 runs of consecutive requests. Its time "
    "is put together from each model's measured request time and load time on the host: without a cache every "
    "run of requests loads its model (the first load included); with one, only a model not in the cache is "
    "loaded (least recently used evicted first). The range beside a time takes every load time at the low and "
    "the high end of its CI95; the cache's memory is the measured peak memory of the models it holds."
)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., min_length=1)
    description: str = ""
    models: list[str] = Field(..., min_length=1, description="Models served, in turn.")
    requests: int = Field(..., ge=1, description="Requests sent.")
    switches: int = Field(..., ge=0, description="Model switches among them.")
    cache: int | None = Field(
        None,
        ge=1,
        description="Models the cache holds (default: all of the scenario's).",
    )

    @model_validator(mode="after")
    def _fits(self) -> Scenario:
        if self.switches >= self.requests:
            raise ValueError(
                f"{self.switches} switches need more than {self.switches} requests (got {self.requests})"
            )
        if self.switches and len(self.models) < 2:
            raise ValueError("switching needs two models or more")
        return self


class SwitchingFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = Field(1, description="Format version.")
    test: str = Field(..., description="The test whose runs give each model's times.")
    matrix: str | None = Field(None, description="Its matrix, preferred (a hint).")
    scenarios: list[Scenario] = Field(..., min_length=1)


def switching_path() -> Path:
    return data_dir() / "switching.yaml"


def load_switching(path: Path | None = None) -> SwitchingFile:
    path = path or switching_path()
    try:
        return SwitchingFile.model_validate(load_yaml(path))
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None


@dataclass
class ModelParts:
    model: str
    request_ms: float
    load: facts_mod.Figure
    peak_bytes: int | None
    run_ids: list[str]


@dataclass
class Result:
    scenario: Scenario
    segments: list[str]  # the model of each segment
    loads_without: int
    loads_with: int
    without_ms: tuple[float, float, float]  # mean, low, high
    with_ms: tuple[float, float, float]
    cache_bytes: int | None
    parts: dict[str, ModelParts] = field(default_factory=dict)

    @property
    def speedup(self) -> tuple[float, float, float]:
        """Without ÷ with: at the mean loads, and at the low and the high end of their CI95."""
        a, b = self.without_ms, self.with_ms
        return a[0] / b[0], a[1] / b[1], a[2] / b[2]

    @property
    def load_per_switch_ms(self) -> float | None:
        """The mean load time of the models switched to (segments after the first)."""
        later = self.segments[1:]
        if not later:
            return None
        return sum(self.parts[m].load.mean * 1000.0 for m in later) / len(later)


def segments(s: Scenario) -> list[tuple[str, int]]:
    """(model, requests) of each segment: switches + 1 of them, the first ones a request longer."""
    n = s.switches + 1
    base, extra = divmod(s.requests, n)
    return [(s.models[k % len(s.models)], base + (k < extra)) for k in range(n)]


def _parts(
    fx: facts_mod.Facts, f: SwitchingFile, model: str, host: str
) -> ModelParts | str:
    e = wi.MixEntry(model=model, test=f.test, matrix=f.matrix, weight=1)
    g, why = wi.entry_group(fx, e, host)
    if g is None:
        return f"{model}: {why}"
    load = wi.load_figure(fx, g)
    if load is None:
        return f"{model}: no measured load time"
    prof = wi.group_profile(g) or {}
    peaks = [r.resources.peak_rss_bytes for r in g.runs if r.resources.peak_rss_bytes]
    return ModelParts(
        model,
        sum(v for k, v in prof.items() if k != "load"),
        load,
        max(peaks) if peaks else None,
        [r.id for r in g.runs],
    )


def evaluate(
    f: SwitchingFile, docs: list[RunRecord], host: str
) -> tuple[list[Result], list[str]]:
    """Every scenario whose models were all measured on the host, and a line for each that was not."""
    fx = facts_mod.of(docs)
    out, missing = [], []
    cache: dict[str, ModelParts | str] = {}
    for s in f.scenarios:
        got = {m: cache.setdefault(m, _parts(fx, f, m, host)) for m in s.models}
        bad = [v for v in got.values() if isinstance(v, str)]
        if bad:
            missing.append(f"{s.name}: " + "; ".join(bad))
            continue
        parts = {m: v for m, v in got.items() if isinstance(v, ModelParts)}
        segs = segments(s)
        order = [m for m, _ in segs]
        capacity = s.cache or len(set(s.models))
        req = sum(parts[m].request_ms * n for m, n in segs)

        without = order  # every segment loads
        with_cache = lru_loaded(order, capacity)
        peaks = sorted((parts[m].peak_bytes or 0 for m in set(s.models)), reverse=True)
        out.append(
            Result(
                s,
                order,
                len(without),
                len(with_cache),
                _total(req, without, parts),
                _total(req, with_cache, parts),
                sum(peaks[:capacity]) if all(peaks) else None,
                parts,
            )
        )
    return out, missing


def _total(
    request_ms: float, loaded: list[str], parts: dict[str, ModelParts]
) -> tuple[float, float, float]:
    """Requests plus the loads, with every load at its mean, then at the low and the high end of its
    CI95 (its mean where it has no interval)."""

    def at(end: str) -> float:
        ms = 0.0
        for m in loaded:
            fig = parts[m].load
            v = {"mean": fig.mean, "low": fig.ci95_low, "high": fig.ci95_high}[end]
            ms += 1000.0 * (v if v is not None else fig.mean)
        return request_ms + ms

    return at("mean"), at("low"), at("high")


def lru_loaded(models: list[str], capacity: int) -> list[str]:
    """The models a least-recently-used cache of ``capacity`` loads over the segments' models, in order."""
    cache: list[str] = []
    loaded = []
    for m in models:
        if m in cache:
            cache.remove(m)
        else:
            loaded.append(m)
            if len(cache) >= capacity:
                cache.pop(0)
        cache.append(m)
    return loaded


def hosts(f: SwitchingFile, docs: list[RunRecord]) -> list[str]:
    """Hosts with a run of the scenarios' test for at least one of their models."""
    fx = facts_mod.of(docs)
    models = {m for s in f.scenarios for m in s.models}
    return sorted(
        {
            g.host_id
            for g in fx.groups_of(None, test=f.test)
            if any(r.model_name in models for r in g.runs)
        }
    )
