"""How long the default quality matrix takes on this host (issue 5: "a few minutes on 2 cores").

    python benchmarks/quality_default_time.py [--matrix quality]

Runs the matrix in a temporary data dir (nothing is written to data/), then prints the wall
time of each suite run and the total, with the load average before and after: on a shared
machine the figure is an upper bound.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", default="quality")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="almanac-qbench-") as td:
        d = Path(td)
        (d / "matrices").mkdir()
        shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
        shutil.copytree(ROOT / "data" / "suites", d / "suites")
        shutil.copy(ROOT / "data" / "matrices" / f"{args.matrix}.yaml", d / "matrices")
        os.environ["ALMANAC_DATA"] = str(d)
        from core import artifacts
        from runtime.quality import suite_runner as runner

        print(f"load average before: {os.getloadavg()}")
        t0 = time.perf_counter()
        report = runner.run_quality_matrix(args.matrix)
        total = time.perf_counter() - t0
        for p in report.measured + report.failed:
            doc = artifacts.load(p)
            s = doc["summary"]
            print(
                f"{doc['suite']['name']:24s} {len(doc['items']):3d} items  {doc['resources']['wall_s']:7.1f} s  "
                f"tokens out {sum((it['timing'].get('output_tokens') or 0) for it in doc['items']):5d}  "
                f"passed {s['passed']}/{s['n']}  {doc['status']}"
            )
        print(
            f"total {total:.1f} s on {os.cpu_count()} logical cores; load average after: {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
