"""llama.cpp's own ``llama-server`` as a managed server kind.

The binary is built from the llama.cpp source that the pinned llama-cpp-python vendors, by
benchmarks/llama_bench_build.py (its TARGETS), into ``<cache>/llama-bench/<commit>/build/bin``
with a ``build.json`` record beside it. This module only finds that binary and asks it for
its version: runtime never imports the benchmarks scripts, and never builds anything.

The command mirrors the in-process backend and the llama_cpp.server command where
llama-server lets it (threads = physical cores, n_ctx, n_batch, every layer on the GPU,
flash attention auto, the same chat format), so the three backends run the same work.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from core.errors import BackendError
from core.paths import cache_dir

ENV = "ALMANAC_LLAMA_SERVER"
# "version: 0.5.0-dev (build 0, commit 0c1e57098)" (older builds: "version: 6400 (0c1e57098)")
VERSION_LINE = re.compile(
    r"version:\s*(\S+)\s*\((?:build\s+(\S+),\s*commit\s+)?([^)\s]+)\)"
)

# llama-cpp-python chat_format names -> llama-server's built-in template names (--chat-template)
CHAT_TEMPLATES = {
    "gemma": "gemma",
    "chatml": "chatml",
    "llama-2": "llama2",
    "llama-3": "llama3",
    "mistral-instruct": "mistral-v1",
    "phi3": "phi3",
    "zephyr": "zephyr",
    "vicuna": "vicuna",
}

COMMAND = [
    "{server_binary}",
    "--model",
    "{model_path}",
    "--alias",
    "{model_name}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--threads",
    "{threads}",
    "--threads-batch",
    "{threads}",
    "--ctx-size",
    "{n_ctx}",
    "--batch-size",
    "{n_batch}",
    "--n-gpu-layers",
    "{n_gpu_layers}",
    "--parallel",
    "{parallel}",
    "--kv-unified",
    "--flash-attn",
    "auto",
    "--no-webui",
    # /metrics (Prometheus counters: prompt tokens served from the cache, decode calls); /slots is on by default
    "--metrics",
    # info level: llama.cpp's load log (offloaded layers, flash attention), as llama_cpp.server prints it
    "--log-verbosity",
    "3",
]


def cached_builds() -> list[dict[str, Any]]:
    """Build records (build.json) of benchmarks/llama_bench_build.py in the cache that hold a
    llama-server binary, newest first."""
    root = cache_dir() / "llama-bench"
    out = []
    for rec in root.glob("*/build.json") if root.is_dir() else []:
        try:
            info = json.loads(rec.read_text())
        except (OSError, ValueError):
            continue
        binary = Path(info.get("lib_dir", "")) / "llama-server"
        if binary.is_file() and os.access(binary, os.X_OK):
            out.append(
                {**info, "server_binary": str(binary), "_mtime": rec.stat().st_mtime}
            )
    return sorted(out, key=lambda d: d["_mtime"], reverse=True)


def find_binary(explicit: str | None = None) -> Path:
    """The llama-server binary: ``explicit``, else $ALMANAC_LLAMA_SERVER, else the newest cached
    build. BackendError (one line, what to do) when there is none."""
    for source, value in (("server_binary", explicit), (ENV, os.environ.get(ENV))):
        if value:
            p = Path(value).expanduser()
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise BackendError(f"{p} is not an executable file", field=source)
            return p
    builds = cached_builds()
    if not builds:
        raise BackendError(
            "llama-server is not built: run `python benchmarks/llama_bench_build.py` (builds "
            "llama.cpp's tools from the vendored source, a few minutes) or set "
            f"${ENV} to a llama-server binary",
            field="server",
        )
    return Path(builds[0]["server_binary"])


def version(binary: Path | str) -> dict[str, Any]:
    """What the binary says about itself (``--version``): llama.cpp's build number and commit."""
    try:
        proc = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"version": None, "commit": None, "version_error": str(exc)}
    text = proc.stdout + proc.stderr
    m = VERSION_LINE.search(text)
    built = re.search(r"built with (.+)", text)
    return {
        "version": m.group(1) if m else None,
        "build_number": m.group(2) if m else None,
        "commit": m.group(3) if m else None,
        "built_with": built.group(1).strip() if built else None,
    }


def system_info(binary: Path | str) -> str:
    """llama.cpp's system-info string of the libraries beside ``binary`` (a build's bin folder),
    asked in a child process through llama-cpp-python (this process never loads llama.cpp)."""
    import sys

    env = dict(os.environ, LLAMA_CPP_LIB_PATH=str(Path(binary).parent))
    code = (
        "import llama_cpp; print(llama_cpp.llama_print_system_info().decode().strip())"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (
        proc.stdout.strip().splitlines()[-1]
        if proc.returncode == 0 and proc.stdout.strip()
        else ""
    )


def extra_bufts(binary: Path | str) -> tuple[list[str], dict[str, Any]]:
    """The AMX policy of runtime.backends.llama_cpp.lib_policy applied to llama-server: ``--no-repack`` exactly
    when the in-process backend would turn extra buffer types off for these libraries."""
    from runtime.backends.llama_cpp import lib_policy as llamacpp_lib

    decision = llamacpp_lib.decide(system_info(binary))
    return ([] if decision["use_extra_bufts"] else ["--no-repack"]), decision


def chat_template(chat_format: str | None) -> list[str]:
    """``--no-jinja --chat-template NAME`` for a llama-cpp-python chat_format (none: the GGUF's own
    template). ``--no-jinja`` first: with Jinja on (llama-server's default since it became one),
    ``--chat-template gemma`` is read as a Jinja template whose whole text is "gemma", and every
    prompt becomes that one word (found by /apply-template; fixed here). A named built-in template
    has no tool-call support: such a server answers a request with ``tools`` with an error, which
    the endpoint probe reports."""
    if not chat_format:
        return []
    name = CHAT_TEMPLATES.get(chat_format)
    if name is None:
        raise BackendError(
            f"chat_format {chat_format!r} has no llama-server template here "
            f"(known: {', '.join(sorted(CHAT_TEMPLATES))})",
            field="chat_format",
        )
    return ["--no-jinja", "--chat-template", name]


def log_facts(text: str) -> dict[str, Any]:
    """What llama.cpp decided in a started server (llama-server or llama_cpp.server), from its log:
    flash attention, offloaded layers, context, slots (llama-server)."""
    facts: dict[str, Any] = {}
    m = re.search(r"llama_context: flash_attn\s*=\s*(\w+)", text)
    if m:
        facts["flash_attn"] = {"enabled": "on", "disabled": "off"}.get(
            m.group(1), m.group(1)
        )
    m = re.search(r"Flash Attention (enabled|disabled)", text)
    if m:  # what "auto" resolved to (the same line the in-process backend reads)
        facts["flash_attn"] = "on" if m.group(1) == "enabled" else "off"
    m = re.search(r"offloaded (\d+)/(\d+) layers to GPU", text)
    if m:
        facts["n_gpu_layers"] = int(m.group(1))
        facts["n_layers_total"] = int(m.group(2))
    m = re.search(r"initializing, n_slots = (\d+)", text)
    if m:
        facts["n_slots"] = int(m.group(1))
    m = re.search(r"llama_context: n_ctx\s*=\s*(\d+)", text)
    if m:
        facts["n_ctx"] = int(m.group(1))
    # llama-server's per-request timings: how many prompt tokens each request really evaluated
    # (fewer than the prompt when its prompt cache reused a previous request's prefix)
    evaluated = [
        int(n)
        for n in re.findall(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", text)
    ]
    if evaluated:
        facts["prompt_tokens_evaluated"] = evaluated
    return facts


def prefix_facts(text: str) -> dict[str, int]:
    """The shape of server.server_log_facts for llama-server: the generations it ran (one
    ``print_timing ... total time`` line each) and how many reused a cached prompt prefix (the
    slot chosen ``by LCP similarity``, i.e. for the prefix already in its KV cache)."""
    generated = len(re.findall(r"print_timing: .*total time =", text))
    if not generated:
        return {}
    return {
        "generate_calls": generated,
        "prefix_match_hits": len(re.findall(r"selected slot by LCP similarity", text)),
    }
