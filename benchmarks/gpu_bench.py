"""GPU benchmark driver (run by benchmarks/gpu_run.sh on the GPU machine).

1. measure the card's device-memory bandwidth (benchmarks/gpu_bandwidth.py);
2. generate the synthetic models a matrix names ("synthetic-<shape>-<quant>",
   runtime.models.synth) into a work folder, with a registry of their own (ALMANAC_DATA);
3. run the matrix through the runtime (one child process per configuration, artifacts
   with the host fingerprint taken here);
4. run llama-bench (built from the same llama.cpp source) on the same files and settings;
5. write fidelity (ours / llama-bench per model and test) and the decode roofline
   (measured tg rate / (bandwidth / bytes read per token)).

Everything lands in --out: runs.tar.gz (the run artifacts, relative to data/runs/),
llama-bench.json, fidelity.json, bandwidth.json, host.json, and a short table on stdout.
Each stage writes its outputs as soon as it ends, so a run stopped by a time limit still
returns what it finished. ``--deadline`` (epoch seconds) skips optional stages that would
start too late.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runtime.backends.llama_cpp import NAME as LLAMA_CPP  # noqa: E402 - llama-bench is compared with this backend only

SYNTH_NAME = re.compile(r"^synthetic-(?P<shape>.+)-(?P<quant>(?:q|f|bf)[0-9a-z_]+)$")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- models -------------------------------------------------------------------------------
def synthetic_spec(name: str) -> tuple[str, str]:
    """("llama-1b", "Q8_0") from "synthetic-llama-1b-q8_0"."""
    m = SYNTH_NAME.match(name)
    if not m:
        raise SystemExit(
            f"model {name!r} is not a synthetic name (synthetic-<shape>-<quant>)"
        )
    return m["shape"], m["quant"].upper()


def project_entries() -> dict[str, dict[str, Any]]:
    """The project's own registry (data/models.yaml of this checkout, whatever ALMANAC_DATA says)."""
    import yaml

    path = ROOT / "data" / "models.yaml"
    return (
        (yaml.safe_load(path.read_text()) or {}).get("models", {})
        if path.exists()
        else {}
    )


def ensure_models(
    names: list[str], model_dir: Path, registry: Path
) -> dict[str, dict[str, Any]]:
    """Make each named model available in ``registry`` (the run's own, under --work) and return
    {name: {path, sha256}} for those that are.

    A model that the project's registry declares as synthetic (``synth: {shape, quant, seed}``)
    gets the same entry here, so it is generated from the same recipe into the cache and has
    the same bytes (sha256) and the same recorded source as on every other host. Other
    ``synthetic-<shape>-<quant>`` names are generated with seed 0. A model that cannot exist
    on this machine (a PyPI package or a local file: no network, and the carried tree is
    limited in size) is left out, and the caller runs the matrix without it."""
    import yaml

    from runtime.models import registry as models
    from runtime.models import synth

    facts: dict[str, dict[str, Any]] = {}
    project = project_entries()
    entries = (
        (yaml.safe_load(registry.read_text()) or {}).get("models", {})
        if registry.exists()
        else {}
    )
    for name in names:
        declared = project.get(name) or {}
        if declared.get("synth"):
            entries[name] = declared
        elif name not in entries:
            if not SYNTH_NAME.match(name):
                log(
                    f"skipping model {name}: not available on this machine (only synthetic models are generated here)"
                )
                continue
            shape, quant = synthetic_spec(name)
            path = model_dir / f"{name}.gguf"
            t0 = time.perf_counter()
            f = synth.write_gguf(shape, quant, path, seed=0)
            log(
                f"generated {name}: {f['size_bytes'] / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s"
            )
            s = synth.get_shape(shape)
            entries[name] = {
                "path": str(path),
                "sha256": f["sha256"],
                "family": "synthetic",
                "description": f"Synthetic {s.description or shape} at {quant}: random weights, speed only.",
            }
        registry.parent.mkdir(parents=True, exist_ok=True)
        registry.write_text(
            yaml.safe_dump({"schema_version": 1, "models": entries}, sort_keys=True)
        )
        t0 = time.perf_counter()
        ref = models.resolve(name, models.load_registry(registry))
        log(
            f"model {name}: {ref.path} ({ref.size_bytes / 1e9:.2f} GB, sha256 {ref.sha256[:16]}, "
            f"{time.perf_counter() - t0:.1f} s)"
        )
        facts[name] = {"path": ref.path, "sha256": ref.sha256}
    return facts


def matrix_for(
    mfile: str, available: list[str], all_models: list[str], work: Path
) -> str:
    """The matrix file itself, or (when some of its models are not available here) a file that
    includes it and narrows its models: same name, tests and settings, so its rows stay
    comparable with the full matrix run elsewhere."""
    if available == all_models:
        return mfile
    import yaml

    from runtime.execution import matrix as matrix_mod

    name = matrix_mod.load(mfile).name
    derived = work / "matrices" / f"{name}.yaml"
    derived.parent.mkdir(parents=True, exist_ok=True)
    derived.write_text(
        yaml.safe_dump(
            {"include": str(Path(mfile).resolve()), "models": available},
            sort_keys=False,
        )
    )
    log(
        f"matrix {name}: running {', '.join(available)} (left out: "
        f"{', '.join(m for m in all_models if m not in available)})"
    )
    return str(derived)


# -- llama-bench ---------------------------------------------------------------------------
def llama_bench_args(m: Any, model_paths: list[str], n_threads: int) -> list[str]:
    """llama-bench arguments equivalent to a matrix (rate tests, one settings point)."""
    rate = [t for t in m.tests if t.kind == "rate"]
    prompts = sorted({t.n_prompt for t in rate if t.n_prompt and not t.n_gen})
    gens = sorted({t.n_gen for t in rate if t.n_gen and not t.n_prompt})
    depths = sorted({t.n_depth for t in rate})
    s = m.spec.settings
    args: list[str] = []
    for p in model_paths:
        args += ["-m", p]
    args += [
        "-p",
        ",".join(map(str, prompts)) or "0",
        "-n",
        ",".join(map(str, gens)) or "0",
        "-d",
        ",".join(map(str, depths)),
        "-r",
        str(m.spec.repetitions),
        "-ngl",
        str(s.get("n_gpu_layers", -1) if s.get("n_gpu_layers", -1) >= 0 else 99),
        "-b",
        str(s.get("n_batch", 2048)),
        "-ub",
        str(s.get("n_ubatch", 512)),
        "-t",
        str(n_threads),
        "-o",
        "json",
    ]
    fa = s.get("flash_attn", "auto")
    args += ["-fa", {"auto": "auto", "on": "1", "off": "0"}[fa]]
    from runtime.hosts import placement

    return args + placement.cli_args(
        s
    )  # split, main GPU, NUMA, CPU mask ... as the matrix says


def run_llama_bench(
    binary: Path, args: list[str], out: Path, timeout: float
) -> list[dict[str, Any]]:
    log(f"llama-bench {' '.join(args)}")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(binary)] + args, capture_output=True, text=True, timeout=timeout
    )
    (out / "llama-bench.log").write_text(proc.stderr[-200000:])
    if proc.returncode != 0:
        log(f"llama-bench failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return []
    rows = json.loads(proc.stdout)
    log(f"llama-bench: {len(rows)} results in {time.perf_counter() - t0:.1f} s")
    return rows


def lb_test_name(row: dict[str, Any]) -> str:
    parts = []
    if row["n_prompt"]:
        parts.append(f"pp{row['n_prompt']}")
    if row["n_gen"]:
        parts.append(f"tg{row['n_gen']}")
    name = "+".join(parts)
    return f"{name}@d{row['n_depth']}" if row.get("n_depth") else name


# -- fidelity and roofline -------------------------------------------------------------------
def bytes_per_token(
    gguf: dict[str, Any], context: float, type_kv_bytes: float = 2.0
) -> float:
    """Bytes one decode step reads: every weight (the embedding matrix only when tied, since
    it is then the output projection; an untied one is a row lookup) plus the KV cache of
    ``context`` tokens (K and V, f16)."""
    weights = float(sum(gguf.get("tensor_bytes_by_type", {}).values()))
    emb = gguf.get("_token_embd_bytes")
    if emb and not gguf.get("_tied"):
        weights -= emb
    n_layer = gguf.get("block_count") or 0
    n_kv = (gguf.get("head_count_kv") or 0) * (gguf.get("key_length") or 0)
    kv = 2.0 * n_layer * n_kv * type_kv_bytes * context
    return weights + kv


def embedding_facts(path: str) -> dict[str, Any]:
    from gguf import GGUFReader

    r = GGUFReader(path, "r")
    names = {t.name: int(t.n_bytes) for t in r.tensors}
    return {
        "_token_embd_bytes": names.get("token_embd.weight", 0),
        "_tied": "output.weight" not in names,
    }


def fidelity(
    ours: list[dict[str, Any]], lb_rows: list[dict[str, Any]], bandwidth: float | None
) -> list[dict[str, Any]]:
    lb: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in (
        lb_rows
    ):  # keyed by split mode too: one file runs on one GPU and split over several
        lb.setdefault(
            (
                Path(r["model_filename"]).name,
                lb_test_name(r),
                r.get("split_mode") or "layer",
            ),
            [],
        ).append(r)
    out = []
    for d in sorted(ours, key=lambda d: (d["model"]["name"], d["test"]["name"])):
        if (
            d["status"] != "ok"
            or d["test"]["kind"] != "rate"
            or d.get("backend", LLAMA_CPP) != LLAMA_CPP
        ):
            continue
        s = d["summary"]["tokens_per_second"]
        split = d["settings"]["effective"].get("split_mode") or "layer"
        row: dict[str, Any] = {
            "model": d["model"]["name"],
            "test": d["test"]["name"],
            "artifact": d["id"],
            "ours_ts": s["mean"],
            "ours_stddev": s["stddev"],
            "ours_n": s["n"],
            "quantization": d["model"]["gguf"].get("quantization"),
            "n_gpu_layers": d["settings"]["effective"].get("n_gpu_layers"),
            "flash_attn": d["settings"]["effective"].get("flash_attn"),
            "split_mode": split,
            "gpus_used": d["settings"]["effective"].get("gpus_used"),
        }
        rs = lb.get((d["model"]["file_name"], d["test"]["name"], split))
        if rs:  # llama-bench's figure: the mean of its rounds' avg_ts (each round: -r repetitions)
            ts = sum(r["avg_ts"] for r in rs) / len(rs)
            row.update(
                llama_bench_ts=ts,
                llama_bench_rounds=[r["avg_ts"] for r in rs],
                llama_bench_stddev=[r["stddev_ts"] for r in rs],
                ratio=s["mean"] / ts,
                ratio_per_round=[s["mean"] / r["avg_ts"] for r in rs],
                # medians of the per-repetition rates: robust to one disturbed repetition
                ratio_median=s["median"]
                / statistics.median(
                    [x for r in rs for x in (r.get("samples_ts") or [r["avg_ts"]])]
                ),
                # like for like: our first k repetitions against llama-bench's k. Both methods time a
                # slow first repetition after the warm-up (prefill at ~65% of the steady rate on an
                # H200); llama-bench averages it over its 5, we over up to 30 (the precision rule),
                # so means of unequal counts differ where medians agree (issue 29).
                ratio_same_n=_same_n_ratio(d, rs),
                llama_bench_n_gpu_layers=rs[0].get("n_gpu_layers"),
                llama_bench_flash_attn=rs[0].get("flash_attn"),
            )
        t = d["test"]
        if bandwidth and t.get("n_gen") and not t.get("n_prompt"):
            gg = (
                {**d["model"]["gguf"], **embedding_facts(d["_model_path"])}
                if d.get("_model_path")
                else d["model"]["gguf"]
            )
            per_tok = bytes_per_token(gg, t.get("n_depth", 0) + t["n_gen"] / 2)
            bound = bandwidth / per_tok
            row.update(
                bytes_per_token=per_tok,
                roofline_bound_ts=bound,
                roofline_efficiency=s["mean"] / bound,
            )
        out.append(row)
    return out


def _same_n_ratio(d: dict[str, Any], rs: list[dict[str, Any]]) -> float | None:
    """Mean of our first k repetitions over llama-bench's mean, k = its repetitions per round."""
    ours = (d.get("samples") or {}).get("ts") or []
    k = len(rs[0].get("samples_ts") or [])
    if not k or len(ours) < k:
        return None
    lb = statistics.mean(x for r in rs for x in r.get("samples_ts") or [])
    return statistics.mean(ours[:k]) / lb


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        (
            f"{'model':28s} {'test':14s} {'ours t/s':>10s} {'llama-bench':>12s} "
            f"{'ratio (per round)':>7s} {'bound t/s':>10s} {'eff':>6s}"
        )
    ]
    for r in rows:
        lbv = f"{r['llama_bench_ts']:12.1f}" if "llama_bench_ts" in r else f"{'-':>12s}"
        ratio = f"{r['ratio']:7.3f}" if "ratio" in r else f"{'-':>7s}"
        if "ratio_median" in r:
            ratio += f" med {r['ratio_median']:.3f}"
        if r.get("ratio_same_n") is not None:
            ratio += f" same-n {r['ratio_same_n']:.3f}"
        if len(r.get("ratio_per_round", [])) > 1:
            ratio += " (" + "/".join(f"{x:.3f}" for x in r["ratio_per_round"]) + ")"
        bound = (
            f"{r['roofline_bound_ts']:10.0f}"
            if "roofline_bound_ts" in r
            else f"{'-':>10s}"
        )
        eff = (
            f"{r['roofline_efficiency']:6.1%}"
            if "roofline_efficiency" in r
            else f"{'-':>6s}"
        )
        lines.append(
            f"{r['model']:28s} {r['test']:14s} {r['ours_ts']:10.1f} {lbv} {ratio} {bound} {eff}".rstrip()
        )
    return "\n".join(lines)


# -- host artifact ----------------------------------------------------------------------------------
def host_artifact(
    fp: dict[str, Any], bw: dict[str, Any], created: str
) -> dict[str, Any]:
    """A ``host`` artifact (probe kind gpu_memory_bandwidth) from the bandwidth measurement."""
    from gpu_bandwidth import host_bandwidth

    from core.records import host as host_record

    return host_record.new_host(
        fingerprint=fp,
        created=created,
        probe={
            "kind": host_record.GPU_MEMORY,
            "version": 1,
            "device": bw["device"],
            "method": bw["method"]
            + f"; {bw['buffer_bytes']} bytes per buffer, one untimed warm-up series of "
            "3 copies; buffers filled with random data; the copy checked",
            "tool": f"benchmarks/gpu_bandwidth.py ({bw['library']})",
            "buffer_bytes": bw["buffer_bytes"],
            "repetitions": bw["iterations"],
            "warmup": True,
            "bytes_counted": "read + written",
            **(
                {
                    "read_method": bw["read"]["method"]
                    + "; one untimed warm-up series of 3 sums; two sums compared",
                    "read_bytes_counted": "read",
                }
                if bw.get("read")
                else {}
            ),
        },
        bandwidth=host_bandwidth(bw),
        read_bandwidth=host_bandwidth(bw["read"]) if bw.get("read") else None,
        conditions={"logical_cores": fp["cpu"].get("logical_cores")},
    )


def write_host_artifact(
    fp: dict[str, Any], bw: dict[str, Any], created: str, data: Path
) -> Path | None:
    from core import artifacts

    if "host" not in artifacts.ARTIFACT_TYPES:
        return None
    from core.records import host as host_record

    doc = host_artifact(fp, bw, created)
    return artifacts.write(
        host_record.artifact_path(doc, data / "hosts", "gpu-bandwidth"), doc
    )


# -- main ---------------------------------------------------------------------------------------
def pack_runs(data: Path, out: Path) -> None:
    """data/runs and data/hosts in one file (the lender returns at most 8 files)."""
    tmp = out / ".runs.tar.gz"
    with tarfile.open(tmp, "w:gz") as tar:
        for sub in ("runs", "hosts"):
            if (data / sub).exists():
                tar.add(data / sub, arcname=sub)
    tmp.replace(out / "runs.tar.gz")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/almanac-gpu"))
    ap.add_argument(
        "--matrix",
        action="append",
        default=[],
        help="matrix file(s), in order; later ones are optional",
    )
    ap.add_argument("--llama-bench", type=Path, default=None)
    ap.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="epoch seconds after which optional stages are skipped",
    )
    ap.add_argument("--no-bandwidth", action="store_true")
    ap.add_argument("--bandwidth-gib", type=float, default=4.0)
    a = ap.parse_args(argv)
    matrices = a.matrix or [str(ROOT / "data/matrices/gpu-synthetic.yaml")]
    out = a.out
    out.mkdir(parents=True, exist_ok=True)
    data = a.work / "data"
    os.environ["ALMANAC_DATA"] = str(data)
    os.environ.setdefault("ALMANAC_CACHE", str(a.work / "cache"))
    (data / "runs").mkdir(parents=True, exist_ok=True)

    from runtime.backends.llama_cpp.backend import physical_cores
    from runtime.execution import matrix as matrix_mod
    from runtime.execution import runner
    from runtime.hosts import fingerprint as hostinfo

    fp = hostinfo.fingerprint()
    (out / "host.json").write_text(json.dumps(fp, indent=1))
    log(
        f"host {fp['id']}: {fp['cpu']['model']}; GPUs: {[g['name'] for g in fp['gpus']]}"
    )

    bandwidth = None
    if not a.no_bandwidth:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks/gpu_bandwidth.py"),
                "--gib",
                str(a.bandwidth_gib),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode == 0:
            bw = json.loads(proc.stdout)
            bw["host_id"] = fp["id"]
            bw["created"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
            write_host_artifact(fp, bw, bw["created"], data)
            (out / "bandwidth.json").write_text(json.dumps(bw, indent=1))
            bandwidth = bw["median_bytes_per_s"]
            log(
                f"bandwidth: median {bandwidth / 1e9:.0f} GB/s (max "
                f"{bw['max_bytes_per_s'] / 1e9:.0f}) over {bw['iterations']} copies"
            )
            if bw.get("read"):
                log(
                    f"read bandwidth: median {bw['read']['median_bytes_per_s'] / 1e9:.0f} GB/s "
                    f"(max {bw['read']['max_bytes_per_s'] / 1e9:.0f}) over {bw['read']['iterations']} sums"
                )
        else:
            log(f"bandwidth measurement failed: {proc.stderr[-1500:]}")

    lb_rows: list[dict[str, Any]] = []
    ours: list[dict[str, Any]] = []
    paths: dict[str, str] = {}
    for i, mfile in enumerate(matrices):
        if i > 0 and a.deadline and time.time() > a.deadline:
            log(f"skipping {mfile}: past the deadline")
            continue
        m = matrix_mod.load(mfile)
        all_names = list(dict.fromkeys(m.spec.models))
        facts = ensure_models(all_names, a.work / "models", data / "models.yaml")
        names = [n for n in all_names if n in facts]
        paths.update({n: f["path"] for n, f in facts.items()})
        if not names:
            log(f"skipping {mfile}: none of its models is available here")
            continue
        mfile = matrix_for(mfile, names, all_names, a.work)

        def on_event(kind: str, info: dict[str, Any]) -> None:
            if kind == "done":
                summ = info.get("summary") or {}
                figures = [
                    (name, summ.get(name) or {})
                    for name in (
                        "tokens_per_second",
                        "ttft_ms",
                        "cold_ttft_ms",
                        "prefill_j_per_token",
                        "decode_j_per_token",
                    )
                ]
                tail = "; ".join(
                    f"{name} {s['mean']:.4g} (sd {s.get('stddev') or 0:.3g}, n={s.get('n')})"
                    for name, s in figures
                    if s.get("mean") is not None
                )
                if info.get("status") != "ok":
                    tail = f"FAILED {info.get('error')}"
                log(
                    f"[{info['index']}/{info['total']}] {info['model']} {info['test']}: {tail}"
                )
                pack_runs(
                    data, out
                )  # what finished comes back even if the call is cut short

        def bench(round_no: int, m=m, names=names, facts=facts) -> None:
            # llama-bench beside the llama.cpp backend only (another backend's matrix has no llama-bench twin)
            if (
                not (a.llama_bench and a.llama_bench.exists())
                or not any(t.kind == "rate" for t in m.tests)
                or m.spec.backend != LLAMA_CPP
            ):
                return
            threads = m.spec.settings.get("n_threads") or physical_cores()
            for n in (
                names
            ):  # one process per model, as our runner isolates each configuration
                rows = run_llama_bench(
                    a.llama_bench,
                    llama_bench_args(m, [facts[n]["path"]], threads),
                    out,
                    timeout=600,
                )
                lb_rows.extend(dict(r, almanac_round=round_no) for r in rows)
            (out / "llama-bench.json").write_text(json.dumps(lb_rows, indent=1))

        bench(
            1
        )  # llama-bench before and after ours: an order or warm-up effect shows as a gap between rounds
        t0 = time.perf_counter()
        report = runner.run_matrix(mfile, on_event=on_event)
        log(
            f"matrix {m.name} ({Path(mfile).name}): {len(report.measured)} measured, {len(report.failed)} failed, "
            f"{len(report.skipped)} skipped in {time.perf_counter() - t0:.0f} s"
        )
        pack_runs(data, out)
        bench(2)

    from core import artifacts

    for _, doc in artifacts.iter_artifacts(data / "runs", "run"):
        doc = dict(doc)
        doc["_model_path"] = paths.get(doc["model"]["name"])
        ours.append(doc)
    rows = fidelity(ours, lb_rows, bandwidth)
    summary = {
        "bandwidth_bytes_per_s": bandwidth,
        "host_id": fp["id"],
        "rows": rows,
        "llama_bench_build_commit": sorted({r.get("build_commit") for r in lb_rows})
        if lb_rows
        else [],
    }
    (out / "fidelity.json").write_text(json.dumps(summary, indent=1))
    print(table(rows), flush=True)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        log(
            f"fidelity ours/llama-bench: min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} points"
        )
    print(backends_table(ours), flush=True)
    return 0


def backends_table(docs: list[dict[str, Any]]) -> str:
    """In-process backends against llama.cpp on the same file (pipelines.backends), as text."""
    try:
        from pipelines.backends import backend_comparisons
    except ImportError:  # pipelines not carried
        return ""
    lines = []
    for g in backend_comparisons(
        [{k: v for k, v in d.items() if not k.startswith("_")} for d in docs]
    ):
        lines.append(
            f"{g['candidate']} / {g['baseline']} on {g['model']} ({g['host']}):"
        )
        for r in g["rows"]:
            ci = (
                f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]"
                if r["ci95_low"] is not None
                else "[-]"
            )
            lines.append(
                f"  {r['what']:34s} {r['baseline_mean']:12.5g} {r['candidate_mean']:12.5g} {r['unit']:8s} "
                f"ratio {r['ratio']:.3f} {ci} n={r['n_baseline']}/{r['n_candidate']} {r['verdict']}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
