"""Perplexity / KL-divergence artifacts and the quantization ladder as tables.

Reads ``perplexity`` artifacts (and, for the ladder, ``run`` and ``quality`` artifacts) only.
The ladder joins, per model file (sha256): its size and quantization, the derived record
(source hash and quantizer command), PPL ± SE on the text, KL-divergence ± SE and top-token
agreement against its source, pp512 / tg128 speed with CI95 on a host, peak RSS, and the
suite scores of each prompt style (never merged across styles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from core.paths import data_dir
from core.records.perplexity import PerplexityRecord
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines import quality as quality_mod
from pipelines.quality import latest_per_key
from pipelines.runs import latest_per_key as latest_runs
from pipelines.runs import load_artifacts

LADDER_MATRIX = "ladder"  # data/matrices/ladder.yaml: the speed of every file of the ladder, same settings


def perplexity_root() -> Path:
    return data_dir() / "perplexity"


def load_perplexity(root: Path | None = None) -> list[PerplexityRecord]:
    return load_artifacts("perplexity", root or perplexity_root())


def perplexity_frame(docs: list[PerplexityRecord]) -> pd.DataFrame:
    """One row per current ok perplexity artifact."""
    rows = []
    for d in latest_per_key([x for x in docs]):
        if not d.ok:
            continue
        r, m, ref = d.results, d.model, d.reference
        rows.append(
            {
                "id": d.id,
                "host_id": d.host_id,
                "model": m.name,
                "model_sha256": m.sha256,
                "size_bytes": m.size_bytes,
                "quantization": m.quantization,
                "derived": m.derived,
                "reference": ref.name if ref else None,
                "reference_sha256": ref.sha256 if ref else None,
                "text": d.text.name,
                "n_ctx": d.n_ctx,
                "n_chunk": d.n_chunk,
                "rope_scaling": d.rope_scaling,
                "chunks_requested": d.method.get("chunks_requested"),
                "context_allocated": d.context_allocated,
                "n": r.n_scored_tokens,
                "ppl": r.ppl,
                "ppl_se": r.ppl_se,
                "kld": r.kld_mean,
                "kld_se": r.kld_se,
                "kld_p99": r.kld_p99,
                "same_top": r.same_top,
                "same_top_se": r.same_top_se,
                "ln_ratio": r.ln_ppl_ratio,
                "ln_ratio_se": r.ln_ppl_ratio_se,
                "created": d.created,
            }
        )
    return pd.DataFrame(rows)


def _speed(
    latest: dict[tuple[str, str], list[Any]], sha: str, test: str, host: str | None
) -> dict[str, Any] | None:
    (
        """The ladder's speed of one model file on one test: ``latest`` holds the """
        """current ok runs per (model sha256, test)."""
    )
    docs = [
        r
        for r in latest.get((sha, test), [])
        if (host is None or r.host_id == host) and r.stat("tokens_per_second")
    ]
    if not docs:
        return None
    # like with like: the ladder matrix's runs (same settings for every file) where there are any
    ladder = [r for r in docs if r.matrix_name == LADDER_MATRIX]
    r = max(ladder or docs, key=lambda r: (r.created, r.id))
    s = r.stat("tokens_per_second")
    return {
        "mean": s.mean,
        "ci95_low": s.ci95_low,
        "ci95_high": s.ci95_high,
        "n": s.n,
        "id": r.id,
        "peak_rss_bytes": r.resources.peak_rss_bytes,
        "host": r.host_id,
    }


def _scores(quality_docs: list[QualityRecord], sha: str) -> dict[str, dict[str, Any]]:
    """Newest ok score per (suite, prompt style) of one model file."""
    out: dict[str, dict[str, Any]] = {}
    for d in sorted(
        latest_per_key([x for x in quality_docs]),
        key=lambda d: (d.created, d.id),
    ):
        if not d.ok or d.model_sha256 != sha:
            continue
        out[f"{d.suite_name} · {d.prompt_style}"] = {
            **d.rate.to_dict(),
            "id": d.id,
            "chance": d.summary.chance,
            "items": quality_mod.item_verdicts(d),
        }
    return out


def ladder_frame(
    ppl_docs: list[PerplexityRecord],
    run_docs: list[RunRecord],
    quality_docs: list[QualityRecord],
    host: str | None = None,
) -> pd.DataFrame:
    """One row per model file of the ladder: every model that has a perplexity artifact."""
    pf = perplexity_frame(ppl_docs)
    if pf.empty:
        return pf
    # the ladder reads whole-text runs with the model's own RoPE: a scaled RoPE, or a run cut to a few
    # chunks (the long-context row's windows), is another measurement
    pf = pf[(pf["rope_scaling"] == "none") & pf["chunks_requested"].isna()]
    if pf.empty:
        return pf
    shas = set(pf["model_sha256"])
    current = [r for r in latest_runs(run_docs) if r.ok and r.model_sha256 in shas]
    if (
        host is None
    ):  # speed from one host only: the one that measured tg128 for the most ladder files
        counts: dict[str, set[str]] = {}
        for r in current:
            if r.test_name == "tg128":
                counts.setdefault(r.host_id, set()).add(r.model_sha256)
        host = max(counts, key=lambda h: (len(counts[h]), h)) if counts else None
    latest: dict[
        tuple[str, str], list[Any]
    ] = {}  # (model sha256, test) -> current ok runs
    for r in current:
        latest.setdefault((r.model_sha256, r.test_name), []).append(r)
    rows = []
    for sha, g in pf.groupby("model_sha256", sort=False):
        own = g[g["reference"].isna()].sort_values("created").tail(1)
        kl = g[g["reference"].notna()].sort_values("created").tail(1)
        src = (own if not own.empty else kl).iloc[0]
        ppl_row = own.iloc[0] if not own.empty else kl.iloc[0]
        row = {
            "model": src["model"],
            "model_sha256": sha,
            "quantization": src["quantization"],
            "size_bytes": int(src["size_bytes"]),
            "derived": src["derived"],
            "text": src["text"],
            "n_ctx": int(src["n_ctx"]),
            "ppl": ppl_row["ppl"],
            "ppl_se": ppl_row["ppl_se"],
            "ppl_id": ppl_row["id"],
            "n_tokens": int(ppl_row["n"]),
        }
        if not kl.empty:
            k = kl.iloc[0]
            row.update(
                {
                    "reference": k["reference"],
                    "kld": k["kld"],
                    "kld_se": k["kld_se"],
                    "kld_p99": k["kld_p99"],
                    "same_top": k["same_top"],
                    "same_top_se": k["same_top_se"],
                    "kld_id": k["id"],
                }
            )
        else:
            row.update(
                {
                    "reference": None,
                    "kld": None,
                    "kld_se": None,
                    "kld_p99": None,
                    "same_top": None,
                    "same_top_se": None,
                    "kld_id": None,
                }
            )
        for test in ("pp512", "tg128"):
            row[test] = _speed(latest, sha, test, host)
        row["peak_rss_bytes"] = max(
            (
                row[t]["peak_rss_bytes"]
                for t in ("pp512", "tg128")
                if row[t] and row[t]["peak_rss_bytes"]
            ),
            default=None,
        )
        row["scores"] = _scores(quality_docs, sha)
        row["speed_host"] = host
        rows.append(row)
    # each requantized file against the file it came from, paired on the items both were scored on
    by_sha = {r["model_sha256"]: r for r in rows}
    for r in rows:
        src = (
            by_sha.get((r["derived"] or {}).get("source_sha256"))
            if isinstance(r["derived"], dict)
            else None
        )
        for key, sc in r["scores"].items():
            other = (src or {}).get("scores", {}).get(key) if src else None
            sc["paired"] = (
                quality_mod.paired(other["items"], sc["items"]) if other else None
            )
    return (
        pd.DataFrame(rows)
        .sort_values("size_bytes", ascending=False)
        .reset_index(drop=True)
    )


def rope_perplexity(
    docs: list[PerplexityRecord], model: str
) -> dict[tuple[str, int], PerplexityRecord]:
    """The model's perplexity with a scaled RoPE by (scaling, extension factor), and with its own RoPE
    under ("none", 1) where it was scored on the same text in the same windows; the newest of each."""
    current = [
        d
        for d in latest_per_key([x for x in docs])
        if d.ok and d.model.name == model and d.reference is None and d.results
    ]
    scaled = [d for d in current if d.rope_scaling != "none" and d.rope_factor]
    windows = {(d.text.name, d.n_ctx, d.n_chunk) for d in scaled}
    out: dict[tuple[str, int], PerplexityRecord] = {}
    for d in sorted(current, key=lambda d: (d.created, d.id)):
        if d.rope_scaling != "none" and d.rope_factor:
            out[(d.rope_scaling, d.rope_factor)] = d
        elif d.rope_scaling == "none" and (d.text.name, d.n_ctx, d.n_chunk) in windows:
            out[("none", 1)] = d
    return out
