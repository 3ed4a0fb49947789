"""Load run artifacts and flatten them into pandas frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from core.paths import data_dir
from core.records import record_class
from core.records import run as record
from core.records.base import read_all
from core.records.run import RunRecord
from pipelines.memo import per_set


def load_artifacts(artifact: str, root: Path | None = None) -> list[Any]:
    """Every artifact of one type under ``root`` (validated), oldest first, as its typed record
    (core.records), ``path`` set for links.

    Without ``root``: the data folder's artifacts of that type from the one loaded set
    (pipelines.dataset), read and validated once however many pages ask."""
    if root is None:
        from pipelines import dataset

        return list(dataset.load().of(artifact))
    return read_all(record_class(artifact), root)


def load_runs(root: Path | None = None) -> list[RunRecord]:
    """Every run artifact (validated), oldest first, as typed run records. Without ``root``: the
    runs of the one loaded set of the data folder (pipelines.dataset: read and validated once)."""
    if root is None:
        from pipelines import dataset

        return list(dataset.load().runs)
    return record.read_all(root)


@per_set
def _latest_per_key(docs: list[Any]) -> list[RunRecord]:
    return record.latest_per_key(list(docs))


def latest_per_key(docs: list[Any]) -> list[RunRecord]:
    """The newest artifact of each configuration (a forced rerun supersedes, history stays on disk);
    computed once per loaded set, every page of a build asks it (the caller gets its own list)."""
    return list(_latest_per_key(docs))


def settings_label(settings: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(
        f"{k}={json.dumps(settings.get(k)) if not isinstance(settings.get(k), str) else settings.get(k)}"
        for k in keys
    )


def metrics_frame(docs: list[Any]) -> pd.DataFrame:
    """One row per (artifact, metric) with the summary statistics and the provenance needed to
    group, rank and link. ``record`` holds the RunRecord of the row."""
    rows = []
    for r in list(docs):
        base = {
            "id": r.id,
            "key": r.key,
            "path": r.path,
            "created": r.created,
            "status": r.status,
            "host_id": r.host_id,
            "host_name": r.host_name,
            "cpu": r.cpu_model,
            "gpu": r.gpu_names,
            "backend": r.backend,
            "backend_version": r.backend_version,
            "backend_build": r.backend_build,
            "llama_cpp_commit": r.llama_cpp_commit,
            "almanac": r.almanac_version,
            "build_label": r.build_label,
            "model": r.model_name,
            "model_sha256": r.model_sha256,
            "quantization": r.quantization,
            "architecture": r.gguf.get("architecture"),
            "n_params": r.model.get("n_params"),
            "synthetic": r.synthetic,
            "test": r.test_name,
            "test_kind": r.test_kind,
            "matrix": r.matrix_name,
            "settings": r.requested,
            "effective": r.effective,
            "swept": r.swept,
            "record": r,
        }
        if not r.ok:
            rows.append({**base, "metric": None, "error": r.error_message})
            continue
        for metric, st in r.summary.items():
            rows.append(
                {
                    **base,
                    "metric": metric,
                    "error": None,
                    **{f"s_{k}": v for k, v in st.to_dict().items()},
                }
            )
    return pd.DataFrame(rows)


def last_updated(recs: list[Any]) -> str | None:
    return max((r.created for r in list(recs)), default=None)


def data_root() -> Path:
    return data_dir()
