"""Capacity at SLO on this host (issue 21's figures): measure, then report from the artifacts.

    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity
            # users, ~5 min
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure
    serving-capacity-poisson  # req/s, ~6 min
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity-sweep    # ~7 min
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity-sweep-high  # ~5 min
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure
    serving-capacity-poisson  # the A/A repeat
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity-probe
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity-np1
    flock -x /tmp/almanac-cpu.lock python3 benchmarks/serving_capacity.py measure serving-capacity-llama-cpp-server
    python3 benchmarks/serving_capacity.py report

``measure`` runs a matrix through the project's runner exactly as ``invoke serve.capacity
--matrices MATRIX --force`` does (always measuring again: a second ``measure`` of the same matrix
is the A/A repeat; the newer artifact supersedes on the pages, the older stays on disk). Each
matrix is one exclusive run of under 10 min (the exhaustive sweep is two: its lower and upper
rates). Artifacts go to data/runs like any other run.

``report`` reads the artifacts of this host and prints what the issue asks to quote: the
capacity answers with their intervals (llama-server -np 4 and -np 1, llama_cpp.server), the
Poisson search beside the exhaustive Poisson sweep over the same rates (its two halves' levels
joined into one sweep: answers, intervals, requests each sent, the ratio), the A/A repeat of the
search (does the newer answer lie in the
older one's interval), the prefix-cache hit rate of the shared-prefix workload, and the probe
table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(matrix: str) -> int:
    """Run a matrix as ``invoke serve.capacity --matrices MATRIX --force`` does (always measuring
    again: a second measure of the same matrix is the A/A repeat)."""
    from pipelines.serving import capacity_lines
    from runtime.execution import runner

    report = runner.run_matrix(matrix, force=True)
    for line in capacity_lines(report.measured + report.failed):
        print(line)
    return 0 if not report.failed else 1


def report() -> int:
    from core.records.run import read_all
    from pipelines import serving
    from runtime.hosts.fingerprint import fingerprint

    host = fingerprint()["id"]
    runs = [r for r in read_all() if r.host_id == host]
    everything = serving.load_results(runs, latest=False)
    print(f"host {host}")
    print("\n== capacity answers (newest of each) ==")
    for res in serving.load_results(runs):
        cost = ""
        if res.get("search"):
            s = res["search"]
            cost = f"  [{s['requests_sent']} requests; exhaustive sweep of the grid: {s['exhaustive_requests']}]"
        print(
            f"{_server(runs, res):>22} · {res['test_name']:<18} {res['answer_text']}{cost}  ({res['id']})"
        )
    search = [
        r
        for r in everything
        if r["test_name"] == "capacity-poisson"
        and r["endpoint"] == "llama-server"
        and r["status"] == "ok"
    ]
    low = [
        r
        for r in everything
        if r["test_name"] == "poisson-sweep" and r["status"] == "ok"
    ]
    high = [
        r
        for r in everything
        if r["test_name"] == "poisson-sweep-high" and r["status"] == "ok"
    ]
    if search and low and high:
        from core.kinds import load_stats

        a, b, c = search[-1], low[-1], high[-1]
        levels = sorted(
            b["stats"]["levels"] + c["stats"]["levels"], key=lambda lv: lv["level"]
        )
        grid = [lv["level"] for lv in levels]
        iv = load_stats.capacity_interval(levels, grid)
        sweep_requests = b["requests"] + c["requests"]
        print(
            "\n== Poisson search vs exhaustive Poisson sweep (same rates, workload, SLOs) =="
        )
        print(f"search: {a['answer_text']}, {a['requests']} requests ({a['id']})")
        print(
            f"sweep:  {load_stats.answer_text(iv, a['slo'], a['unit'])}, {sweep_requests} requests "
            f"({b['id']} + {c['id']})"
        )
        print(
            "sweep levels: "
            + ", ".join(f"{lv['level']:g}: {lv['slo']['verdict']}" for lv in levels)
        )
        print(f"search / sweep requests: {a['requests'] / sweep_requests:.3f}")
        print(
            f"search answer {a['answer']['answer']:g} within the sweep's interval [{iv['low']:g}, {iv['high']:g}]: "
            f"{iv['low'] <= a['answer']['answer'] <= iv['high']}"
        )
    for test in ("capacity-poisson", "capacity-users"):
        rows = [
            r
            for r in everything
            if r["test_name"] == test
            and r["endpoint"] == "llama-server"
            and r["status"] == "ok"
            and r["model"] == "gemma3-270m-q4_k_m"
            and _parallel(runs, r["id"]) == 4
        ]
        if len(rows) >= 2:
            first, again = rows[-2], rows[-1]
            inside = (
                first["answer"]["low"]
                <= again["answer"]["answer"]
                <= first["answer"]["high"]
            )
            print(f"\n== A/A repeat of {test} (llama-server -np 4) ==")
            print(f"first:  {first['answer_text']} ({first['id']})")
            print(f"repeat: {again['answer_text']} ({again['id']})")
            print(f"repeat's answer within the first's interval: {inside}")
    for res in serving.load_results(runs):
        if res["test_name"] == "shared-prefix":
            lv = res["stats"]["levels"][0]
            cache = lv["prefix_cache"]
            print(
                f"\n== shared prefix ({res['endpoint']}) ==\n{res['workload']}: prefix cache hit rate "
                f"{_pct(cache['hit_rate'])} from {cache['source']}; from /metrics {_pct(cache['metrics_hit_rate'])}"
            )
    probes = serving.probe_results(runs)
    if probes:
        print("\n== endpoint probe ==")
        from core.kinds.probe import CASES

        print("case".ljust(16) + "".join(p["endpoint"][:34].ljust(36) for p in probes))
        for case in CASES:
            cells = []
            for p in probes:
                c = p["cases"].get(case)
                if not c:
                    cells.append("—".ljust(36))
                    continue
                lat = c.get("latency_ms_median")
                txt = (
                    f"{c['succeeded']}/{c['n']} {lat:.0f} ms"
                    if lat is not None
                    else f"{c['succeeded']}/{c['n']}"
                )
                if c["reasons"]:
                    txt += " " + c["reasons"][0][:60]
                cells.append(txt[:34].ljust(36))
            print(case.ljust(16) + "".join(cells))
        for p in probes:
            for case, c in p["cases"].items():
                if c["reasons"]:
                    print(f"  {p['endpoint']} {case}: {'; '.join(c['reasons'])[:300]}")
    return 0


def _pct(x: float | None) -> str:
    return "not reported" if x is None else f"{x:.1%}"


def _server(runs, res) -> str:
    """The endpoint with its slot count where one was set (llama-server -np N)."""
    n = _parallel(runs, res["id"])
    return f"{res['endpoint']} -np {n}" if n else res["endpoint"]


def _parallel(runs, rid: str) -> int | None:
    r = next((x for x in runs if x.id == rid), None)
    return r.requested.get("parallel") if r is not None else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("matrix")
    sub.add_parser("report")
    args = ap.parse_args(argv)
    if args.cmd == "measure":
        return measure(args.matrix)
    return report()


if __name__ == "__main__":
    sys.exit(main())
