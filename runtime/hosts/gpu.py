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
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` honoured: runtime.hosts.devices),
    ``index`` being the CUDA ordinal the process uses and ``nvml_index`` the machine's."""
    from runtime.hosts import devices

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
        for i, dev in enumerate(devices.visible(nv)):
            h = nv.nvmlDeviceGetHandleByIndex(dev.nvml_index)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            try:
                cc = nv.nvmlDeviceGetCudaComputeCapability(h)
                cc_s = f"{cc[0]}.{cc[1]}"
            except Exception:
                cc_s = None
            entry = {
                "index": i,
                "nvml_index": dev.nvml_index,
                "pci_bus_id": dev.pci_bus_id or None,
                "name": _s(nv.nvmlDeviceGetName(h)),
                "memory_bytes": int(mem.total),
                "driver": driver,
                "cuda": cuda_s,
                "compute_capability": cc_s,
                **_extra_facts(nv, h),
            }
            node = devices.pci_numa_node(dev.pci_bus_id) if dev.pci_bus_id else None
            if node is not None:
                entry["numa_node"] = node
            out.append(
                {
                    k: v
                    for k, v in entry.items()
                    if v is not None or k in ("cuda", "compute_capability")
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
    """Samples this process's GPU memory on each visible GPU every ``interval`` seconds, and
    each GPU's utilisation where NVML gives it; ``peak`` (the largest total over the GPUs) is
    None where NVML is unavailable.

    ``method`` says how: "process" (NVML's per-process accounting for this pid) or, where
    NVML lists no process of this pid (a container or VM with its own pid namespace),
    "device-delta" (device memory in use minus what was in use at the start: exact on an
    otherwise idle GPU, an over-estimate if another process allocates meanwhile).
    ``per_gpu()`` gives the same per GPU (CUDA ordinal, PCI bus id, peak bytes, mean and
    peak utilisation), so a model split over GPUs shows what each card held."""

    def __init__(self, interval: float = 0.05):
        from runtime.hosts import devices

        self.interval = interval
        self.peak: int | None = None
        self.method: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nv = _nvml()
        self._devs = devices.visible(self._nv) if self._nv is not None else []
        self._handles_cache: list[Any] | None = None
        self._baseline: list[int] = []
        self._peak_process = 0
        self._peak_delta = 0
        self._dev_process: list[int] = [0] * len(self._devs)
        self._dev_delta: list[int] = [0] * len(self._devs)
        self._util: list[list[int]] = [[] for _ in self._devs]
        self._baseline_ok = False
        self.error: str | None = (
            None  # set when NVML fails mid-run after working at the start
        )

    def _handles(self) -> list[Any]:
        if self._handles_cache is None:
            self._handles_cache = [
                self._nv.nvmlDeviceGetHandleByIndex(d.nvml_index) for d in self._devs
            ]
        return self._handles_cache

    def _device_used(self) -> list[int]:
        return [int(self._nv.nvmlDeviceGetMemoryInfo(h).used) for h in self._handles()]

    def _sample(self) -> list[int]:
        nv, pid = self._nv, os.getpid()
        out = []
        for h in self._handles():
            total = 0
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:
                procs = []
            for p in procs:
                if p.pid == pid and p.usedGpuMemory:
                    total += int(p.usedGpuMemory)
            out.append(total)
        return out

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(self.interval)

    def _take(self) -> None:
        try:
            per = self._sample()
            self._peak_process = max(self._peak_process, sum(per))
            self._dev_process = [
                max(a, b) for a, b in zip(self._dev_process, per, strict=True)
            ]
        except Exception:
            pass
        try:
            per = [
                u - b for u, b in zip(self._device_used(), self._baseline, strict=True)
            ]
            self._peak_delta = max(self._peak_delta, sum(per))
            self._dev_delta = [
                max(a, b) for a, b in zip(self._dev_delta, per, strict=True)
            ]
        except Exception as exc:
            # NVML read the GPUs at the start and cannot now: a GPU fell off (the run fails with this)
            if self._baseline_ok and self.error is None:
                self.error = (
                    f"NVML lost a GPU during the run: {type(exc).__name__}: {exc}"
                )
        for i, h in enumerate(self._handles()):
            try:
                self._util[i].append(int(self._nv.nvmlDeviceGetUtilizationRates(h).gpu))
            except Exception:
                pass
        if self._peak_process:
            self.peak, self.method = self._peak_process, "process"
        elif self._peak_delta:
            self.peak, self.method = self._peak_delta, "device-delta"

    def per_gpu(self) -> list[dict[str, Any]] | None:
        """Per visible GPU: its CUDA ordinal, PCI bus id, peak bytes (by ``method``) and utilisation."""
        if self.peak is None or not self._devs:
            return None
        peaks = self._dev_process if self.method == "process" else self._dev_delta
        out = []
        for i, dev in enumerate(self._devs):
            u = self._util[i]
            out.append(
                {
                    "index": i,
                    "pci_bus_id": dev.pci_bus_id or None,
                    "peak_bytes": int(peaks[i]),
                    "utilisation_mean_pct": round(sum(u) / len(u), 1) if u else None,
                    "utilisation_max_pct": max(u) if u else None,
                    "utilisation_samples": len(u),
                }
            )
        return out

    def __enter__(self) -> PeakVram:
        if self._nv is not None and self._devs:
            self.peak = 0
            try:
                self._baseline = self._device_used()
                self._baseline_ok = True
            except Exception:
                self._baseline = [0] * len(self._devs)
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()
