"""Quality artifacts as tables: scores per model x configuration x suite, with n and CI.

Reads ``quality`` artifacts only (through core.artifacts). The pass rate of a suite is
the share of scored items that passed; its 95% interval is the Wilson score interval
(computed again here from passed / n, so the table does not trust a stored figure).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from core import stats
from core.paths import data_dir
from core.records.base import ArtifactRecord
from core.records.base import latest_per_key as records_latest
from core.records.quality import QualityRecord, pass_rate
from pipelines.runs import load_artifacts

R = TypeVar("R", bound=ArtifactRecord)


def latest_per_key(docs: list[R]) -> list[R]:
    """The newest quality (or perplexity) artifact of each key, oldest first: a forced rerun
    supersedes, history stays on disk (core.records.base.latest_per_key)."""
    return records_latest(docs)


# Settings that change how fast a configuration runs but not what it writes: left out of
# the identity that joins quality verdicts to speed measurements (see config_identity).
SPEED_ONLY_SETTINGS = frozenset(
    {
        "n_threads",
        "n_threads_batch",
        "n_batch",
        "n_ubatch",
        "n_ctx",
        "n_gpu_layers",
        "main_gpu",
        "use_mmap",
        "use_mlock",
        "offload_kqv",
        "seed",
        "flash_attn",
        "swa_full",
        "n_parallel",
        "parallel",
        "split_mode",
        "tensor_split",
    }
)


# Settings of how an HTTP backend talks to its server (timeouts, retries, health path, SLOs):
# they decide whether a request succeeds in time, never what the model writes.
TRANSPORT_SETTINGS = frozenset(
    {
        "host",
        "port",
        "health_path",
        "api_key_env",
        "api_model",
        "server_label",
        "include_usage",
        "connect_timeout_s",
        "read_timeout_s",
        "request_timeout_s",
        "retries",
        "retry_backoff_s",
        "startup_timeout_s",
        "stop_timeout_s",
        "slo_ttft_ms",
        "slo_tpot_ms",
        "slo_attainment",
        "logits_all",
        "server_binary",
    }
)


def quality_root() -> Path:
    return data_dir() / "quality"


def load_quality(root: Path | None = None) -> list[QualityRecord]:
    """Every quality artifact (validated), oldest first, as typed records (``path`` for links)."""
    return load_artifacts("quality", root)


# Settings that mean nothing while another setting has a given value.
INERT_WHEN = {("speculative", "none"): ("draft_max", "lookup_ngram_max", "draft_model")}
# Values that mean "feature off", dropped so artifacts from before a setting existed still join.
NEUTRAL = {"speculative": "none"}


def output_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that can change a model's output: everything not declared speed-only,
    without empty values and without settings made inert by another (draft_max without
    speculative decoding)."""
    inert = {
        k
        for (key, val), keys in INERT_WHEN.items()
        if settings.get(key, val) == val
        for k in keys
    }
    return {
        k: v
        for k, v in sorted(settings.items())
        if k not in SPEED_ONLY_SETTINGS
        and k not in TRANSPORT_SETTINGS
        and k not in inert
        and v not in (None, {}, [])
        and not (k in NEUTRAL and v == NEUTRAL[k])
    }


def config_identity(
    backend: str, model_sha256: str | None, settings: dict[str, Any]
) -> str:
    """What quality and speed artifacts are joined on: backend, model file and output-relevant settings."""
    return json.dumps(
        {
            "backend": backend,
            "model": model_sha256,
            "settings": output_settings(settings),
        },
        sort_keys=True,
        default=str,
    )


def config_label(settings: dict[str, Any]) -> str:
    s = output_settings(settings)
    return (
        ", ".join(
            f"{k}={json.dumps(v, sort_keys=True) if not isinstance(v, str) else v}"
            for k, v in s.items()
        )
        or "defaults"
    )


def rate(passed: int, n: int) -> dict[str, Any]:
    """n, passed, pass rate and its Wilson CI95 (core.records.quality.pass_rate)."""
    return pass_rate(passed, n)


def style_of(doc: QualityRecord) -> str:
    """The prompt style of a quality artifact (chat for artifacts from before styles existed)."""
    return doc.prompt_style


def suite_style(suite: str, style: str) -> str:
    """The column a score belongs to: a suite in one prompt style (styles are never merged)."""
    return suite if style == "chat" else f"{suite} · {style}"


def scores_frame(docs: list[QualityRecord]) -> pd.DataFrame:
    """One row per current quality artifact: model, configuration, suite, n, pass rate, Wilson CI95,
    degeneration, status and provenance."""
    rows = []
    for d in latest_per_key([x for x in docs]):
        verdicts = d.verdicts
        degenerate = verdicts.n_degenerate
        r = d.rate.to_dict()
        summary = d.summary
        rows.append(
            {
                "id": d.id,
                "key": d.key,
                "path": d.path,
                "created": d.created,
                "status": d.status,
                "error": d.error_message,
                "host_id": d.host_id,
                "backend": d.backend,
                "model": d.model_name,
                "model_sha256": d.model_sha256,
                "synthetic": d.synthetic,
                "quantization": d.quantization,
                "suite": d.suite.name,
                "suite_version": d.suite.version,
                "category": d.suite.category,
                "n_in_suite": d.suite.n_items_in_suite,
                "settings": d.requested,
                "config": config_identity(d.backend, d.model_sha256, d.requested),
                "config_label": (
                    f"{d.backend}: {config_label(d.requested)}"
                    if d.server
                    else config_label(d.requested)
                ),
                "generation": d.generation,
                **r,
                "degenerate": degenerate,
                "degenerate_rate": degenerate / len(verdicts) if verdicts else None,
                "by_tag": {t: rate(v.passed, v.n) for t, v in summary.by_tag.items()},
                "prompt_style": d.prompt_style,
                "suite_style": suite_style(d.suite.name, d.prompt_style),
                "chance": summary.chance,
                "acc_norm": summary.acc_norm.to_dict() if summary.acc_norm else None,
            }
        )
    return pd.DataFrame(rows)


# -- paired comparisons on shared items ---------------------------------------------------------
PAIRED_RULE = (
    "Two configurations scored on the same items are compared item by item: the exact McNemar test on the "
    "items one passed and the other failed decides (win or loss at p < 0.05, else within noise), Agresti–Min's "
    "paired interval (the Wald interval after adding 1/2 to each cell of the paired table) gives the "
    "difference's CI95, and the minimum detectable difference is the "
    "smallest difference in pass rate this many shared items would show with 80% power at the observed "
    "share of discordant items (never below 6 items)."
)


def item_verdicts(doc: QualityRecord) -> dict[str, bool]:
    """Item id -> passed, for one quality artifact."""
    return doc.verdicts.by_id()


def paired(a: dict[str, bool], b: dict[str, bool]) -> stats.PairedComparison | None:
    """B against A on the items both were scored on (None when they share none)."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return stats.paired_rates([a[k] for k in shared], [b[k] for k in shared])


def paired_against_leader(docs: list[QualityRecord]) -> list[dict[str, Any]]:
    """Per suite and prompt style: every configuration against the one with the highest pass rate
    (the leader), paired on their shared items. One row per (suite style, configuration)."""
    best: dict[tuple[str, str], QualityRecord] = {}
    for d in latest_per_key([x for x in docs]):
        if not d.ok or not d.n_items:
            continue
        label = f"{d.model_name} · {config_label(d.requested)}"
        k = (suite_style(d.suite_name, d.prompt_style), label)
        if k not in best or (d.created, d.id) > (best[k].created, best[k].id):
            best[k] = d
    by_suite: dict[str, list[tuple[str, QualityRecord]]] = {}
    for (suite, label), d in best.items():
        by_suite.setdefault(suite, []).append((label, d))
    rows = []
    for suite, entries in sorted(by_suite.items()):
        if len(entries) < 2:
            continue
        rate_of = {label: d.passed / d.n_items for label, d in entries}
        leader, ld = max(entries, key=lambda e: (rate_of[e[0]], e[1].n_items, e[0]))
        for label, d in sorted(entries, key=lambda e: (-rate_of[e[0]], e[0])):
            if label == leader:
                continue
            pc = paired(item_verdicts(ld), item_verdicts(d))
            rows.append(
                {
                    "suite": suite,
                    "leader": leader,
                    "leader_id": ld.id,
                    "config": label,
                    "id": d.id,
                    "comparison": pc,
                }
            )
    return rows
