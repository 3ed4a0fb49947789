"""The Fidelity section of the Methodology page: our token rates against llama-bench's on each host.

Rendered from the committed results of the fidelity benchmark, never typed by hand:

* CPU: ``benchmarks/results/cpu/fidelity-*.json`` (benchmarks/fidelity.py: both tools in fresh
  processes, alternating, samples pooled over rounds; ratio ours / llama-bench with its CI95 and
  verdict from ``core.stats.compare``);
* GPU: ``benchmarks/results/<gpu>/fidelity.json`` (benchmarks/gpu_bench.py: ``ratio`` of the
  means and ``ratio_per_round``, one ratio per llama-bench round); the CI95 here is Student's t
  over the per-round ratios (the rounds are the independent repetitions of the comparison).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from core import stats
from core.paths import project_root, relpath
from pipelines.site.markdown import cell, code, num, table


def results_dir() -> Path:
    return project_root() / "benchmarks" / "results"


def _verdict(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "insufficient data"
    return "win" if lo > 1.0 else "loss" if hi < 1.0 else "within noise"


def cpu_rows(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    rows = []
    for test, t in sorted((doc.get("tests") or {}).items()):
        c = ((t.get("vs_llama_bench") or {}).get("ours")) or {}
        s = t.get("summary") or {}
        rows.append(
            {
                "host": (doc.get("host") or {}).get("id", "?"),
                "file": relpath(path),
                "model": (doc.get("model") or {}).get("name", "?"),
                "test_name": test,
                "setting": f"flash_attn {(doc.get('settings') or {}).get('fa', '?')}",
                "ours": (s.get("ours") or {}).get("mean"),
                "llama_bench": (s.get("llama-bench") or {}).get("mean"),
                "n": f"{(s.get('ours') or {}).get('n', '?')} / {(s.get('llama-bench') or {}).get('n', '?')}",
                "ratio": c.get("ratio"),
                "ci95_low": c.get("ci95_low"),
                "ci95_high": c.get("ci95_high"),
                "verdict": c.get("verdict")
                or _verdict(c.get("ci95_low"), c.get("ci95_high")),
                "ci_method": "ratio of means, log-scale delta method (Welch)",
            }
        )
    return rows


def gpu_rows(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    rows = []
    for r in doc.get("rows") or []:
        per = [
            x
            for x in (r.get("ratio_per_round") or [])
            if x is not None and math.isfinite(x)
        ]
        s = stats.summarize(per)
        lo, hi = s["ci95_low"], s["ci95_high"]
        rows.append(
            {
                "host": doc.get("host_id", "?"),
                "file": relpath(path),
                "model": r.get("model", "?"),
                "test_name": r.get("test", "?"),
                "setting": f"{r.get('n_gpu_layers', '?')} layers on the GPU",
                "ours": r.get("ours_ts"),
                "llama_bench": r.get("llama_bench_ts"),
                "n": f"{r.get('ours_n', '?')} / {len(r.get('llama_bench_rounds') or [])} rounds",
                "ratio": r.get("ratio"),
                "ci95_low": lo,
                "ci95_high": hi,
                "verdict": _verdict(lo, hi),
                "ci_method": f"t over {len(per)} per-round ratios",
            }
        )
    return rows


def fidelity_rows(root: Path | None = None) -> list[dict[str, Any]]:
    """Every committed fidelity comparison, CPU files first, then each GPU folder's."""
    root = root or results_dir()
    rows: list[dict[str, Any]] = []
    for p in sorted((root / "cpu").glob("fidelity*.json")):
        rows += cpu_rows(p)
    for p in sorted(root.glob("gpu-*/fidelity.json")):
        rows += gpu_rows(p)
    return rows


def fidelity_section(root: Path | None = None) -> str:
    rows = fidelity_rows(root)
    if not rows:
        return (
            "No committed fidelity results yet: `invoke bench.fidelity` (CPU) and "
            "benchmarks/gpu_h100.sh (GPU) write them."
        )
    body = []
    for r in rows:
        ci = (
            f"{num(r['ci95_low'], 3)} – {num(r['ci95_high'], 3)}"
            if r["ci95_low"] is not None
            else "—"
        )
        body.append(
            [
                code(r["host"]),
                cell(r["model"]),
                code(r["test_name"]),
                cell(r["setting"]),
                num(r["ours"], 1),
                num(r["llama_bench"], 1),
                cell(r["n"]),
                num(r["ratio"], 3),
                ci,
                "<span "
                f'class="almanac-verdict-{r["verdict"] if r["verdict"] in ("win", "loss") else "noise"}">'
                f"{cell(r['verdict'])}</span>",
                code(r["file"]),
            ]
        )
    out = [
        table(
            [
                "host",
                "model",
                "test",
                "setting",
                "ours t/s",
                "llama-bench t/s",
                "n (ours / llama-bench)",
                "ratio",
                "CI95",
                "verdict",
                "source",
            ],
            body,
            ["l", "l", "l", "l", "r", "r", "r", "r", "r", "l", "l"],
        ),
        "",
    ]
    out.append(
        "Ratio = our mean rate ÷ llama-bench's on the same model file, settings and build; a win (loss) "
        "means the whole CI95 lies above (below) 1, within noise that it contains 1. CPU: both tools in fresh "
        "processes, alternating, samples pooled over rounds; CI95 of the ratio of means on the log scale. "
        "GPU: CI95 of the per-round ratios (Student's t). Every row comes from the file named in its last "
        "column."
    )
    return "\n".join(out)
