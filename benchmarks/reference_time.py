"""How long the reference workload takes on this host (issue 19: "`invoke all` measures it in
<= 3 minutes on a 2-core VM"; the README quotes the figure).

    flock -x /tmp/almanac-cpu.lock python3 benchmarks/reference_time.py [--fresh-synthetic]
    [--with-default] [--with-noise] [--with-probe]

Runs data/matrices/reference.yaml through the real runner in a temporary data dir (nothing is
written to data/), then prints each configuration's samples, CI95 half-width, why it stopped and
its wall time, and the total, with the load average before and after (on a shared machine the
figure is an upper bound). ``--with-default`` runs default.yaml first, as `invoke all` does (the
embedded model's reference rows are then already measured). ``--fresh-synthetic`` generates the
synthetic model into a temporary cache first and times that too, as a fresh host does.
``--with-noise`` and ``--with-probe`` add what `invoke all` runs once on a new host: the noise A/A
(almanac_tasks.workflow.NOISE_FIRST_MAX_RUNS runs and NOISE_FIRST_BUDGET_S seconds at most) and the bandwidth probe.
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
    ap.add_argument(
        "--with-default",
        action="store_true",
        help="run default.yaml first, as `invoke all` does",
    )
    ap.add_argument(
        "--fresh-synthetic",
        action="store_true",
        help="generate the synthetic model anew (timed)",
    )
    ap.add_argument(
        "--with-noise",
        action="store_true",
        help="then the noise A/A `invoke all` runs once on a new host",
    )
    ap.add_argument(
        "--with-probe",
        action="store_true",
        help="then the bandwidth probe `invoke all` runs once on a new host",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="almanac-refbench-") as td:
        d = Path(td) / "data"
        (d / "matrices").mkdir(parents=True)
        shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
        for name in ("default", "reference", "noise"):
            shutil.copy(ROOT / "data" / "matrices" / f"{name}.yaml", d / "matrices")
        os.environ["ALMANAC_DATA"] = str(d)
        if (
            args.fresh_synthetic
        ):  # a cache of its own, the embedded model's files linked in
            from core.paths import cache_dir

            cache = Path(td) / "cache"
            cache.mkdir()
            for p in cache_dir().iterdir():
                if p.name != "synthetic":
                    (cache / p.name).symlink_to(p)
            os.environ["ALMANAC_CACHE"] = str(cache)
        from core.records import run as record
        from runtime.execution import runner
        from runtime.models import registry

        print(f"load average before: {os.getloadavg()}")
        t_gen = 0.0
        if args.fresh_synthetic:
            t0 = time.perf_counter()
            reg = registry.load_registry()
            for name in ("synthetic-llama-1b-q8_0",):
                registry.ensure_synthetic(reg.models[name].synth)
            t_gen = time.perf_counter() - t0
            print(f"synthetic model generated in {t_gen:.1f} s")
        t_default = 0.0
        if args.with_default:
            t0 = time.perf_counter()
            runner.run_matrix("default")
            t_default = time.perf_counter() - t0
            print(f"default matrix: {t_default:.1f} s")
        t0 = time.perf_counter()
        report = runner.run_matrix("reference")
        total = time.perf_counter() - t0
        for r in sorted(record.read_all(d / "runs"), key=lambda r: r.created):
            if r.matrix_name != "reference":
                continue
            s, p = r.headline, r.precision
            half = (
                (s.ci95_high - s.ci95_low) / 2 / s.mean * 100
                if s and s.ci95_high is not None
                else float("nan")
            )
            print(
                f"{r.model_name:26s} {r.test_name:6s} n={s.n if s else 0:2d} mean={s.mean if s else 0:8.1f} "
                f"±{half:5.2f}%  stop={getattr(p, 'stop_reason', None) or getattr(p, 'reason', '?')}  "
                f"wall {r.resources.wall_s:6.1f} s  {r.status}"
            )
        print(
            f"reference matrix: {total:.1f} s ({len(report.measured)} measured, {len(report.skipped)} already "
            f"measured, {len(report.failed)} failed); with generation {total + t_gen:.1f} s"
        )
        t_noise = 0.0
        if (
            args.with_noise
        ):  # what `invoke all` adds once on a host without a run-to-run noise estimate
            from almanac_tasks import workflow
            from core import artifacts
            from runtime.execution import noise as noise_run

            t0 = time.perf_counter()
            path = noise_run.run_noise(
                workflow.NOISE_FIRST_MAX_RUNS, workflow.NOISE_FIRST_BUDGET_S
            )
            t_noise = time.perf_counter() - t0
            st = artifacts.load(path)["stopping"]
            print(
                f"first noise A/A ({st['counted_runs']} counted runs + {st['warmup_runs']} warm-up, stopped: "
                f"{st['reason']}): {t_noise:.1f} s"
            )
        t_probe = 0.0
        if (
            args.with_probe
        ):  # what `invoke all` adds once on a host without a bandwidth artifact
            from runtime.hosts import probe as hostprobe

            t0 = time.perf_counter()
            hostprobe.run_probe()
            t_probe = time.perf_counter() - t0
            print(f"bandwidth probe: {t_probe:.1f} s")
        print(
            f"all measured steps: {t_gen + t_default + total + t_noise + t_probe:.1f} s "
            f"(generation {t_gen:.1f}, default "
            f"{t_default:.1f}, reference {total:.1f}, noise {t_noise:.1f}, probe {t_probe:.1f}); on {os.cpu_count()} "
            "logical cores; "
            f"load average after: {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
