"""Engine families side by side (issue 31): load and capacity runs of one matrix's test on one host,
each sent to a server of another family (``transformers serve``, llama-server ...) with the same
workload. Per level both engines' TTFT, inter-token latency, output throughput, SLO attainment,
prompt length as each server counted it, and the GPU's utilisation and power while the level ran;
per capacity search both answers with their intervals. Reads artifacts only (level statistics from
``pipelines.serving.load_results``, stored or recomputed)."""

from __future__ import annotations

from typing import Any

from core.records.run import RunRecord
from pipelines import serving


def _p50(stats: dict[str, Any], metric: str) -> dict[str, Any] | None:
    p = ((stats.get("percentiles") or {}).get(metric) or {}).get("p50")
    return p if isinstance(p, dict) and p.get("value") is not None else None


def _gpu(stats: dict[str, Any], key: str) -> float | None:
    g = stats.get("gpu_telemetry") or {}
    vals = [
        (row.get(key) or {}).get("mean")
        for row in g.get("gpus") or []
        if isinstance(row, dict)
    ]
    nums = [v for v in vals if isinstance(v, (int, float))]
    return sum(nums) if key == "power_w" and nums else (max(nums) if nums else None)


def level_row(stats: dict[str, Any]) -> dict[str, Any]:
    """One engine's figures at one level (None where the level lacks them)."""
    itl = stats.get("itl_ms") or {}
    return {
        "ttft_p50": _p50(stats, "ttft_ms"),
        "itl_median_ms": itl.get("median"),
        "itl_p95_ms": itl.get("p95"),
        "itl_n": itl.get("n"),
        "output_tps": stats.get("aggregate_tps"),
        "slo_attainment": stats.get("slo_attainment"),
        "ok": stats.get("ok"),
        "requests": stats.get("requests"),
        "prompt_tokens_mean": stats.get("prompt_tokens_mean"),
        "output_tokens_mean": stats.get("output_tokens_mean"),
        "gpu_util_pct": _gpu(stats, "util_pct"),
        "gpu_power_w": _gpu(stats, "power_w"),
        "gpu_mem_mib": _gpu(stats, "mem_used_mib"),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None and a > 0 else None


def engine_groups(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Groups of current, successful load/capacity runs with the same host, matrix, test and workload
    served by at least two server families; each with its engines (first: the one of the lowest
    output throughput at the first level, so ratios read "how many times the first") and the levels
    every engine ran."""
    by_id = {d.id: d for d in docs}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for res in serving.load_results(docs):
        r = by_id.get(res["id"])
        if r is None or res["status"] != "ok" or not res["server"]:
            continue
        key = (
            res["host"],
            r.matrix_name,
            res["test_name"],
            res["kind"],
            res["profile"],
            res["workload"],
        )
        groups.setdefault(key, []).append(res)
    out = []
    for (host, matrix, test, kind, profile, workload), rs in sorted(groups.items()):
        if len({x["server"] for x in rs}) < 2:
            continue
        engines = []
        for res in rs:
            m = by_id[res["id"]].model
            levels = {float(s["level"]): level_row(s) for s in res["stats"]["levels"]}
            engines.append(
                {
                    "id": res["id"],
                    "server": res["server"],
                    "server_version": m.get("server_version"),
                    "version_stated": bool(m.get("server_version_stated")),
                    "model": res["model"],
                    "synthetic": res["synthetic"],
                    "description": m.get("description") or "",
                    "answer": res["answer"],
                    "answer_text": res["answer_text"],
                    "levels": levels,
                }
            )
        common = sorted(set.intersection(*(set(e["levels"]) for e in engines)))
        if common:
            engines.sort(
                key=lambda e: (e["levels"][common[0]]["output_tps"] or 0.0, e["server"])
            )
        rows = []
        for lv in common:
            a, b = engines[0]["levels"][lv], engines[-1]["levels"][lv]
            rows.append(
                {
                    "level": lv,
                    "engines": [e["levels"][lv] for e in engines],
                    "tps_ratio": _ratio(a["output_tps"], b["output_tps"]),
                    "itl_ratio": _ratio(b["itl_median_ms"], a["itl_median_ms"]),
                }
            )
        out.append(
            {
                "host": host,
                "matrix": matrix,
                "test_name": test,
                "kind": kind,
                "profile": profile,
                "workload": workload,
                "unit": rs[0]["unit"],
                "engines": engines,
                "levels": rows,
                "prompt_lengths_differ": _lengths_differ(engines, common),
            }
        )
    return out


def _lengths_differ(engines: list[dict[str, Any]], levels: list[float]) -> float | None:
    """How many times more prompt tokens one engine counted than another for the same prompts
    (the tokenizers differ), when that is over 10%; None otherwise. Engines are compared level
    by level (the same prompts), never one level's prompts against another's."""
    worst = 1.0
    for lv in levels:
        means = [
            e["levels"][lv]["prompt_tokens_mean"]
            for e in engines
            if e["levels"][lv]["prompt_tokens_mean"]
        ]
        if len(means) >= 2:
            worst = max(worst, max(means) / min(means))
    return worst if worst > 1.1 else None
