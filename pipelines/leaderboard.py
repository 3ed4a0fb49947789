"""Leaderboards: per host and test, configurations ranked on the test's headline metric."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from runtime.metrics import METRICS, Metric

from .runs import latest_per_key, metrics_frame

# The metric a test kind is ranked on (others are shown beside it).
HEADLINE: dict[str, str] = {"rate": "tokens_per_second", "chat": "ttft_ms", "generate": "generation_tps"}
COLUMNS: dict[str, list[str]] = {"rate": ["tokens_per_second"], "chat": ["ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"],
                                 "generate": ["generation_tps", "ttft_ms", "draft_acceptance"]}


@dataclass
class Board:
    host_id: str
    host_name: str
    test: str
    test_kind: str
    metric: Metric
    varying: list[str]  # settings that differ between rows
    rows: pd.DataFrame  # ranked best first


def varying_settings(settings: list[dict[str, Any]]) -> list[str]:
    keys = sorted({k for s in settings for k in s})
    out = []
    for k in keys:
        vals = {repr(s.get(k)) for s in settings}
        if len(vals) > 1:
            out.append(k)
    return out


def boards(docs: list[dict[str, Any]]) -> list[Board]:
    """Leaderboards from run artifacts (the newest artifact per configuration; failed runs excluded)."""
    docs = [d for d in latest_per_key(docs) if d["status"] == "ok"]
    frame = metrics_frame(docs)
    if frame.empty:
        return []
    out: list[Board] = []
    for (host_id, test), group in frame.groupby(["host_id", "test"], sort=True):
        kind = group["test_kind"].iloc[0]
        metric_name = HEADLINE.get(kind)
        if metric_name is None:
            continue
        metric = METRICS[metric_name]
        g = group[group["metric"] == metric_name].copy()
        if g.empty:
            continue
        g = g.sort_values("s_mean", ascending=not metric.higher_is_better, kind="stable").reset_index(drop=True)
        g["rank"] = range(1, len(g) + 1)
        varying = varying_settings(list(g["settings"])) if len(g) > 1 else []
        out.append(Board(host_id, group["host_name"].iloc[0], test, kind, metric, varying, g))
    return out


def board_records(board: Board) -> list[dict[str, Any]]:
    """Plain rows for rendering: rank, model, quantization, settings that differ, statistics, source."""
    recs = []
    for _, r in board.rows.iterrows():
        recs.append({
            "rank": int(r["rank"]),
            "model": r["model"],
            "quantization": r["quantization"],
            "synthetic": bool(r["synthetic"]),
            "settings": {k: r["settings"].get(k) for k in board.varying},
            "mean": r["s_mean"],
            "stddev": r["s_stddev"],
            "n": int(r["s_n"]),
            "ci95_low": r["s_ci95_low"],
            "ci95_high": r["s_ci95_high"],
            "id": r["id"],
            "backend": r["backend"],
        })
    return recs
