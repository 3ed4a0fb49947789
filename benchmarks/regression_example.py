"""A real regression for the History and Regressions pages: the ordinary build, then a
deliberately slowed build variant, then the ordinary build again.

    flock -x /tmp/almanac-cpu.lock python benchmarks/regression_example.py [--rounds 2]

The slowed variant is the same llama-cpp-python build run with half the threads (physical
cores // 2, at least 1): its artifacts record ``build.label = "threads-halved"`` and the
variant (what it overrode), their requested settings stay the matrix's (n_threads null =
physical cores) and their effective settings show what ran (n_threads 1 on 2 cores). So the
configuration's history (same host, model file, backend, test and requested settings) has a
build change where the rate drops; ``invoke compare --a build=ordinary --b build=threads-halved``
gives the same step as a table.

Order: ``rounds`` ordinary measurements, ``rounds`` slowed ones, then ``rounds`` ordinary
ones again (a recovery step). Each is a forced rerun of data/matrices/regression-example.yaml
(tg32, 5 repetitions; prompt-processing tests crashed (SIGSEGV) on the
VM this was measured on, vm-0372cd29 (the one with AMX), in the locally built llama-cpp-python) written to data/runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.execution import runner
from runtime.hosts import fingerprint as hostinfo

MATRIX = "regression-example"


def slowed_variant() -> runner.BuildVariant:
    cores = hostinfo.fingerprint()["cpu"]["physical_cores"] or 2
    threads = max(1, cores // 2)
    return runner.BuildVariant(
        "threads-halved",
        f"deliberately slowed build: {threads} thread(s) instead of the {cores} "
        "physical cores llama.cpp's default uses",
        {"n_threads": threads, "n_threads_batch": threads},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rounds", type=int, default=2, help="measurements of each build per phase"
    )
    args = ap.parse_args()
    phases = [
        ("ordinary", None),
        ("threads-halved", slowed_variant()),
        ("ordinary", None),
    ]
    for name, variant in phases:
        for i in range(args.rounds):
            report = runner.run_matrix(MATRIX, force=True, build_variant=variant)
            for p in report.measured + report.failed:
                print(f"{name} round {i + 1}: {p}")


if __name__ == "__main__":
    main()
