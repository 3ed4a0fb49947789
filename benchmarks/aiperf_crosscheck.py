"""Cross-check against an anchor (issue 31, item 8): one workload measured by our load generator and
by NVIDIA's AIPerf against the same llama-server, interleaved (ours, AIPerf, ours, AIPerf ...), at a
request rate (AIPerf's scheduler spins at half a core or more in concurrency mode on 2 cores and
slows the server; at a rate it idles between sends).

    python3 -m venv /work/wt/traffic-venvs/aiperf && /work/wt/traffic-venvs/aiperf/bin/pip install aiperf
    flock -w 3600 /tmp/almanac-measure.lock python3 benchmarks/aiperf_crosscheck.py \
        --aiperf /work/wt/traffic-venvs/aiperf/bin/aiperf [--rate 0.5] [--requests 20] [--rounds 3]

Writes benchmarks/results/aiperf_crosscheck.json (every run's figures) and .md (the table). The
server: the embedded Gemma 3 270M behind llama-server -np 4 on loopback, started here once for
every run (warm after the first: each tool's prompts are its own, so no prompt is reused).

Definitions side by side (each tool's own docs):

* TTFT: ours, request sent -> first content chunk; AIPerf's ``time_to_first_token``, the same.
* ITL: ours, the mean gap between consecutive content chunks over all of a run's gaps; AIPerf's
  ``inter_token_latency`` is per request (E2E - TTFT) / (output tokens - 1), averaged over requests:
  that is our TPOT, and the table compares it with our TPOT (and our chunk ITL beside it).
* E2E: ours, sent -> last byte; AIPerf's ``request_latency``, the same.
* Throughput: ours, output tokens / the level's wall time (first send -> last end); AIPerf's
  ``output_token_throughput``, output tokens / its benchmark duration.

AIPerf gets the model's own tokenizer, offline: benchmarks/gguf_tokenizer.py builds a Hugging Face
tokenizer folder from the GGUF's vocabulary with AIPerf's python (gguf, tokenizers; no torch, no
hub), identical to llama.cpp's tokenization on 303 of 303 test texts, so AIPerf's ``--isl`` prompts
are that many Gemma tokens, as ours are. (An earlier run fed it a word-level stand-in: its prompts
were mostly "[UNK]".) ``--use-server-token-count`` takes every count from the server's usage.

The server's own view: llama-server's /metrics counters are read before and after every run (the
runs never overlap), so each run also gets the server's prefill time per request
(``prompt_seconds_total`` / requests), its generation time per token (``tokens_predicted_seconds_total``
/ ``tokens_predicted_total``) and its prompt-cache share. Each tool's TTFT divided by the server's
prefill time, and its TPOT by the server's time per token, says whether the tools measure the same
thing: the ratios agree when they do, whatever the host's load did to the server between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results"


def start_server(port: int) -> subprocess.Popen:
    from runtime.backends.openai_http import llama_server

    binary = llama_server.cached_builds()[0]["server_binary"]
    model = MODEL
    cmd = [
        binary,
        "--model",
        str(model),
        "--alias",
        "gemma3-270m-q4_k_m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    cmd += [
        "--threads",
        "2",
        "--ctx-size",
        "4096",
        "--parallel",
        "4",
        "--metrics",
        "--no-webui",
        "--no-jinja",
    ]
    cmd += ["--chat-template", "gemma"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import httpx

    for _ in range(600):
        try:
            if (
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code
                == 200
            ):
                return p
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    p.kill()
    raise SystemExit("llama-server did not come up")


def ours(port: int, rate: float, n: int, isl: int, osl: int, seed: int) -> dict:
    from core.kinds import parse_test
    from runtime.backends.openai_http.backend import OpenAIHttpBackend
    from runtime.backends.openai_http.config import OpenAIHttpSettings

    test = parse_test(
        {
            "kind": "load",
            "profile": "constant",
            "levels": [rate],
            "requests": n,
            "warmup_requests": 0,
            "telemetry_interval_s": None,
            "workload": {"prompt_tokens": isl, "output_tokens": osl, "seed": seed},
            "slo": {"percentile": 50, "ttft_ms": 600000, "tpot_ms": None},
        }
    )
    b = OpenAIHttpBackend(
        None,
        OpenAIHttpSettings(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_model="gemma3-270m-q4_k_m",
            retries=0,
            read_timeout_s=300,
            request_timeout_s=600,
        ),
    )
    try:
        b.load(test)
        res = b.run(test)
    finally:
        b.close()
    lv = res.samples["levels"][0]
    recs = [r for r in lv["requests"] if r.get("ok")]
    s = res.details["summary"]["levels"][0]
    gaps = [b - a for r in recs for a, b in zip(r["chunk_ms"], r["chunk_ms"][1:])]
    return {
        "tool": "ours",
        "ok": len(recs),
        "requests": len(lv["requests"]),
        "ttft_ms": statistics.mean(r["ttft_ms"] for r in recs),
        "tpot_ms": statistics.mean(
            r["tpot_ms"] for r in recs if r.get("tpot_ms") is not None
        ),
        "itl_chunk_ms": statistics.mean(gaps) if gaps else None,
        "e2e_ms": statistics.mean(r["e2e_ms"] for r in recs),
        "output_tps": s["aggregate_tps"],
        "prompt_tokens_server": statistics.mean(
            r["prompt_tokens"] for r in recs if r.get("prompt_tokens")
        ),
        "output_tokens_server": statistics.mean(r["output_tokens"] for r in recs),
        "client_cpu_share": (lv.get("client") or {}).get("cpu_s", 0) / lv["wall_s"]
        if lv.get("wall_s")
        else None,
    }


MODEL = (
    Path.home() / ".cache" / "inference-almanac" / "models" / "gemma-3-270m-q4_k_m.gguf"
)


def ensure_tokenizer(aiperf_bin: str, dest: Path) -> Path:
    """The model's own tokenizer as a Hugging Face folder (benchmarks/gguf_tokenizer.py), made once with
    AIPerf's python."""
    if not (dest / "tokenizer.json").exists():
        py = str(Path(aiperf_bin).with_name("python"))
        subprocess.run(
            [py, str(ROOT / "benchmarks" / "gguf_tokenizer.py"), str(MODEL), str(dest)],
            check=True,
        )
    return dest


COUNTERS = (
    "llamacpp:prompt_seconds_total",
    "llamacpp:prompt_tokens_total",
    "llamacpp:tokens_predicted_seconds_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:n_decode_total",
)


def counters(port: int) -> dict[str, float]:
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in COUNTERS:
            out[parts[0]] = float(parts[1])
    return out


def server_view(before: dict, after: dict, run: dict) -> dict:
    """The server's own figures over one run (its counters' deltas) and each tool figure divided by them."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in COUNTERS}
    n = run.get("ok") or 0
    prefill_ms = 1000.0 * d["llamacpp:prompt_seconds_total"] / n if n else None
    per_token_ms = (
        1000.0
        * d["llamacpp:tokens_predicted_seconds_total"]
        / d["llamacpp:tokens_predicted_total"]
        if d["llamacpp:tokens_predicted_total"]
        else None
    )
    sent = (run.get("prompt_tokens_server") or 0) * n
    out = {
        "server_prefill_ms": prefill_ms,
        "server_ms_per_token": per_token_ms,
        "server_prompt_tokens_computed": d["llamacpp:prompt_tokens_total"],
        "server_cached_share": 1.0 - d["llamacpp:prompt_tokens_total"] / sent
        if sent
        else None,
        "server_tokens_predicted": d["llamacpp:tokens_predicted_total"],
    }
    if prefill_ms and run.get("ttft_ms") is not None:
        out["ttft_over_server"] = run["ttft_ms"] / prefill_ms
    if per_token_ms and run.get("tpot_ms") is not None:
        out["tpot_over_server"] = run["tpot_ms"] / per_token_ms
    return out


def _metric(d: dict, *names: str) -> float | None:
    for n in names:
        v = d.get(n)
        if isinstance(v, dict) and v.get("avg") is not None:
            return float(v["avg"])
    return None


def aiperf(
    binary: str,
    tokenizer: Path,
    port: int,
    rate: float,
    n: int,
    isl: int,
    osl: int,
    seed: int,
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            binary,
            "profile",
            "--model",
            "gemma3-270m-q4_k_m",
            "--url",
            f"http://127.0.0.1:{port}",
        ]
        cmd += [
            "--endpoint-type",
            "chat",
            "--streaming",
            "--tokenizer",
            str(tokenizer),
            "--use-server-token-count",
        ]
        cmd += [
            "--use-legacy-max-tokens",
            "--arrival-pattern",
            "constant",
            "--request-rate",
            str(rate),
        ]
        cmd += [
            "--request-count",
            str(n),
            "--isl",
            str(isl),
            "--osl",
            str(osl),
            "--random-seed",
            str(seed),
        ]
        cmd += [
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            f"min_tokens:{osl}",
            "--artifact-dir",
            tmp,
        ]
        cmd += ["--ui-type", "none", "--no-auto-plot"]
        t0 = time.perf_counter()
        r0 = os.times()
        p = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=1800
        )
        r1 = os.times()
        wall = time.perf_counter() - t0
        found = list(Path(tmp).rglob("*aiperf*.json"))
        data = None
        for f in found:
            try:
                obj = json.loads(f.read_text())
            except ValueError:
                continue
            if isinstance(obj, dict) and any(
                k in obj for k in ("time_to_first_token", "records")
            ):
                data = (
                    obj.get("records", obj)
                    if isinstance(obj.get("records"), dict)
                    else obj
                )
                break
        if data is None:
            tail = (p.stdout + p.stderr)[-1500:]
            raise SystemExit(f"aiperf wrote no summary (rc {p.returncode}): {tail}")
    return {
        "tool": "aiperf",
        "ok": _metric(data, "request_count"),
        "ttft_ms": _metric(data, "time_to_first_token", "ttft"),
        "tpot_ms": _metric(data, "inter_token_latency", "itl"),
        "itl_chunk_ms": _metric(data, "inter_chunk_latency"),
        "e2e_ms": _metric(data, "request_latency"),
        "output_tps": _metric(data, "output_token_throughput"),
        "prompt_tokens_server": _metric(data, "input_sequence_length"),
        "output_tokens_server": _metric(data, "output_sequence_length"),
        "client_cpu_share": (
            (r1.children_user - r0.children_user)
            + (r1.children_system - r0.children_system)
        )
        / wall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiperf", default="/work/wt/traffic-venvs/aiperf/bin/aiperf")
    ap.add_argument("--rate", type=float, default=0.5)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--isl", type=int, default=64)
    ap.add_argument("--osl", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument(
        "--tokenizer",
        default="/work/wt/traffic-venvs/gemma3-270m-tokenizer",
        help="where the model's tokenizer folder is made once (benchmarks/gguf_tokenizer.py)",
    )
    a = ap.parse_args()
    tok = ensure_tokenizer(a.aiperf, Path(a.tokenizer))
    load0 = os.getloadavg()[0]
    srv = start_server(a.port)
    runs = []

    def one(fn, k: int) -> None:
        before = counters(a.port)
        run = fn()
        run.update(
            server_view(before, counters(a.port), run), round=k, load=os.getloadavg()[0]
        )
        runs.append(run)
        print(json.dumps(run), flush=True)

    try:
        for k in range(a.rounds):
            one(lambda k=k: ours(a.port, a.rate, a.requests, a.isl, a.osl, seed=k), k)
            one(
                lambda k=k: aiperf(
                    a.aiperf, tok, a.port, a.rate, a.requests, a.isl, a.osl, seed=k
                ),
                k,
            )
    finally:
        srv.terminate()
        srv.wait(30)
    out = {
        "what": "our load generator vs AIPerf at a request rate, interleaved, same llama-server -np 4 (Gemma 3 270M)",
        "rate_rps": a.rate,
        "requests": a.requests,
        "isl": a.isl,
        "osl": a.osl,
        "tokenizer": "the GGUF's own (benchmarks/gguf_tokenizer.py)",
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg()[0],
        "runs": runs,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "aiperf_crosscheck.json").write_text(
        json.dumps(out, indent=1, sort_keys=True) + "\n"
    )
    print("\n".join(table(runs)))
    return 0


KEYS = (
    "ttft_ms",
    "server_prefill_ms",
    "ttft_over_server",
    "tpot_ms",
    "server_ms_per_token",
    "tpot_over_server",
    "itl_chunk_ms",
    "e2e_ms",
    "output_tps",
    "prompt_tokens_server",
    "server_cached_share",
    "client_cpu_share",
)


def table(runs: list[dict]) -> list[str]:
    """The runs as a Markdown table, one row a run."""
    lines = [
        "| round | tool | " + " | ".join(KEYS) + " | load |",
        "|" + "---|" * (len(KEYS) + 3),
    ]
    for r in runs:
        cells = [
            f"{r[k]:.3g}" if isinstance(r.get(k), (int, float)) else "—" for k in KEYS
        ]
        lines.append(
            f"| {r['round']} | {r['tool']} | "
            + " | ".join(cells)
            + f" | {r['load']:.1f} |"
        )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
