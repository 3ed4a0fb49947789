"""A/A calibration of the verdicts: how often do identical builds get called different, and how
small a real slowdown is still caught?

    flock -x /tmp/almanac-cpu.lock python3 benchmarks/aa_calibration.py collect --minutes 13   # repeat: chunks
    python3 benchmarks/aa_calibration.py pool-csv --pool DIR --csv FILE   # the pool alone, for fleet_aa.py
    python3 benchmarks/aa_calibration.py analyse [--out benchmarks/results/aa_calibration]

**collect** runs data/matrices/noise.yaml (the embedded model, pp64 and tg16, each repeated to the
default precision: CI95 within ±2% of its mean) again and again through the project's own runner
(``runtime.execution.runner.run_matrix``, every configuration in a fresh child process), under two
build labels that change nothing (``aa-a``, ``aa-b``: a ``BuildVariant`` without overrides), in
blocks of four: A A A A B B B B A A A A ... It appends to a pool of run artifacts
(build/aa-calibration/runs, not data/: these are a measurement of the method, not results) and
resumes the label pattern where the last chunk stopped, so the pool can be gathered in chunks of at
most ~15 minutes under the exclusive CPU lock.

**analyse** feeds the pool, unchanged, through the pipelines the site uses (``pipelines.history``
and ``pipelines.compare``), with an empty data folder (so the only run-to-run noise they know is
the one the history itself shows), and counts:

* *history, as measured*: each test's runs in time order with the labels they were measured
  under; every label change is a build boundary the step detector judges (four runs a side).
  A flagged boundary is a false alarm.
* *history, relabelled*: the same runs labelled in blocks of four starting at offsets 1, 2 and 3
  (with offset 0, as measured, every pair of consecutive runs is a boundary in exactly one of the
  four labellings). A run is reused in four labellings, so these boundaries are not independent of
  each other or of the as-measured ones; they show the rate is not a property of one phase.
* *compare, 4 vs 4 runs*: windows of eight consecutive runs starting at every block of four, the
  first four labelled A and the next four B whatever they were measured under (the labels change
  nothing), through ``invoke compare``'s function with ``build=aa-a`` against ``build=aa-b``; a win
  or a loss is a false alarm. Each run is in two windows (once as A, once as B).
* *compare, 1 vs 1 run*: disjoint pairs of consecutive runs (A then B), the only case where the
  host's run-to-run noise widens the interval; that noise is estimated from the *other half* of the
  pool (cross-fitted: the runs of the other half are added under a third label, so they enter the
  history estimate and no selection).
* *detection*: the same trials with every B run made slower by a known factor (its samples and
  summary multiplied by 1 − x: a multiplicative slowdown injected into real runs, which keeps their
  real noise; the issue's "sleep in a fake backend", without a fake backend), for x from 1% to 20%;
  a history boundary A→B must be flagged a regression (B→A an improvement), a compare a loss.

Beside the run-level method each trial is also judged the way the project did before (repetitions
of the runs on each side pooled as one sample, Welch on the pooled repetitions), for contrast.
A real slowdown (threads halved) is checked by ``invoke ab`` (tasks.py) and quoted in the report.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "build" / "aa-calibration" / "runs"
OUT = ROOT / "benchmarks" / "results" / "aa_calibration"
MATRIX = "noise"
LABELS = ("aa-a", "aa-b")
BLOCK = 4
EFFECTS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.10, 0.15, 0.20)
METRIC = "tokens_per_second"


# -- collect --------------------------------------------------------------------------------
def matrix_runs(pool: Path) -> int:
    return sum(1 for _ in pool.rglob("pp64--*.json")) if pool.exists() else 0


def collect(minutes: float, pool: Path, block: int = BLOCK) -> None:
    from runtime.execution import runner

    i = matrix_runs(pool)
    end = time.time() + minutes * 60
    while time.time() < end:
        label = LABELS[(i // block) % 2]
        t0 = time.time()
        runner.run_matrix(
            MATRIX,
            force=True,
            root=pool,
            build_variant=runner.BuildVariant(label, "A/A label: changes nothing", {}),
        )
        print(
            f"run {i}: {label} {time.time() - t0:.1f} s  load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        i += 1


# -- analyse --------------------------------------------------------------------------------
def load_pool(pool: Path) -> dict[str, list[Any]]:
    from core.records import run as record

    out: dict[str, list[Any]] = {}
    for r in record.read_all(pool):
        if r.ok and r.stat(METRIC) is not None and r.stat(METRIC).mean:
            out.setdefault(r.test_name, []).append(r)
    for runs in out.values():
        runs.sort(key=lambda r: (r.created, r.id))
    return out


def variant(r: Any, label: str, scale: float = 1.0) -> Any:
    """A copy of a run record under another build label, its metric's samples and summary x scale."""
    from core.records.run import RunRecord

    doc = r.stored
    doc["build"] = {**doc["build"], "label": label}
    if scale != 1.0:
        summ = copy.deepcopy(doc["summary"])
        s = summ[METRIC]
        for k in (
            "mean",
            "stddev",
            "ci95_low",
            "ci95_high",
            "median",
            "min",
            "max",
            "p95",
            "p99",
            "median_ci95_low",
            "median_ci95_high",
        ):
            if s.get(k) is not None:
                s[k] = s[k] * scale
        doc["summary"] = summ
        samples = copy.deepcopy(doc.get("samples") or {})
        for k, v in samples.items():
            if isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
                samples[k] = [x * scale for x in v]
        doc["samples"] = samples
    return RunRecord(doc, r.path)


def label_of(i: int, offset: int, block: int = BLOCK) -> int:
    return ((i + offset) // block) % 2


def history_trials(
    runs: list[Any], offset: int | None, x: float, block: int = BLOCK
) -> dict[str, int]:
    """Label the runs in blocks of ``block`` (starting at ``offset``; None: the labels they were measured
    under), slow every B run by x, run the step detector: boundaries, flagged boundaries, correctly
    flagged ones (A->B a regression, B->A an improvement); the same counts for the pre-change method
    (the repetitions of a window pooled as one sample)."""
    from core import stats
    from pipelines import history

    labels = [
        LABELS.index(r.build_label) if offset is None else label_of(i, offset, block)
        for i, r in enumerate(runs)
    ]
    docs = [
        variant(r, LABELS[lb], 1.0 - x if lb else 1.0) for r, lb in zip(runs, labels)
    ]
    (ser,) = history.series(docs)
    segs = history.segments(ser.points)
    flagged = {st.after[0].id: st for st in ser.steps}
    out = {
        "boundaries": 0,
        "flagged": 0,
        "correct": 0,
        "old_flagged": 0,
        "old_correct": 0,
    }
    for prev, nxt in zip(segs, segs[1:]):
        if offset is not None and (len(prev) != block or len(nxt) != block):
            continue  # a partial block at either end of the pool
        before, after = prev[-history.WINDOW :], nxt[: history.WINDOW]
        to_b = nxt[0].build.get("label") == LABELS[1]
        want = "regression" if to_b else "improvement"
        out["boundaries"] += 1
        st = flagged.get(after[0].id)
        if st is not None:
            out["flagged"] += 1
            out["correct"] += st.verdict == want
        pa = stats.pool_summaries(
            [{"n": p.n, "mean": p.mean, "stddev": p.stddev} for p in before]
        )
        pb = stats.pool_summaries(
            [{"n": p.n, "mean": p.mean, "stddev": p.stddev} for p in after]
        )
        c = stats.compare_summaries(pa, pb, True)
        if (
            c.verdict in ("win", "loss")
            and c.ratio is not None
            and abs(c.ratio - 1) >= history.MIN_STEP
        ):
            out["old_flagged"] += 1
            out["old_correct"] += (c.verdict == "loss") == to_b
    return out


def compare_verdicts(docs: list[Any]) -> tuple[str, str]:
    """(run-level verdict, pre-change verdict) of build=aa-a against build=aa-b on these runs."""
    from core import stats
    from pipelines import compare as cmp

    res = cmp.compare(
        docs,
        cmp.parse_selection(f"build={LABELS[0]}"),
        cmp.parse_selection(f"build={LABELS[1]}"),
    )
    (row,) = res.rows
    sa = [d.stat(METRIC) for d in docs if d.build_label == LABELS[0]]
    sb = [d.stat(METRIC) for d in docs if d.build_label == LABELS[1]]
    old = stats.compare_summaries(
        stats.pool_summaries(sa), stats.pool_summaries(sb), True
    ).verdict
    return row.verdict, old


def compare_trials(
    runs: list[Any], x: float, half: int, step: int, reference: list[Any] | None = None
) -> dict[str, int]:
    """Windows of 2 x ``half`` consecutive runs starting every ``step`` runs: the first half labelled A,
    the second B (whatever they were measured under: the labels change nothing), B slowed by x;
    ``reference`` runs join every window under a third label (they feed the noise estimate only)."""
    out = {
        "trials": 0,
        "flagged": 0,
        "correct": 0,
        "old_flagged": 0,
        "old_correct": 0,
        "no_interval": 0,
    }
    for i in range(0, len(runs) - 2 * half + 1, step):
        win = runs[i : i + 2 * half]
        docs = [variant(r, LABELS[0]) for r in win[:half]] + [
            variant(r, LABELS[1], 1.0 - x) for r in win[half:]
        ]
        docs += [variant(r, "noise-ref") for r in reference or []]
        v, old = compare_verdicts(docs)
        out["trials"] += 1
        out["flagged"] += v in ("win", "loss")
        out["correct"] += v == "loss"
        out["no_interval"] += v == "insufficient data"
        out["old_flagged"] += old in ("win", "loss")
        out["old_correct"] += old == "loss"
    return out


def _sum(ds: list[dict[str, int]]) -> dict[str, int]:
    return {k: sum(d[k] for d in ds) for k in ds[0]}


SIDES = (1, 2, 3, 4, 5, 6)  # runs a side swept
DETAIL_SIDES = (4, 5)  # runs a side with the whole slowdown sweep


def trials(runs: list[Any], k: int, x: float) -> dict[str, dict[str, int]]:
    """Every trial kind at k runs a side and slowdown x."""
    out = {"history": _sum([history_trials(runs, off, x, k) for off in range(k)])}
    if (
        k == 1
    ):  # one run a side: the host noise (cross-fitted: from the other half of the pool)
        mid = len(runs) // 2
        out["compare"] = _sum(
            [
                compare_trials(runs[:mid], x, 1, 2, reference=runs[mid:]),
                compare_trials(runs[mid:], x, 1, 2, reference=runs[:mid]),
            ]
        )
    else:
        out["compare"] = compare_trials(runs, x, k, k)
    return out


def analyse(pool: Path, out: Path) -> dict[str, Any]:
    from core import stats

    tmp = tempfile.mkdtemp(prefix="aa-calibration-data-")
    os.environ["ALMANAC_DATA"] = (
        tmp  # no committed noise artifact: the pool's own history only
    )
    tests = load_pool(pool)
    result: dict[str, Any] = {
        "pool": {},
        "as_measured": {},
        "sides": [],
        "sweep": [],
        "excluded": None,
    }
    reason = pool.parent / "excluded" / "REASON.txt"
    if reason.exists():  # runs set aside, with why (never silently)
        result["excluded"] = {
            "artifacts": len(list(reason.parent.glob("*.json"))),
            "reason": reason.read_text().strip(),
        }
    for test, runs in sorted(tests.items()):
        means = [r.stat(METRIC).mean for r in runs]
        sigma, df = stats.pooled_log_spread([means])
        result["pool"][test] = {
            "runs": len(runs),
            "first": runs[0].created,
            "last": runs[-1].created,
            "min": min(means),
            "max": max(means),
            "median": sorted(means)[len(means) // 2],
            "sigma_log": sigma,
            "df": df,
            "mean_repetitions": sum(r.stat(METRIC).n for r in runs) / len(runs),
        }
        result["as_measured"][test] = {
            f"{x:g}": history_trials(runs, None, x) for x in (0.0, 0.10)
        }
    for k in SIDES:
        row: dict[str, Any] = {"runs_a_side": k}
        for test, runs in sorted(tests.items()):
            row[test] = {f"{x:g}": trials(runs, k, x) for x in (0.0, 0.10)}
        result["sides"].append(row)
        print(f"{k} run(s) a side: done", file=sys.stderr, flush=True)
    for x in EFFECTS[1:]:
        row = {"slowdown": x}
        for test, runs in sorted(tests.items()):
            row[test] = {str(k): trials(runs, k, x) for k in DETAIL_SIDES}
        result["sweep"].append(row)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps(result, indent=2, sort_keys=True) + "\n"
    )
    out.with_suffix(".md").write_text(markdown(result))
    write_pool_csv(tests, out.with_name("aa_pool.csv"))
    return result


def _rate(k: int, n: int) -> str:
    if not n:
        return "—"
    lo, hi = stats_wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def stats_wilson(k: int, n: int) -> tuple[float, float]:
    from core import stats

    lo, hi = stats.wilson_interval(k, n)
    return lo or 0.0, hi or 0.0


def _n(d: dict[str, int]) -> int:
    return d.get("boundaries", d.get("trials", 0))


def markdown(res: dict[str, Any]) -> str:
    tests = sorted(res["pool"])
    lines = [
        "# A/A calibration (benchmarks/aa_calibration.py)",
        "",
        "Pool: "
        + "; ".join(
            f"{t}: {p['runs']} runs, {p['first'][:16]}–{p['last'][11:16]} UTC, run means "
            f"{p['min']:.1f}–{p['max']:.1f} t/s (median {p['median']:.1f}), spread between runs "
            f"{100 * p['sigma_log']:.1f}% (log sd), {p['mean_repetitions']:.1f} repetitions a run"
            for t, p in res["pool"].items()
        ),
        "",
        *(
            [
                f"Excluded from the pool: {res['excluded']['artifacts']} run artifacts. "
                + " ".join(res["excluded"]["reason"].split()),
                "",
            ]
            if res.get("excluded")
            else []
        ),
        "Rates with their Wilson CI95 in brackets. At 0% a flag is a false alarm (any step, any win or loss); with a "
        "slowdown only a flag in the right direction counts (A→B a regression, B→A an improvement, B a loss).",
        "",
        "## As measured (blocks of 4 in the order they ran)",
        "",
        "| test | A/A: boundaries flagged | 10% slower B: boundaries detected | A/A, pooled repetitions (before) |",
        "|---|---|---|---|",
    ]
    for t in tests:
        a = res["as_measured"][t]
        lines.append(
            f"| {t} | {_rate(a['0']['flagged'], a['0']['boundaries'])} | "
            f"{_rate(a['0.1']['correct'], a['0.1']['boundaries'])} | "
            f"{_rate(a['0']['old_flagged'], a['0']['boundaries'])} |"
        )
    lines += [
        "",
        "## Summary (both tests pooled)",
        "",
        "| runs a side | A/A boundaries flagged as steps | A/A compares called win or loss | 10% slowdown: "
        "boundaries detected | 10% slowdown: compares detected |",
        "|---|---|---|---|---|",
    ]
    for row in res["sides"]:
        k = row["runs_a_side"]
        agg = {}
        for trial in ("history", "compare"):
            for x in ("0", "0.1"):
                ds = [row[t][x][trial] for t in tests]
                agg[(trial, x)] = (
                    sum(d["flagged" if x == "0" else "correct"] for d in ds),
                    sum(_n(d) for d in ds),
                )
        lines.append(
            f"| {k} | {_rate(*agg[('history', '0')])} | {_rate(*agg[('compare', '0')])} | "
            f"{_rate(*agg[('history', '0.1')])} | {_rate(*agg[('compare', '0.1')])} |"
        )
    lines += [
        "",
        "## False alarms and 10% detection against runs a side",
        "",
        "| runs a side | trial | "
        + " | ".join(
            f"{t}: A/A flagged | {t}: 10% detected | {t}: A/A flagged, "
            "pooled repetitions (before)"
            for t in tests
        )
        + " |",
        "|---|---|" + "---|" * (3 * len(tests)),
    ]
    for row in res["sides"]:
        k = row["runs_a_side"]
        for trial, label in (
            ("history", "history boundary"),
            ("compare", "compare" + (" (+ host noise)" if k == 1 else "")),
        ):
            cells = []
            for t in tests:
                a0, a1 = row[t]["0"][trial], row[t]["0.1"][trial]
                cells += [
                    _rate(a0["flagged"], _n(a0)),
                    _rate(a1["correct"], _n(a1)),
                    _rate(a0["old_flagged"], _n(a0)),
                ]
            lines.append(f"| {k} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Detection against the size of the slowdown",
        "",
        "| slowdown | "
        + " | ".join(
            f"{t}: {trial}, {k} a side"
            for t in tests
            for k in DETAIL_SIDES
            for trial in ("history", "compare")
        )
        + " |",
        "|---|" + "---|" * (len(tests) * len(DETAIL_SIDES) * 2),
    ]
    smallest: dict[str, float] = {}
    for row in res["sweep"]:
        cells = []
        for t in tests:
            for k in DETAIL_SIDES:
                for trial in ("history", "compare"):
                    d = row[t][str(k)][trial]
                    cells.append(_rate(d["correct"], _n(d)))
                    key = f"{t}, {trial}, {k} a side"
                    if _n(d) and d["correct"] / _n(d) >= 0.9 and key not in smallest:
                        smallest[key] = row["slowdown"]
        lines.append(f"| {100 * row['slowdown']:g}% | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Smallest slowdown detected in at least 90% of trials: "
        + "; ".join(f"{k}: {100 * v:g}%" for k, v in smallest.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _quiet_cells(r: Any) -> list[Any]:
    """The kept attempt's others' CPU share, whether it was disturbed, and how many attempts (core.quiet);
    blank for a run measured before the policy."""
    q = r.resources.quiet
    if not q:
        return ["", "", ""]
    kept = q["attempts"][q["kept"]]
    return [
        "" if kept.get("share") is None else kept["share"],
        q.get("disturbed"),
        len(q["attempts"]),
    ]


def write_pool_csv(tests: dict[str, list[Any]], path: Path) -> None:
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            [
                "id",
                "created",
                "test",
                "label",
                "n",
                "mean_tps",
                "stddev_tps",
                "loadavg_1m_before",
                "wall_s",
                "others_share",
                "disturbed",
                "attempts",
                "cores",
                "group",
            ]
        )
        for test, runs in sorted(tests.items()):
            for r in runs:
                s = r.stat(METRIC)
                w.writerow(
                    [
                        r.id,
                        r.created,
                        test,
                        r.build_label,
                        s.n,
                        f"{s.mean:.4f}",
                        "" if s.stddev is None else f"{s.stddev:.4f}",
                        r.resources.loadavg_1m_before,
                        f"{r.resources.wall_s or 0:.2f}",
                        *_quiet_cells(r),
                        r.doc["host"].get("cpu", {}).get("logical_cores", ""),
                        # runs of one group are an A/A: same build (the labels of the A/A change nothing)
                        r.backend_build.split(" · [")[0],
                    ]
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser(
        "collect",
        help="append runs to the pool (under flock -x, at most ~15 minutes a chunk)",
    )
    c.add_argument("--minutes", type=float, default=13.0)
    c.add_argument("--pool", type=Path, default=POOL)
    a = sub.add_parser("analyse", help="the calibration table from the pool")
    a.add_argument("--pool", type=Path, default=POOL)
    a.add_argument("--out", type=Path, default=OUT)
    pc = sub.add_parser(
        "pool-csv",
        help="only the pool's CSV (each run's mean, load and quiet-policy record), e.g. for fleet_aa.py",
    )
    pc.add_argument(
        "--pool", type=Path, action="append", help="folders of run artifacts (repeat)"
    )
    pc.add_argument(
        "--matrix",
        default="",
        help="only runs of these matrices (comma-separated), e.g. noise,builds",
    )
    pc.add_argument(
        "--since", default="", help="only runs created at or after this ISO time"
    )
    pc.add_argument("--csv", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "collect":
        collect(args.minutes, args.pool)
    elif args.cmd == "pool-csv":
        tests: dict[str, list[Any]] = {}
        wanted = {m for m in args.matrix.split(",") if m}
        for folder in args.pool or [POOL]:
            for test, runs in load_pool(folder).items():
                tests.setdefault(test, []).extend(
                    r
                    for r in runs
                    if (not wanted or r.matrix_name in wanted)
                    and r.created >= args.since
                )
        write_pool_csv(tests, args.csv)
    else:
        res = analyse(args.pool, args.out)
        print(markdown(res))


if __name__ == "__main__":
    main()
