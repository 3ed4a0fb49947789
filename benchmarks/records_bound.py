"""What bounding request records saves: a load (or concurrency) run's artifact with every record against the same run
bounded to ``--kept`` records a level (core.request_records), and the sidecar that keeps them all.

The records are copies of a real one (the first request of a committed load run), each with its own
index and every time jittered by a seeded ±20% (identical copies would compress unrealistically
well), so the sizes are near those of real records; the run's statistics are not recomputed
(they do not change with the bound). Prints one JSON object: bytes of the artifact's JSON with all
records and bounded, the sidecar's bytes, and the seconds bound + compression took.

    python benchmarks/records_bound.py --levels 10 --requests 5000 --kept 1000
    # a concurrency level of 256 clients x 100 rounds, records of the committed slot sweep:
    python benchmarks/records_bound.py --levels 1 --requests 25600 --kept 1000 \
        --run data/runs/vm-d4bbc016/gemma3-270m-q4-k-m/slots-worker--ee8a504f77c8c7ca-20261128T080912.138Z.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN = "data/runs/vm-d4bbc016/gemma3-270m-q4-k-m/repeats-varied--b3e8a136a9c6c0ba-20261128T104707.133Z.json"


def _jitter(x: Any, rng: random.Random) -> Any:
    if isinstance(x, float):
        return round(x * rng.uniform(0.8, 1.2), 3)
    if isinstance(x, list):
        return [_jitter(v, rng) for v in x]
    if isinstance(x, dict):
        return {k: _jitter(v, rng) for k, v in x.items()}
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--requests", type=int, default=5000, help="requests per level")
    ap.add_argument("--kept", type=int, default=1000, help="records kept per level")
    ap.add_argument(
        "--run",
        default=RUN,
        help="a committed load or concurrency run to copy a record from",
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from core import artifacts, request_records

    doc = json.loads((ROOT / args.run).read_text())
    one = doc["samples"]["levels"][0]["requests"][0]
    level = doc["samples"]["levels"][0]
    levels = []
    for i in range(args.levels):
        recs = []
        for j in range(args.requests):
            rng = random.Random(i * 1_000_003 + j)
            r = _jitter(one, rng)
            r["index"] = j
            recs.append(r)
        levels.append({**level, "level": float(i + 1), "requests": recs})
    doc["samples"]["levels"] = levels
    full_json = len(artifacts.dumps(doc).encode())
    t0 = time.perf_counter()
    bounded, side = request_records.bound(
        doc, request_records.RecordPolicy(kept=args.kept, keep_all=True)
    )
    took = time.perf_counter() - t0
    out = {
        "levels": args.levels,
        "requests_per_level": args.requests,
        "kept_per_level": args.kept,
        "artifact_bytes_all_records": full_json,
        "artifact_bytes_bounded": len(artifacts.dumps(bounded).encode()),
        "sidecar_bytes": len(side or b""),
        "bound_and_gzip_s": round(took, 3),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
