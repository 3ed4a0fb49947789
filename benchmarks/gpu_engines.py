"""Two engine families on one GPU (issue 31): ``transformers serve`` and llama.cpp's llama-server
serving the same random weights, measured by the same matrix through the OpenAI HTTP backend.

Run by benchmarks/gpu_engines.sh on the GPU machine (no network):

1. a synthetic GGUF (``runtime.models.synth``, F16, seed 0) and the same numbers as a Hugging Face
   checkpoint (safetensors, config, tokenizer) in a hub cache (``runtime.models.synth_hf``);
2. ``transformers serve <repo>@<revision>`` on loopback (continuous batching unless
   ``--no-continuous-batching``), reading that cache offline;
3. both servers registered as endpoint models (identified by what each reports: transformers
   serve by its routes and the listed ``<repo>@<revision>``, llama-server by its /v1/models meta);
   the engine's version is recorded as the registry states it where the server reports none;
4. the matrix against transformers serve, then (transformers serve stopped, the llama.cpp build
   finished) against llama-server with every layer on the GPU; NVML sampled during every level.

Everything lands in --out: runs.tar.gz (artifacts under runs/), host.json, and each server's log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_bench import log, matrix_for, pack_runs  # noqa: E402 - the GPU driver's helpers

TRANSFORMERS = "transformers-serve-{name}"
LLAMA_SERVER = "llama-server-{name}"


def wait_listed(
    base_url: str, name: str, proc: subprocess.Popen, timeout_s: float
) -> float:
    """Seconds until the server at ``base_url`` lists ``name`` (SystemExit if it dies or times out)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(
                f"the server exited ({proc.returncode}) before listing {name}"
            )
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=5) as r:
                ids = [e.get("id") for e in json.load(r).get("data") or []]
            if name in ids:
                return time.perf_counter() - t0
        except (OSError, ValueError):
            pass
        time.sleep(1.0)
    raise SystemExit(f"{base_url} did not list {name} within {timeout_s:.0f} s")


def warm(base_url: str, name: str) -> None:
    """One short chat request (the engine's first-request costs out of the way)."""
    body = json.dumps(
        {
            "model": name,
            "messages": [{"role": "user", "content": "Hello there."}],
            "max_tokens": 8,
        }
    ).encode()
    req = urllib.request.Request(
        base_url + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as r:
        answer = json.load(r)
    log(
        f"warm-up answer in {time.perf_counter() - t0:.2f} s: usage {answer.get('usage')}"
    )


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_one(
    mfile: str, model: str, names: list[str], work: Path, data: Path, out: Path
) -> None:
    from runtime.execution import runner

    derived = matrix_for(mfile, [model], names, work)
    t0 = time.perf_counter()

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "done":
            log(
                f"[{info['index']}/{info['total']}] {info['model']} {info['test']}: "
                f"{info.get('status')} {info.get('error') or ''}"
            )
            pack_runs(data, out)

    report = runner.run_matrix(derived, on_event=on_event)
    log(
        f"{model}: {len(report.measured)} measured, {len(report.failed)} failed in "
        f"{time.perf_counter() - t0:.0f} s"
    )
    pack_runs(data, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/almanac-engines"))
    ap.add_argument("--matrix", default=str(ROOT / "data/matrices/gpu-engines.yaml"))
    ap.add_argument("--shape", default="llama-1b")
    ap.add_argument("--llama-server", type=Path, required=True)
    ap.add_argument(
        "--build-pid",
        type=int,
        default=0,
        help="wait for this process (the llama.cpp build) first",
    )
    ap.add_argument("--no-continuous-batching", action="store_true")
    ap.add_argument("--parallel", type=int, default=16, help="llama-server slots (-np)")
    a = ap.parse_args(argv)
    out, work = a.out, a.work
    out.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    (data / "runs").mkdir(parents=True, exist_ok=True)
    os.environ["ALMANAC_DATA"] = str(data)
    os.environ.setdefault("ALMANAC_CACHE", str(work / "cache"))

    import transformers
    import yaml

    from runtime.hosts import fingerprint as hostinfo
    from runtime.models import synth, synth_hf

    fp = hostinfo.fingerprint()
    (out / "host.json").write_text(json.dumps(fp, indent=1))
    log(f"host {fp['id']}: GPUs {[g['name'] for g in fp['gpus']]}")

    name = f"synthetic-{a.shape}-f16"
    gguf = work / "models" / f"{name}.gguf"
    gguf.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    f = synth.write_gguf(a.shape, "F16", gguf, seed=0)
    log(
        f"generated {gguf.name}: {f['size_bytes'] / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s"
    )
    t0 = time.perf_counter()
    ck = synth_hf.write_checkpoint(gguf, work / "hub", f"almanac/{name}")
    log(
        f"checkpoint {ck['served_name']}: {ck['size_bytes'] / 1e9:.2f} GB safetensors "
        f"in {time.perf_counter() - t0:.1f} s"
    )

    t_port, l_port = 8011, 8012
    t_url, l_url = f"http://127.0.0.1:{t_port}/v1", f"http://127.0.0.1:{l_port}/v1"
    env = {**os.environ, "HF_HUB_CACHE": str(work / "hub"), "HF_HUB_OFFLINE": "1"}
    tproc, tlog, cb = None, None, False
    # continuous batching first (its own batching, as llama-server's slots); without it if it fails
    for cb in [True, False] if not a.no_continuous_batching else [False]:
        cmd = [
            sys.executable, "-m", "transformers.cli.transformers", "serve", ck["served_name"],
            "--host", "127.0.0.1", "--port", str(t_port), "--device", "cuda:0", "--dtype", "auto",
            "--log-level", "warning", *(["--continuous-batching"] if cb else []),
        ]  # fmt: skip
        log("starting " + " ".join(cmd))
        tlog = (out / "transformers-serve.log").open("a")
        tproc = subprocess.Popen(cmd, env=env, stdout=tlog, stderr=subprocess.STDOUT)
        try:
            took = wait_listed(t_url, ck["served_name"], tproc, 300)
            log(f"transformers serve listed the model after {took:.1f} s")
            warm(t_url, ck["served_name"])
            break
        except (SystemExit, OSError, ValueError) as exc:
            log(f"transformers serve (continuous batching {cb}) failed: {exc}")
            stop(tproc)
            tlog.close()
            tproc = None
    t_name, l_name = TRANSFORMERS.format(name=name), LLAMA_SERVER.format(name=name)
    registry = {
        "schema_version": 1,
        "models": {
            t_name: {
                "family": "synthetic",
                "description": (
                    f"Synthetic {a.shape} (random weights, seed 0) as float16 safetensors, served by "
                    f"transformers serve {transformers.__version__} (PyTorch {torch_version()})"
                    + (
                        " with continuous batching"
                        if cb
                        else " without continuous batching"
                    )
                    + f"; the same numbers as {name}.gguf under llama-server. Speed only."
                ),
                "endpoint": {
                    "base_url": t_url,
                    "model": ck["served_name"],
                    "revision": ck["revision"],
                    "server_version": f"transformers {transformers.__version__}",
                },
            },
            l_name: {
                "family": "synthetic",
                "description": (
                    f"Synthetic {a.shape} (random weights, seed 0) as an F16 GGUF, served by llama-server "
                    f"(CUDA, every layer on the GPU, {a.parallel} slots); the same numbers as the "
                    "transformers serve checkpoint. Speed only."
                ),
                "endpoint": {"base_url": l_url, "model": name},
            },
        },
    }
    (data / "models.yaml").write_text(yaml.safe_dump(registry, sort_keys=True))
    names = [t_name, l_name]
    if tproc is not None:
        try:
            if a.build_pid:
                t0 = time.perf_counter()
                while Path(f"/proc/{a.build_pid}").exists():
                    time.sleep(2.0)
                log(f"waited {time.perf_counter() - t0:.0f} s for the llama.cpp build")
            run_one(a.matrix, t_name, names, work, data, out)
        finally:
            stop(tproc)
            if tlog is not None:
                tlog.close()
    if a.build_pid:
        while Path(f"/proc/{a.build_pid}").exists():
            time.sleep(2.0)
    if not a.llama_server.exists():
        log(
            f"no llama-server at {a.llama_server}: the build failed (see cmake-build.log)"
        )
        return 3
    lcmd = [
        str(a.llama_server), "-m", str(gguf), "--alias", name, "--host", "127.0.0.1",
        "--port", str(l_port), "-ngl", "99", "-np", str(a.parallel), "-c", str(2048 * a.parallel),
        "--metrics",
    ]  # fmt: skip
    log("starting " + " ".join(lcmd))
    llog = (out / "llama-server.log").open("w")
    lproc = subprocess.Popen(lcmd, stdout=llog, stderr=subprocess.STDOUT)
    try:
        log(
            f"llama-server listed the model after {wait_listed(l_url, name, lproc, 120):.1f} s"
        )
        warm(l_url, name)
        run_one(a.matrix, l_name, names, work, data, out)
    except SystemExit as exc:
        log(f"llama-server: {exc}")
    finally:
        stop(lproc)
        llog.close()
    pack_runs(data, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
