"""Repeats of a load level, and a cold cache when a test wants one (issue 31: fixed-seed repeats
silently measure a warm prefix cache, vLLM #52884 and #54227).

A level measured ``repeats`` times is one level: the repeats run one after another and their
records are pooled (each marked ``repeat``, its times shifted past the repeats before it). Repeat
r draws its prompts and arrival times with the seeds + r (``repeat_workload: vary``), so it never
resends what the server may still cache, unless the test resends the same requests on purpose
(``same``). With ``cache_reset: erase`` the server's slots are erased before each repeat. Each
repeat's seeds and reset are kept in the level's ``repeats``; what the server then reported as
cache hits per repeat, and whether a repeat ran warm without meaning to, is read from the
records by ``core.kinds.load_stats.repeat_stats``.
"""

from __future__ import annotations

from typing import Any

from core.kinds.workload import Workload

TIME_KEYS = ("scheduled_ms", "start_ms", "first_token_ms", "end_ms")


def workload_for(test: Any, repeat: int) -> Workload:
    """The workload of repeat ``repeat``: the test's, with its seed + repeat unless the test resends the same."""
    if repeat == 0 or test.repeat_workload == "same":
        return test.workload
    return test.workload.model_copy(update={"seed": test.workload.seed + repeat})


def arrival_seed(test: Any, repeat: int) -> int:
    return test.seed if test.repeat_workload == "same" else test.seed + repeat


def shifted(
    records: list[dict[str, Any]], shift_ms: float, **marks: Any
) -> list[dict[str, Any]]:
    """Copies of ``records`` with their times moved ``shift_ms`` later and ``marks`` set on each."""
    out = []
    for r in records:
        r = dict(r)
        for k in TIME_KEYS:
            if isinstance(r.get(k), (int, float)):
                r[k] = r[k] + shift_ms
        r.update(marks)
        out.append(r)
    return out


def join(parts: list[dict[str, Any]], infos: list[dict[str, Any]]) -> dict[str, Any]:
    """One level from its repeats (each a ``run_level`` result, with ``infos[r]`` what repeat r used)."""
    if len(parts) == 1 and not infos[0].get("cache_reset"):
        return parts[0]
    first = parts[0]
    recs: list[dict[str, Any]] = []
    wall = 0.0
    for r, part in enumerate(parts):
        recs += shifted(part["requests"], wall * 1000.0, repeat=r)
        wall += part.get("wall_s") or 0.0
    out = {
        **first,
        "requests": recs,
        "wall_s": wall,
        "planned": sum(p.get("planned") or 0 for p in parts),
        "repeats": [
            {
                **info,
                "repeat": r,
                "wall_s": p.get("wall_s"),
                "stop_reason": p.get("stop_reason"),
            }
            for r, (p, info) in enumerate(zip(parts, infos))
        ],
    }
    if len(parts) > 1:
        out["stop_reason"] = "; ".join(
            f"repeat {r}: {p.get('stop_reason')}" for r, p in enumerate(parts)
        )
    return out
