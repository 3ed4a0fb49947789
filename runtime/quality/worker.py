"""Child-process entry point of a quality run: load the model once, generate every item.

``python -m runtime.quality.worker JOB.json RESULT.json`` (started by
``runtime.execution.runner.run_child(job, timeout, module="runtime.quality.worker")``, so a crash
or an abort in llama.cpp ends only this process and its log and peak RSS are captured the
same way as a speed run's).

A ``loglikelihood`` item asks the backend for the log-probability of each choice;
a ``completion`` item has its raw text continued (``Backend.complete``). A ``chat`` item
is one streamed chat request through the backend's own ``chat`` test kind
(``ChatTest`` with one request and no warm-up), so a quality run uses exactly the
template, sampler and timing code of a speed run. The result file is rewritten after
every item: a timeout or a crash keeps the items already generated. This process never
scores anything: scoring (and running model-written code) happens in the parent.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from core.artifacts import atomic_write_text


def _save(path: Path, result: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(result, allow_nan=False, default=str))


def run_job(job: dict[str, Any], out_path: Path) -> dict[str, Any]:
    from runtime import backends
    from runtime.models.registry import ModelRef
    from core.kinds.chat import ChatTest

    gen = job["generation"]
    settings = backends.settings_class(job["backend"]).model_validate(job["settings"])
    model = ModelRef.from_dict(job["model"])
    backend = backends.create(job["backend"], model, settings)
    result: dict[str, Any] = {"status": "failed", "items": []}
    t0 = time.perf_counter()

    def chat_test(item: dict[str, Any]) -> ChatTest:
        return ChatTest(id=item["id"], messages=item["messages"], max_tokens=item.get("max_tokens") or gen["max_tokens"],
                        requests=1, warmup_requests=0, warmup=False, temperature=gen["temperature"], top_k=gen["top_k"],
                        top_p=gen["top_p"], min_p=gen["min_p"], repeat_penalty=gen["repeat_penalty"])

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
                    rec = {"loglik": rows, "text": item["continuations"][best].strip(),
                           "prompt_tokens": None, "output_tokens": 0}
                elif style == "completion":
                    rec = backend.complete(item["text"], max_tokens=item.get("max_tokens") or gen["max_tokens"],
                                           stop=item.get("stop") or [], temperature=gen["temperature"],
                                           seed=getattr(settings, "seed", 0) or 0)
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
        result["error"] = {"kind": "error", "message": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc(limit=8)}
    finally:
        try:
            result["describe"] = backend.describe()
        except Exception as exc:
            result["describe"] = {"build": {"backend": job["backend"], "describe_error": str(exc)}, "model": {}}
        backend.close()
    result["worker_wall_s"] = time.perf_counter() - t0
    return result


def main(argv: list[str]) -> int:
    from runtime.procs import start_watchdog

    start_watchdog(parent_pid=None, deadline=None)  # die with the runner; hold its timeout on our own
    job_path, out_path = Path(argv[1]), Path(argv[2])
    job = json.loads(job_path.read_text())
    result = run_job(job, out_path)
    _save(out_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if result["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
