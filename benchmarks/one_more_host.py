"""Add one more fleet host's first reference run to a data folder (or take it away again), as
``benchmarks/site_scale.py --incremental`` does between its warm build and the timed rebuild.

    python benchmarks/one_more_host.py DATA --host 200          # add host 200's probe and reference runs
    python benchmarks/one_more_host.py DATA --host 200 --remove # the folder as it was

Then time the rebuild with the cache of the folder's last build (a warm build with one new host).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.site_scale import committed, new_host_reference
from core import artifacts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "data", type=Path, help="the data folder (a fleet site_scale wrote)"
    )
    ap.add_argument(
        "--host",
        type=int,
        default=200,
        help="the new host's index (site_scale's fleet hosts are 0 .. H-1: H is a new one)",
    )
    ap.add_argument(
        "--remove", action="store_true", help="remove what --host added instead"
    )
    args = ap.parse_args()
    if not args.data.is_dir():
        print(f"{args.data}: not a data folder", file=sys.stderr)
        return 2
    added = new_host_reference(committed(), args.host)
    for rel, doc in added:
        if args.remove:
            (args.data / rel).unlink(missing_ok=True)
        else:
            artifacts.write(args.data / rel, doc)
    print(
        f"{'removed' if args.remove else 'added'} {len(added)} artifacts: "
        + ", ".join(rel for rel, _ in added)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
