"""Fidelity benchmark: our pp/tg rates beside llama.cpp's own, same machine, same settings.

    python benchmarks/fidelity.py [--model NAME] [--reps 5] [--rounds 3] [--fa off|on|auto]
                                  [--threads N] [--out fidelity.json] [--no-naive] [--check]
                                  [--tests pp512,tg128] [--llama-bench PATH]
    invoke bench.fidelity [--reps 5] [--rounds 3] [--fa auto] [--out FILE] [--check]

What it does, in one invocation:

1. Builds llama-bench from the llama.cpp source vendored in the sdist of the pinned
   llama-cpp-python (cached in ~/.cache/inference-almanac/llama-bench/<commit>/; see
   llama_bench_build.py for the flags, which follow the wheel's build), after checking
   that the sdist's CHANGELOG names the commit runtime.backends.llama_cpp records.
2. For each test (pp512, tg128) and each round, runs with identical settings (threads,
   n_batch 2048, n_ubatch 512, flash attention, KV f16, repetitions):
   * llama-bench ``-o json`` (its own process; warm-up + r repetitions);
   * OUR harness: the llama_cpp backend's rate test through runtime.execution.runner, in its child
     process, with ALMANAC_DATA pointing at a temporary folder (nothing lands in data/);
     llama.cpp's own perf counters (llama_perf_context) are read from that artifact;
   * a naive ``Llama.eval`` loop in a child process (what one would write by hand), to
     show what the harness does not pay.
   Every tool runs in a fresh process (own model load, untimed warm-up). The tools alternate:
   round r starts with tool r mod 3 (ABC, BCA, CAB, ...), so slow drift of the machine
   (thermal, other load) falls on every tool alike.
3. Prints, per test: each tool's mean ± sample stddev (n = reps x rounds per-repetition
   rates), the ratio ours / llama-bench with its CI95 and verdict (core.stats.compare),
   the perf-counter rate and the naive loop's rate with their ratios; writes all of it, raw
   samples and both system-info strings included, to --out.

The goal (issue 2): ours / llama-bench within 0.97-1.03 for pp512 and tg128. --check exits 1
when a ratio lies outside that band. Measure on a quiet machine: other load makes both
tools slower and noisier, unevenly. Ctrl-C (or SIGTERM) stops it, kills the running child
and still prints and writes what was measured (the JSON is also rewritten after every run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_bench_build as lbb

from core import stats
from core.errors import ConfigError, UserError
from core.paths import project_root

BAND = (0.97, 1.03)
TOOLS = ("llama-bench", "ours", "naive")


# -- the three tools ---------------------------------------------------------------------
def run_llama_bench(
    binary: str,
    model_path: str,
    n_prompt: int,
    n_gen: int,
    cfg: dict[str, Any],
    workdir: Path,
) -> dict[str, Any]:
    """One llama-bench invocation; returns its (validated) JSON record."""
    from runtime.importers.llama_bench import read_records

    cmd = [
        binary,
        "-m",
        model_path,
        "-p",
        str(n_prompt),
        "-n",
        str(n_gen),
        "-r",
        str(cfg["reps"]),
        "-t",
        str(cfg["threads"]),
        "-b",
        str(cfg["n_batch"]),
        "-ub",
        str(cfg["n_ubatch"]),
        "-fa",
        cfg["fa"],
        "-ctk",
        "f16",
        "-ctv",
        "f16",
        "-ngl",
        str(cfg["n_gpu_layers"]),
        "-o",
        "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"llama-bench failed ({proc.returncode}): {proc.stderr.strip()[-500:]}"
        )
    out = workdir / f"llama-bench-{time.time_ns()}.json"
    out.write_text(proc.stdout)
    (record,) = read_records(out)
    return {
        "samples_ts": list(record.samples_ts),
        "samples_ns": list(record.samples_ns),
        "record": json.loads(proc.stdout)[0],
        "command": cmd,
    }


def run_ours(model: str, test: str, cfg: dict[str, Any], data: Path) -> dict[str, Any]:
    """Our rate test through runtime.execution.runner (child process), into the temporary data dir."""
    from core import artifacts
    from runtime.backends.llama_cpp import (
        NAME as LLAMA_CPP,
    )  # llama-bench measures llama.cpp in process
    from runtime.execution import runner

    matrix = data / "matrices" / "fidelity.yaml"
    settings = {
        "n_threads": cfg["threads"],
        "n_threads_batch": cfg["threads"],
        "n_batch": cfg["n_batch"],
        "n_ubatch": cfg["n_ubatch"],
        "flash_attn": cfg["fa"],
        "type_k": "f16",
        "type_v": "f16",
        "n_gpu_layers": cfg["n_gpu_layers"],
    }
    matrix.write_text(
        json.dumps(
            {  # JSON is YAML
                "schema_version": 1,
                "name": "fidelity",
                "backend": LLAMA_CPP,
                "models": [model],
                "repetitions": cfg["reps"],
                "warmup": True,
                "timeout_s": 1800,
                "settings": settings,
                "tests": [test],
            }
        )
    )
    report = runner.run_matrix(str(matrix), force=True, root=data / "runs")
    path = (report.measured or report.failed)[0]
    doc = artifacts.load(path)
    if doc["status"] != "ok":
        raise RuntimeError(
            f"our run failed: {doc['error']['message']}\n{doc['log_tail'][-1500:]}"
        )
    return {
        "samples_ts": doc["samples"]["ts"],
        "samples_ns": doc["samples"]["ns"],
        "perf_counter_ts": doc["details"].get("perf_counter_ts", []),
        "artifact_id": doc["id"],
        "effective": doc["settings"]["effective"],
        "system_info": doc["build"].get("system_info"),
        "llama_cpp_commit": doc["build"].get("llama_cpp_commit"),
    }


def naive_eval(
    model_path: str, n_prompt: int, n_gen: int, cfg: dict[str, Any]
) -> dict[str, Any]:
    """What one writes by hand with llama-cpp-python: ``Llama.eval`` on the prompt, then one
    ``Llama.eval([token])`` per generated token. Same settings; runs in a child process."""
    import llama_cpp
    import llama_cpp.llama as llama_module

    from runtime.backends.llama_cpp import lib_policy as llamacpp_lib

    # the one thing not written by hand: this host's library policy, as our backend applies it (where llama.cpp
    # has AMX compiled in, its matmul crashes on the prompt's multi-token decode; both sides then run without it)
    llamacpp_lib.apply()
    inner = llama_module.llama_cpp
    saved = inner.LLAMA_FLASH_ATTN_TYPE_ENABLED
    if (
        cfg["fa"] == "auto"
    ):  # the constructor only knows on/off (as in runtime.backends.llama_cpp)
        inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = inner.LLAMA_FLASH_ATTN_TYPE_AUTO
    try:
        llm = llama_cpp.Llama(
            model_path=model_path,
            n_ctx=n_prompt + n_gen,
            n_batch=cfg["n_batch"],
            n_ubatch=cfg["n_ubatch"],
            n_threads=cfg["threads"],
            n_threads_batch=cfg["threads"],
            flash_attn=cfg["fa"] != "off",
            type_k=1,
            type_v=1,
            n_gpu_layers=cfg["n_gpu_layers"],
            swa_full=False,  # llama-bench's (and our backend's) choice; llama.cpp defaults to true
            logits_all=False,
            verbose=False,
        )
    finally:
        inner.LLAMA_FLASH_ATTN_TYPE_ENABLED = saved
    rng = random.Random(0)
    n_vocab = llm.n_vocab()
    bos = llm.token_bos()
    samples_ns = []
    for rep in range(cfg["reps"] + 1):  # the first is the untimed warm-up
        prompt = (
            [bos] + [rng.randrange(n_vocab) for _ in range(max(n_prompt - 1, 0))]
            if n_prompt
            else []
        )
        gen = (
            [bos] + [rng.randrange(n_vocab) for _ in range(n_gen - 1)] if n_gen else []
        )
        if rep == 0:
            gen = gen[:1]
        llm.reset()
        t0 = time.perf_counter_ns()
        if prompt:
            llm.eval(prompt)
        for tok in gen:
            llm.eval([tok])
        if rep:
            samples_ns.append(time.perf_counter_ns() - t0)
    llm.close()
    n = n_prompt + n_gen
    return {"samples_ns": samples_ns, "samples_ts": [n * 1e9 / ns for ns in samples_ns]}


def run_naive(
    model_path: str, n_prompt: int, n_gen: int, cfg: dict[str, Any]
) -> dict[str, Any]:
    """naive_eval in a fresh child process (like the other two tools: own load, own memory)."""
    job = json.dumps(
        {"model_path": model_path, "n_prompt": n_prompt, "n_gen": n_gen, "cfg": cfg}
    )
    proc = subprocess.run(
        [sys.executable, __file__, "--naive-child", job], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"naive loop failed ({proc.returncode}): {proc.stderr.strip()[-500:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- comparison ----------------------------------------------------------------------------
def summarize_test(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    pooled = {
        tool: [v for r in rs for v in r["samples_ts"]] for tool, rs in runs.items()
    }
    if runs.get("ours"):
        pooled["perf_counters"] = [
            v for r in runs["ours"] for v in r["perf_counter_ts"] if v is not None
        ]
    base = pooled["llama-bench"]
    out: dict[str, Any] = {
        "samples_ts": pooled,
        "summary": {k: stats.summarize(v) for k, v in pooled.items()},
        "vs_llama_bench": {},
    }
    for k, v in pooled.items():
        if k != "llama-bench":
            out["vs_llama_bench"][k] = stats.compare(
                base, v, higher_is_better=True
            ).to_dict()
    if "naive" in pooled and "ours" in pooled:
        out["ours_vs_naive"] = stats.compare(
            pooled["naive"], pooled["ours"], higher_is_better=True
        ).to_dict()
    if pooled.get("perf_counters"):
        # Our timer against llama.cpp's own, same repetitions: what the Python loop around the C calls costs.
        out["ours_vs_perf_counters"] = stats.compare(
            pooled["perf_counters"], pooled["ours"], higher_is_better=True
        ).to_dict()
    return out


def _ms(s: dict[str, Any]) -> str:
    if not s or s.get("mean") is None:
        return "—"
    sd = f" ± {s['stddev']:.2f}" if s.get("stddev") is not None else ""
    return f"{s['mean']:.2f}{sd} (n={s['n']})"


def _ratio(c: dict[str, Any] | None) -> str:
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" [{c['ci95_low']:.3f}, {c['ci95_high']:.3f}]"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{c['ratio']:.3f}{ci} {c['verdict']}"


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="Fidelity: tokens/s, ours vs llama-bench (same build commit, settings, machine)"
    )
    for col in (
        "test",
        "llama-bench",
        "ours",
        "ours / llama-bench [CI95]",
        "perf counters",
        "perf / llama-bench",
        "naive Llama.eval",
        "naive / llama-bench",
    ):
        table.add_column(col, justify="left" if col == "test" else "right")
    for test, r in results["tests"].items():
        s, c = r["summary"], r["vs_llama_bench"]
        table.add_row(
            test,
            _ms(s.get("llama-bench")),
            _ms(s.get("ours")),
            _ratio(c.get("ours")),
            _ms(s.get("perf_counters")),
            _ratio(c.get("perf_counters")),
            _ms(s.get("naive")),
            _ratio(c.get("naive")),
        )
    Console(highlight=False, width=200).print(table)


# -- main ----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--model",
        default="gemma3-270m-q4_k_m",
        help="Registry name or .gguf path (default: the embedded model).",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=5,
        help="Repetitions per invocation of each tool (llama-bench -r; default 5).",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="Alternating rounds; each tool runs reps x rounds repetitions (default 3).",
    )
    ap.add_argument(
        "--fa",
        choices=("off", "on", "auto"),
        default="auto",
        help="Flash attention (default auto, llama.cpp's).",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="Threads for both tools (default: physical cores).",
    )
    ap.add_argument(
        "--tests",
        default="pp512,tg128",
        help="Comma-separated rate tests (default pp512,tg128).",
    )
    ap.add_argument("--out", default=None, help="Write the result JSON here.")
    ap.add_argument(
        "--no-naive", action="store_true", help="Skip the naive Llama.eval loop."
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help=f"Exit 1 when ours/llama-bench lies outside {BAND[0]}-{BAND[1]}.",
    )
    ap.add_argument(
        "--sdist",
        default=None,
        help="Path to the llama-cpp-python sdist (default: cache, else pip download).",
    )
    ap.add_argument(
        "--llama-bench",
        dest="llama_bench",
        default=None,
        help="Use this llama-bench binary instead of building one.",
    )
    ap.add_argument(
        "--naive-child", dest="naive_child", default=None, help=argparse.SUPPRESS
    )
    ap.add_argument(
        "--jobs", type=int, default=None, help="Build parallelism (default: all CPUs)."
    )
    args = ap.parse_args(argv)
    for name in ("reps", "rounds", "threads", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise ConfigError(f"must be at least 1 (got {v})", field=f"--{name}")
    return args


def parse_tests(text: str) -> dict[str, tuple[int, int]]:
    from core.kinds.rate import RateTest

    out = {}
    for name in filter(None, (t.strip() for t in text.split(","))):
        try:
            t = RateTest.parse(name)
        except ValueError as exc:
            raise ConfigError(str(exc), field="--tests") from None
        if t.n_depth:
            raise ConfigError(
                f"{name}: depth tests are not compared here", field="--tests"
            )
        out[t.name] = (t.n_prompt, t.n_gen)
    if not out:
        raise ConfigError("no tests", field="--tests")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tests = parse_tests(args.tests)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    from runtime.backends.llama_cpp.backend import VENDORED_LLAMA_CPP, physical_cores
    from runtime.hosts import fingerprint as hostinfo
    from runtime.models import registry as models

    version = lbb.pinned_version()
    sdist = lbb.find_sdist(version, args.sdist, log=log)
    commit = lbb.vendored_commit(sdist, version)
    recorded = VENDORED_LLAMA_CPP.get(version)
    if recorded is None or not (
        commit.startswith(recorded) or recorded.startswith(commit)
    ):
        raise ConfigError(
            f"the sdist's CHANGELOG names llama.cpp {commit}, VENDORED_LLAMA_CPP[{version!r}] says {recorded}",
            file="runtime/backends/llama_cpp/backend.py",
            field="VENDORED_LLAMA_CPP",
        )
    if args.llama_bench:
        build = lbb.BuildInfo(
            commit=commit,
            binary=str(Path(args.llama_bench).resolve()),
            lib_dir=str(Path(args.llama_bench).resolve().parent),
            cmake_args=[],
            build_s=None,
            reused=True,
            compiler="unknown (given with --llama-bench)",
            build_command="",
        )
    else:
        build = lbb.ensure_llama_bench(sdist, version, commit, args.jobs, log=log)
    log(
        f"llama-bench: {build.binary} ({'cached build' if build.reused else f'built in {build.build_s} s'})"
    )

    ref = models.resolve(args.model)
    cfg = {
        "reps": args.reps,
        "threads": args.threads or physical_cores(),
        "n_batch": 2048,
        "n_ubatch": 512,
        "fa": args.fa,
        "n_gpu_layers": -1,
    }
    tools = [t for t in TOOLS if not (args.no_naive and t == "naive")]
    sysinfo = {
        "ours (llama-cpp-python wheel)": lbb.system_info(),
        "llama-bench build": lbb.system_info(build.lib_dir),
    }
    if (
        sysinfo["ours (llama-cpp-python wheel)"]["system_info"]
        != sysinfo["llama-bench build"]["system_info"]
    ):
        log(
            "warning: the two builds report different system info: the comparison is not like for like"
        )
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        t: {tool: [] for tool in tools} for t in tests
    }
    order_log: list[dict[str, Any]] = []
    results: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            [
                Path(sys.executable).name,
                "benchmarks/fidelity.py",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        ),
        "complete": False,
        "goal": {"ratio_band": list(BAND)},
        "host": hostinfo.fingerprint(),
        "model": {"name": ref.name, "path": ref.path, "sha256": ref.sha256},
        "llama_cpp_python": version,
        "llama_cpp_commit": commit,
        "build": build.to_dict(),
        "system_info": sysinfo,
        "settings": {
            **cfg,
            "type_k": "f16",
            "type_v": "f16",
            "warmup": True,
            "llama_bench_poll": 50,
            "swa_full": False,
        },
        "method": (
            "Tools alternate: round r starts with tool r mod n (ABC, BCA, CAB, ...); in every round each "
            "test runs each tool once, in a fresh process, with `reps` repetitions after an untimed "
            "warm-up; the samples are the per-repetition rates pooled over rounds."
        ),
        "order": order_log,
        "raw": runs,
    }

    def finish() -> None:
        results["tests"] = {
            t: summarize_test(r) for t, r in runs.items() if all(r.values())
        }
        if args.out:  # after every run: a killed benchmark keeps what it measured
            Path(args.out).write_text(json.dumps(results, indent=2, default=str) + "\n")

    interrupted = False
    with tempfile.TemporaryDirectory(prefix="almanac-fidelity-") as td:
        data = Path(td) / "data"
        (data / "matrices").mkdir(parents=True)
        shutil.copy(project_root() / "data" / "models.yaml", data / "models.yaml")
        saved_env = os.environ.get("ALMANAC_DATA")
        os.environ["ALMANAC_DATA"] = str(
            data
        )  # runner, registry and children all read it
        try:
            for rnd in range(args.rounds):
                order = tools[rnd % len(tools) :] + tools[: rnd % len(tools)]
                for test, (n_prompt, n_gen) in tests.items():
                    for tool in order:
                        t0 = time.perf_counter()
                        if tool == "llama-bench":
                            r = run_llama_bench(
                                build.binary, ref.path, n_prompt, n_gen, cfg, Path(td)
                            )
                        elif tool == "ours":
                            r = run_ours(args.model, test, cfg, data)
                        else:
                            r = run_naive(ref.path, n_prompt, n_gen, cfg)
                        runs[test][tool].append(r)
                        mean = sum(r["samples_ts"]) / len(r["samples_ts"])
                        order_log.append(
                            {
                                "round": rnd,
                                "test": test,
                                "tool": tool,
                                "wall_s": round(time.perf_counter() - t0, 2),
                                "mean_ts": mean,
                            }
                        )
                        log(
                            f"round {rnd + 1}/{args.rounds} · {test} · {tool}: {mean:.2f} t/s"
                        )
                        finish()
            results["complete"] = True
        except (
            KeyboardInterrupt
        ):  # Ctrl-C or SIGTERM: children are gone (runner/subprocess kill them)
            interrupted = True
            log("interrupted: reporting what was measured so far")
        finally:
            if saved_env is None:
                os.environ.pop("ALMANAC_DATA", None)
            else:
                os.environ["ALMANAC_DATA"] = saved_env
    finish()
    print_table(results)
    for k, v in sysinfo.items():
        print(f"system_info {k}: {v['system_info']}  [{v['ggml_cpu_library']}]")
    if args.out:
        print(
            f"result written to {args.out}"
            + ("" if results["complete"] else " (incomplete)")
        )
    outside = [
        t
        for t, r in results["tests"].items()
        if not (BAND[0] <= (r["vs_llama_bench"]["ours"]["ratio"] or 0) <= BAND[1])
    ]
    if outside:
        print(f"ours / llama-bench outside {BAND[0]}-{BAND[1]}: {', '.join(outside)}")
    if interrupted:
        return 130
    return 1 if (args.check and outside) else 0


def _sigterm(signum, frame):
    raise KeyboardInterrupt  # so `timeout` or kill unwinds like Ctrl-C: children killed, results kept


if __name__ == "__main__":
    if (
        "--naive-child" in sys.argv
    ):  # internal: one naive_eval run, result as JSON on stdout
        job = json.loads(sys.argv[sys.argv.index("--naive-child") + 1])
        print(
            json.dumps(
                naive_eval(job["model_path"], job["n_prompt"], job["n_gen"], job["cfg"])
            )
        )
        sys.exit(0)
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
