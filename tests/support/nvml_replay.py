"""NVML replayed from a recording (tests only): the calls runtime.load.gpu_telemetry and
runtime.hosts.devices make, answering with the readings of tests/fixtures/nvml/*.json in order
(the last one repeats). A mock of the driver library, which cannot run on a machine without an
NVIDIA GPU; the sampler's own code runs as it does on the lent H200."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


class ReplayNvml:
    class NVMLError(Exception):
        pass

    def __init__(self, name: str = "h200-serving", fail: set[str] | None = None):
        fx = json.loads((FIXTURES / f"{name}.json").read_text())
        self.devices = fx["devices"]
        self.readings = fx["readings"]
        self.fail = fail or set()
        self.calls = 0  # reads of utilisation: one per GPU per sample
        self._i: dict[int, int] = {}

    def _now(self, h: int) -> dict[str, float]:
        i = self._i.get(h, 0)
        return self.readings[min(i, len(self.readings) - 1)][h]

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.devices[h]["name"]

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self.devices[h]["pci_bus_id"])

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self.devices[h]["uuid"]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        if "util" in self.fail:
            raise self.NVMLError("Not Supported")
        r = self._now(h)
        self.calls += 1
        return SimpleNamespace(gpu=r["util_pct"], memory=r["mem_util_pct"])

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(round(self._now(h)["power_w"] * 1000))  # milliwatts

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        used = int(self._now(h)["mem_used_mib"] * 2**20)
        self._i[h] = (
            self._i.get(h, 0) + 1
        )  # the last call of a sample: the next one reads on
        return SimpleNamespace(used=used, total=used * 2, free=used)
