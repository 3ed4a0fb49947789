"""Load run artifacts and flatten them into pandas frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from runtime import artifacts
from runtime.paths import data_dir, relpath, runs_dir


def load_artifacts(artifact: str, root: Path | None = None) -> list[dict[str, Any]]:
    """Every artifact of one type under ``root`` (validated), oldest first, with ``_path`` for links.

    Without ``root``: the data folder's artifacts of that type from the one loaded set
    (pipelines.dataset), read and validated once however many pages ask."""
    if root is None:
        from . import dataset

        return list(dataset.load().of(artifact))
    docs = []
    for path, doc in artifacts.iter_artifacts(root, artifact):
        doc = dict(doc)
        doc["_path"] = relpath(path)
        docs.append(doc)
    docs.sort(key=lambda d: (d["created"], d["id"]))
    return docs


def load_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """Every run artifact under data/ (validated), oldest first."""
    return load_artifacts("run", root)


def latest_per_key(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest artifact of each configuration (a forced rerun supersedes, history stays on disk)."""
    latest: dict[str, dict[str, Any]] = {}
    for d in docs:
        cur = latest.get(d["key"])
        if cur is None or (d["created"], d["id"]) > (cur["created"], cur["id"]):
            latest[d["key"]] = d
    return sorted(latest.values(), key=lambda d: (d["created"], d["id"]))


def settings_label(settings: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k}={json.dumps(settings.get(k)) if not isinstance(settings.get(k), str) else settings.get(k)}" for k in keys)


def metrics_frame(docs: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (artifact, metric) with the summary statistics and the provenance needed to
    group, rank and link."""
    rows = []
    for d in docs:
        base = {
            "id": d["id"],
            "key": d["key"],
            "path": d.get("_path", ""),
            "created": d["created"],
            "status": d["status"],
            "host_id": d["host"]["id"],
            "host_name": d["host"]["name"],
            "cpu": d["host"]["cpu"]["model"],
            "gpu": ", ".join(g["name"] for g in d["host"].get("gpus", [])) or "",
            "backend": d["backend"],
            "backend_version": d["build"].get("backend_version", ""),
            "model": d["model"]["name"],
            "quantization": d["model"]["gguf"].get("quantization"),
            "architecture": d["model"]["gguf"].get("architecture"),
            "n_params": d["model"].get("n_params"),
            "synthetic": d["model"]["synthetic"],
            "test": d["test"]["name"],
            "test_kind": d["test"]["kind"],
            "matrix": d["matrix"]["name"],
            "settings": d["settings"]["requested"],
            "effective": d["settings"]["effective"],
            "swept": d["settings"]["swept"],
        }
        if d["status"] != "ok":
            rows.append({**base, "metric": None, "error": (d.get("error") or {}).get("message")})
            continue
        for metric, s in d["summary"].items():
            rows.append({**base, "metric": metric, "error": None, **{f"s_{k}": v for k, v in s.items()}})
    return pd.DataFrame(rows)


def last_updated(docs: list[dict[str, Any]]) -> str | None:
    return max((d["created"] for d in docs), default=None)


def data_root() -> Path:
    return data_dir()
