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

from dataclasses import dataclass
from typing import Any

from core import stats
from core.records.run import RunRecord
from pipelines.memo import per_set
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


_NEEDS = ("client_serialize_ms", "client_parse_ms", "e2e_ms", "server_timings")
_SPLITTABLE: dict[
    type, bool
] = {}  # request model -> whether its requests can carry a split


def _may_split(cls: type) -> bool:
    """Whether a request of this class can have what a split needs: a model (pydantic) that declares none
    of those fields and allows no others never has them (reading a missing attribute of a model costs
    an exception: most of the What-if page's time at 10,000 runs, for requests of other kinds)."""
    if cls not in _SPLITTABLE:
        fields = getattr(cls, "model_fields", None)
        config = getattr(cls, "model_config", None) or {}
        _SPLITTABLE[cls] = (
            not isinstance(fields, dict)
            or config.get("extra") == "allow"
            or all(k in fields or hasattr(cls, k) for k in _NEEDS)
        )
    return _SPLITTABLE[cls]


def _split(r: Any) -> dict[str, float] | None:
    """One request's four stages (ms), or None when it lacks what a split needs."""
    if not isinstance(r, dict) and not _may_split(type(r)):
        return None
    get = (
        (lambda k: r.get(k)) if isinstance(r, dict) else (lambda k: getattr(r, k, None))
    )
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
