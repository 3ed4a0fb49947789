"""Child-process entry point: run one configuration and write its result.

``python -m runtime.execution.worker JOB.json RESULT.json``. The parent (runtime.execution.runner) captures
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

from core.artifacts import atomic_write_text


def _rss_bytes() -> int | None:
    """This process's resident set now (the memory planner compares its prediction with it)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def _vm_hwm_bytes() -> int | None:
    """This process's own peak RSS (VmHWM of its address space). getrusage's ru_maxrss, which the
    parent reads, also counts the parent's high-water mark at exec (Linux keeps the larger one),
    so a runner that read a big GGUF header first would inflate every child's figure."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from runtime import backends
    from runtime.backends.base import UnsupportedTest
    from runtime.hosts.gpu import PeakVram
    from runtime.models.registry import ref_from_dict
    from core.kinds import parse_test

    settings = backends.settings_class(job["backend"]).model_validate(job["settings"])
    test = parse_test(job["test"])
    model = ref_from_dict(job["model"]) if job.get("model") else None
    backend = backends.create(job["backend"], model, settings)
    result: dict[str, Any] = {"status": "failed"}
    t0 = time.perf_counter()
    with PeakVram() as vram:
        try:
            result["rss_before_load_bytes"] = _rss_bytes()
            load = backend.load(test)
            result["load"] = load
            result["rss_after_load_bytes"] = _rss_bytes()
            res = backend.run(test)
            result.update(status="ok", metrics=res.metrics, samples=res.samples, details=res.details)
        except UnsupportedTest as exc:
            result["error"] = {"kind": getattr(exc, "kind", "unsupported"), "message": str(exc)}
        except Exception as exc:  # recorded as data: the run failed, the matrix goes on
            result["error"] = {"kind": "error", "message": f"{type(exc).__name__}: {exc}",
                               "traceback": traceback.format_exc(limit=8)}
            partial = getattr(exc, "partial", None)  # what a failed run did measure (e.g. every request's record)
            if partial is not None:
                result.update(samples=partial.samples, details=partial.details)
        finally:
            try:
                result["describe"] = backend.describe()
            except Exception as exc:
                result["describe"] = {"build": {"backend": job["backend"], "describe_error": str(exc)}, "model": {}}
            backend.close()
    result["peak_vram_bytes"] = vram.peak
    result["peak_rss_self_bytes"] = _vm_hwm_bytes()
    result["peak_vram_method"] = vram.method
    result["worker_wall_s"] = time.perf_counter() - t0
    return result


# Native libraries a backend needs loaded before anything imports numpy & co. Seen on the
# lent H100 image (its own numpy build): with numpy imported first, a CUDA libllama loaded
# afterwards segfaults in its first std::stringstream (model load, print_info), while
# `import llama_cpp` first (it loads libllama, then numpy) runs. Loading it first costs nothing.
PRELOAD = {"llama_cpp": "llama_cpp"}


def preload(backend: str) -> None:
    module = PRELOAD.get(backend)
    if module:
        try:
            __import__(module)
        except Exception:  # the backend's own import reports it properly, as data
            pass


def main(argv: list[str]) -> int:
    from runtime.procs import start_watchdog

    start_watchdog(parent_pid=None, deadline=None)  # die with the runner; hold its timeout on our own
    job_path, out_path = Path(argv[1]), Path(argv[2])
    job = json.loads(job_path.read_text())
    preload(job.get("backend", ""))
    result = run_job(job)
    atomic_write_text(out_path, json.dumps(result, allow_nan=False, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if result["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
