"""Run the hostile input corpus (tests/hostile/corpus.py) and report its figures: how many
inputs, the slowest and the largest (peak RSS) before their error, and any input that broke
a rule (traceback, exit code, more than one line, data/ touched, over 60 s or 1 GiB).

    python benchmarks/hostile_corpus.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.corpus import CASES, MAX_RSS_BYTES, MAX_WALL_S, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows, broken = [], []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="almanac-corpus-") as td:
            o = run_case(case, Path(td))
        problems = []
        if "Traceback" in o.stdout + o.stderr:
            problems.append("traceback")
        if o.rc != case.rc:
            problems.append(f"exit {o.rc}")
        if len(o.error_lines) != 1 or case.expect not in (o.error_lines or [""])[0]:
            problems.append(f"{len(o.error_lines)} error lines")
        if o.changed:
            problems.append(f"changed {o.changed[:3]}")
        if o.wall_s >= MAX_WALL_S or o.peak_rss_bytes >= MAX_RSS_BYTES:
            problems.append("over limits")
        rows.append({"case": case.name, "rc": o.rc, "wall_s": round(o.wall_s, 2),
                     "peak_rss_mib": round(o.peak_rss_bytes / 2**20, 1), "problems": problems,
                     "line": (o.error_lines or [""])[0][:160]})
        print(f"{case.name:>28}: rc {o.rc}  {o.wall_s:6.2f} s  {o.peak_rss_bytes / 2**20:7.1f} MiB  "
              f"{'; '.join(problems) or 'ok'}", flush=True)
        if problems:
            broken.append(case.name)
    wall = max(r["wall_s"] for r in rows)
    rss = max(r["peak_rss_mib"] for r in rows)
    print(f"\n{len(rows)} inputs: {len(rows) - len(broken)} clean, {len(broken)} broken; "
          f"max time {wall:.2f} s, max peak RSS {rss:.1f} MiB (limits {MAX_WALL_S:g} s, {MAX_RSS_BYTES / 2**20:.0f} MiB)")
    if args.json:
        Path(args.json).write_text(json.dumps({"inputs": len(rows), "broken": broken, "max_wall_s": wall,
                                               "max_peak_rss_mib": rss, "rows": rows}, indent=1))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
