"""Fixture artifacts for the recommender and the Quality / Roles pages.

Speed artifacts are copies of a real golden run artifact (tests/fixtures/data) with the
test, model, settings and figures changed; quality artifacts are built from item verdicts.
Every document is validated against its schema when written (core.artifacts.write), so
the fixtures cannot drift from what the runtime writes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from core import artifacts, stats
from core.records.quality import QualityRecord
from core.records.run import RunRecord

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_RUN = next((ROOT / "tests" / "fixtures" / "data" / "runs").rglob("tg16--*.json"))
HOST = "golden-host-55ecea05"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def base_settings(**over: Any) -> dict[str, Any]:
    golden = json.loads(GOLDEN_RUN.read_text())
    return {**golden["settings"]["requested"], **over}


def model_block(name: str, size_bytes: int = 250_000_000) -> dict[str, Any]:
    golden = json.loads(GOLDEN_RUN.read_text())
    m = copy.deepcopy(golden["model"])
    m.update(
        name=name,
        sha256=sha(name),
        size_bytes=size_bytes,
        file_name=f"{name}.gguf",
        kind="file",
        identity=sha(name),
    )
    return m


def speed_doc(
    model: str,
    *,
    test: str = "tg128",
    metric: str = "tokens_per_second",
    mean: float,
    settings: dict[str, Any] | None = None,
    peak_rss: int = 800_000_000,
    size_bytes: int = 250_000_000,
    stamp: str = "20260101T000000Z",
) -> RunRecord:
    """A rate run of ``model`` whose headline averages ``mean``, as the record the pipelines take."""
    d = copy.deepcopy(
        artifacts.load(GOLDEN_RUN)
    )  # in the current run schema (older files migrate on load)
    settings = settings or base_settings()
    key = sha(json.dumps([model, test, metric, settings], sort_keys=True))
    d.update(
        id=f"{key[:12]}-{stamp}",
        key=key,
        created=f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T00:00:00+00:00",
    )
    d["model"] = {
        **model_block(model, size_bytes),
        "kind": "file",
        "identity": sha(model),
    }
    d["test"] = {**d["test"], "name": test, "n_gen": 128}
    d["settings"]["requested"] = settings
    samples = [mean * 0.98, mean, mean * 1.02]
    d["summary"] = {
        metric: stats.summarize(samples),
        "peak_rss_bytes": stats.summarize([peak_rss]),
    }
    d["resources"] = {**d["resources"], "peak_rss_bytes": peak_rss}
    return RunRecord(d)


def quality_doc(
    model: str,
    suite: str,
    verdicts: list[bool],
    *,
    degenerate: list[bool] | None = None,
    tags: list[list[str]] | None = None,
    settings: dict[str, Any] | None = None,
    size_bytes: int = 250_000_000,
    outputs: list[str] | None = None,
    stamp: str = "20260101T000000Z",
    status: str = "ok",
) -> QualityRecord:
    from core.records.quality import summarize_items

    golden = json.loads(GOLDEN_RUN.read_text())
    settings = settings or base_settings()
    degenerate = degenerate or [False] * len(verdicts)
    tags = tags or [[] for _ in verdicts]
    outputs = outputs or [("ok answer" if v else "wrong answer") for v in verdicts]
    items = []
    for i, (v, dg, tg, out) in enumerate(zip(verdicts, degenerate, tags, outputs)):
        items.append(
            {
                "id": f"{suite}-{i}",
                "tags": tg,
                "prompt": f"Question {i} of {suite}?",
                "system": None,
                "expected": "42",
                "scorer": "exact",
                "scorer_version": 1,
                "check": {"answer": "42"},
                "output": out,
                "passed": v,
                "score": 1.0 if v else 0.0,
                "details": {"normalized_output": out},
                "degeneration": {
                    "degenerate": dg,
                    "flags": ["repetition_loop"] if dg else [],
                    "reasons": ["ends with 'x' repeated 50 times"] if dg else [],
                    "metrics": {},
                    "version": 1,
                },
                "error": None,
                "timing": {
                    "ttft_ms": 50.0,
                    "tpot_ms": 20.0,
                    "e2e_ms": 300.0,
                    "output_tokens": 8,
                    "prompt_tokens": 12,
                    "finish_reason": "stop",
                    "wall_s": 0.3,
                },
                "scoring_s": 0.0,
            }
        )
    key = sha(
        json.dumps([model, suite, settings, verdicts, degenerate], sort_keys=True)
    )
    return QualityRecord(
        {
            "artifact": "quality",
            "schema_version": 1,
            "id": f"q{key[:12]}-{stamp}",
            "key": key,
            "created": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T00:00:00+00:00",
            "status": status,
            "error": None
            if status == "ok"
            else {
                "kind": "timeout",
                "message": "child killed",
                "signal": None,
                "exit_code": None,
            },
            "matrix": {"name": "fixture", "file": "data/matrices/fixture.yaml"},
            "backend": "llama_cpp",
            "suite": {
                "name": suite,
                "version": 1,
                "category": "general",
                "description": f"fixture suite {suite}",
                "file": f"data/suites/{suite}.yaml",
                "includes": [],
                "content_sha256": sha(suite),
                "n_items_in_suite": max(len(items), 1),
                "source": {},
                "sample": {
                    "requested": None,
                    "seed": 0,
                    "ids": [it["id"] for it in items],
                },
            },
            "generation": {
                "max_tokens": 16,
                "temperature": 0.0,
                "top_k": 40,
                "top_p": 0.95,
                "min_p": 0.05,
                "repeat_penalty": 1.0,
            },
            "settings": {"requested": settings, "swept": {}, "effective": {}},
            "model": {
                k: v
                for k, v in model_block(model, size_bytes).items()
                if k != "metadata"
            },
            "host": golden["host"],
            "build": {**golden["build"], "scorers": {"exact": 1}},
            "items": items,
            "summary": summarize_items(items),
            "sandbox": None,
            "resources": {
                "peak_rss_bytes": 500_000_000,
                "wall_s": 1.0,
                "load_time_s": 0.5,
                "exit_code": 0,
                "signal": None,
                "scoring_s": 0.0,
            },
            "log_tail": "",
        }
    )


def write_all(
    data_dir: Path, runs: list[RunRecord], quality: list[QualityRecord]
) -> None:
    for d in runs:
        artifacts.write(
            data_dir
            / "runs"
            / d["host"]["id"]
            / d["model"]["name"]
            / f"{d['test']['name']}--{d['key'][:16]}-{d['id'].split('-', 1)[1]}.json",
            getattr(d, "doc", d),
        )
    for d in quality:
        artifacts.write(
            data_dir
            / "quality"
            / d["host"]["id"]
            / d["model"]["name"]
            / f"{d['suite']['name']}--{d['key'][:16]}-{d['id'].split('-', 1)[1]}.json",
            getattr(d, "doc", d),
        )
