"""Seed 004's two tables from the committed artifacts: backend quality parity and the agent-loop matrix.

    python benchmarks/seed004_tables.py            # both tables as Markdown, from data/
    python benchmarks/seed004_tables.py --measure  # run the two measurements first (through the tasks)

The measurements themselves are the project's tasks (artifacts under data/): ``invoke quality
--matrix quality-parity`` (the same 138 items through llama.cpp in process, llama_cpp.server
with and without flash attention, and llama-server) and ``invoke bench --matrix agent-loops``
(six fault profiles x tools internal/external, behind llama-server and llama_cpp.server). This
script prints what the Quality and Agent loops pages show, in plain Markdown, for quoting.
Run the measurements under ``flock -x /tmp/almanac-cpu.lock`` on a shared machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def pp(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:+.1f} pp"


def parity_table() -> str:
    from pipelines import parity, quality

    groups = parity.parity_groups(quality.load_quality())
    lines = [
        "| backend (vs llama.cpp in process) | items | identical output | same verdict | pass rate ref → backend "
        "| Δ (CI95) | discordant ref/backend | McNemar p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in parity.overall(groups):
        lo, hi = o.delta_ci
        p = "—" if o.p_value is None else f"{o.p_value:.3f}"
        lines.append(
            f"| {o.other} | {o.n} | {o.identical_output} ({pct(o.identical_output / o.n)}) | {o.same_verdict} "
            f"| {pct(o.ref_passed / o.n)} → {pct(o.other_passed / o.n)} | {pp(o.delta)} ({pp(lo)} … {pp(hi)}) "
            f"| {o.b}/{o.c} | {p} | {o.verdict} |"
        )
    lines += [
        "",
        "| suite | backend | items | identical | same verdict | ref/backend only |",
        "|---|---|---|---|---|---|",
    ]
    for g in groups:
        for pr in g.pairs:
            lines.append(
                f"| {g.label} | {pr.other} | {pr.n} | {pr.identical_output} | {pr.same_verdict} | {pr.b}/{pr.c} |"
            )
    return "\n".join(lines)


def agent_table() -> str:
    from pipelines import agents
    from pipelines.runs import load_runs

    out = []
    for run in agents.agent_runs(load_runs()):
        cells = {(c["profile"], c["placement"]): c for c in run.stats["cells"]}
        comps = {c["profile"]: c for c in run.stats["comparisons"]}
        out += [
            f"### {run.label} ({run.record.id})",
            "",
            "| profile | int success (CI95) | ext success (CI95) | ext−int (McNemar p) | steps int/ext "
            "| episode ms int/ext | ext/int episode (CI95) | tool call ms int/ext | ext/int tool call (CI95) "
            "| retries/ep int/ext | failed tool steps int/ext |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]

        def rate(c):
            lo, hi = c["success_ci95"]
            return f"{pct(c['success_rate'])} ({pct(lo)}–{pct(hi)})"

        def mean(s, d=1):
            return "—" if not s or not s.get("n") else f"{s['mean']:.{d}f}"

        def ratio(r):
            if not r or r.get("ratio") is None:
                return "—"
            ci = (
                f" ({r['ci95_low']:.2f}–{r['ci95_high']:.2f})"
                if r.get("ci95_low") is not None
                else ""
            )
            return f"{r['ratio']:.2f}×{ci} {r['verdict']}"

        rows = [
            (p, cells.get((p, "internal")), cells.get((p, "external")), comps.get(p))
            for p in run.stats["profiles"]
        ]
        rows.append(
            (
                "all profiles",
                run.stats["pooled"].get("internal"),
                run.stats["pooled"].get("external"),
                run.stats.get("overall"),
            )
        )
        for name, ci, ce, comp in rows:
            if not ci or not ce or not comp:
                continue
            s = comp["success"]
            sp = "—" if s["p_value"] is None else f"{s['p_value']:.3f}"
            out.append(
                f"| {name} | {rate(ci)} | {rate(ce)} | {pp(s['delta'])} ({sp}) | "
                f"{mean(ci['steps'], 2)}/{mean(ce['steps'], 2)} "
                f"| {mean(ci['loop_ms'], 0)}/{mean(ce['loop_ms'], 0)} | {ratio(comp['loop_ms'])} "
                f"| {mean(ci['tool_attempt_ms'], 2)}/{mean(ce['tool_attempt_ms'], 2)} | "
                f"{ratio(comp['tool_attempt_ms'])} "
                f"| {mean(ci['retries'], 2)}/{mean(ce['retries'], 2)} "
                f"| {pct(ci['tool_error_rate'])}/{pct(ce['tool_error_rate'])} |"
            )
        out.append("")
    return "\n".join(out) or "no agent_loop artifacts"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--measure",
        action="store_true",
        help="run invoke quality --matrix quality-parity and invoke bench "
        "--matrix agent-loops first (skips what is already measured)",
    )
    args = ap.parse_args(argv)
    if args.measure:
        for cmd in (
            ["invoke", "quality", "--matrix", "quality-parity"],
            ["invoke", "bench", "--matrix", "agent-loops"],
        ):
            subprocess.run(cmd, cwd=ROOT, check=True)
    print("## Backend quality parity\n")
    print(parity_table())
    print("\n## Agent loops under injected faults\n")
    print(agent_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
