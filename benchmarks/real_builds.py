"""Real builds on this host: the reference workload measured with several llama-cpp-python releases (each
vendoring a different llama.cpp commit), interleaved in rounds, every run a fresh child process and a run
artifact in data/runs, so History and Regressions show real build changes.

    python3 benchmarks/real_builds.py --builds 0.3.34,0.3.35,0.3.36 --rounds 3 \
        [--matrix reference --sweeps reference-embedded] [--venvs /work/wt/verdicts-venvs] [--root data/runs]

Builds are runtime.execution.builds specs (a version means the venv ``<venvs>/lcp-<version>``; ``current``
is this environment). Round 1 runs the builds in the order given (the history orders builds by when each was
first measured, so give them oldest first); round r rotates that order by r - 1, so a drift of the machine
over the session does not line up with one build. Each round runs every configuration of the matrix (the
sweeps named) with each build. A summary (per build and configuration: runs, geometric mean, spread; the
machine's load average around each run) goes to benchmarks/results/real_builds.md.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from core import artifacts
    from core.errors import UserError
    from core.paths import relpath
    from runtime.execution import ab, builds, runlock, runner
    from runtime.execution import matrix as matrix_mod
    from runtime.hosts import fingerprint as hostinfo
    from runtime.models import registry as models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--builds", required=True, help="comma-separated build specs, oldest first"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--matrix", default="reference")
    ap.add_argument(
        "--sweeps",
        default="reference-embedded",
        help="comma-separated sweeps ('' for all)",
    )
    ap.add_argument("--venvs", default="")
    ap.add_argument("--root", default=str(ROOT / "data" / "runs"))
    ap.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "real_builds.md")
    )
    args = ap.parse_args(argv)
    try:
        specs = [s.strip() for s in args.builds.split(",") if s.strip()]
        bs = [
            builds.probe(builds.parse(s, Path(args.venvs) if args.venvs else None))
            for s in specs
        ]
        m = matrix_mod.load(args.matrix)
        sweeps = [s for s in args.sweeps.split(",") if s]
        cfgs = [c for c in m.configurations() if not sweeps or c.sweep in sweeps]
        registry = models.load_registry()
        refs = {
            n: models.resolve(n, registry) for n in dict.fromkeys(c.model for c in cfgs)
        }
        for cfg in cfgs:
            runner.preflight(cfg, refs[cfg.model])
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    fp = hostinfo.fingerprint()
    root = Path(args.root)
    rows: dict[tuple[str, str], list[float]] = {}
    loads: list[float] = []
    t0 = time.time()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M UTC")
    with runlock.run_lock(root, fp["id"], wait_s=3600):
        for r in range(args.rounds):
            order = bs[r % len(bs) :] + bs[: r % len(bs)]
            for b in order:
                for cfg in cfgs:
                    loads.append(os.getloadavg()[0])
                    res = ab._one_run(cfg, refs[cfg.model], fp, None, root, build=b)
                    rows.setdefault((b.spec, ab._work_id(cfg)), []).append(res["mean"])
                    print(
                        f"round {r + 1} {b.spec} ({b.info['llama_cpp_commit']}): {ab._work_id(cfg)} "
                        f"{res['mean']:.2f} ({res['wall_s']:.0f} s) {res['path']}",
                        flush=True,
                    )
    wall = time.time() - t0
    lines = [
        "# Real builds on this host (benchmarks/real_builds.py)",
        "",
        f"`python3 benchmarks/real_builds.py --builds {args.builds} --rounds {args.rounds} --matrix {args.matrix} "
        f"--sweeps {args.sweeps}`: started {started}, {wall / 60:.1f} min, host {fp['id']}. Rounds interleave "
        f"the builds (round r rotates the order by r - 1). Load average (1 min) before each run: "
        f"{min(loads):.1f}–{max(loads):.1f}, median {sorted(loads)[len(loads) // 2]:.1f}, on 2 cores shared "
        "with other work: the run-to-run spread below is this machine's, not the builds'.",
        "",
        "| build | llama.cpp | configuration | runs | geometric mean | spread between runs (log sd) |",
        "|---|---|---|--:|--:|--:|",
    ]
    for b in bs:
        for cfg in cfgs:
            v = rows.get((b.spec, ab._work_id(cfg)), [])
            logs = [math.log(x) for x in v if x > 0]
            gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
            sd = (
                math.sqrt(
                    sum((x - sum(logs) / len(logs)) ** 2 for x in logs)
                    / (len(logs) - 1)
                )
                if len(logs) > 1
                else float("nan")
            )
            lines.append(
                f"| {b.spec} ({b.info['llama_cpp_python']}) | {b.info['llama_cpp_commit']} | {ab._work_id(cfg)} | "
                f"{len(v)} | {gm:.2f} | {100 * sd:.1f}% |"
            )
    out = Path(args.out)
    artifacts.atomic_write_text(out, "\n".join(lines) + "\n")
    print(f"written: {relpath(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
