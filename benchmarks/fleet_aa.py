"""Fleet A/A: how many false regressions does a night of a large fleet raise, and how often is a real
drop on one host still found, once every boundary of the night is judged together?

    python3 benchmarks/fleet_aa.py [--nights 40] [--hosts 200] [--configs 10] [--runs 5] [--seed 1]
                                   [--out benchmarks/results/fleet_aa]

The noise is real: the measured A/A pool of benchmarks/aa_calibration.py (benchmarks/results/aa_pool.csv:
154 runs each of pp64 and tg16, fresh processes, two labels that change nothing). Each run's deviation is
its log run mean minus its kind's median. A simulated night:

* 200 hosts; each host gets its own noise, a bootstrap resample of the pool's deviations per kind of test
  (so hosts differ as resamples of real noise do, heavy slow-run tail included), and its run-to-run noise
  estimate as `invoke noise` gives it: an A/A of ``--aa-runs`` runs drawn from that host's noise
  (core.stats.pooled_log_spread -> RunNoise);
* 10 configurations a host (half prompt processing, half generation), each at a build boundary with
  ``--runs`` runs a side drawn from its host's noise;
* a known subset of boundaries (``--changed``, default 5%) gets a real drop of 2, 5, 10, 15 or 20% (equal
  shares) on the after side; the rest are A/A.

Every boundary is judged by the project's own code, as the Regressions page judges a boundary: each side a
figure of the fact layer (core.stats.pooled_side with the host's noise), compared by
core.stats.combine_sides, the night's family held to the false discovery rate by core.stats.fleet_fdr
(core.stats.FDR_NAME at core.stats.FDR_Q), a step only if it changes by at least pipelines.history.MIN_STEP.
For contrast each boundary is also judged alone (as before the fleet control), with Benjamini–Hochberg, and
by a robust candidate (the median of the runs against a MAD-based host noise). ``--max-load`` keeps only the
pool's runs that started at a low load average: what a runner that measures again a run started under
interference would see; by default the pool is chosen by the project's quiet-machine policy (core.quiet:
a run counts when others' CPU at its priority stayed within the rule, or, for a run measured before the
policy recorded that share, by the rule's load-average fallback), the same rule the runner applies when
it decides to measure a run again. ``--pool`` picks another pool CSV (default: the noise matrix's A/A
pool, benchmarks/results/aa_pool.csv; benchmarks/results/aa_pool_builds_quiet.csv holds the builds
matrix's runs measured by the quiet runner, their shares recorded). Counts: false regressions per night (an A/A
boundary flagged as a loss), false alarms per night (flagged either way), and detection by size of the
drop (flagged as a loss), with Wilson CI95s.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import quiet, stats
from pipelines.history import MIN_STEP

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "benchmarks" / "results" / "aa_pool.csv"
# the builds matrix's runs (±5%, 3-5 repetitions) measured by the quiet policy's runner, each run's share recorded
BUILDS_POOL = ROOT / "benchmarks" / "results" / "aa_pool_builds_quiet.csv"
OUT = ROOT / "benchmarks" / "results" / "fleet_aa"
KINDS = ("pp64", "tg16")
SIZES = (0.02, 0.05, 0.10, 0.15, 0.20)
RULES = ("alone", "bh", "by", "median-bh")
RULE_NAMES = {
    "alone": "each boundary alone (before)",
    "bh": "Benjamini–Hochberg over the night",
    "by": "Benjamini–Yekutieli over the night (the site)",
    "median-bh": "median of runs, robust host noise (MAD), BH (a candidate)",
}


def median_side(means: np.ndarray, sigma: float, df: int) -> stats.SideEstimate:
    """A robust side (a candidate rule, not the site's): the median of the log run means, its variance
    (pi / 2) sigma^2 / k with sigma the host's noise from the MAD of its A/A."""
    logs = np.log(means)
    return stats.SideEstimate(
        float(np.median(logs)),
        (math.pi / 2) * sigma**2 / logs.size,
        float(df),
        logs.size,
        "median",
    )


def load_pool(
    path: Path | None = None, max_load: float | None = None
) -> dict[str, np.ndarray]:
    """Per kind of test: each run's log mean minus its group's median (real run-to-run noise; a group is
    one build, whose runs are an A/A; a group of one run says nothing and is left out). The runs
    kept are those the quiet-machine policy (core.quiet) calls quiet (the runner's own rule), unless
    ``max_load`` asks for the older filter (a 1-minute load average at most that at the start)."""
    path = path or POOL
    by: dict[str, dict[str, list[float]]] = {k: {} for k in KINDS}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["test"] not in by:
                continue
            load = (
                float(row["loadavg_1m_before"])
                if row.get("loadavg_1m_before")
                else None
            )
            if max_load is not None:
                keep = load is not None and load <= max_load
            else:
                share = row.get("others_share")
                keep = quiet.row_usable(
                    float(share) if share else None, load, int(row.get("cores") or 2)
                )
            if (
                keep
            ):  # each group (one build: its runs an A/A) centred on its own median
                by[row["test"]].setdefault(row.get("group") or "", []).append(
                    math.log(float(row["mean_tps"]))
                )
    return {
        k: np.concatenate(
            [np.asarray(v) - np.median(v) for v in g.values() if len(v) >= 2]
            or [np.zeros(0)]
        )
        for k, g in by.items()
    }


def night(
    rng: np.random.Generator,
    pool: dict[str, np.ndarray],
    hosts: int,
    configs: int,
    runs: int,
    changed: float,
    aa_runs: int,
    level: float = stats.FDR_Q,
) -> dict[str, dict[str, list]]:
    """One night: per rule, the flags of every boundary as (effect, verdict) pairs."""
    cmps: list[stats.Comparison] = []
    robust: list[stats.Comparison] = []
    effects: list[float] = []
    n = hosts * configs
    n_changed = round(n * changed)
    chosen = rng.choice(n, size=n_changed, replace=False)
    effect_of = np.zeros(n)
    effect_of[chosen] = np.resize(np.asarray(SIZES), n_changed)
    for h in range(hosts):
        own = {k: rng.choice(pool[k], size=pool[k].size, replace=True) for k in KINDS}
        noise, mad = {}, {}
        for k in KINDS:
            aa = rng.choice(own[k], size=aa_runs)
            sd, df = stats.pooled_log_spread([np.exp(aa)])
            noise[k] = stats.RunNoise(sd or 0.0, df, "simulated host A/A")
            mad[k] = 1.4826 * float(np.median(np.abs(aa - np.median(aa))))
        for c in range(configs):
            k = KINDS[c * len(KINDS) // configs]
            base = 100.0 * (1 + c)
            eff = float(effect_of[h * configs + c])
            before = base * np.exp(rng.choice(own[k], size=runs))
            after = base * (1.0 - eff) * np.exp(rng.choice(own[k], size=runs))
            cmps.append(
                stats.combine_sides(
                    stats.pooled_side(before, noise=noise[k]),
                    stats.pooled_side(after, noise=noise[k]),
                    True,
                )
            )
            robust.append(
                stats.combine_sides(
                    median_side(before, mad[k], aa_runs - 1),
                    median_side(after, mad[k], aa_runs - 1),
                    True,
                )
            )
            effects.append(eff)
    out: dict[str, dict[str, list]] = {}
    for rule in RULES:
        judged = (
            cmps
            if rule == "alone"
            else stats.fleet_fdr(robust, level, method="bh")
            if rule == "median-bh"
            else stats.fleet_fdr(cmps, level, method=rule)
        )
        verdicts = [
            c.verdict
            if c.verdict in ("win", "loss") and abs((c.ratio or 1.0) - 1.0) >= MIN_STEP
            else "none"
            for c in judged
        ]
        out[rule] = {"effects": effects, "verdicts": verdicts}
    return out


def wilson(k: int, n: int) -> str:
    lo, hi = stats.wilson_interval(k, n)
    return (
        f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" if n else "—"
    )


def mean_ci(xs: list[int]) -> str:
    a = np.asarray(xs, dtype=float)
    if a.size < 2:
        return f"{a.mean():.2f}"
    half = stats.t_critical(a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
    return f"{a.mean():.2f} [{max(0.0, a.mean() - half):.2f}, {a.mean() + half:.2f}]"


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def run(args: argparse.Namespace) -> str:
    pool_path = Path(args.pool) if args.pool else POOL
    pool = load_pool(pool_path, max_load=args.max_load)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    per_rule = {
        r: {"false_reg": [], "false_any": [], "det": {s: [0, 0] for s in SIZES}}
        for r in RULES
    }
    for _ in range(args.nights):
        res = night(
            rng,
            pool,
            args.hosts,
            args.configs,
            args.runs,
            args.changed,
            args.aa_runs,
            args.level,
        )
        for rule, d in res.items():
            fr = fa = 0
            for eff, v in zip(d["effects"], d["verdicts"]):
                if eff == 0.0:
                    fr += v == "loss"
                    fa += v != "none"
                else:
                    cnt = per_rule[rule]["det"][round(eff, 2)]
                    cnt[0] += v == "loss"
                    cnt[1] += 1
            per_rule[rule]["false_reg"].append(fr)
            per_rule[rule]["false_any"].append(fa)
    wall = time.time() - t0
    n = args.hosts * args.configs
    lines = [
        "# Fleet A/A (benchmarks/fleet_aa.py)",
        "",
        f"`python3 benchmarks/fleet_aa.py --nights {args.nights} --hosts {args.hosts} --configs {args.configs} "
        f"--runs {args.runs} --changed {args.changed:g} --aa-runs {args.aa_runs} --seed {args.seed}"
        + (f" --max-load {args.max_load:g}" if args.max_load is not None else "")
        + (f" --pool {args.pool}" if args.pool else "")
        + (f" --level {args.level:g}" if args.level != stats.FDR_Q else "")
        + "` "
        f"({wall:.0f} s).",
        "",
        f"Noise: the measured A/A pool (`{_shown(pool_path)}`, "
        f"{pool['pp64'].size} pp64 and {pool['tg16'].size} tg16 runs"
        + (
            f", those started at a load average ≤ {args.max_load:g}"
            if args.max_load is not None
            else ", those the quiet-machine policy keeps (core.quiet: others' CPU at the run's priority at most "
            f"{100 * quiet.DEFAULT.max_share:g}% of the cores where the run recorded it, else its load-average "
            f"fallback, at most {quiet.DEFAULT.max_load_per_core:g} per core at the start)"
        )
        + f"), resampled per host. A night: {args.hosts} hosts × {args.configs} "
        f"configurations = {n} boundaries, {args.runs} runs a side, each host's noise estimate from an A/A of "
        f"{args.aa_runs} runs; {round(n * args.changed)} boundaries ({args.changed:.0%}) carry a real drop "
        f"(equal shares of {', '.join(f'{100 * s:g}%' for s in SIZES)}), the other "
        f"{n - round(n * args.changed)} are A/A. {args.nights} nights. "
        f"False discovery rate {args.level:g}. A step also needs a change of at least "
        f"{MIN_STEP:.0%}. Means per night with a t CI95; detection with its Wilson CI95.",
        "",
        "| rule | false regressions a night | false alarms a night (either way) | "
        + " | ".join(f"{100 * s:g}% drop detected" for s in SIZES)
        + " |",
        "|---|---|---|" + "---|" * len(SIZES),
    ]
    for rule in RULES:
        d = per_rule[rule]
        lines.append(
            f"| {RULE_NAMES[rule]} | {mean_ci(d['false_reg'])} | {mean_ci(d['false_any'])} | "
            + " | ".join(wilson(*d["det"][s]) for s in SIZES)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=40)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--configs", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--changed",
        type=float,
        default=0.05,
        help="share of boundaries with a real drop",
    )
    ap.add_argument(
        "--aa-runs", type=int, default=20, help="runs of each host's noise A/A"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--level",
        type=float,
        default=stats.FDR_Q,
        help="false discovery rate (default: the site's)",
    )
    ap.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="keep only pool runs started at this load or less (instead of the quiet-machine policy)",
    )
    ap.add_argument(
        "--pool", default="", help="pool CSV (default: benchmarks/results/aa_pool.csv)"
    )
    ap.add_argument("--out", default="", help="also write OUT.md")
    args = ap.parse_args(argv)
    for name in ("nights", "hosts", "configs", "runs", "aa_runs"):
        if getattr(args, name) < (2 if name in ("runs", "aa_runs") else 1):
            print(
                f"error: --{name.replace('_', '-')}: {getattr(args, name)} is too small",
                file=sys.stderr,
            )
            return 2
    if not 0.0 <= args.changed < 1.0:
        print(
            f"error: --changed: {args.changed:g} is not a share in [0, 1)",
            file=sys.stderr,
        )
        return 2
    md = run(args)
    print(md, end="")
    if args.out:
        from core import artifacts

        path = Path(args.out).with_suffix(".md")
        artifacts.atomic_write_text(path, md)
        print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
