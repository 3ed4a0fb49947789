"""A/B: does attaching a ggml threadpool, as llama-bench does, change our rate-test figures?

    python benchmarks/threadpool_ab.py [--test tg128] [--reps 5] [--rounds 6] [--threads N] [--poll 50]

llama-bench creates a ggml threadpool (``ggml_threadpool_new``, poll 50) and attaches it
with ``llama_attach_threadpool``; llama-cpp-python does not bind that call, so our
harness runs on llama.cpp's default: a disposable threadpool per graph computation. In an
OpenMP build (our wheel: ``OPENMP = 1``) the workers are OpenMP's either way and ``poll``
is only read by the non-OpenMP code path, so the expected difference is two small
allocations per graph; in a build without OpenMP the disposable pool starts and joins
threads for every graph, which would cost real time per generated token.

This script answers it by measurement: one model load, our backend's own rate test
(``LlamaCppBackend._run_rate``), alternating default / attached (ABBA...) in the same
process, ``reps`` repetitions per block; then ``core.stats.compare``. The threadpool is
bound through ctypes (``ggml_threadpool_params_default`` in libggml-base,
``ggml_threadpool_new``/``_free`` in libggml-cpu, ``llama_attach_threadpool`` /
``llama_detach_threadpool`` in libllama, all in the llama_cpp package's lib/ folder).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

GGML_MAX_N_THREADS = 512  # ggml.h


class ThreadpoolParams(ctypes.Structure):
    """struct ggml_threadpool_params (ggml.h)."""

    _fields_ = [
        ("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


class Threadpool:
    """A ggml threadpool attached to / detached from a llama_context through ctypes."""

    def __init__(self, n_threads: int, poll: int):
        import llama_cpp

        lib_dir = Path(llama_cpp.__file__).parent / "lib"
        base = ctypes.CDLL(str(lib_dir / "libggml-base.so"))
        self._cpu = ctypes.CDLL(str(lib_dir / "libggml-cpu.so"))
        self._llama = llama_cpp.llama_cpp._lib
        base.ggml_threadpool_params_default.restype = ThreadpoolParams
        base.ggml_threadpool_params_default.argtypes = [ctypes.c_int]
        self._cpu.ggml_threadpool_new.restype = ctypes.c_void_p
        self._cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(ThreadpoolParams)]
        self._cpu.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
        self._cpu.ggml_threadpool_free.restype = None
        self._llama.llama_attach_threadpool.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self._llama.llama_attach_threadpool.restype = None
        self._llama.llama_detach_threadpool.argtypes = [ctypes.c_void_p]
        self._llama.llama_detach_threadpool.restype = None
        params = base.ggml_threadpool_params_default(n_threads)
        params.poll = poll
        self.handle = self._cpu.ggml_threadpool_new(ctypes.byref(params))
        if not self.handle:
            raise RuntimeError("ggml_threadpool_new failed")

    def attach(self, ctx) -> None:
        self._llama.llama_attach_threadpool(
            ctx, self.handle, None
        )  # NULL batch pool: the same one

    def detach(self, ctx) -> None:
        self._llama.llama_detach_threadpool(ctx)

    def free(self) -> None:
        self._cpu.ggml_threadpool_free(self.handle)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default="gemma3-270m-q4_k_m", help="Registry name or .gguf path."
    )
    ap.add_argument("--test", default="tg128", help="Rate test (default tg128).")
    ap.add_argument(
        "--reps", type=int, default=5, help="Repetitions per block (default 5)."
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="Blocks per mode, alternating ABBA (default 6).",
    )
    ap.add_argument(
        "--threads", type=int, default=None, help="Threads (default: physical cores)."
    )
    ap.add_argument(
        "--poll",
        type=int,
        default=50,
        help="Threadpool polling level (llama-bench's default 50).",
    )
    ap.add_argument(
        "--fa", choices=("off", "on", "auto"), default="auto", help="Flash attention."
    )
    args = ap.parse_args(argv)

    from core import stats
    from core.kinds.rate import RateTest
    from runtime.backends.llama_cpp.backend import LlamaCppBackend, physical_cores
    from runtime.backends.llama_cpp.config import LlamaCppSettings
    from runtime.models import registry as models

    threads = args.threads or physical_cores()
    test = RateTest.parse(args.test).model_copy(
        update={"repetitions": args.reps, "warmup": True}
    )
    backend = LlamaCppBackend(
        models.resolve(args.model),
        LlamaCppSettings(n_threads=threads, flash_attn=args.fa),
    )
    backend.load(test)
    ctx = backend.llm._ctx.ctx
    pool = Threadpool(threads, args.poll)
    samples: dict[str, list[float]] = {"default": [], "threadpool": []}
    try:
        for rnd in range(args.rounds * 2):
            mode = ("default", "threadpool", "threadpool", "default")[rnd % 4]
            pool.attach(ctx) if mode == "threadpool" else pool.detach(ctx)
            samples[mode] += backend._run_rate(test).samples["ts"]
            print(
                f"block {rnd + 1}/{args.rounds * 2} {mode}: {sum(samples[mode][-args.reps :]) / args.reps:.2f} t/s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        pool.detach(ctx)
        backend.close()
        pool.free()
    for mode, v in samples.items():
        s = stats.summarize(v)
        print(
            f"{test.name} {mode:10s} {s['mean']:.2f} ± {s['stddev']:.2f} t/s (n={s['n']})"
        )
    c = stats.compare(samples["default"], samples["threadpool"], higher_is_better=True)
    print(
        f"threadpool / default: {c.ratio:.3f} [{c.ci95_low:.3f}, {c.ci95_high:.3f}] {c.verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
