"""Host probe: memory bandwidth by a large copy and by a read-only pass, stored as a ``host`` artifact.

Decode is bound by memory bandwidth (tokens/s ≤ bandwidth ÷ bytes read per token), so the
decode roofline needs this host's bandwidth, measured, not taken from a datasheet.

Method (STREAM's "copy" kernel, done with numpy, no C code of ours):

* two buffers of ``buffer_bytes`` each (default 256 MiB, far above any last-level cache),
  both written once before timing so no page fault lands inside the timer;
* one untimed warm-up copy, then ``repetitions`` timed copies ``dst[:] = src`` with
  ``numpy.copyto`` (glibc's memcpy underneath; numpy releases the GIL while it copies);
* the rate of a repetition counts the bytes read plus the bytes written, ``2 × buffer_bytes``,
  over its wall time (a write-allocate CPU may move more than that; the figure is what a
  copy achieves, the same quantity the roofline divides by);
* single-threaded, and with the buffers split in contiguous chunks over N threads for each N
  in the thread counts (default 1, the physical cores and the logical cores).

Decode only reads (weights and KV cache), so the roofline's bound uses a read-only pass
(``read_bandwidth``), with the copy figure kept beside it:

* three numpy reductions over the same source buffer (a float64 sum, a uint64 max, a
  count of non-zero bytes), split in contiguous chunks over N threads like the copy (numpy
  releases the GIL while it reduces); the fastest is kept per thread count, since one can be
  compute-bound (numpy's pairwise float sum is, on some CPUs) and would understate the bound;
* the rate counts the bytes read, ``buffer_bytes``, over the wall time; one untimed warm-up.

The default buffer is at least twice the last-level cache (and 256 MiB), so neither pass is
served from cache. The 1-minute load average before and after is kept beside the samples: a
busy machine measures low, and the artifact says so.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core import artifacts
from core.errors import ConfigError
from core.paths import data_dir
from core.records import host as host_record
from core.records.host import llc_bytes
from runtime.hosts import fingerprint as hostinfo

METHOD = (
    "STREAM-style copy with numpy.copyto: dst[:] = src over two buffers of buffer_bytes each, "
    "written once before timing; one untimed warm-up; rate = (bytes read + bytes written) / wall time "
    "= 2 x buffer_bytes / t; threaded runs split the buffers into contiguous chunks, one per thread"
)
READ_METHOD = (
    "read-only pass over the source buffer (written once before timing) with each of three numpy "
    "reductions (add.reduce of a float64 view, maximum.reduce of a uint64 view, count_nonzero of the bytes), "
    "one untimed warm-up each; rate = bytes read / wall time = buffer_bytes / t; threaded runs reduce "
    "contiguous chunks, one per thread; per thread count the fastest kernel (by mean) is kept, since a "
    "compute-bound kernel understates the bandwidth"
)
PROBE_VERSION = (
    2  # 2: read-only pass beside the copy; buffer at least twice the last-level cache
)


def default_buffer_mib(fp: dict[str, Any]) -> int:
    """At least 256 MiB and at least twice the last-level cache."""
    llc = llc_bytes(fp) or 0
    return max(256, -(-2 * llc // 2**20))


def hosts_dir() -> Path:
    return data_dir() / "hosts"


def _timed_passes(
    part,
    bounds: list[tuple[int, int]],
    whole,
    threads: int,
    repetitions: int,
    nbytes: int,
) -> list[float]:
    """GB/s of ``repetitions`` timed passes over a buffer: ``part`` per slice on a thread pool
    (``whole`` in the calling thread when ``threads`` is 1), after one untimed warm-up pass."""
    rates = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(part, bounds))  # warm-up (and starts the threads)
        for _ in range(repetitions):
            t0 = time.perf_counter()
            if threads == 1:
                whole()
            else:
                list(pool.map(part, bounds))
            dt = time.perf_counter() - t0
            rates.append(nbytes / dt / 1e9)
    return rates


def _copy_rates(
    src: np.ndarray, dst: np.ndarray, threads: int, repetitions: int
) -> list[float]:
    n = src.size
    bounds = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]

    def part(b: tuple[int, int]) -> None:
        np.copyto(dst[b[0] : b[1]], src[b[0] : b[1]])

    return _timed_passes(
        part, bounds, lambda: np.copyto(dst, src), threads, repetitions, 2 * n
    )  # read + written


# Read-only kernels: each reads the whole buffer once and writes nothing but a scalar. A kernel
# can be compute-bound on a given CPU (numpy's pairwise float sum is, on some), which would
# understate the bandwidth, so the probe runs every one and keeps the fastest per thread count.
READ_KERNELS = {
    "sum_f64": lambda a: np.add.reduce(a.view(np.float64)),
    "max_u64": lambda a: np.maximum.reduce(a.view(np.uint64)),
    "count_nonzero_u8": lambda a: np.count_nonzero(a),
}


def _read_rates(
    src: np.ndarray, threads: int, repetitions: int, kernel: str = "sum_f64"
) -> list[float]:
    fn = READ_KERNELS[kernel]
    n = src.size - src.size % 8  # whole 8-byte words for the 64-bit views
    bounds = [
        (i * n // threads // 8 * 8, (i + 1) * n // threads // 8 * 8)
        for i in range(threads)
    ]

    def part(b: tuple[int, int]) -> float:
        return float(fn(src[b[0] : b[1]]))

    return _timed_passes(part, bounds, lambda: part((0, n)), threads, repetitions, n)


def best_read(
    src: np.ndarray, threads: int, repetitions: int
) -> tuple[str, list[float], dict[str, float]]:
    """Every read kernel at this thread count: the fastest one's samples (by mean), and each one's mean."""
    means: dict[str, float] = {}
    samples: dict[str, list[float]] = {}
    for name in READ_KERNELS:
        samples[name] = _read_rates(src, threads, repetitions, name)
        means[name] = float(np.mean(samples[name]))
    best = max(means, key=means.get)
    return best, samples[best], means


def thread_counts(fp: dict[str, Any]) -> list[int]:
    phys = fp["cpu"].get("physical_cores") or 1
    logical = fp["cpu"].get("logical_cores") or phys
    return sorted({1, int(phys), int(logical)})


def probe(
    buffer_mib: int | None = None,
    repetitions: int = 5,
    threads: list[int] | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure and return a ``host`` artifact (not written). ``buffer_mib`` None: :func:`default_buffer_mib`."""
    fp = fingerprint or hostinfo.fingerprint()
    if buffer_mib is None:
        buffer_mib = default_buffer_mib(fp)
    if buffer_mib < 1:
        raise ConfigError(f"must be at least 1 MiB, got {buffer_mib}", field="size_mib")
    if repetitions < 2:
        raise ConfigError(
            f"needs at least 2 repetitions for a confidence interval, got {repetitions}",
            field="repetitions",
        )
    counts = threads or thread_counts(fp)
    if any(t < 1 for t in counts):
        raise ConfigError(f"thread counts must be >= 1, got {counts}", field="threads")
    n = buffer_mib * 1024 * 1024
    n -= n % 8  # the read pass views the buffer as float64
    load_before = os.getloadavg()[0]
    src = np.ones(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    created = datetime.now(UTC)
    results, reads, kernels = [], [], {}
    for t in counts:  # copy and read alternate per thread count, so drift of the machine falls on both
        rates = _copy_rates(src, dst, t, repetitions)
        results.append(host_record.bandwidth_entry(t, rates))
        kernel, rates, means = best_read(src, t, repetitions)
        reads.append(host_record.bandwidth_entry(t, rates))
        kernels[t] = {"kernel": kernel, "means_gbs": means}
    del src, dst
    load_after = os.getloadavg()[0]
    return host_record.new_host(
        fingerprint=fp,
        created=created,
        probe={
            "kind": host_record.HOST_MEMORY,
            "version": PROBE_VERSION,
            "method": METHOD,
            "tool": "numpy.copyto",
            "numpy": np.__version__,
            "buffer_bytes": n,
            "repetitions": repetitions,
            "warmup": True,
            "bytes_counted": "read + written",
            "read_method": READ_METHOD,
            "read_bytes_counted": "read",
            "llc_bytes": llc_bytes(fp),
            "read_kernels": {str(t): k for t, k in kernels.items()},
        },
        bandwidth=results,
        read_bandwidth=reads,
        conditions={
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": load_after,
            "logical_cores": fp["cpu"].get("logical_cores"),
        },
    )


def artifact_path(doc: dict[str, Any], root: Path | None = None) -> Path:
    return host_record.artifact_path(doc, root or hosts_dir())


def has_probe(host_id: str, root: Path | None = None) -> bool:
    """Whether ``host_id`` has a memory bandwidth artifact (``<root>/<host id>/bandwidth-*.json``, what
    :func:`run_probe` writes; root: data/hosts)."""
    return any(((root or hosts_dir()) / host_id).glob("bandwidth-*.json"))


def run_probe(
    buffer_mib: int | None = None,
    repetitions: int = 5,
    threads: list[int] | None = None,
) -> Path:
    """Measure this host and write the artifact under data/hosts/<host-id>/."""
    doc = probe(buffer_mib, repetitions, threads)
    return artifacts.write(artifact_path(doc), doc)
