"""llama.cpp's llama-server on loopback, started and stopped by a test (or a fixture script):
the endpoint an endpoint model is declared by (URL and served name only)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from runtime.backends.openai_http import llama_server
from runtime.backends.openai_http.server import free_port


@contextlib.contextmanager
def serving(
    model_path: str | Path,
    alias: str,
    *,
    parallel: int = 2,
    n_ctx: int = 512,
    log: Path | None = None,
    startup_timeout_s: float = 120.0,
) -> Iterator[str]:
    """Serve ``model_path`` as ``alias``; yield its ``/v1`` URL once /health says ready; always stop it."""
    binary = llama_server.find_binary()
    port = free_port()
    extra, _ = llama_server.extra_bufts(
        binary
    )  # --no-repack where AMX is compiled in (lib_policy)
    cmd = [
        str(binary),
        "--model",
        str(model_path),
        "--alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        "1",
        "--threads-batch",
        "1",
        "--ctx-size",
        str(n_ctx),
        "--parallel",
        str(parallel),
        "--kv-unified",
        "--chat-template",
        "gemma",
        "--no-webui",
        *extra,
    ]
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited with {proc.returncode} before it was ready"
                )
            try:
                if (
                    httpx.get(
                        f"http://127.0.0.1:{port}/health", timeout=2.0, trust_env=False
                    ).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama-server was not ready in time")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if log:
            out.close()
