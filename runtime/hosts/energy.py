"""Energy counters: NVML's total energy on NVIDIA GPUs, RAPL's package energy on CPUs.

A meter reads a monotonic energy counter in joules; a backend reads it immediately before
and after a timed region (never around imports or the model load), so joules per token are
the region's energy over its tokens.

* GPU: ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the driver loaded), summed
  over the GPUs this process may use (``CUDA_VISIBLE_DEVICES`` when it lists indices, else
  every GPU NVML reports). Volta and newer; an older GPU or a driver without it is "not
  exposed".
* CPU: Linux RAPL under ``/sys/class/powercap``: the package zones (``intel-rapl:N``, named
  ``package-N``; their core/uncore/DRAM sub-zones are parts of them and are not added again),
  ``energy_uj`` in microjoules, wrapping at ``max_energy_range_uj`` (a wrap between two reads
  is added back). Many VMs do not expose it at all; a host that does may keep ``energy_uj``
  readable by root only (Linux 5.10 and later, since the PLATYPUS attack).

Such counters advance in steps (the driver or firmware updates them every few to hundreds of
milliseconds), so a region much shorter than a step is mostly quantisation. :class:`RateEnergy`
therefore meters a rate test per repetition only where repetitions last at least
``WINDOW_S``; shorter ones are metered as regions of back-to-back repetitions, as many as it
takes for a region to last that long. The counters measure the whole device (GPU board or CPU package), idle
power included, whatever else runs on it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
WINDOW_S = 1.0  # the shortest region metered on its own (a counter step is at most ~100 ms on the GPUs seen)
REGIONS = 5  # regions metered after the timed repetitions when those are shorter than WINDOW_S
MAX_REGION_REPS = 100_000
PROBE_S = 0.3  # longest wait for two counter steps when measuring the step


@dataclass
class EnergyMeter:
    """A monotonic energy counter in joules (``read_j``) and what it covers."""

    source: str  # "nvml" | "rapl"
    domain: str  # "gpu" | "cpu-package"
    devices: list[str]
    read_j: Callable[[], float]

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "domain": self.domain,
            "devices": list(self.devices),
        }


class Unavailable(Exception):
    """No energy counter on this host, with the reason (said in the artifact)."""


# -- NVML ----------------------------------------------------------------------------------
def gpu_meter(
    nvml: Any = None, used: list[int] | None = None, idle: bool = False
) -> EnergyMeter:
    """NVML's total energy of the GPUs a run uses (CUDA ordinals ``used`` among the visible
    GPUs, runtime.hosts.devices; None = every visible GPU), or with ``idle`` of the visible GPUs
    it does not use; :class:`Unavailable` otherwise."""
    from runtime.hosts import devices

    nv = nvml
    if nv is None:
        try:
            import pynvml  # nvidia-ml-py

            nv = pynvml
        except ImportError:
            raise Unavailable(
                "GPU energy not measured: nvidia-ml-py (pynvml) is not installed"
            ) from None
    try:
        nv.nvmlInit()
        visible = devices.visible(nv)
    except Exception as exc:
        raise Unavailable(
            f"GPU energy not exposed on this host: NVML did not initialise ({exc})"
        ) from None
    if not visible:
        raise Unavailable(
            "GPU energy not exposed on this host: NVML lists no visible GPU"
        )
    chosen = [
        (i, d) for i, d in enumerate(visible) if (used is None or i in used) != idle
    ]
    if not chosen:
        raise Unavailable(
            "no idle GPU" if idle else "the run uses none of the visible GPUs"
        )
    handles, names = [], []
    for _, d in chosen:
        h = nv.nvmlDeviceGetHandleByIndex(d.nvml_index)
        try:
            nv.nvmlDeviceGetTotalEnergyConsumption(h)
        except Exception as exc:
            raise Unavailable(
                f"GPU energy not exposed on this host: nvmlDeviceGetTotalEnergyConsumption "
                f"fails on GPU {d.nvml_index} ({exc})"
            ) from None
        name = nv.nvmlDeviceGetName(h)
        handles.append(h)
        bus = f" {d.pci_bus_id}" if d.pci_bus_id else ""
        names.append(
            f"GPU{d.nvml_index} {name.decode() if isinstance(name, bytes) else name}{bus}"
        )

    def read_j() -> float:
        return (
            sum(int(nv.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles)
            / 1000.0
        )

    return EnergyMeter("nvml", "gpu", names, read_j)


# -- RAPL ----------------------------------------------------------------------------------
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")


def cpu_meter(root: Path | None = None) -> EnergyMeter:
    """RAPL package energy (every package, wraps handled); :class:`Unavailable` otherwise."""
    root = POWERCAP if root is None else root
    if not root.is_dir():
        raise Unavailable(
            f"CPU energy not exposed on this host: no RAPL ({root} is absent)"
        )
    zones = []
    for z in sorted(root.iterdir()):
        if not _PACKAGE_ZONE.match(z.name):
            continue
        try:
            name = (z / "name").read_text().strip()
        except OSError:
            name = z.name
        if not name.startswith("package"):
            continue
        zones.append((z, name))
    if not zones:
        raise Unavailable(
            f"CPU energy not exposed on this host: no RAPL package zone under {root}"
        )
    ranges = []
    for z, _ in zones:
        try:
            int((z / "energy_uj").read_text())
            ranges.append(int((z / "max_energy_range_uj").read_text()))
        except PermissionError:
            raise Unavailable(
                f"CPU energy not readable on this host: {z / 'energy_uj'} is readable by root only "
                "(Linux 5.10 and later)"
            ) from None
        except (OSError, ValueError) as exc:
            raise Unavailable(
                f"CPU energy not exposed on this host: {z / 'energy_uj'} cannot be read ({exc})"
            ) from None
    last = [int((z / "energy_uj").read_text()) for z, _ in zones]
    total_uj = [0]

    def read_j() -> float:
        for i, (z, _) in enumerate(zones):
            now = int((z / "energy_uj").read_text())
            delta = now - last[i]
            if delta < 0:  # the counter wrapped at max_energy_range_uj
                delta += ranges[i] + 1
            total_uj[0] += delta
            last[i] = now
        return total_uj[0] / 1e6

    return EnergyMeter("rapl", "cpu-package", [name for _, name in zones], read_j)


def meter_for(
    on_gpu: bool, gpus: list[int] | None = None
) -> tuple[EnergyMeter | None, str | None]:
    """The meter for work on the GPU (NVML; ``gpus``: the CUDA ordinals the run uses, None =
    every visible GPU) or on the CPU (RAPL), or None and why not."""
    try:
        return (gpu_meter(used=gpus) if on_gpu else cpu_meter()), None
    except Unavailable as exc:
        return None, str(exc)


def idle_meter(gpus: list[int] | None) -> EnergyMeter | None:
    """The visible GPUs a run does not use, metered apart (their idle draw); None when there are none."""
    if gpus is None:
        return None
    try:
        return gpu_meter(used=gpus, idle=True)
    except Unavailable:
        return None


def counter_step_ms(meter: EnergyMeter, max_s: float = PROBE_S) -> float | None:
    """Time between two consecutive changes of the counter (its update step), or None when it
    did not change twice within ``max_s``."""
    t_end = time.perf_counter() + max_s
    v0 = meter.read_j()
    changes: list[float] = []
    while time.perf_counter() < t_end and len(changes) < 2:
        v = meter.read_j()
        if v != v0:
            changes.append(time.perf_counter())
            v0 = v
    return (changes[1] - changes[0]) * 1000.0 if len(changes) == 2 else None


# -- a rate test's energy --------------------------------------------------------------------
@dataclass
class RateEnergy:
    """Joules per token of a rate test: per timed repetition where repetitions last at least
    ``window_s``, else per region of k back-to-back repetitions (run after the timed ones).

    A ``pp`` test gives ``prefill_j_per_token``, a ``tg`` test ``decode_j_per_token``; a
    ``pp+tg`` test is metered as a whole (recorded, no per-phase figure). Depth tests
    (``@dN``) prefill their context between repetitions, so they are metered per repetition
    only: with short repetitions they get no figure (the reason is recorded)."""

    meter: EnergyMeter | None
    reason: str | None
    n_prompt: int
    n_gen: int
    n_depth: int = 0
    window_s: float = WINDOW_S
    n_regions: int = REGIONS
    repetitions: list[dict[str, float]] = field(default_factory=list)
    regions: list[dict[str, float]] = field(default_factory=list)
    method: str | None = None
    step_ms: float | None = None
    note: str | None = None
    idle: EnergyMeter | None = (
        None  # visible GPUs the run does not use: recorded apart, never in J/token
    )
    idle_regions: list[dict[str, float]] = field(default_factory=list)
    _idle_reads: list[float] = field(default_factory=list)

    @classmethod
    def for_test(
        cls, test: Any, on_gpu: bool, gpus: list[int] | None = None
    ) -> RateEnergy:
        """``gpus``: the CUDA ordinals the run uses (its placement); the other visible GPUs are metered apart."""
        meter, reason = meter_for(on_gpu, gpus)
        return cls(
            meter,
            reason,
            test.n_prompt,
            test.n_gen,
            test.n_depth,
            window_s=WINDOW_S,
            n_regions=REGIONS,
            idle=idle_meter(gpus) if on_gpu else None,
        )

    @property
    def part(self) -> str | None:
        if self.n_prompt and not self.n_gen:
            return "prefill"
        if self.n_gen and not self.n_prompt:
            return "decode"
        return None

    @property
    def tokens(self) -> int:
        return self.n_prompt + self.n_gen

    def read(self) -> float | None:
        """The counter now (joules), or None without a meter (the idle GPUs' counter is read too)."""
        if self.idle is not None:
            self._idle_reads.append(self.idle.read_j())
        return self.meter.read_j() if self.meter is not None else None

    def add(self, e0: float | None, e1: float | None, seconds: float) -> None:
        """One timed repetition: the counter read right before and right after it."""
        if e0 is not None and e1 is not None:
            self.repetitions.append({"j": e1 - e0, "s": seconds})
        if len(self._idle_reads) >= 2:
            self.idle_regions.append(
                {"j": self._idle_reads[-1] - self._idle_reads[-2], "s": seconds}
            )

    def finish(self, once: Callable[[], None]) -> None:
        """After the timed repetitions: decide the method; run the regions when needed
        (``once`` runs one repetition's preparation and work, synchronised)."""
        if self.meter is None or not self.repetitions:
            return
        mean_s = sum(r["s"] for r in self.repetitions) / len(self.repetitions)
        if mean_s >= self.window_s:
            self.method = "per repetition"
        elif self.n_depth:
            self.method = None
            self.note = (
                f"repetitions of {mean_s * 1000:.1f} ms are shorter than the {self.window_s:g} s window and "
                "each prefills its context first: not metered"
            )
        elif self.part is None:
            self.method = None
            self.note = "pp+tg: metered as a whole; no per-phase figure"
        else:
            for _ in range(
                self.n_regions
            ):  # back-to-back repetitions until the region lasts the window
                k = 0
                e0 = self.meter.read_j()
                t0 = time.perf_counter()
                while k < MAX_REGION_REPS:
                    once()
                    k += 1
                    if time.perf_counter() - t0 >= self.window_s:
                        break
                seconds = time.perf_counter() - t0
                e1 = self.meter.read_j()
                self.regions.append({"j": e1 - e0, "s": seconds, "repetitions": k})
            ks = sorted({r["repetitions"] for r in self.regions})
            self.method = (
                f"regions of {ks[0]} repetitions"
                if len(ks) == 1
                else f"regions of {ks[0]}-{ks[-1]} repetitions"
            )
        if self.method is not None and self.meter.source == "nvml":
            self.step_ms = counter_step_ms(self.meter)

    def _per_token(self) -> list[float]:
        if self.method is None or self.part is None:
            return []
        if self.regions:
            return [r["j"] / (r["repetitions"] * self.tokens) for r in self.regions]
        return [r["j"] / self.tokens for r in self.repetitions]

    def metrics(self) -> dict[str, list[float]]:
        vals = self._per_token()
        return {f"{self.part}_j_per_token": vals} if vals else {}

    def samples(self) -> dict[str, Any]:
        return {"repetitions": self.repetitions, "regions": self.regions}

    def details(self) -> dict[str, Any]:
        if self.meter is None:
            return {"available": False, "reason": self.reason}
        used = self.regions or self.repetitions
        watts = [r["j"] / r["s"] for r in used if r["s"] > 0]
        out: dict[str, Any] = {
            "available": True,
            **self.meter.describe(),
            "method": self.method,
            "window_s": self.window_s,
            "part": self.part,
            "mean_power_w": sum(watts) / len(watts) if watts else None,
        }
        if self.step_ms is not None:
            out["counter_step_ms"] = self.step_ms
        if self.idle is not None:
            secs = sum(r["s"] for r in self.idle_regions)
            out["idle_gpus"] = {
                "devices": list(self.idle.devices),
                "mean_power_w": sum(r["j"] for r in self.idle_regions) / secs
                if secs > 0
                else None,
                "note": "visible GPUs the run did not use, over the timed repetitions; not in J/token",
            }
        if self.note:
            out["note"] = self.note
        return out
