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
from pipelines.site.markdown import cell, code, fold, num, table


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
                "setting": f"{r.get('n_gpu_layers', '?')} layers on the GPU"
                + (
                    f", split {r['split_mode']} over {len(r['gpus_used'])} GPUs"
                    if len(r.get("gpus_used") or []) > 1
                    else ", split none"
                    if r.get("split_mode") == "none"
                    else ""
                ),
                "same_n": r.get("ratio_same_n"),
                "median_ratio": r.get("ratio_median"),
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


BAND = (0.97, 1.03)


def outside_note(rows: list[dict[str, Any]]) -> str:
    """The GPU points whose ratio lies outside 0.97–1.03, each with its like-for-like ratio (our first
    k repetitions against llama-bench's k) and its ratio of medians, and why they differ (issue 29)."""
    files = {
        r["file"] for r in rows if r.get("same_n") is not None
    }  # the runs since issue 29's method
    gpu = [r for r in rows if r["file"] in files]
    out = [
        r
        for r in gpu
        if r["ratio"] is not None and not BAND[0] <= r["ratio"] <= BAND[1]
    ]
    if not gpu:
        return ""
    if not out:
        return f"Every GPU point of {', '.join(code(f) for f in sorted(files))} lies inside {BAND[0]}–{BAND[1]}."
    still = [
        r for r in out if r["same_n"] is None or not BAND[0] <= r["same_n"] <= BAND[1]
    ]
    items = "; ".join(
        f"{cell(r['model'])} {code(r['test_name'])} ({code(r['host'])}): {num(r['ratio'], 3)}, like for like "
        + (num(r["same_n"], 3) if r["same_n"] is not None else "—")
        + (
            f", medians {num(r['median_ratio'], 3)}"
            if r["median_ratio"] is not None
            else ""
        )
        for r in out
    )
    points = fold(
        f"The {len(out)} points outside {BAND[0]}–{BAND[1]}, like for like and by medians",
        items + ".",
    )
    return (
        f"**Outside {BAND[0]}–{BAND[1]}**: {len(out)} of {len(gpu)} points of "
        + ", ".join(code(f) for f in sorted(files))
        + ". Why: both tools time "
        "a slow first repetition after the warm-up (a prefill of 512 tokens at about 65% of the steady rate on "
        "the H200); llama-bench averages it over its 5 repetitions, we over as many as the precision rule runs "
        "(up to 30), so the means differ where the medians and the like-for-like ratio (our first 5 against its "
        "5) agree. Decode at depth 4096 was low (0.95–0.97 on the 1B files) while we prefilled the depth before "
        "every repetition: llama-bench prefills it once and restores the saved state, so its first decode step "
        "does not rebuild the graph inside the timed region; we now do the same. "
        + (
            "Still outside like for like (or with fewer than 5 repetitions of ours to compare): "
            + "; ".join(f"{cell(r['model'])} {code(r['test_name'])}" for r in still)
            + ": repetitions of 10 ms (prefill) to 130 ms (decode), where our samples rise over the first "
            "repetitions (a clock ramp is the likely cause; not established)."
            if still
            else "Like for like, every point lies inside the band."
        )
        + "\n\n"
        + points
    )


HEADERS = [
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
]


def _table(rows: list[dict[str, Any]]) -> str:
    body = []
    for r in rows:
        ci = (
            f"{num(r['ci95_low'], 3)} – {num(r['ci95_high'], 3)}"
            if r["ci95_low"] is not None
            else "—"
        )
        verdict = (
            "win"
            if r["verdict"] == "win"
            else "loss"
            if r["verdict"] == "loss"
            else "noise"
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
                f'<span class="almanac-verdict-{verdict}">{cell(r["verdict"])}</span>',
                code(r["file"]),
            ]
        )
    return table(HEADERS, body, ["l", "l", "l", "l", "r", "r", "r", "r", "r", "l", "l"])


def fidelity_section(root: Path | None = None) -> str:
    rows = fidelity_rows(root)
    if not rows:
        return (
            "No committed fidelity results yet: `invoke bench.fidelity` (CPU) and "
            "benchmarks/gpu_run.sh (GPU) write them."
        )
    # the CPU files and the largest GPU run of the current method (like-for-like ratios) open; the
    # other GPU files folded, each under its own title (every row stays on the page)
    method = {r["file"] for r in rows if r.get("same_n") is not None}
    main = max(method, key=lambda f: sum(r["file"] == f for r in rows), default=None)
    shown = [r for r in rows if r["file"] == main or "/cpu/" in r["file"]]
    out = [_table(shown), ""]
    for f in dict.fromkeys(r["file"] for r in rows if r not in shown):
        part = [r for r in rows if r["file"] == f]
        what = (
            "Another GPU run"
            if f in method
            else "Earlier GPU run, before llama-bench's depth method"
        )
        out += [fold(f"{what}: {f} ({len(part)} points)", _table(part)), ""]
    out += [outside_note(rows), ""]
    out.append(
        "Ratio = our mean rate ÷ llama-bench's on the same model file, settings and build; a win (loss) "
        "means the whole CI95 lies above (below) 1, within noise that it contains 1. CPU: both tools in fresh "
        "processes, alternating, samples pooled over rounds; CI95 of the ratio of means on the log scale. "
        "GPU: CI95 of the per-round ratios (Student's t). Every row comes from the file named in its last "
        "column."
    )
    return "\n".join(out)
