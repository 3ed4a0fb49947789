"""Real traffic on the Serving page (issue 31): the load and capacity runs whose arrivals are a
trace, bursts or a ramp, whose requests are conversations, that state a steady-state window or an
over-saturation stop, or that carry the server's or the GPU's telemetry; for each level, what the page draws
(every request in time, the server's series, the swim lanes) and states (the window, the stop, the
drift from the trace's schedule, cold or warm). Reads artifacts only (the level statistics come
from ``pipelines.serving.load_results``, stored or recomputed)."""

from __future__ import annotations

from typing import Any

from core import request_records, telemetry
from core.records.run import RunRecord
from pipelines import serving

TIMELINE_MAX = 30  # swim lanes drawn per level; a longer level is sampled evenly, and says so (a page's bytes: #30)


def arrivals_text(spec: Any) -> str:
    """How requests arrived, in words: "gamma bursts (shape 0.5) ramping linearly from 0.25 to the level"."""
    p = spec.profile
    if p == "trace":
        return "arrival times as recorded in the trace (levels: speed-ups)"
    if p == "gamma":
        than = "burstier than" if spec.burstiness < 1 else "as regular as or more than"
        out = f"gamma bursts (burstiness {spec.burstiness:g}: {than} Poisson)"
    elif p in ("poisson", "constant"):
        out = f"{p} arrivals"
    else:
        out = f"{p} users (closed loop)"
    if spec.ramp_up:
        start = spec.ramp_up_start
        out += (
            f", ramping up {spec.ramp_up}ly from {start:g} req/s to the level"
            if start
            else f", ramping up {spec.ramp_up}ly from a tenth of the level"
        )
    return out


def _features(spec: Any, levels: list[dict[str, Any]]) -> list[str]:
    f = []
    if spec.profile == "trace":
        f.append("trace replay")
    if spec.profile == "gamma":
        f.append("bursts")
    if spec.ramp_up:
        f.append("ramp-up")
    if spec.steady_state:
        f.append("steady state")
    if spec.oversaturation_stop:
        f.append("over-saturation stop")
    if spec.workload.kind == "multi_turn":
        f.append("conversations")
    if spec.workload.kind == "agent":
        f.append("agent sessions")
    if getattr(spec, "repeats", 1) > 1:
        f.append("repeats")
    if getattr(spec, "cache_reset", "none") != "none":
        f.append("cache reset")
    if any(telemetry.scrapes(lv.get("telemetry")) for lv in levels):
        f.append("server telemetry")
    if any(telemetry.gpu_samples(lv.get("gpu_telemetry")) for lv in levels):
        f.append("GPU telemetry")
    return f


def _requests(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        if r.get("start_ms") is None:
            continue
        first = r.get("first_token_ms")
        out.append(
            {
                "index": r.get("index"),
                "ok": bool(r.get("ok")),
                "scheduled_s": (
                    r["scheduled_ms"]
                    if r.get("scheduled_ms") is not None
                    else r["start_ms"]
                )
                / 1000.0,
                "start_s": r["start_ms"] / 1000.0,
                "first_s": first / 1000.0 if first is not None else None,
                "end_s": r["end_ms"] / 1000.0 if r.get("end_ms") is not None else None,
                "ttft_ms": r.get("ttft_ms"),
                "prompt_tokens": r.get("prompt_tokens")
                or r.get("prompt_tokens_counted"),
                "turn": r.get("turn"),
            }
        )
    return out


def timeline(
    records: list[dict[str, Any]], limit: int = TIMELINE_MAX
) -> dict[str, Any]:
    """Swim lanes of one level: each request's queued (scheduled -> sent), prefill (sent -> first token)
    and decode (first token -> end) spans, at most ``limit`` requests (every k-th, in schedule order)."""
    reqs = sorted(_requests(records), key=lambda r: (r["scheduled_s"], r["index"] or 0))
    n = len(reqs)
    step = max(1, -(-n // limit))
    shown = reqs[::step]
    lanes = []
    for lane, r in enumerate(shown):
        spans = [("queued", r["scheduled_s"], r["start_s"])]
        if r["first_s"] is not None:
            spans.append(("prefill", r["start_s"], r["first_s"]))
            if r["end_s"] is not None:
                spans.append(("decode", r["first_s"], r["end_s"]))
        elif r["end_s"] is not None:
            spans.append(
                ("failed" if not r["ok"] else "prefill", r["start_s"], r["end_s"])
            )
        for phase, a, b in spans:
            if b is not None and b >= a:
                lanes.append(
                    {
                        "lane": lane,
                        "request": r["index"],
                        "phase": phase,
                        "from_s": a,
                        "to_s": b,
                    }
                )
    return {"lanes": lanes, "requests": n, "shown": len(shown), "every": step}


def traffic_runs(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Every current load or capacity run that shows real traffic (the module's docstring), each with
    its levels' statistics, requests, telemetry series and swim lanes."""
    by_id = {d.id: d for d in docs}
    out = []
    for res in serving.load_results(docs):
        r = by_id.get(res["id"])
        if r is None or r.spec is None:
            continue
        levels = [lv.model_dump(exclude_unset=True) for lv in r.samples.levels or []]
        feats = _features(r.spec, levels)
        if not feats:
            continue
        stats_by_level = {float(s["level"]): s for s in res["stats"]["levels"]}
        rows = []
        for lv in sorted(levels, key=lambda x: float(x["level"])):
            recs = lv.get("requests") or []
            rows.append(
                {
                    "level": float(lv["level"]),
                    "stats": stats_by_level.get(float(lv["level"])) or {},
                    "requests": _requests(recs),
                    "telemetry": lv.get("telemetry"),
                    "gpu_telemetry": lv.get("gpu_telemetry"),
                    "timeline": timeline(recs),
                    # a level whose records were bounded (core.request_records): k of n stored
                    "sampled": lv.get("sampled"),
                }
            )
        out.append(
            {
                **res,
                "features": feats,
                "arrivals": arrivals_text(r.spec),
                "steady_state": r.spec.steady_state,
                "cache_state": getattr(r.details, "cache_state", None),
                "records_file": request_records.sidecar_of(r.data_path, r.records_full),
                "levels": rows,
            }
        )
    return out
