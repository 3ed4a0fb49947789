"""Run the hostile input corpus (tests/hostile/corpus.py) and report its figures: how many
inputs, the slowest and the largest (peak RSS) before their error, and any input that broke
a rule (traceback, exit code, not the expected lines, data/ touched, live markup in a built site,
over 60 s or 1 GiB). Storage cases need root (skipped, and counted as such, otherwise).

    python benchmarks/hostile_corpus.py [--json OUT] [-k NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.corpus import CASES, MAX_RSS_BYTES, MAX_WALL_S, problems, run_case


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    args = ap.parse_args()
    rows, broken, skipped = [], [], []
    for case in CASES:
        if args.k and args.k not in case.name:
            continue
        with tempfile.TemporaryDirectory(prefix="almanac-corpus-") as td:
            o = run_case(case, Path(td))
        if o.skipped:
            skipped.append(case.name)
            print(f"{case.name:>34}: skipped ({o.skipped})", flush=True)
            continue
        bad = problems(case, o)
        rows.append(
            {
                "case": case.name,
                "rc": o.rc,
                "wall_s": round(o.wall_s, 2),
                "peak_rss_mib": round(o.peak_rss_bytes / 2**20, 1),
                "problems": bad,
                "line": (o.error_lines or [""])[0][:160],
            }
        )
        print(
            f"{case.name:>34}: rc {o.rc}  {o.wall_s:6.2f} s  {o.peak_rss_bytes / 2**20:7.1f} MiB  "
            f"{'; '.join(bad) or 'ok'}",
            flush=True,
        )
        if bad:
            broken.append(case.name)
    wall = max((r["wall_s"] for r in rows), default=0.0)
    rss = max((r["peak_rss_mib"] for r in rows), default=0.0)
    slowest = max(rows, key=lambda r: r["wall_s"])["case"] if rows else "-"
    largest = max(rows, key=lambda r: r["peak_rss_mib"])["case"] if rows else "-"
    print(
        f"\n{len(rows)} inputs: {len(rows) - len(broken)} clean, {len(broken)} broken"
        f"{f', {len(skipped)} skipped (not root)' if skipped else ''}; max time {wall:.2f} s ({slowest}), "
        f"max peak RSS {rss:.1f} MiB ({largest}) (limits {MAX_WALL_S:g} s, {MAX_RSS_BYTES / 2**20:.0f} MiB)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "inputs": len(rows),
                    "broken": broken,
                    "skipped": skipped,
                    "max_wall_s": wall,
                    "max_peak_rss_mib": rss,
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
