"""Print the seed tables of issue 22 from the committed artifacts (plain text, for a report).

The measurements themselves are the project's matrices, run under the exclusive CPU lock:

    flock -x /tmp/almanac-cpu.lock invoke bench --matrix lora            # LoRA adapters
    flock -x /tmp/almanac-cpu.lock invoke bench --matrix optimization    # MoE x speculation, draft ladder
    flock -x /tmp/almanac-cpu.lock invoke bench --matrix projections     # gate evidence (KV cache)
    flock -x /tmp/almanac-cpu.lock invoke quality --matrix quality-gates # gate evidence (quality)
    flock -x /tmp/almanac-cpu.lock invoke bench --matrix serving-faults  # error and retry overhead

``python benchmarks/seed_tracks.py [--host HOST]`` then prints: the adapter table and the cost per
adapter, the MoE x speculation table per workload, the draft Pareto rows, every gate with its
verdict, the error and retry measurements with the recommendations, and the corpus totals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _r(c: dict | None) -> str:
    if not c or c.get("ratio") is None:
        return "-"
    if c.get("ci95_low") is None:
        return f"{c['ratio']:.2f}x"
    return (
        f"{c['ratio']:.2f}x ({c['ci95_low']:.2f}-{c['ci95_high']:.2f}) {c['verdict']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=None, help="host id (default: every host)")
    args = ap.parse_args(argv)

    from pipelines import (
        adapters as ad,
    )
    from pipelines import (
        corpus,
        gates,
        projections,
        retries,
        speculation,
        whatif,
    )
    from pipelines import (
        optimization as opt,
    )
    from pipelines.quality import load_quality
    from pipelines.runs import load_runs

    runs = [r for r in load_runs() if args.host is None or r.host_id == args.host]
    quality = load_quality()

    print(
        "== LoRA adapters (rate t/s, vs no adapter, adapter load ms, predicted / llama.cpp buffers / RSS growth MiB)"
    )
    series = ad.adapter_series(runs)
    for s in series:
        for p in s.points:
            mib = lambda v: "-" if v is None else "%.2f" % (v / 2**20)  # noqa: E731
            load = "-" if p.load_time_s is None else "%.1f" % (1000 * p.load_time_s)
            vs0 = _r(p.comparison) if p.count else "baseline"
            print(
                f"{s.host_id} {s.model:28s} {s.stage:8s} {s.test:6s} n_adapters={p.count} rate={p.mean:8.2f} "
                f"CI95 {p.ci95[0]:.2f}-{p.ci95[1]:.2f} vs0={vs0} load_ms={load} "
                f"pred={mib(p.predicted_bytes)} buf={mib(p.buffer_bytes)} rss={mib(p.rss_growth_bytes)}"
            )
    print(
        "-- cost per adapter (least squares over runs: ms/token per adapter, share of the time without)"
    )
    for s in series:
        f = s.fit
        if f:
            lo, hi = f["slope_ci95"]
            rlo, rhi = f["relative_ci95"]
            print(
                f"{s.model:28s} {s.stage:8s} {1000 * f['slope']:.1f} us/token/adapter (CI95 "
                f"{1000 * lo:.1f}-{1000 * hi:.1f}); "
                f"{100 * f['relative']:.2f}% (CI95 {100 * rlo:.2f}-{100 * rhi:.2f}%) of a token's time"
            )

    print(
        "\n== MoE x speculation (generation rate vs the baseline: all experts, plain decoding)"
    )
    for sw in opt.sweeps(runs):
        if sw.track != "moe-speculation":
            continue
        for test, cells in speculation.moe_speculation(sw).items():
            print(f"-- {sw.host_id} {sw.name} {test}")
            for c in cells:
                ll = c.lossless_vs_plain
                acc = (
                    "-" if c.point.acceptance is None else f"{c.point.acceptance:.1f}%"
                )
                lossless = (
                    "-"
                    if ll is None
                    else ("yes" if ll["identical"] else "NO @" + str(ll["first_diff"]))
                )
                base = "baseline" if c.point.is_baseline else _r(c.vs_baseline)
                print(
                    f"experts={c.experts} {c.mode:13s} rate={c.point.mean:8.2f} vs_base={base} "
                    f"vs_plain_same_experts={_r(c.vs_plain)} acc={acc} lossless={lossless}"
                )
            for line in speculation.moe_speculation_findings(cells):
                print("  *", line)

    print("\n== Draft models: acceptance, speed-up, quality (Pareto front)")
    for sw in opt.sweeps(runs):
        if not speculation.is_draft_sweep(sw):
            continue
        res = speculation.draft_pareto(sw, quality)
        print(f"-- {sw.host_id} {sw.name} (quality: {res['score']})")
        for test, rows in res["tests"].items():
            for r in rows:
                q = r.quality
                qs = (
                    "-"
                    if not q
                    else f"{100 * q['pass_rate']:.1f}% ({q['passed']}/{q['n']})"
                )
                acc = "-" if r.acceptance is None else f"{r.acceptance:.1f}%"
                print(
                    f"{test:6s} draft={r.draft:22s} acc={acc} speedup={_r(r.speedup)} quality={qs} "
                    f"front={'yes' if r.front else 'no'}"
                )

    print("\n== Go/no-go gates")
    cat = projections.load_catalogue()
    for host in gates.gate_hosts(cat, runs, quality):
        for og in gates.evaluate(cat, runs, quality, host):
            print(f"-- {host} {og.opt.id}: {og.decision}")
            for r in og.results:
                v = "-" if r.value is None else f"{r.value:.4f}"
                ci = (
                    "exact"
                    if r.exact
                    else (
                        "-" if r.ci95[0] is None else f"{r.ci95[0]:.4f}-{r.ci95[1]:.4f}"
                    )
                )
                print(
                    f"   {r.gate.id:28s} {r.verdict:12s} value={v} CI95 {ci}  ({r.reason})"
                )

    print("\n== Errors, retries and planned optimizations")
    f = whatif.load_whatif()
    hosts = sorted({r.host_id for r in runs})
    for host in hosts:
        m = retries.measure_errors(f.errors, runs, host) if f.errors else None
        if m is not None and not m.missing:
            print(
                f"-- {host}: error rate {100 * m.p['mean']:.1f}% "
                f"({m.p['failed']}/{m.p['n']}, Wilson {100 * m.p['lo']:.1f}-"
                f"{100 * m.p['hi']:.1f}%), failed attempt {m.t_fail['mean']:.1f} ms, clean "
                f"request {m.t_clean['mean']:.1f} ms, "
                f"with errors + retry {m.t_auto['mean']:.1f} ms, retry cost {m.retry_cost['mean']:.1f} ms "
                f"(CI95 {m.retry_cost['lo']:.1f}-{m.retry_cost['hi']:.1f}), error overhead "
                f"{100 * m.overhead['mean']:+.1f}% "
                f"(CI95 {100 * m.overhead['lo']:+.1f}-{100 * m.overhead['hi']:+.1f}%), happy-path cost "
                f"{100 * m.happy_cost['mean']:+.2f}% (CI95 "
                f"{100 * m.happy_cost['lo']:+.2f}-{100 * m.happy_cost['hi']:+.2f}%)"
            )
        for rec in retries.evaluate_plans(f, runs, host):
            if rec.verdict == "NOT MEASURED":
                continue
            g = rec.gain
            c = rec.cost
            cost = (
                "none measured"
                if c[1] is None
                else f"{100 * c[1]:+.2f}% ({100 * c[0]:+.2f}-{100 * c[2]:+.2f}%)"
            )
            print(
                f"   {host} {rec.plan.id:16s} gain {100 * g[1]:+.1f}% "
                f"({100 * g[0]:+.1f}-{100 * g[2]:+.1f}%) cost {cost}: {rec.verdict}"
            )

    t = corpus.totals(runs)
    print(
        f"\n== Corpus: {t['tokens']:,} tokens generated in {t['hours']:.3f} h ({t['rate']:.1f} t/s average) over "
        f"{t['runs']} ok runs, {len(t['models'])} models, {len(t['by_host'])} hosts"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
