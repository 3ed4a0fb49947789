"""Device memory bandwidth of one GPU: a large device-to-device copy, bytes read + written.

    python3 benchmarks/gpu_bandwidth.py [--gib 4] [--iters 30] > bandwidth.json

The figure the decode roofline divides by (tokens/s <= bandwidth / bytes read per token).
Times a ``copy_`` between two buffers of ``--gib`` GiB each with CUDA events (after a
warm-up), ``--iters`` times; reports every sample, the median and the best, counting
2 x size bytes per copy (one read, one write). Uses PyTorch when importable, else CuPy.
Buffers are filled with random data first (never zeros). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


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
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) / 1000.0)
    if not torch.equal(dst[:1024], src[:1024]) or not torch.equal(dst[-1024:], src[-1024:]):
        raise RuntimeError("copy check failed")
    return {"library": f"torch {torch.__version__}", "device": torch.cuda.get_device_name(0), "seconds": samples,
            "bytes_per_copy": n * 4}


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
    return {"library": f"cupy {cp.__version__}", "device": name.decode() if isinstance(name, bytes) else name,
            "seconds": samples, "bytes_per_copy": n * 4}


def measure(gib: float, iters: int) -> dict:
    n_bytes = int(gib * 2**30)
    try:
        res = _torch(n_bytes, iters)
    except ImportError:
        res = _cupy(n_bytes, iters)
    moved = 2 * res["bytes_per_copy"]
    rates = [moved / s for s in res["seconds"]]
    return {
        "method": "device-to-device copy, CUDA events, bytes read + written",
        "library": res["library"],
        "device": res["device"],
        "buffer_bytes": res["bytes_per_copy"],
        "bytes_moved_per_copy": moved,
        "iterations": iters,
        "samples_bytes_per_s": rates,
        "median_bytes_per_s": statistics.median(rates),
        "max_bytes_per_s": max(rates),
        "stddev_bytes_per_s": statistics.stdev(rates) if len(rates) > 1 else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.0, help="size of each buffer in GiB")
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.gib, a.iters), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
