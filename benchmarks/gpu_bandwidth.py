"""Device memory bandwidth of one GPU: a device-to-device copy and a read-only reduction.

    python3 benchmarks/gpu_bandwidth.py [--mode both|copy|read] [--gib 4] [--iters 30] > bandwidth.json

* ``copy``: a ``copy_`` between two buffers of ``--gib`` GiB each, counting 2 x size bytes per
  copy (one read, one write);
* ``read``: a reduction (``torch.sum`` / ``cupy.sum``) over one buffer of ``--gib`` GiB into a
  scalar, counting size bytes (read only): what decode does to its weights, so the figure the
  decode roofline divides by (tokens/s <= read bandwidth / bytes read per token).

Each is timed with CUDA events after a warm-up, ``--iters`` times; every sample, the median
and the best are reported. Uses PyTorch when importable, else CuPy. Buffers are filled with
random data first (never zeros); the copy is checked and the sum compared with a second one.
Prints one JSON object: the copy's fields at the top level (as before) and, with ``read``, a
``read`` object of the same shape. ``host_bandwidth`` turns either into the rows of a
``host`` artifact, the shape the CPU probe writes (runtime/hosts/probe.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def _torch_read(n_bytes: int, iters: int) -> dict:
    import torch

    dev = torch.device("cuda:0")
    n = n_bytes // 4
    src = torch.rand(n, device=dev, dtype=torch.float32)
    for _ in range(3):
        first = src.sum()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        a, b = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        a.record()
        total = src.sum()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) / 1000.0)
    if not torch.isclose(first, total, rtol=1e-3):
        raise RuntimeError("read check failed: two sums of the same buffer differ")
    return {
        "library": f"torch {torch.__version__}",
        "device": torch.cuda.get_device_name(0),
        "seconds": samples,
        "bytes_per_pass": n * 4,
    }


def _cupy_read(n_bytes: int, iters: int) -> dict:
    import cupy as cp

    n = n_bytes // 4
    src = cp.random.random(n, dtype=cp.float32)
    for _ in range(3):
        first = src.sum()
    cp.cuda.Device(0).synchronize()
    samples = []
    for _ in range(iters):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        total = src.sum()
        b.record()
        b.synchronize()
        samples.append(cp.cuda.get_elapsed_time(a, b) / 1000.0)
    if abs(float(first) - float(total)) > 1e-3 * abs(float(first)):
        raise RuntimeError("read check failed: two sums of the same buffer differ")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    return {
        "library": f"cupy {cp.__version__}",
        "device": name.decode() if isinstance(name, bytes) else name,
        "seconds": samples,
        "bytes_per_pass": n * 4,
    }


def rates_from_seconds(seconds: list[float], bytes_per_sample: int) -> dict:
    """Bytes per second of each timed sample, with median, best and stddev."""
    rates = [bytes_per_sample / s for s in seconds]
    return {
        "samples_bytes_per_s": rates,
        "median_bytes_per_s": statistics.median(rates),
        "max_bytes_per_s": max(rates),
        "stddev_bytes_per_s": statistics.stdev(rates) if len(rates) > 1 else None,
    }


def host_bandwidth(result: dict) -> list[dict]:
    """The ``bandwidth`` (or ``read_bandwidth``) rows of a ``host`` artifact from one result of
    this script: one row (one host thread drives the GPU), samples in GB/s, summarised the way
    the CPU probe summarises its own (core.stats.summarize)."""
    from core.records.host import bandwidth_entry

    return [bandwidth_entry(1, [x / 1e9 for x in result["samples_bytes_per_s"]])]


def _torch(n_bytes: int, iters: int) -> dict:
    import torch

    dev = torch.device("cuda:0")
    n = n_bytes // 4
    src = torch.rand(n, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        a, b = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) / 1000.0)
    if not torch.equal(dst[:1024], src[:1024]) or not torch.equal(
        dst[-1024:], src[-1024:]
    ):
        raise RuntimeError("copy check failed")
    return {
        "library": f"torch {torch.__version__}",
        "device": torch.cuda.get_device_name(0),
        "seconds": samples,
        "bytes_per_copy": n * 4,
    }


def _cupy(n_bytes: int, iters: int) -> dict:
    import cupy as cp

    n = n_bytes // 4
    src = cp.random.random(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    for _ in range(3):
        cp.copyto(dst, src)
    cp.cuda.Device(0).synchronize()
    samples = []
    for _ in range(iters):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        cp.copyto(dst, src)
        b.record()
        b.synchronize()
        samples.append(cp.cuda.get_elapsed_time(a, b) / 1000.0)
    if not bool((dst[:1024] == src[:1024]).all()):
        raise RuntimeError("copy check failed")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    return {
        "library": f"cupy {cp.__version__}",
        "device": name.decode() if isinstance(name, bytes) else name,
        "seconds": samples,
        "bytes_per_copy": n * 4,
    }


def measure_copy(gib: float, iters: int) -> dict:
    n_bytes = int(gib * 2**30)
    try:
        res = _torch(n_bytes, iters)
    except ImportError:
        res = _cupy(n_bytes, iters)
    moved = 2 * res["bytes_per_copy"]
    return {
        "method": "device-to-device copy, CUDA events, bytes read + written",
        "library": res["library"],
        "device": res["device"],
        "buffer_bytes": res["bytes_per_copy"],
        "bytes_moved_per_copy": moved,
        "iterations": iters,
        **rates_from_seconds(res["seconds"], moved),
    }


def measure_read(gib: float, iters: int) -> dict:
    n_bytes = int(gib * 2**30)
    try:
        res = _torch_read(n_bytes, iters)
    except ImportError:
        res = _cupy_read(n_bytes, iters)
    return {
        "method": "read-only reduction (sum of a float32 buffer into a scalar), CUDA events, bytes read",
        "library": res["library"],
        "device": res["device"],
        "buffer_bytes": res["bytes_per_pass"],
        "bytes_read_per_pass": res["bytes_per_pass"],
        "iterations": iters,
        **rates_from_seconds(res["seconds"], res["bytes_per_pass"]),
    }


def measure(gib: float, iters: int, mode: str = "both") -> dict:
    """``copy``: the copy's fields; ``read``: the read's; ``both``: the copy's with ``read`` inside."""
    if mode == "read":
        return measure_read(gib, iters)
    out = measure_copy(gib, iters)
    if mode == "both":
        out["read"] = measure_read(gib, iters)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("both", "copy", "read"), default="both")
    ap.add_argument("--gib", type=float, default=4.0, help="size of each buffer in GiB")
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.gib, a.iters, a.mode), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
