"""Where a model runs (issue 29): GPU split and CPU placement settings, checked against the host.

One owner for the rules shared by llama.cpp in process, llama-server and llama-bench:

* GPUs: ``split_mode`` (none: one GPU, ``main_gpu``; layer: whole layers per GPU; row: each
  weight matrix split by rows over the GPUs, ``main_gpu`` keeping the small tensors; tensor:
  tensor parallelism, each layer's weights and KV cache split over the GPUs with an all-reduce,
  which llama.cpp requires flash attention for),
  ``tensor_split`` (one share per visible GPU, llama.cpp's proportions; a zero leaves a GPU out);
* CPUs: ``numa`` (off, distribute, isolate, numactl: llama.cpp's ``--numa``), ``cpu_mask`` (hex,
  bit i = CPU i) and ``cpu_strict``, ``prio`` (-1 low … 3 realtime) and ``poll`` (0-100, how hard
  idle workers spin).

:func:`check` refuses what the host cannot honour in one line naming the setting and what the
host has; :func:`gpus_used` says which visible GPUs a configuration occupies (the energy meter
meters those, the others apart); :func:`cli_args` gives llama-bench's and llama-server's flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError

SPLIT_MODES = ("none", "layer", "row", "tensor")
NUMA_POLICIES = ("off", "distribute", "isolate", "numactl")
DEFAULTS: dict[str, Any] = {
    "split_mode": "layer",
    "tensor_split": None,
    "main_gpu": 0,
    "numa": "off",
    "cpu_mask": None,
    "cpu_strict": False,
    "prio": 0,
    "poll": 50,
}


@dataclass(frozen=True)
class HostView:
    """What the checks compare with: GPUs the run sees, NUMA nodes, CPUs it may run on."""

    gpus: int
    gpus_on_host: int
    numa_nodes: int
    cpus: frozenset[int]

    @classmethod
    def here(cls) -> HostView:
        import os

        from runtime.hosts import devices

        visible = devices.visible()
        nodes = devices.numa_nodes()
        try:
            cpus = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = frozenset(range(os.cpu_count() or 1))
        return cls(len(visible), devices.host_count() or 0, max(len(nodes), 1), cpus)

    def describe_gpus(self) -> str:
        if not self.gpus:
            return "this host has no visible GPU"
        extra = (
            f" of the {self.gpus_on_host} on the machine"
            if self.gpus_on_host > self.gpus
            else ""
        )
        return f"this host shows {self.gpus} GPU{'s' if self.gpus != 1 else ''}{extra} (0-{self.gpus - 1})"


def _get(s: Any, key: str) -> Any:
    return (
        s.get(key, DEFAULTS[key])
        if isinstance(s, Mapping)
        else getattr(s, key, DEFAULTS[key])
    )


def _get_opt(s: Any, key: str) -> Any:
    """A setting that is not a placement setting (None where absent)."""
    return s.get(key) if isinstance(s, Mapping) else getattr(s, key, None)


def is_default(s: Any, key: str) -> bool:
    return _get(s, key) == DEFAULTS[key]


def check(s: Any, host: HostView, *, offload: bool = True) -> None:
    """Refuse settings the host cannot honour (ConfigError with the field; the runner adds the matrix)."""
    gpu_keys = ("split_mode", "tensor_split", "main_gpu")
    if offload and host.gpus == 0:
        asked = [k for k in gpu_keys if not is_default(s, k)]
        if asked:
            raise ConfigError(
                f"{asked[0]} {_get(s, asked[0])!r} places a model on GPUs, but {host.describe_gpus()}",
                field=asked[0],
            )
    if host.gpus:
        mg = _get(s, "main_gpu")
        if not 0 <= mg < host.gpus:
            raise ConfigError(
                f"main_gpu {mg} is not a visible GPU: {host.describe_gpus()}",
                field="main_gpu",
            )
        ts = _get(s, "tensor_split")
        if ts is not None:
            if len(ts) != host.gpus:
                raise ConfigError(
                    f"tensor_split has {len(ts)} share{'s' if len(ts) != 1 else ''} but {host.describe_gpus()}: "
                    "give one share per visible GPU",
                    field="tensor_split",
                )
            if any(x < 0 for x in ts) or not any(x > 0 for x in ts):
                raise ConfigError(
                    f"tensor_split {list(ts)}: shares must be >= 0 and one at least > 0",
                    field="tensor_split",
                )
            if _get(s, "split_mode") == "none":
                raise ConfigError(
                    "tensor_split with split_mode none: one GPU (main_gpu) holds the model; "
                    "use split_mode layer, row or tensor",
                    field="tensor_split",
                )
    if (
        offload
        and _get(s, "split_mode") == "tensor"
        and _get_opt(s, "flash_attn") == "off"
    ):
        raise ConfigError(
            "split_mode tensor with flash_attn off: llama.cpp's tensor parallelism needs flash attention "
            "(use flash_attn on or auto)",
            field="split_mode",
        )
    numa = _get(s, "numa")
    if numa != "off" and host.numa_nodes < 2:
        raise ConfigError(
            f"numa {numa!r} needs several NUMA nodes, but this host has {host.numa_nodes}",
            field="numa",
        )
    mask = _get(s, "cpu_mask")
    if mask is not None:
        from runtime.hosts.devices import parse_cpu_mask

        try:
            cpus = parse_cpu_mask(mask)
        except ValueError as exc:
            raise ConfigError(str(exc), field="cpu_mask") from None
        outside = sorted(cpus - host.cpus)
        if not cpus or outside:
            have = _cpulist(host.cpus)
            raise ConfigError(
                f"cpu_mask {mask} names CPU{'s' if len(outside) != 1 else ''} "
                f"{_cpulist(outside) or 'none'} outside this host's CPUs ({have})",
                field="cpu_mask",
            )


def _cpulist(cpus: Any) -> str:
    """CPU numbers as a Linux cpulist (``0-3,8``)."""
    xs = sorted(cpus)
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def gpus_used(s: Any, n_visible: int, offload: bool = True) -> list[int]:
    """The visible GPUs (CUDA ordinals) a configuration puts weights on: ``main_gpu`` for
    split_mode none, else every GPU with a share (every visible GPU without tensor_split)."""
    if not offload or n_visible == 0:
        return []
    if _get(s, "split_mode") == "none":
        return [_get(s, "main_gpu")]
    ts = _get(s, "tensor_split")
    if ts is None:
        return list(range(n_visible))
    return [i for i, x in enumerate(ts) if x > 0]


def effective(s: Any, host: HostView, offload: bool = True) -> dict[str, Any]:
    """Every placement value that ran, defaults included, and the GPUs it occupied."""
    used = gpus_used(s, host.gpus, offload)
    return {
        "split_mode": _get(s, "split_mode"),
        "tensor_split": _get(s, "tensor_split"),
        "main_gpu": _get(s, "main_gpu"),
        "gpus_visible": host.gpus,
        "gpus_used": used,
        "numa": _get(s, "numa"),
        "numa_nodes": host.numa_nodes,
        "cpu_mask": _get(s, "cpu_mask"),
        "cpu_strict": _get(s, "cpu_strict"),
        "prio": _get(s, "prio"),
        "poll": _get(s, "poll"),
    }


def cli_args(s: Any, *, server: bool = False) -> list[str]:
    """llama-bench's (or, with ``server``, llama-server's) flags for the placement settings."""
    out = ["-sm", _get(s, "split_mode"), "-mg", str(_get(s, "main_gpu"))]
    ts = _get(s, "tensor_split")
    if ts is not None:
        out += ["-ts", ("," if server else "/").join(f"{x:g}" for x in ts)]
    if _get(s, "numa") != "off":
        out += ["--numa", _get(s, "numa")]
    if _get(s, "cpu_mask") is not None:
        out += ["-C", _get(s, "cpu_mask")]
    if not is_default(s, "cpu_strict"):
        out += ["--cpu-strict", "1" if _get(s, "cpu_strict") else "0"]
    if not is_default(s, "prio"):
        out += ["--prio", str(_get(s, "prio"))]
    if not is_default(s, "poll"):
        out += ["--poll", str(_get(s, "poll"))]
    return out
