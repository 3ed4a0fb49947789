"""Corpus totals (seed 000's "benchmark baseline"): tokens generated, hours of generation and the
average rate, over every run artifact on disk, computed from the artifacts alone.

Every artifact counts (a forced re-measurement is work that was done, and history stays on
disk); only successful runs, only their timed part (warm-ups and failed requests left out),
as :meth:`core.records.run.RunRecord.generation` defines per test kind. The average rate is
total tokens over total time, i.e. weighted by time, over work of every kind: the seed's own
caveat holds, it is not a production figure.
"""

from __future__ import annotations

from typing import Any

from pipelines.memo import per_run


@per_run
def generation(r: Any) -> dict[str, Any]:
    """What a run generated (core.records.run.RunRecord.generation), once per run: kept with it."""
    return r.generation()


def totals(docs: list[Any]) -> dict[str, Any]:
    """Totals over all ok run artifacts, overall and per test kind, per host and per model."""
    out: dict[str, Any] = {
        "runs": 0,
        "tokens": 0,
        "seconds": 0.0,
        "prompt_tokens": 0,
        "by_kind": {},
        "by_host": {},
        "models": set(),
        "synthetic_tokens": 0,
        "first": None,
        "last": None,
    }
    for d in docs:
        r = d
        if not r.ok:
            continue
        g = generation(r)
        out["runs"] += 1
        out["tokens"] += g["tokens"]
        out["seconds"] += g["seconds"]
        out["prompt_tokens"] += g["prompt_tokens"]
        if r.synthetic:
            out["synthetic_tokens"] += g["tokens"]
        out["models"].add(r.model_name)
        for key, name in (("by_kind", r.test_kind), ("by_host", r.host_id)):
            row = out[key].setdefault(
                name, {"runs": 0, "tokens": 0, "seconds": 0.0, "time": set()}
            )
            row["runs"] += 1
            row["tokens"] += g["tokens"]
            row["seconds"] += g["seconds"]
            if g["time"] and g["tokens"]:
                row["time"].add(g["time"])
        out["first"] = min(filter(None, (out["first"], r.created)))
        out["last"] = max(filter(None, (out["last"], r.created)))
    out["rate"] = out["tokens"] / out["seconds"] if out["seconds"] else None
    out["hours"] = out["seconds"] / 3600.0
    for key in ("by_kind", "by_host"):
        for row in out[key].values():
            row["rate"] = row["tokens"] / row["seconds"] if row["seconds"] else None
            row["time"] = sorted(row["time"])
    out["models"] = sorted(out["models"])
    return out
