"""The child process of every configuration: load a backend, run its work, write the result.

``python -m runtime.execution.worker JOB.json RESULT.json``. The parent (runtime.execution.runner)
captures this process's stdout/stderr as the run's log, its exit status (an abort or a segfault in
llama.cpp ends only this process) and its peak RSS (wait4 rusage). The job says what to run:

* ``task: test`` (the default): one test of a speed matrix, through the backend's dispatch table
  (:func:`run_job`);
* ``task: items``: a quality run's items, generated with the backend's prompt styles and never
  scored here (:func:`run_items`; runtime.quality.suite_runner scores them in the parent). The
  result file is rewritten after every item: a timeout or a crash keeps the items already
  generated.
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
    from core.kinds import parse_test
    from runtime import backends
    from runtime.backends.base import UnsupportedTest
    from runtime.hosts.gpu import PeakVram
    from runtime.models.registry import ref_from_dict

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
            result.update(
                status="ok",
                metrics=res.metrics,
                samples=res.samples,
                details=res.details,
            )
        except UnsupportedTest as exc:
            result["error"] = {
                "kind": getattr(exc, "kind", "unsupported"),
                "message": str(exc),
            }
        except Exception as exc:  # recorded as data: the run failed, the matrix goes on
            result["error"] = {
                "kind": "error",
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
            partial = getattr(
                exc, "partial", None
            )  # what a failed run did measure (e.g. every request's record)
            if partial is not None:
                result.update(samples=partial.samples, details=partial.details)
        finally:
            try:
                result["describe"] = backend.describe()
            except Exception as exc:
                result["describe"] = {
                    "build": {"backend": job["backend"], "describe_error": str(exc)},
                    "model": {},
                }
            backend.close()
    result["peak_vram_bytes"] = vram.peak
    result["peak_rss_self_bytes"] = _vm_hwm_bytes()
    result["peak_vram_method"] = vram.method
    result["peak_vram_by_gpu"] = vram.per_gpu()
    if (
        vram.error and result.get("status") == "ok"
    ):  # a GPU that vanished: never a silent figure
        result["status"] = "failed"
        result["error"] = {"kind": "gpu_lost", "message": vram.error}
    result["worker_wall_s"] = time.perf_counter() - t0
    return result


def _save(path: Path, result: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(result, allow_nan=False, default=str))


def run_items(job: dict[str, Any], out_path: Path) -> dict[str, Any]:
    """Generate every item of a quality job with one loaded model.

    A ``loglikelihood`` item asks the backend for the log-probability of each choice; a
    ``completion`` item has its raw text continued (``Backend.complete``). A ``chat`` item is one
    streamed chat request through the backend's own ``chat`` test kind (``ChatTest`` with one
    request and no warm-up), so a quality run uses exactly the template, sampler and timing code of
    a speed run."""
    from core.kinds.chat import ChatTest
    from runtime import backends
    from runtime.models.registry import ModelRef

    gen = job["generation"]
    settings = backends.settings_class(job["backend"]).model_validate(job["settings"])
    model = ModelRef.from_dict(job["model"])
    backend = backends.create(job["backend"], model, settings)
    result: dict[str, Any] = {"status": "failed", "items": []}
    t0 = time.perf_counter()

    def chat_test(item: dict[str, Any]) -> ChatTest:
        return ChatTest(
            id=item["id"],
            messages=item["messages"],
            max_tokens=item.get("max_tokens") or gen["max_tokens"],
            requests=1,
            warmup_requests=0,
            warmup=False,
            temperature=gen["temperature"],
            top_k=gen["top_k"],
            top_p=gen["top_p"],
            min_p=gen["min_p"],
            repeat_penalty=gen["repeat_penalty"],
        )

    try:
        result["load"] = backend.load(chat_test(job["items"][0]))
        _save(out_path, result)
        for item in job["items"]:
            started = time.perf_counter()
            style = item.get("style") or "chat"
            try:
                if style == "loglikelihood":
                    rows = backend.loglikelihood(item["text"], item["continuations"])
                    best = max(range(len(rows)), key=lambda i: rows[i]["logprob"])
                    rec = {
                        "loglik": rows,
                        "text": item["continuations"][best].strip(),
                        "prompt_tokens": None,
                        "output_tokens": 0,
                    }
                elif style == "completion":
                    rec = backend.complete(
                        item["text"],
                        max_tokens=item.get("max_tokens") or gen["max_tokens"],
                        stop=item.get("stop") or [],
                        temperature=gen["temperature"],
                        seed=getattr(settings, "seed", 0) or 0,
                    )
                else:
                    res = backend.run(chat_test(item))
                    rec = dict(res.samples["requests"][0])
                    rec.pop("itl_ms", None)
                rec["error"] = None
            except Exception as exc:  # one bad item (e.g. a prompt longer than the context) does not end the run
                rec = {"text": "", "error": f"{type(exc).__name__}: {exc}"}
            rec["id"] = item["id"]
            rec["wall_s"] = time.perf_counter() - started
            result["items"].append(rec)
            _save(out_path, result)
        result["status"] = "ok"
    except Exception as exc:
        result["error"] = {
            "kind": "error",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        }
    finally:
        try:
            result["describe"] = backend.describe()
        except Exception as exc:
            result["describe"] = {
                "build": {"backend": job["backend"], "describe_error": str(exc)},
                "model": {},
            }
        backend.close()
    result["worker_wall_s"] = time.perf_counter() - t0
    return result


def preload(backend: str) -> None:
    """The native libraries the backend declares to load first (runtime.backends.preload)."""
    from runtime import backends

    backends.preload(backend)


def main(argv: list[str]) -> int:
    from runtime.procs import start_watchdog

    start_watchdog(
        parent_pid=None, deadline=None
    )  # die with the runner; hold its timeout on our own
    job_path, out_path = Path(argv[1]), Path(argv[2])
    job = json.loads(job_path.read_text())
    preload(job.get("backend", ""))
    result = run_items(job, out_path) if job.get("task") == "items" else run_job(job)
    _save(out_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if result["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
