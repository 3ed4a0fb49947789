"""Per-request overhead, broken down (seed 003, phase 1's "Breakdown": JSON serialization, stdio
write/read, JSON deserialization per request, beside the compute that dominates).

From the request records of HTTP runs against a server that reports its own timings (llama-server's
``timings``): per request, the client's serialisation of the body (``client_serialize_ms``), its
parsing of the streamed answer (``client_parse_ms``), the server's compute (prompt + generation:
``prompt_ms + predicted_ms``), and transport with the server's own framing: the request's wall time
(``e2e_ms``, from the first byte sent to the last received, serialisation included) less the other
three. Each stage is the mean over the run's ok warm requests with its CI95 (Student t on the
log scale: core.stats.mean_interval); its share is of the mean wall time. Artifacts alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from core import stats
from core.records.run import RunRecord
from pipelines.memo import per_run, per_set
from pipelines.runs import latest_per_key

STAGES = (
    ("serialization", "serialization (client: request body to JSON)"),
    ("transport", "transport and server framing (HTTP, streaming)"),
    ("deserialization", "deserialization (client: parsing the streamed answer)"),
    ("compute", "compute (server: prompt and generation)"),
)


@dataclass
class Stage:
    name: str
    label: str
    mean_ms: float
    ci95: tuple[float | None, float | None]
    share: float  # of the mean wall time


@dataclass
class Breakdown:
    run: RunRecord
    n: int  # requests behind it
    wall_ms: float
    stages: list[Stage]


_KEYS = ("ok", "server_timings", "client_serialize_ms", "client_parse_ms", "e2e_ms")
_ON_CLASS: dict[
    type, frozenset[str]
] = {}  # model class -> which of _KEYS its class itself has


def _getter(r: Any) -> Callable[[str], Any]:
    """How ``_split`` reads a request: a dict by key; a model (pydantic) as ``getattr(r, k, None)`` reads
    it, its fields and extra fields looked up directly (a missing attribute of a model costs pydantic's
    ``__getattr__`` and an exception: most of the What-if page's time at 10,000 runs)."""
    if isinstance(r, dict):
        return r.get
    if not isinstance(r, BaseModel):
        return lambda k: getattr(r, k, None)
    cls = type(r)
    if cls not in _ON_CLASS:
        _ON_CLASS[cls] = frozenset(k for k in _KEYS if hasattr(cls, k))
    on_class, fields, extra = _ON_CLASS[cls], r.__dict__, r.__pydantic_extra__ or {}

    def get(k: str) -> Any:
        if k in on_class:  # a property or class attribute: as getattr finds it
            return getattr(r, k, None)
        return fields[k] if k in fields else extra.get(k)

    return get


def _split(r: Any) -> dict[str, float] | None:
    """One request's four stages (ms), or None when it lacks what a split needs."""
    get = _getter(r)
    if get("ok") is False:
        return None
    t = get("server_timings") or {}
    ser, par, e2e = get("client_serialize_ms"), get("client_parse_ms"), get("e2e_ms")
    if ser is None or par is None or e2e is None or "predicted_ms" not in t:
        return None
    compute = float(t.get("prompt_ms") or 0.0) + float(t["predicted_ms"])
    return {
        "serialization": float(ser),
        "deserialization": float(par),
        "compute": compute,
        "transport": float(e2e) - float(ser) - float(par) - compute,
    }


def _requests(run: RunRecord) -> list[Any]:
    s = run.samples
    return list(getattr(s, "warm", None) or getattr(s, "requests", None) or [])


@per_run
def breakdown(run: RunRecord) -> Breakdown | None:
    splits = [x for x in (_split(r) for r in _requests(run)) if x is not None]
    if len(splits) < 2:
        return None
    wall = sum(sum(x.values()) for x in splits) / len(splits)
    out = []
    for name, label in STAGES:
        vals = [x[name] for x in splits]
        s = stats.summary(vals)
        mean = float(s.mean or 0.0)
        lo, hi, _ = stats.mean_interval(s.n, s.mean, s.stddev, positive=mean > 0)
        out.append(Stage(name, label, mean, (lo, hi), mean / wall if wall > 0 else 0.0))
    return Breakdown(run, len(splits), wall, out)


@per_set
def breakdowns(docs: list[RunRecord]) -> list[Breakdown]:
    """Every current run whose requests can be split, by host and model (once per loaded set: the
    Overhead page and the batching rows of each host ask; read-only)."""
    found = [b for b in (breakdown(r) for r in latest_per_key(docs) if r.ok) if b]
    return sorted(
        found, key=lambda b: (b.run.host_id, b.run.model_name, b.run.test_name)
    )
