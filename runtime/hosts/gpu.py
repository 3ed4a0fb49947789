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
            out.append(
                {
                    "index": i,
                    "name": _s(nv.nvmlDeviceGetName(h)),
                    "memory_bytes": int(mem.total),
                    "driver": driver,
                    "cuda": cuda_s,
                    "compute_capability": cc_s,
                    **_extra_facts(nv, h),
                }
            )
    except Exception:
        return out
    return out


def _extra_facts(nv: Any, h: Any) -> dict[str, Any]:
    """Facts that explain a GPU's speed, each omitted where NVML cannot read it: SM count
    is not in NVML; memory bus width and max memory clock give the datasheet bandwidth."""
    facts: dict[str, Any] = {}
    probes = {
        "memory_bus_width_bits": lambda: int(nv.nvmlDeviceGetMemoryBusWidth(h)),
        "max_memory_clock_mhz": lambda: int(
            nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)
        ),
        "max_sm_clock_mhz": lambda: int(
            nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
        ),
        "power_limit_w": lambda: round(nv.nvmlDeviceGetPowerManagementLimit(h) / 1000),
        "pcie_generation": lambda: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
    }
    for key, probe in probes.items():
        try:
            facts[key] = probe()
        except Exception:
            continue
    if facts.get("memory_bus_width_bits") and facts.get("max_memory_clock_mhz"):
        # double data rate: two transfers per memory clock
        facts["datasheet_bandwidth_bytes_per_s"] = int(
            facts["max_memory_clock_mhz"] * 1e6 * 2 * facts["memory_bus_width_bits"] / 8
        )
    return facts


class PeakVram:
    """Samples this process's GPU memory (all devices) every ``interval`` seconds; ``peak``
    is None where NVML is unavailable.

    ``method`` says how: "process" (NVML's per-process accounting for this pid) or, where
    NVML lists no process of this pid (a container or VM with its own pid namespace),
    "device-delta" (device memory in use minus what was in use at the start: exact on an
    otherwise idle GPU, an over-estimate if another process allocates meanwhile)."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak: int | None = None
        self.method: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nv = _nvml()
        self._baseline = 0
        self._peak_process = 0
        self._peak_delta = 0

    def _handles(self) -> list[Any]:
        nv = self._nv
        return [
            nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())
        ]

    def _device_used(self) -> int:
        return sum(
            int(self._nv.nvmlDeviceGetMemoryInfo(h).used) for h in self._handles()
        )

    def _sample(self) -> int:
        nv, pid, total = self._nv, os.getpid(), 0
        for h in self._handles():
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
            self._take()
            self._stop.wait(self.interval)

    def _take(self) -> None:
        try:
            self._peak_process = max(self._peak_process, self._sample())
        except Exception:
            pass
        try:
            self._peak_delta = max(
                self._peak_delta, self._device_used() - self._baseline
            )
        except Exception:
            pass
        if self._peak_process:
            self.peak, self.method = self._peak_process, "process"
        elif self._peak_delta:
            self.peak, self.method = self._peak_delta, "device-delta"

    def __enter__(self) -> PeakVram:
        if self._nv is not None and self._nv.nvmlDeviceGetCount() > 0:
            self.peak = 0
            try:
                self._baseline = self._device_used()
            except Exception:
                self._baseline = 0
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
