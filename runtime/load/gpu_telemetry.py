"""Samples NVML while a load level runs, at the same interval as the server's Prometheus scrape
(``runtime.load.telemetry``): per GPU, utilisation (% of the interval a kernel ran), memory
controller utilisation, board power and memory in use. The series the level stores
(``gpu_telemetry``) is drawn under the latency chart beside the server's.

The GPUs sampled are the ones this process may use (``CUDA_VISIBLE_DEVICES`` honoured:
runtime.hosts.devices), which a server started on loopback shares; a server reached at another
host's address runs on GPUs this host cannot see, and the series says so instead of sampling ours.
A host without NVML (no nvidia-ml-py, no driver, no GPU) records that it has none and why. A
reading that fails is counted and left out; nothing here stops or slows the run (the calls run in
a thread, not on the event loop).
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import urlsplit

MAX_SAMPLES = 1200  # beyond this the series keeps every other sample (and says so)
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def on_this_host(base_url: str | None) -> bool:
    """A server at a loopback address (or started by the run) runs on this host's GPUs."""
    if not base_url:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return host in LOOPBACK or host.startswith("127.")


def _nvml() -> tuple[Any, str | None]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"NVML did not initialise ({' '.join(str(exc).split())[:120]})"
    return pynvml, None


class GpuSampler:
    """Samples the visible GPUs every ``interval_s`` in a thread between :meth:`start` and
    :meth:`stop`. ``nvml`` may be given (a recorded fixture in tests); by default pynvml."""

    def __init__(
        self,
        interval_s: float = 0.5,
        nvml: Any = None,
        *,
        base_url: str | None = None,
    ):
        self.interval_s = float(interval_s)
        self.samples: list[dict[str, Any]] = []
        self.failures = 0
        self.thinned = 0
        self.gpus: list[dict[str, Any]] = []
        self.reason: str | None = None
        self._handles: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = 0
        if not on_this_host(base_url):
            self.reason = (
                "the server is not on this host: its GPUs cannot be sampled from here"
            )
            self.nv = None
            return
        self.nv, self.reason = (nvml, None) if nvml is not None else _nvml()
        if self.nv is None:
            return
        from runtime.hosts import devices

        try:
            if nvml is not None:
                self.nv.nvmlInit()
            visible = devices.visible(self.nv)
            for i, d in enumerate(visible):
                h = self.nv.nvmlDeviceGetHandleByIndex(d.nvml_index)
                name = self.nv.nvmlDeviceGetName(h)
                self._handles.append(h)
                self.gpus.append(
                    {
                        "index": i,
                        "nvml_index": d.nvml_index,
                        "name": name.decode() if isinstance(name, bytes) else str(name),
                    }
                )
        except Exception as exc:
            self.nv, self.reason = (
                None,
                f"NVML lists no GPU ({' '.join(str(exc).split())[:120]})",
            )
            return
        if not self.gpus:
            self.nv, self.reason = None, "NVML lists no visible GPU"

    def _read(self, h: Any) -> dict[str, float]:
        nv: Any = self.nv
        out: dict[str, float] = {}
        for key, call in (
            ("util", lambda: nv.nvmlDeviceGetUtilizationRates(h)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ("mem_used_mib", lambda: nv.nvmlDeviceGetMemoryInfo(h).used / 2**20),
        ):
            try:
                v = call()
            except Exception:
                self.failures += 1
                continue
            if key == "util":
                out["util_pct"] = float(v.gpu)
                out["mem_util_pct"] = float(v.memory)
            else:
                out[key] = round(float(v), 1)
        return out

    def take(self) -> None:
        """One sample of every GPU (the thread calls it; tests call it directly)."""
        t = (time.perf_counter_ns() - self._origin) / 1e6
        self.samples.append(
            {"t_ms": round(t, 1), "g": [self._read(h) for h in self._handles]}
        )
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.thinned += 1

    def _loop(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            self.take()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.perf_counter()))

    def start(self, origin_ns: int) -> None:
        self._origin = origin_ns
        if self.nv is None:
            return
        self._thread = threading.Thread(
            target=self._loop, name="gpu-telemetry", daemon=True
        )
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """The stored series: ``{available, interval_s, gpus, samples, failures}``, or
        ``{available: false, reason}`` on a host without NVML (or a remote server)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5.0)
        if self.nv is None:
            return {"available": False, "reason": self.reason}
        return {
            "available": True,
            "source": "nvml",
            "interval_s": self.interval_s * (2**self.thinned),
            "gpus": self.gpus,
            "samples": self.samples,
            **({"failures": self.failures} if self.failures else {}),
        }
