"""Check our perplexity and KL-divergence against llama.cpp's llama-perplexity.

Both on the same text, context and model files: llama-perplexity built from the llama.cpp
source vendored in the pinned llama-cpp-python (benchmarks/llama_bench_build.py). Runs

1. ``llama-perplexity -m SOURCE -f TEXT -c N -b N --kl-divergence-base BASE.kld`` (PPL of the
   source, and its logits saved for the KL-divergence),
2. ``llama-perplexity -m VARIANT -f TEXT -c N -b N --kl-divergence-base BASE.kld --kl-divergence``,

and ours (``runtime.quality.perplexity.measure``; an existing artifact of the same inputs is
reused), then prints each figure side by side and whether ours lies within llama-perplexity's
standard error. Weight repacking follows the same policy in both (``--no-repack`` where
``runtime.backends.llama_cpp.lib_policy`` turns extra buffer types off for the in-process runs). The result goes to
``benchmarks/results/perplexity_check.json``.

    python benchmarks/perplexity_check.py [--bin DIR] [--ctx 512] [--variant gemma3-270m-q3_k_m]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import artifacts  # noqa: E402
from core.paths import relpath  # noqa: E402
from runtime.backends.llama_cpp import lib_policy as llamacpp_lib  # noqa: E402
from runtime.models import registry as models  # noqa: E402
from runtime.quality import perplexity  # noqa: E402

NUM = r"([0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)"


def parse_ppl(log: str) -> dict[str, float]:
    m = re.search(rf"Final estimate: PPL = {NUM} \+/- {NUM}", log)
    if not m:
        raise SystemExit("llama-perplexity printed no final estimate:\n" + log[-3000:])
    return {"ppl": float(m.group(1)), "ppl_se": float(m.group(2))}


def parse_kld(log: str) -> dict[str, float]:
    out = {}
    for key, label in (
        ("ppl", r"Mean PPL\(Q\)\s*"),
        ("ppl_reference", r"Mean PPL\(base\)\s*"),
        ("kld_mean", r"Mean\s+KLD"),
    ):
        m = re.search(rf"{label}:\s*{NUM}\s*±\s*{NUM}", log)
        if not m:
            raise SystemExit(f"llama-perplexity printed no {label!r}:\n" + log[-3000:])
        out[key], out[key + "_se" if key != "kld_mean" else "kld_se"] = (
            float(m.group(1)),
            float(m.group(2)),
        )
    m = re.search(rf"Same top p:\s*{NUM}\s*±\s*{NUM}\s*%", log)
    out["same_top"], out["same_top_se"] = (
        float(m.group(1)) / 100,
        float(m.group(2)) / 100,
    )
    m = re.search(rf"Median\s+KLD:\s*{NUM}", log)
    out["kld_median"] = float(m.group(1))
    return out


def run(cmd: list[str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{log[-3000:]}")
    return log, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--bin",
        help="folder of the built llama.cpp tools (default: the path in /tmp/llama-tools.ready)",
    )
    ap.add_argument("--source", default="gemma3-270m-q4_k_m")
    ap.add_argument("--variant", default="gemma3-270m-q3_k_m")
    ap.add_argument("--text", default="gpl-3.0")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "perplexity_check.json")
    )
    a = ap.parse_args()
    bin_dir = Path(a.bin or Path("/tmp/llama-tools.ready").read_text().strip())
    tool = bin_dir / "llama-perplexity"
    if not tool.is_file():
        raise SystemExit(f"no llama-perplexity in {bin_dir}")
    src, var = models.resolve(a.source), models.resolve(a.variant)
    text = perplexity.load_text(a.text)

    ours_ppl_path, _ = perplexity.measure(a.source, text=a.text, n_ctx=a.ctx)
    ours_kld_path, _ = perplexity.measure(
        a.variant, reference=a.source, text=a.text, n_ctx=a.ctx
    )
    ours_ppl = artifacts.load(ours_ppl_path)["results"]
    ours_kld = artifacts.load(ours_kld_path)["results"]

    common = [
        "-f",
        str(text.path),
        "-c",
        str(a.ctx),
        "-b",
        str(a.ctx),
        "-t",
        str(a.threads),
    ]
    import llama_cpp

    if not llamacpp_lib.decide(
        llama_cpp.llama_print_system_info().decode(errors="replace")
    )["use_extra_bufts"]:
        common.append("--no-repack")
    with tempfile.TemporaryDirectory(prefix="ppl-check-") as td:
        base = str(Path(td) / "base.kld")
        cmd1 = [str(tool), "-m", src.path] + common + ["--kl-divergence-base", base]
        log1, s1 = run(cmd1)
        cmd2 = (
            [str(tool), "-m", var.path]
            + common
            + ["--kl-divergence-base", base, "--kl-divergence"]
        )
        log2, s2 = run(cmd2)
    theirs_ppl = parse_ppl(log1)
    theirs_kld = parse_kld(log2)

    rows = []

    def compare(
        what: str, ours: float, ours_se: float, theirs: float, theirs_se: float
    ) -> None:
        diff = ours - theirs
        rows.append(
            {
                "figure": what,
                "ours": ours,
                "ours_se": ours_se,
                "llama_perplexity": theirs,
                "llama_perplexity_se": theirs_se,
                "difference": diff,
                "within_their_se": abs(diff) <= theirs_se,
            }
        )

    compare(
        f"PPL {a.source}",
        ours_ppl["ppl"],
        ours_ppl["ppl_se"],
        theirs_ppl["ppl"],
        theirs_ppl["ppl_se"],
    )
    compare(
        f"PPL {a.variant}",
        ours_kld["ppl"],
        ours_kld["ppl_se"],
        theirs_kld["ppl"],
        theirs_kld["ppl_se"],
    )
    compare(
        f"KLD {a.variant} vs {a.source}",
        ours_kld["kld_mean"],
        ours_kld["kld_se"],
        theirs_kld["kld_mean"],
        theirs_kld["kld_se"],
    )
    compare(
        f"same top token {a.variant} vs {a.source}",
        ours_kld["same_top"],
        ours_kld["same_top_se"],
        theirs_kld["same_top"],
        theirs_kld["same_top_se"],
    )
    result = {
        "text": text.to_dict(),
        "n_ctx": a.ctx,
        "source": {"name": src.name, "sha256": src.sha256},
        "variant": {
            "name": var.name,
            "sha256": var.sha256,
            "derived": var.facts.get("derived"),
        },
        "ours": {
            "ppl_artifact": relpath(ours_ppl_path),
            "kld_artifact": relpath(ours_kld_path),
            "n_scored_tokens": ours_kld["n_scored_tokens"],
        },
        "llama_perplexity": {
            "commands": [" ".join(cmd1), " ".join(cmd2)],
            "seconds": [round(s1, 1), round(s2, 1)],
            "kld_median": theirs_kld["kld_median"],
            "log_tail": log2[-2500:],
        },
        "rows": rows,
        "all_within_their_se": all(r["within_their_se"] for r in rows),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(
        f"{'figure':50s} {'ours':>22s} {'llama-perplexity':>22s} {'diff':>10s}  within SE"
    )
    for r in rows:
        print(
            f"{r['figure']:50s} {r['ours']:>12.6f} ± {r['ours_se']:<8.6f} {r['llama_perplexity']:>12.6f} ± "
            f"{r['llama_perplexity_se']:<8.6f} {r['difference']:>+10.6f}  {'yes' if r['within_their_se'] else 'NO'}"
        )
    print(f"-> {relpath(Path(a.out))}")
    return 0 if result["all_within_their_se"] else 1


if __name__ == "__main__":
    sys.exit(main())
