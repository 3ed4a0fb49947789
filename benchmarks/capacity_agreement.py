"""Two Poisson capacity searches and the exhaustive sweep against llama-server -np 4 (issue 31's
Done-when): do they agree (their intervals overlap), and does each search cost at most half the
sweep's requests?

    bash benchmarks/measure.sh probe python3 benchmarks/serving_capacity.py measure serving-agree-probe
    bash benchmarks/measure.sh search-a python3 benchmarks/serving_capacity.py measure serving-agree-search
    bash benchmarks/measure.sh sweep-low python3 benchmarks/serving_capacity.py measure serving-agree-sweep-low
    bash benchmarks/measure.sh sweep-high python3 benchmarks/serving_capacity.py measure serving-agree-sweep-high
    bash benchmarks/measure.sh search-b python3 benchmarks/serving_capacity.py measure serving-agree-search-b
    python3 benchmarks/capacity_agreement.py [--out benchmarks/results/capacity_agreement.md]

The probe (30 requests at each of 1-6 req/s) finds where the server saturates, which sets the SLOs
and the grid (data/matrices/serving-agree-search.yaml says why they are what they are). Each
``measure`` is one run of under 8 minutes. This script reads the newest artifact of each test on
this host and writes the comparison: the probe's levels, each search's answer and interval with the
requests it sent, the sweep's (its two halves' levels joined and read by the searches' own rule,
``core.kinds.load_stats.capacity_interval``), whether every pair of intervals overlaps, each
search's requests over the sweep's, and every level's verdict (and whether it decides anything)
with the host's load average when it started.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "capacity_agreement.md"
SEARCHES = ("agree-search", "agree-search-b")
HALVES = ("agree-sweep-low", "agree-sweep-high")
PROBE = "agree-probe"


def overlap(a: dict, b: dict) -> bool:
    return a["low"] <= b["high"] and b["low"] <= a["high"]


def _iv(x: dict) -> str:
    return f"{x['answer']:g} req/s [{x['low']:g}, {x['high']:g}{'+' if x.get('open_above') else ''}]"


def _load(lv: dict) -> str:
    c = lv.get("client") or {}
    v = c.get("loadavg_1m_start")
    return f"{v:.2f}" if isinstance(v, (int, float)) else "—"


def report(out: Path) -> int:
    from core.kinds import load_stats
    from core.records.run import read_all
    from pipelines import serving
    from runtime.hosts.fingerprint import fingerprint

    host = fingerprint()["id"]
    runs = [r for r in read_all() if r.host_id == host]
    newest: dict[str, dict] = {}
    for res in serving.load_results(runs, latest=False):
        if res["test_name"] in SEARCHES + HALVES and res["status"] == "ok":
            if (
                res["test_name"] not in newest
                or res["created"] > newest[res["test_name"]]["created"]
            ):
                newest[res["test_name"]] = res
    missing = [t for t in SEARCHES + HALVES if t not in newest]
    if missing:
        print(
            f"no artifact yet of {', '.join(missing)} on host {host}: measure them first (see --help)"
        )
        return 1
    raw = {r.id: r for r in runs}
    sweep_grid = sorted(
        float(lv["level"]) for t in HALVES for lv in newest[t]["stats"]["levels"]
    )
    for t in SEARCHES:
        if [float(g) for g in newest[t]["search"]["grid"]] != sweep_grid:
            print(
                f"{t} ({newest[t]['id']}) searched another grid than the sweep's halves measured: "
                "measure all four again"
            )
            return 1
    levels = sorted(
        (lv for t in HALVES for lv in newest[t]["stats"]["levels"]),
        key=lambda lv: lv["level"],
    )
    grid = newest[SEARCHES[0]]["search"]["grid"]
    sweep = load_stats.capacity_interval(levels, grid)
    sweep_requests = sum(newest[t]["requests"] for t in HALVES)
    a, b = (newest[t] for t in SEARCHES)
    slo = a["slo"]
    lines = [
        "# Two capacity searches and the exhaustive sweep (benchmarks/capacity_agreement.py)",
        "",
        f"Host {host}; llama-server -np 4, embedded Gemma 3 270M Q4_K_M; Poisson arrivals; workload "
        f"{a['workload']}; SLOs {slo.describe()} at {slo.confidence:.0%} confidence. Grid "
        f"{', '.join(f'{g:g}' for g in grid)} req/s. Each piece ran alone under the measurement lock "
        "(/tmp/almanac-measure.lock); the load average when each level started is in the tables.",
        "",
        *_probe(runs, raw),
        "## The experiment",
        "",
        "| run | answer [interval] | requests | requests / sweep's | artifacts |",
        "|---|---|---|---|---|",
    ]
    for name, res in (("search A (seeds 0)", a), ("search B (seeds 1)", b)):
        lines.append(
            f"| {name} | {_iv(res['answer'])} | {res['requests']} | "
            f"{res['requests'] / sweep_requests:.3f} | {res['id']} |"
        )
    lines.append(
        f"| exhaustive sweep (seeds 2) | {_iv(sweep)} | {sweep_requests} | 1 | "
        f"{newest[HALVES[0]]['id']} + {newest[HALVES[1]]['id']} |"
    )
    pairs = (
        ("A", a["answer"], "B", b["answer"]),
        ("A", a["answer"], "sweep", sweep),
        ("B", b["answer"], "sweep", sweep),
    )
    lines += ["", "Agreement:", ""]
    for n1, x, n2, y in pairs:
        lines.append(
            f"- {n1} and {n2}: intervals {'overlap' if overlap(x, y) else 'do NOT overlap'}."
        )
    for name, res in (("A", a), ("B", b)):
        ratio = res["requests"] / sweep_requests
        lines.append(
            f"- search {name} cost {ratio:.3f} of the sweep's requests ({'within' if ratio <= 0.5 else 'OVER'} 0.5)."
        )
    met = all(overlap(x, y) for _, x, _, y in pairs) and all(
        res["requests"] / sweep_requests <= 0.5 for res in (a, b)
    )
    lines += [
        "",
        f"**Done-when {'met' if met else 'NOT met'}**: all three intervals overlap pairwise and each "
        "search costs at most half the sweep's requests.",
    ]
    for name, iv in (
        ("search A", a["answer"]),
        ("search B", b["answer"]),
        ("sweep", sweep),
    ):
        undecided = iv.get("undecided_levels") or []
        if undecided:
            lines.append(
                f"- {name}: levels measured that bound nothing (unresolved, borderline from one run, or met "
                "while saturated): " + ", ".join(f"{x:g}" for x in undecided) + "."
            )
    lines += ["", "## The sweep, level by level", ""]
    lines += [
        "| rate (req/s) | requests | verdict | decides | p90 TTFT (ms) | p90 TPOT (ms) | load average at start |",
        "|---|---|---|---|---|---|---|",
    ]
    by_level = {}
    for t in HALVES:
        rr = raw.get(newest[t]["id"])
        for lv in (getattr(rr.samples, "levels", None) or []) if rr is not None else []:
            by_level[float(lv.level)] = lv.model_dump()
    for lv in levels:
        lim = lv["slo"]["limits"]
        lines.append(
            f"| {lv['level']:g} | {lv['requests']} | {lv['slo']['verdict']} | "
            f"{load_stats.decisive(lv) or 'nothing'} | {_num(lim.get('ttft_ms'))} | {_num(lim.get('tpot_ms'))} | "
            f"{_load(by_level.get(float(lv['level']), {}))} |"
        )
    for name, res in (("A", a), ("B", b)):
        rr = raw.get(res["id"])
        lv_raw = (
            {
                float(lv.level): lv.model_dump()
                for lv in (getattr(rr.samples, "levels", None) or [])
            }
            if rr is not None
            else {}
        )
        lines += ["", f"## Search {name}: its visits", ""]
        lines += [
            "| level | why | verdict | decides | requests (pooled) | stopped | seconds |",
            "|---|---|---|---|---|---|---|",
        ]
        for v in res["search"]["visits"]:
            lines.append(
                f"| {v['level']:g} | {v['why']} | {v['verdict']} | "
                f"{v.get('decisive') or 'nothing'} | {v['requests']} | "
                f"{v['stop_reason']} | {v['seconds']:.0f} |"
            )
        lines.append("")
        lines.append(
            f"Climb stopped: {res['search']['stopped']}; re-checked: "
            f"{', '.join(f'{x:g}' for x in res['search'].get('rechecked') or []) or 'none'}; "
            f"budget: {_budget(res['search'])}; load average at each level's start: "
            + ", ".join(f"{k:g} → {_load(v)}" for k, v in sorted(lv_raw.items()))
            + "."
        )
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _probe(runs: list, raw: dict) -> list[str]:
    """The knee probe (serving-agree-probe.yaml): where the server stops keeping up."""
    from pipelines import serving

    mine = [r for r in runs if r.test_name == PROBE and r.status == "ok"]
    if not mine:
        return []
    r = max(mine, key=lambda x: x.created)
    res = next(x for x in serving.load_results([r], latest=False) if x["id"] == r.id)
    lv_raw = {float(lv.level): lv.model_dump() for lv in r.samples.levels or []}
    out = [
        f"## The knee probe ({PROBE}, {r.id})",
        "",
        "Before the experiment: where does this server stop keeping up? Completions / arrivals below 0.9, "
        "or TTFT growing over the level (Mann-Kendall, p < 0.01, to more than twice its start), mark a "
        "saturated level.",
        "",
        "| rate (req/s) | requests | p50 TTFT (ms) | p90 TTFT (ms) | p90 TPOT (ms) | completions / arrivals "
        "| TTFT end / start | saturated | load average at start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lv in res["stats"]["levels"]:
        p = lv["percentiles"]
        qg = lv.get("queue_growth") or {}
        out.append(
            f"| {lv['level']:g} | {lv['requests']} | {_num(p['ttft_ms'].get('p50'))} | "
            f"{_num(p['ttft_ms'].get('p90'))} | {_num(p['tpot_ms'].get('p90'))} | "
            f"{_ratio(lv.get('completion_ratio'))} | {_ratio(qg.get('ratio_end_start'))} | "
            f"{'yes' if lv.get('saturated') else 'no'} | {_load(lv_raw.get(float(lv['level']), {}))} |"
        )
    return out + [""]


def _budget(search: dict) -> str:
    stop = search.get("budget_stop")
    share = search.get("budget")
    if not stop:
        return f"{share:g} of the sweep, never reached" if share else "none"
    return (
        f"{share:g} of the sweep; stopped before a {stop['why']} visit of {stop['level']:g} "
        f"(one more full level after {stop['sent']} requests would have passed it)"
    )


def _ratio(v: float | None) -> str:
    return f"{v:.2f}" if isinstance(v, (int, float)) else "—"


def _num(v: dict | None) -> str:
    if not v or v.get("value") is None:
        return "—"
    return f"{v['value']:.0f}" + (" (∞: failures)" if v.get("infinite") else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=OUT, help="the Markdown result file to write"
    )
    a = ap.parse_args(argv)
    return report(a.out)


if __name__ == "__main__":
    sys.exit(main())
