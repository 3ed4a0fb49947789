"""Child-process entry point: run one configuration and write its result.

``python -m runtime.worker JOB.json RESULT.json``. The parent (runtime.runner) captures
this process's stdout/stderr as the run's log, its exit status (an abort or a segfault in
llama.cpp ends only this process) and its peak RSS (wait4 rusage).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .artifacts import atomic_write_text


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from . import backends
    from .backends.base import UnsupportedTest
    from .gpu import PeakVram
    from .models import ModelRef
    from .workloads import parse_test

    settings = backends.settings_class(job["backend"]).model_validate(job["settings"])
    test = parse_test(job["test"])
    model = ModelRef.from_dict(job["model"]) if job.get("model") else None
    backend = backends.create(job["backend"], model, settings)
    result: dict[str, Any] = {"status": "failed"}
    t0 = time.perf_counter()
    with PeakVram() as vram:
        try:
            load = backend.load(test)
            result["load"] = load
            res = backend.run(test)
            result.update(status="ok", metrics=res.metrics, samples=res.samples, details=res.details)
        except UnsupportedTest as exc:
            result["error"] = {"kind": "unsupported", "message": str(exc)}
        except Exception as exc:  # recorded as data: the run failed, the matrix goes on
            result["error"] = {"kind": "error", "message": f"{type(exc).__name__}: {exc}",
                               "traceback": traceback.format_exc(limit=8)}
        finally:
            try:
                result["describe"] = backend.describe()
            except Exception as exc:
                result["describe"] = {"build": {"backend": job["backend"], "describe_error": str(exc)}, "model": {}}
            backend.close()
    result["peak_vram_bytes"] = vram.peak
    result["worker_wall_s"] = time.perf_counter() - t0
    return result


def main(argv: list[str]) -> int:
    job_path, out_path = Path(argv[1]), Path(argv[2])
    job = json.loads(job_path.read_text())
    result = run_job(job)
    atomic_write_text(out_path, json.dumps(result, allow_nan=False, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if result["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
