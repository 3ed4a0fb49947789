"""Time to precision: repeating to a ±2% CI95 against a fixed ``-r 5``, on the default matrix.

    flock -x /tmp/almanac-cpu.lock python benchmarks/time_to_precision.py [--matrix default] [--rounds 2]
        [--target 0.02] [--min 3] [--max 30] [--max-time 120] [--out benchmarks/results/cpu/time_to_precision.json]

For every test of the matrix (its first model, base settings), each method runs in a fresh
child process exactly as ``invoke bench`` runs it (``runtime.execution.runner.run_child``), the two
methods alternating (fixed, adaptive, adaptive, fixed, ...) ``rounds`` times so that drift of
the shared machine falls on both:

* fixed: ``precision: null, repetitions: 5`` (chat: ``requests: 5``), llama-bench's -r 5;
* adaptive: ``precision: {target, min_repetitions, max_repetitions, max_time_s}``.

Per run it keeps the number of samples, the CI95 half-width reached (as a fraction of the
mean, the same statistic the stopping rule judges), whether it is within the target, the
time of the repetition loop (``details.precision.elapsed_s``: timed work plus its untimed
per-repetition preparation) and the child's whole wall time (model load and warm-up
included, the same for both methods). The goal of issue 13: on stable tests, the same or
better precision verdict (within ±2%) in at most half the time.

Writes a JSON result and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.artifacts import atomic_write_text
from core.precision import Precision
from runtime.execution import matrix as matrix_mod
from runtime.execution import runner
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models


def variants(test, precision: Precision):
    fixed_update = {"precision": None, "repetitions": 5}
    if hasattr(test, "requests"):
        fixed_update["requests"] = 5
    return {
        "fixed-r5": test.model_copy(update=fixed_update),
        "adaptive": test.model_copy(update={"precision": precision}),
    }


def run_one(cfg, ref, test, overrides: dict | None = None) -> dict:
    settings = runner.merged_settings(cfg, ref)
    if overrides:
        settings = type(settings).model_validate(
            {**settings.model_dump(mode="json"), **overrides}
        )
    job = {
        "backend": cfg.backend,
        "model": ref.to_dict(),
        "settings": settings.model_dump(mode="json"),
        "test": test.model_dump(mode="json"),
    }
    out = runner.run_child(job, cfg.timeout_s)
    res = out.result or {}
    if res.get("status") != "ok":
        raise SystemExit(
            f"{test.name}: run failed: {(res.get('error') or {}).get('message') or out.log[-500:]}"
        )
    prec = res["details"]["precision"]
    return {
        "n": prec["n"],
        "half_width_rel": prec["half_width_rel"],
        "metric": prec["metric"],
        "stop_reason": prec["stop_reason"],
        "loop_s": prec["elapsed_s"],
        "wall_s": round(out.wall_s, 3),
        "loadavg_before": out.loadavg_before,
    }


def summarise(name: str, runs: dict[str, list[dict]], target: float) -> dict:
    row: dict = {"test": name}
    for method, rs in runs.items():
        hws = [r["half_width_rel"] for r in rs]
        row[method] = {
            "n": [r["n"] for r in rs],
            "half_width_rel": hws,
            "within_target": [hw is not None and hw <= target for hw in hws],
            "loop_s": statistics.mean(r["loop_s"] for r in rs),
            "wall_s": statistics.mean(r["wall_s"] for r in rs),
            "stop_reason": [r["stop_reason"] for r in rs],
        }
    f, a = row["fixed-r5"], row["adaptive"]
    row["loop_ratio"] = a["loop_s"] / f["loop_s"] if f["loop_s"] else None
    row["wall_ratio"] = a["wall_s"] / f["wall_s"] if f["wall_s"] else None
    fixed_ok, adapt_ok = all(f["within_target"]), all(a["within_target"])
    row["stable"] = fixed_ok  # a test -r 5 already pins within the target
    row["goal_met"] = bool(
        adapt_ok
        and fixed_ok
        and row["loop_ratio"] is not None
        and row["loop_ratio"] <= 0.5
    )
    return row


def table(rows: list[dict], target: float) -> str:
    pct = lambda v: "—" if v is None else f"{100 * v:.2f}%"  # noqa: E731
    out = [
        (
            f"| test | method | n | CI95 half-width (target ±{100 * target:g}%) | loop s "
            "| wall s | adaptive/fixed loop (wall) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for m in ("fixed-r5", "adaptive"):
            d = r[m]
            ratio = (
                f"{r['loop_ratio']:.2f} ({r['wall_ratio']:.2f})"
                if m == "adaptive"
                else ""
            )
            out.append(
                f"| {r['test']} | {m} | {', '.join(map(str, d['n']))} | "
                f"{', '.join(pct(h) for h in d['half_width_rel'])} | {d['loop_s']:.2f} | {d['wall_s']:.2f} | {ratio} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", default="default")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.02)
    ap.add_argument("--min", type=int, default=3)
    ap.add_argument("--max", type=int, default=30)
    ap.add_argument("--max-time", type=float, default=120.0)
    ap.add_argument("--tests", nargs="*", help="only these test names")
    ap.add_argument(
        "--settings",
        default="{}",
        help="JSON backend settings over the matrix's, for both methods "
        "(e.g. '{\"extra_bufts\": false}')",
    )
    ap.add_argument("--out", default="benchmarks/results/cpu/time_to_precision.json")
    a = ap.parse_args(argv)
    overrides = json.loads(a.settings)
    precision = Precision(
        target=a.target,
        min_repetitions=a.min,
        max_repetitions=a.max,
        max_time_s=a.max_time,
    )
    m = matrix_mod.load(a.matrix)
    cfgs = [c for c in m.configurations() if c.model == m.configurations()[0].model]
    seen, rows = set(), []
    for cfg in cfgs:
        if cfg.test.name in seen or (a.tests and cfg.test.name not in a.tests):
            continue
        seen.add(cfg.test.name)
        ref = models.resolve(cfg.model)
        runs: dict[str, list[dict]] = {"fixed-r5": [], "adaptive": []}
        order = ["fixed-r5", "adaptive"]
        for r in range(a.rounds):
            for method in order if r % 2 == 0 else order[::-1]:
                runs[method].append(
                    run_one(cfg, ref, variants(cfg.test, precision)[method], overrides)
                )
                print(
                    f"{cfg.test.name} {method}: {runs[method][-1]}",
                    file=sys.stderr,
                    flush=True,
                )
        rows.append(summarise(cfg.test.name, runs, a.target))
    doc = {
        "benchmark": "time_to_precision",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": hostinfo.fingerprint()["id"],
        "matrix": a.matrix,
        "settings": overrides,
        "precision": precision.model_dump(mode="json"),
        "rounds": a.rounds,
        "command": "python benchmarks/time_to_precision.py "
        + " ".join(argv or sys.argv[1:]),
        "loadavg_1m_end": os.getloadavg()[0],
        "rows": rows,
    }
    atomic_write_text(Path(a.out), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(table(rows, a.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
