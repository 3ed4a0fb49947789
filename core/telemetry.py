"""Server telemetry: Prometheus text from a serving engine's /metrics, read into a few roles that
explain latency (requests queued, requests running, KV-cache occupancy, prefix-cache hits), and
the series a run stores (``runtime.load.telemetry`` scrapes it at a fixed interval).

Metric names per engine, from each engine's own docs or source (the fixtures in
tests/fixtures/telemetry/ are their documented expositions):

* llama-server (``--metrics``, tools/server/server-task.cpp): ``llamacpp:requests_deferred``
  (queued), ``llamacpp:requests_processing`` (running), ``llamacpp:prompt_tokens_cached_total`` and
  ``llamacpp:prompt_tokens_total`` (cache hits); builds before 2025 also had
  ``llamacpp:kv_cache_usage_ratio`` (occupancy);
* vLLM (docs "Production Metrics"): ``vllm:num_requests_waiting``, ``vllm:num_requests_running``,
  ``vllm:kv_cache_usage_perc`` (older ``vllm:gpu_cache_usage_perc``), ``vllm:prefix_cache_hits_total``
  / ``vllm:prefix_cache_queries_total`` (tokens);
* SGLang (docs "Production Metrics"): ``sglang:num_queue_reqs``, ``sglang:num_running_reqs``,
  ``sglang:token_usage``, ``sglang:cache_hit_rate``;
* TGI (docs "Metrics"): ``tgi_queue_size``, ``tgi_batch_current_size``.

A sample of several label sets (vLLM's ``{model_name=...}``) is summed per name. A value that is not
a number is dropped and counted; a counter that goes down between two scrapes is flagged (a restart or
a lying endpoint) and its rates are not computed across that point.
"""

from __future__ import annotations

import math
from typing import Any

#: role -> metric names that fill it, first found wins (gauges unless the name ends in _total)
ROLES: dict[str, tuple[str, ...]] = {
    "queued": (
        "llamacpp:requests_deferred",
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
    ),
    "running": (
        "llamacpp:requests_processing",
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
    ),
    "kv_usage": (
        "llamacpp:kv_cache_usage_ratio",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
    ),
    "cache_hit_tokens_total": (
        "llamacpp:prompt_tokens_cached_total",
        "vllm:prefix_cache_hits_total",
    ),
    "cache_query_tokens_total": ("vllm:prefix_cache_queries_total",),
    "prompt_tokens_total": ("llamacpp:prompt_tokens_total", "vllm:prompt_tokens_total"),
    "generated_tokens_total": (
        "llamacpp:tokens_predicted_total",
        "vllm:generation_tokens_total",
    ),
    "cache_hit_rate": ("sglang:cache_hit_rate",),
}
COUNTERS = tuple(r for r in ROLES if r.endswith("_total"))
ROLE_HELP = {
    "queued": "requests waiting for a slot (queue depth)",
    "running": "requests being processed",
    "kv_usage": "KV-cache occupancy (0-1)",
    "cache_hit_rate": "prefix-cache hit rate (tokens)",
}
MAX_TEXT = 2 << 20  # the most of one exposition read (bytes)


def parse(text: str) -> tuple[dict[str, float], int]:
    """({metric name: value summed over its label sets}, lines whose value was not a number)."""
    out: dict[str, float] = {}
    bad = 0
    for line in text[:MAX_TEXT].splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            _, _, rest = rest.rpartition("}")
            parts = rest.split()
        else:
            name, *parts = line.split()
        if not parts or not name:
            bad += 1
            continue
        try:
            v = float(parts[0])
        except ValueError:
            bad += 1
            continue
        if not math.isfinite(v):
            bad += 1
            continue
        out[name] = out.get(name, 0.0) + v
    return out, bad


def roles(values: dict[str, float]) -> dict[str, float]:
    """The roles a scrape fills ({role: value}), by the first name of each role's list it has."""
    out = {}
    for role, names in ROLES.items():
        for n in names:
            if n in values:
                out[role] = values[n]
                break
    return out


def engine_of(values: dict[str, float]) -> str | None:
    for prefix, engine in (
        ("llamacpp:", "llama-server"),
        ("vllm:", "vllm"),
        ("sglang:", "sglang"),
        ("tgi_", "tgi"),
    ):
        if any(k.startswith(prefix) for k in values):
            return engine
    return None


def check_series(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """What is wrong with a stored series: counters that went down (between which samples)."""
    decreasing: dict[str, int] = {}
    last: dict[str, float] = {}
    for s in samples:
        for k in COUNTERS:
            v = (s.get("v") or {}).get(k)
            if v is None:
                continue
            if k in last and v < last[k]:
                decreasing[k] = decreasing.get(k, 0) + 1
            last[k] = v
    return {"decreasing_counters": decreasing}


def summary(series: dict[str, Any] | None) -> dict[str, Any] | None:
    """Peak and mean of every gauge role, and the cache hit rate over the level from the counters
    (None where the series lacks them), from a stored series."""
    if not series:
        return None
    samples = [s for s in series.get("samples") or [] if isinstance(s, dict)]
    out: dict[str, Any] = {
        "samples": len(samples),
        "interval_s": series.get("interval_s"),
    }
    for role in ("queued", "running", "kv_usage", "cache_hit_rate"):
        raw = [(s.get("v") or {}).get(role) for s in samples]
        vals = [v for v in raw if isinstance(v, (int, float))]
        out[role] = {"max": max(vals), "mean": sum(vals) / len(vals)} if vals else None
    bad = check_series(samples)["decreasing_counters"]
    raw_hits = [(s.get("v") or {}).get("cache_hit_tokens_total") for s in samples]
    raw_fresh = [(s.get("v") or {}).get("prompt_tokens_total") for s in samples]
    raw_queries = [(s.get("v") or {}).get("cache_query_tokens_total") for s in samples]
    hits = [h for h in raw_hits if h is not None]
    fresh = [f for f in raw_fresh if f is not None]
    queries = [q for q in raw_queries if q is not None]
    rate = None
    if len(hits) >= 2 and not bad:
        dh = hits[-1] - hits[0]
        if len(queries) >= 2:  # vLLM: hits / queries (tokens)
            dq = queries[-1] - queries[0]
            rate = dh / dq if dq > 0 else None
        elif (
            len(fresh) >= 2
        ):  # llama-server: prompt_tokens_total counts the tokens not taken from the cache
            df = fresh[-1] - fresh[0]
            rate = dh / (dh + df) if dh + df > 0 else None
    out["cache_hit_rate_counters"] = rate
    out["decreasing_counters"] = bad
    out["missing"] = series.get("missing")
    return out


def scrapes(series: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A stored series' scrapes (each ``{"t_ms": ..., "v": {role: value}}``), the well-formed ones only."""
    return [s for s in (series or {}).get("samples") or [] if isinstance(s, dict)]


def scrape_count(summary: dict[str, Any]) -> int:
    """How many scrapes (or NVML samples: gpu_summary's count) a level's telemetry summary was
    computed from."""
    return int(summary.get("samples") or 0)


# -- GPU telemetry (NVML, runtime.load.gpu_telemetry) ---------------------------------------------
#: per-GPU readings of a sample, with their units and meaning (the chart's and the table's)
GPU_READINGS: dict[str, tuple[str, str]] = {
    "util_pct": ("%", "GPU utilisation (share of the interval a kernel ran)"),
    "mem_util_pct": ("%", "memory-controller utilisation"),
    "power_w": ("W", "board power"),
    "mem_used_mib": ("MiB", "GPU memory in use"),
}


def gpu_samples(series: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A stored GPU series' samples (each ``{"t_ms": ..., "g": [{reading: value} per GPU]}``),
    the well-formed ones only."""
    if not series or not series.get("available"):
        return []
    return [
        s
        for s in series.get("samples") or []
        if isinstance(s, dict) and isinstance(s.get("g"), list)
    ]


def gpu_summary(series: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per GPU, the mean and peak of each reading over a level, or why there are none
    (``{"available": false, "reason": ...}``)."""
    if not series:
        return None
    if not series.get("available"):
        return {"available": False, "reason": series.get("reason")}
    samples = gpu_samples(series)
    gpus = [g for g in series.get("gpus") or [] if isinstance(g, dict)]
    per_gpu = []
    for i, g in enumerate(gpus):
        row: dict[str, Any] = {"index": g.get("index"), "name": g.get("name")}
        for key in GPU_READINGS:
            vals = [
                s["g"][i].get(key)
                for s in samples
                if i < len(s["g"]) and isinstance(s["g"][i], dict)
            ]
            nums = [v for v in vals if isinstance(v, (int, float))]
            row[key] = (
                {"mean": sum(nums) / len(nums), "max": max(nums)} if nums else None
            )
        per_gpu.append(row)
    return {
        "available": True,
        "samples": len(samples),
        "interval_s": series.get("interval_s"),
        "gpus": per_gpu,
    }
