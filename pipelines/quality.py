"""Quality artifacts as tables: scores per model x configuration x suite, with n and CI.

Reads ``quality`` artifacts only (through core.artifacts). The pass rate of a suite is
the share of scored items that passed; its 95% interval is the Wilson score interval
(computed again here from passed / n, so the table does not trust a stored figure).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from core import stats
from core.paths import data_dir

from pipelines.runs import load_artifacts


def latest_per_key(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest quality (or perplexity) artifact of each key, oldest first: a forced rerun
    supersedes, history stays on disk. (Run artifacts have theirs in core.records.run.)"""
    latest: dict[str, dict[str, Any]] = {}
    for d in docs:
        cur = latest.get(d["key"])
        if cur is None or (d["created"], d["id"]) > (cur["created"], cur["id"]):
            latest[d["key"]] = d
    return sorted(latest.values(), key=lambda d: (d["created"], d["id"]))

# Settings that change how fast a configuration runs but not what it writes: left out of
# the identity that joins quality verdicts to speed measurements (see config_identity).
SPEED_ONLY_SETTINGS = frozenset({
    "n_threads", "n_threads_batch", "n_batch", "n_ubatch", "n_ctx", "n_gpu_layers", "main_gpu", "use_mmap",
    "use_mlock", "offload_kqv", "seed", "flash_attn", "swa_full", "n_parallel", "parallel", "split_mode",
    "tensor_split",
})


# Settings of how an HTTP backend talks to its server (timeouts, retries, health path, SLOs):
# they decide whether a request succeeds in time, never what the model writes.
TRANSPORT_SETTINGS = frozenset({
    "host", "port", "health_path", "api_key_env", "api_model", "server_label", "include_usage", "connect_timeout_s",
    "read_timeout_s", "request_timeout_s", "retries", "retry_backoff_s", "startup_timeout_s", "stop_timeout_s",
    "slo_ttft_ms", "slo_tpot_ms", "slo_attainment", "logits_all", "server_binary",
})


def quality_root() -> Path:
    return data_dir() / "quality"


def load_quality(root: Path | None = None) -> list[dict[str, Any]]:
    """Every quality artifact (validated), oldest first, with ``_path`` for links."""
    return load_artifacts("quality", root)


# Settings that mean nothing while another setting has a given value.
INERT_WHEN = {("speculative", "none"): ("draft_max", "lookup_ngram_max", "draft_model")}
# Values that mean "feature off", dropped so artifacts from before a setting existed still join.
NEUTRAL = {"speculative": "none"}


def output_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that can change a model's output: everything not declared speed-only,
    without empty values and without settings made inert by another (draft_max without
    speculative decoding)."""
    inert = {k for (key, val), keys in INERT_WHEN.items() if settings.get(key, val) == val for k in keys}
    return {k: v for k, v in sorted(settings.items())
            if k not in SPEED_ONLY_SETTINGS and k not in TRANSPORT_SETTINGS and k not in inert and v not in (None, {}, [])
            and not (k in NEUTRAL and v == NEUTRAL[k])}


def config_identity(backend: str, model_sha256: str, settings: dict[str, Any]) -> str:
    """What quality and speed artifacts are joined on: backend, model file and output-relevant settings."""
    return json.dumps({"backend": backend, "model": model_sha256, "settings": output_settings(settings)},
                      sort_keys=True, default=str)


def config_label(settings: dict[str, Any]) -> str:
    s = output_settings(settings)
    return ", ".join(f"{k}={json.dumps(v, sort_keys=True) if not isinstance(v, str) else v}" for k, v in s.items()) or "defaults"


def rate(passed: int, n: int) -> dict[str, Any]:
    lo, hi = stats.wilson_interval(passed, n)
    return {"n": n, "passed": passed, "pass_rate": passed / n if n else None, "ci95_low": lo, "ci95_high": hi}


def style_of(doc: dict[str, Any]) -> str:
    """The prompt style of a quality artifact (chat for artifacts from before styles existed)."""
    return doc.get("prompt_style") or "chat"


def suite_style(suite: str, style: str) -> str:
    """The column a score belongs to: a suite in one prompt style (styles are never merged)."""
    return suite if style == "chat" else f"{suite} · {style}"


def scores_frame(docs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per current quality artifact: model, configuration, suite, n, pass rate, Wilson CI95,
    degeneration, status and provenance."""
    rows = []
    for d in latest_per_key(docs):
        items = d["items"]
        passed = sum(1 for it in items if it["passed"])
        degenerate = sum(1 for it in items if it["degeneration"]["degenerate"])
        r = rate(passed, len(items))
        rows.append({
            "id": d["id"], "key": d["key"], "path": d.get("_path", ""), "created": d["created"], "status": d["status"],
            "error": (d.get("error") or {}).get("message"), "host_id": d["host"]["id"], "backend": d["backend"],
            "model": d["model"]["name"], "model_sha256": d["model"]["sha256"], "synthetic": d["model"]["synthetic"],
            "quantization": d["model"]["gguf"].get("quantization"), "suite": d["suite"]["name"],
            "suite_version": d["suite"]["version"], "category": d["suite"]["category"],
            "n_in_suite": d["suite"]["n_items_in_suite"], "settings": d["settings"]["requested"],
            "config": config_identity(d["backend"], d["model"]["sha256"], d["settings"]["requested"]),
            "config_label": (config_label(d["settings"]["requested"]) if d["backend"] == "llama_cpp"
                             else f"{d['backend']}: {config_label(d['settings']['requested'])}"),
            "generation": d["generation"],
            **r, "degenerate": degenerate, "degenerate_rate": degenerate / len(items) if items else None,
            "by_tag": {t: rate(v["passed"], v["n"]) for t, v in (d["summary"].get("by_tag") or {}).items()},
            "prompt_style": style_of(d), "suite_style": suite_style(d["suite"]["name"], style_of(d)),
            "chance": d["summary"].get("chance"), "acc_norm": d["summary"].get("acc_norm"),
        })
    return pd.DataFrame(rows)
