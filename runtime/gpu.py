"""GPU facts and VRAM through NVML (nvidia-ml-py), when there is an NVIDIA GPU; empty otherwise."""

from __future__ import annotations

import os
import threading
from typing import Any


def _nvml():
    try:
        import pynvml  # provided by nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def list_gpus() -> list[dict[str, Any]]:
    nv = _nvml()
    if nv is None:
        return []
    out = []
    try:
        driver = _s(nv.nvmlSystemGetDriverVersion())
        try:
            cuda = nv.nvmlSystemGetCudaDriverVersion_v2()
            cuda_s = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        except Exception:
            cuda_s = None
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            try:
                cc = nv.nvmlDeviceGetCudaComputeCapability(h)
                cc_s = f"{cc[0]}.{cc[1]}"
            except Exception:
                cc_s = None
            out.append({"index": i, "name": _s(nv.nvmlDeviceGetName(h)), "memory_bytes": int(mem.total),
                        "driver": driver, "cuda": cuda_s, "compute_capability": cc_s})
    except Exception:
        return out
    return out


class PeakVram:
    """Samples this process's GPU memory (all devices) every ``interval`` seconds; ``peak``
    is None where NVML is unavailable."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nv = _nvml()

    def _sample(self) -> int:
        nv, pid, total = self._nv, os.getpid(), 0
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:
                continue
            for p in procs:
                if p.pid == pid and p.usedGpuMemory:
                    total += int(p.usedGpuMemory)
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                v = self._sample()
                self.peak = max(self.peak or 0, v)
            except Exception:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakVram":
        if self._nv is not None and self._nv.nvmlDeviceGetCount() > 0:
            self.peak = 0
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
