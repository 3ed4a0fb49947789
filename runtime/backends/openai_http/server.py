"""A server process the backend starts, watches and always stops.

The server is a child of the worker (a grandchild of the runner). It stays in the worker's
process group, so the runner's kill of that group on a timeout takes it too, and it is
started with PR_SET_PDEATHSIG = SIGKILL, so it dies with the worker however the worker ends.
Its stdout and stderr go to a log file that ends up in the artifact's log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from runtime.procs import die_with_parent

NOISY_PREFIXES = (
    "llama_graph_n_input_tensors",
    "create_tensor:",
    "llama_model_loader: - kv",
    "load_tensors: layer",
    "resolve_fused_ops: fused",
    "llama_model_loader: - type",
    "Model metadata:",
)


class ServerError(Exception):
    """The server could not be started, or it went away; carries the tail of its log."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        last = (
            [ln for ln in log_tail.strip().splitlines() if ln.strip()][-1:]
            if log_tail
            else []
        )
        super().__init__(
            message
            + (f"; last server log line: {last[0].strip()[:300]}" if last else "")
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class ManagedServer:
    """One server process: start, wait for health, watch, stop."""

    def __init__(
        self,
        command: list[str],
        health_url: str,
        log_path: Path,
        *,
        startup_timeout_s: float,
        stop_timeout_s: float,
        env: dict[str, str] | None = None,
    ):
        self.command = command
        self.health_url = health_url
        self.log_path = Path(log_path)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.startup_ms: float | None = None
        self.stop_info: dict[str, Any] | None = None
        self._log_offset = 0

    # -- start ----------------------------------------------------------------------------
    def start(self) -> float:
        """Start the process and poll the health URL; return startup to healthy in ms."""
        env = dict(self.env if self.env is not None else os.environ)
        for var in (
            "HOST",
            "PORT",
            "CONFIG_FILE",
        ):  # llama_cpp.server reads these over its arguments
            env.pop(var, None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            log.write(f"---- almanac: starting {' '.join(self.command)}\n".encode())
            log.flush()
            t0 = time.perf_counter()
            try:
                self.proc = subprocess.Popen(
                    self.command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    preexec_fn=die_with_parent(os.getpid()),
                    close_fds=True,
                )
            except OSError as exc:
                raise ServerError(
                    f"cannot start the server ({self.command[0]}): {exc}"
                ) from None
        self.stop_info = None
        deadline = t0 + self.startup_timeout_s
        last_err = "no answer yet"
        with httpx.Client(timeout=httpx.Timeout(2.0), trust_env=False) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    sig = _signal_name(code)
                    raise ServerError(
                        f"the server exited during startup ({sig or f'exit code {code}'}) "
                        f"after {time.perf_counter() - t0:.1f} s",
                        self.log_tail(),
                    )
                try:
                    r = client.get(self.health_url)
                    if r.status_code == 200:
                        break
                    last_err = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last_err = type(exc).__name__
                if time.perf_counter() > deadline:
                    self.stop()
                    raise ServerError(
                        f"the server was not healthy within {self.startup_timeout_s:g} s "
                        f"({self.health_url}: {last_err})",
                        self.log_tail(),
                    )
                time.sleep(0.05)
        self.startup_ms = (time.perf_counter() - t0) * 1000.0
        return self.startup_ms

    # -- watch ----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_description(self) -> str:
        if self.proc is None:
            return "never started"
        code = self.proc.poll()
        if code is None:
            return "running"
        return _signal_name(code) or f"exit code {code}"

    def peak_rss_bytes(self) -> int | None:
        """The server's peak resident set (VmHWM) while it still runs (Linux)."""
        if not self.alive():
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None

    # -- stop -----------------------------------------------------------------------------
    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait, SIGKILL; children of the server too. Safe to call twice."""
        if self.proc is None:
            return {"stopped": False}
        if self.stop_info is not None and self.proc.poll() is not None:
            return self.stop_info
        info: dict[str, Any] = {
            "pid": self.proc.pid,
            "peak_rss_bytes": self.peak_rss_bytes(),
        }
        children = []
        try:
            import psutil

            children = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:  # already gone
            pass
        t0 = time.perf_counter()
        if self.proc.poll() is None:
            info["already_exited"] = False
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_timeout_s)
                info["signal_sent"] = "SIGTERM"
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                info["signal_sent"] = (
                    "SIGKILL (no exit within stop_timeout_s of SIGTERM)"
                )
        else:
            info["already_exited"] = True
        for ch in children:
            try:
                ch.kill()
            except Exception:
                pass
        info["stop_ms"] = (time.perf_counter() - t0) * 1000.0
        info["exit"] = self.exit_description()
        self.stop_info = info
        return info

    # -- log ------------------------------------------------------------------------------
    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 40) -> str:
        lines = [
            ln
            for ln in self.log_text()[self._log_offset :].splitlines()
            if not ln.startswith(NOISY_PREFIXES)
        ]
        return "\n".join(lines[-n:])


def server_log_facts(text: str) -> dict[str, int]:
    """What a llama_cpp.server log says about the generations it ran (one llama_perf "total time"
    line each) and how many of them reused the previous prompt's KV cache (``Llama.generate: N
    prefix-match hit``)."""
    import re

    generated = len(re.findall(r"llama_perf_context_print:\s+total time", text))
    if not generated:
        return {}
    return {
        "generate_calls": generated,
        "prefix_match_hits": text.count("prefix-match hit"),
    }


def condensed_log(text: str, head: int = 30, tail: int = 60) -> str:
    """The server log without llama.cpp's per-tensor noise: its beginning and its end."""
    lines = [ln for ln in text.splitlines() if not ln.startswith(NOISY_PREFIXES)]
    if len(lines) <= head + tail:
        return "\n".join(lines)
    return "\n".join(
        lines[:head]
        + [f"[... {len(lines) - head - tail} lines omitted ...]"]
        + lines[-tail:]
    )


def echo_log(text: str, label: str) -> None:
    """Write the server's log into the worker's own (the artifact's log_tail)."""
    sys.stderr.write(
        f"\n---- server log ({label}) ----\n{condensed_log(text)}\n---- end of server log ----\n"
    )
    sys.stderr.flush()
