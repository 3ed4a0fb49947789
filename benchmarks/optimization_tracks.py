"""Run the optimization matrix and print each sweep against its baseline, from the artifacts.

    python benchmarks/optimization_tracks.py                # into a scratch data dir (printed)
    python benchmarks/optimization_tracks.py --data data     # into the project's data/ (committed runs)
    python benchmarks/optimization_tracks.py --data DIR --no-run   # only print what DIR holds

Prints, per sweep and test: rate (mean ± stddev, n), speedup over the baseline with CI95 and
verdict, draft acceptance, and the lossless / degeneration checks: the figures the seed
quotes by hand (prompt lookup's 12.7x on summarisation against ~1x in free generation,
"MoE2: GARBAGE"), measured on this host.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fmt(v: float | None, d: int = 2) -> str:
    return "—" if v is None else f"{v:,.{d}f}"


def report(data: Path) -> str:
    sys.path.insert(0, str(ROOT))
    from pipelines import optimization as opt
    from pipelines.runs import load_runs

    lines = []
    for sw in opt.sweeps(load_runs(data / "runs")):
        lines.append(
            f"\n== {sw.name} ({opt.TRACK_TITLES[sw.track]}) on {sw.host_id}"
            + (" [synthetic weights, speed only]" if sw.synthetic else "")
        )
        for test in sw.tests:
            lines.append(f"  -- {test}")
            for p in (p for p in sw.points if p.doc["test"]["name"] == test):
                if not p.ok:
                    err = p.doc.get("error") or {}
                    lines.append(
                        f"     {p.label:<44} FAILED ({err.get('kind')}): {err.get('message')}"
                    )
                    continue
                c = p.comparison or {}
                speed = (
                    "baseline"
                    if p.is_baseline
                    else (
                        f"{_fmt(c.get('ratio'))}x [{_fmt(c.get('ci95_low'))}, "
                        f"{_fmt(c.get('ci95_high'))}] {c.get('verdict')}"
                    )
                )
                extra = []
                if p.acceptance is not None:
                    extra.append(f"accept {_fmt(p.acceptance, 1)}%")
                if p.lossless is not None:
                    ll = p.lossless
                    extra.append(
                        "identical"
                        if ll["identical"]
                        else f"differs at token {ll['first_diff']} ({ll['agreement']:.0%} agree)"
                    )
                if p.degeneration and p.degeneration["degenerate"]:
                    extra.append("DEGENERATE: " + "; ".join(p.degeneration["flags"]))
                lines.append(
                    f"     {p.label:<44} {_fmt(p.mean):>10} ± {_fmt(p.stddev):<8} n={p.n:<3} {speed:<34} "
                    + "  ".join(extra)
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="data dir (default: a new scratch dir)")
    ap.add_argument("--matrix", default="optimization")
    ap.add_argument(
        "--no-run", action="store_true", help="only print what the data dir holds"
    )
    args = ap.parse_args(argv)
    data = args.data or Path(tempfile.mkdtemp(prefix="almanac-optimization-"))
    if not args.no_run:
        if args.data is None:
            (data / "matrices").mkdir(parents=True)
            shutil.copy(ROOT / "data" / "models.yaml", data / "models.yaml")
            shutil.copy(
                ROOT / "data" / "matrices" / f"{args.matrix}.yaml", data / "matrices"
            )
        env = {**os.environ, "ALMANAC_DATA": str(data.resolve())}
        import subprocess

        rc = subprocess.call(
            [sys.executable, "-m", "invoke", "bench", "--matrix", args.matrix],
            cwd=ROOT,
            env=env,
        )
        if rc:
            return rc
    print(f"artifacts: {data / 'runs'}")
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
