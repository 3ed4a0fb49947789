"""Soak: N random SIGKILLs of a matrix run, then a resume; count what a kill left broken.

    python benchmarks/soak.py [--kills 10] [--seed 0] [--json OUT]

A tiny matrix of the embedded model (32 configurations of about a second each) runs in a fresh data
folder as ``invoke bench``; at a random moment the runner (the invoke process, not its
group) gets SIGKILL, as from ``kill -9`` or the OOM killer. After each kill: which of its
workers were still alive 2 s later (orphans). After the last kill a run without kills must
complete. Then over the whole data folder: artifacts that do not load (corrupt), keys with
more than one artifact (duplicates), the configurations without an artifact, leftover job
folders of the killed runners (the next run must have removed them) and half-written
temporary files. Prints one line per kill and a summary; exit 1 when anything is non-zero.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MATRIX = """schema_version: 1
name: soak
models: [gemma3-270m-q4_k_m]
repetitions: 1
warmup: false
timeout_s: 60
settings: {n_threads: 1}
sweep: {n_batch: [32, 64, 96, 128, 160, 192, 224, 256]}
tests: [tg2, tg3, tg4, tg5]
"""


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        return [k for k in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--max-delay",
        type=float,
        default=4.0,
        help="latest kill, seconds after the start",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    from core import artifacts
    from runtime import procs

    work = Path(tempfile.mkdtemp(prefix="almanac-soak-"))
    data = work / "data"
    (data / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "models.yaml", data / "models.yaml")
    (data / "matrices" / "soak.yaml").write_text(MATRIX)
    env = dict(os.environ, ALMANAC_DATA=str(data), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "invoke", "bench", "--matrix", "soak"]
    killed_pids: list[int] = []
    orphans = 0
    rows = []
    i = 0
    while len(killed_pids) < args.kills and i < 3 * args.kills:
        i += 1
        delay = rng.uniform(0.5, args.max_delay)
        p = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        t0 = time.monotonic()
        seen: dict[int, psutil.Process] = {}
        while time.monotonic() - t0 < delay and p.poll() is None:
            for w in workers_of(p.pid):
                seen.setdefault(w.pid, w)
            time.sleep(0.05)
        for w in workers_of(p.pid):
            seen.setdefault(w.pid, w)
        finished = p.poll() is not None
        if not finished:
            os.kill(p.pid, signal.SIGKILL)
            killed_pids.append(p.pid)
        p.wait()
        alive = [
            w
            for w in seen.values()
            if w.is_running() and w.status() != psutil.STATUS_ZOMBIE
        ]
        if alive:
            _, alive = psutil.wait_procs(alive, timeout=2.0)
        orphans += len(alive)
        for w in alive:  # do not let them disturb the next round
            try:
                w.kill()
            except psutil.NoSuchProcess:
                pass
        n_art = (
            len(list((data / "runs").rglob("*.json")))
            if (data / "runs").exists()
            else 0
        )
        rows.append(
            {
                "kill": i,
                "after_s": round(delay, 2),
                "killed": not finished,
                "workers_seen": len(seen),
                "orphans": len(alive),
                "artifacts": n_art,
            }
        )
        print(
            f"kill {i:2d}: after {delay:4.1f} s{'' if not finished else ' (run had finished)'}; "
            f"workers seen {len(seen)}, alive 2 s later {len(alive)}; artifacts so far {n_art}",
            flush=True,
        )
    final = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    resumed_ok = final.returncode == 0
    # -- the verdict over the whole data folder
    corrupt, keys = 0, collections.Counter()
    runs = data / "runs"
    for path in artifacts.iter_files(runs):
        try:
            doc = artifacts.load(path)
        except Exception:
            corrupt += 1
            continue
        keys[doc["key"]] += 1
    quarantined = (
        len(list((data / "quarantine").rglob("*")))
        if (data / "quarantine").exists()
        else 0
    )
    duplicates = sum(n - 1 for n in keys.values() if n > 1)
    from runtime.execution import matrix as matrix_mod

    os.environ["ALMANAC_DATA"] = str(data)
    expected = len(matrix_mod.load("soak").configurations())
    missing = max(0, expected - len(keys))
    leftover = [
        str(p)
        for pid in killed_pids
        for p in Path(tempfile.gettempdir()).glob(f"{procs.JOB_PREFIX}{pid}-*")
    ]
    tmp_files = [str(p) for p in runs.rglob("*.tmp")] if runs.exists() else []
    summary = {
        "kills": len(killed_pids),
        "rounds": args.kills,
        "corrupt": corrupt,
        "quarantined": quarantined,
        "orphaned_workers": orphans,
        "leftover_job_folders": len(leftover),
        "leftover_tmp_files": len(tmp_files),
        "duplicate_keys": duplicates,
        "configurations": expected,
        "measured_keys": len(keys),
        "missing_after_resume": missing,
        "resume_completed": resumed_ok,
    }
    print(
        f"\n{len(killed_pids)} SIGKILLs: {corrupt} corrupt artifacts, {orphans} orphaned workers, "
        f"{len(leftover)} leftover job folders, {len(tmp_files)} leftover temp files, {duplicates} duplicate keys; "
        f"resume {'completed' if resumed_ok else 'FAILED'}: {len(keys)}/{expected} configurations measured "
        f"({quarantined} quarantined)"
    )
    if not resumed_ok:
        print(final.stderr[-2000:])
    if args.json:
        Path(args.json).write_text(
            json.dumps({"summary": summary, "rounds": rows}, indent=1)
        )
    shutil.rmtree(work, ignore_errors=True)
    bad = (
        corrupt
        or orphans
        or leftover
        or tmp_files
        or duplicates
        or missing
        or not resumed_ok
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
