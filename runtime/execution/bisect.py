"""``invoke bisect``: which build between a good and a bad one made things slower (asv's ``find``).

The builds are an ordered list, oldest first (runtime.execution.builds specs: releases, venv folders,
``lib:`` library folders, ``variant:`` planted changes); the first is good, the last bad. Every
measurement is a fresh child process of the matrix's configurations (runtime.execution.ab._one_run),
stored as a run artifact, interleaved against the good build in ABBA blocks (good X X good: a drift
linear over a block hits both alike). Order:

1. the bad build against the good one: the configurations where bad loses (core.stats.compare_runs, the
   run as the unit, its CI95 below 1, and by at least ``threshold``) are the regression searched for; none:
   "good is not better than bad", the search stops;
2. then the middle build of the open range, against good: it is *bad* when, on a regressed configuration,
   it loses against good and its change is at least half the bad build's (on the log scale), else good;
   the range halves, until the first bad build is next to the last good one.

Resumable: a state file (JSON, written atomically after every run) keeps every run and decision; the same
command again continues where it stopped and measures nothing twice. A build that fails to install or
load, or a version that does not exist, stops the search with one line naming it, where it stopped and
how to resume; nothing is measured for it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import artifacts, stats
from core.errors import UserError
from core.kinds import headline
from core.paths import project_root, relpath
from runtime.execution import ab, builds, runlock, runner
from runtime.execution import matrix as matrix_mod
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models

SLOTS = ("good", "x", "x", "good")  # one ABBA block
STATE_VERSION = 1


class BisectError(UserError):
    """Bad bisection input or a search that cannot go on (one line: where it stopped, how to resume)."""


@dataclass
class Verdict:
    build: str
    call: str  # "bad", "good", or for the bad endpoint "regressed" / "not worse"
    per_config: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # name -> ratio, ci, verdict, runs


@dataclass
class Result:
    builds: list[str]
    first_bad: str | None
    last_good: str | None
    order: list[str]  # builds in the order they were measured against good
    verdicts: dict[str, Verdict]
    regressed: list[str]  # configurations the bad build regressed
    runs: int
    wall_s: float
    state: str
    root: str


def _load_state(path: Path, key: dict[str, Any]) -> dict[str, Any]:
    if not path.exists():
        return {
            "schema_version": STATE_VERSION,
            "key": key,
            "runs": [],
            "verdicts": {},
            "wall_s": 0.0,
        }
    try:
        st = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BisectError(
            f"{relpath(path)}: not a readable bisection state ({e})"
        ) from None
    if st.get("schema_version") != STATE_VERSION or st.get("key") != key:
        raise BisectError(
            f"{relpath(path)}: the state of another search (builds, matrix or tests differ); "
            "pass --state with a new file or remove this one"
        )
    return st


def _save(path: Path, st: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    artifacts.atomic_write_text(path, json.dumps(st, indent=1, sort_keys=True) + "\n")


def _compare(st: dict[str, Any], spec: str, name: str, hib: bool) -> stats.Comparison:
    runs = [r for r in st["runs"] if r["against"] == spec and r["config"] == name]
    good = [r["mean"] for r in runs if r["side"] == "good"]
    x = [r["mean"] for r in runs if r["side"] == "x"]
    return stats.compare_runs(good, x, hib)


def _held(cmps: dict[str, stats.Comparison]) -> dict[str, stats.Comparison]:
    """One build's comparisons with the good build, one per configuration, held together to the false
    discovery rate (core.stats.fleet_fdr), as every verdict over many comparisons on the site is: a loss on
    one configuration among several stands only if it stands among all of them."""
    names = list(cmps)
    return dict(zip(names, stats.fleet_fdr([cmps[n] for n in names])))


def run_bisect(
    specs: list[str],
    *,
    matrix: str = "noise",
    tests: tuple[str, ...] = (),
    blocks: int = 3,
    threshold: float = 0.05,
    state_path: Path | None = None,
    root: Path | None = None,
    venvs: Path | None = None,
    install: bool = True,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> Result:
    emit = on_event or (lambda kind, info: None)
    if len(specs) < 2:
        raise BisectError(
            "give at least two builds, the good one first and the bad one last",
            field="--builds",
        )
    if len(set(specs)) != len(specs):
        dup = next(s for s in specs if specs.count(s) > 1)
        raise BisectError(f"build {dup!r} is listed twice", field="--builds")
    if blocks < 2:
        raise BisectError(
            f"{blocks} blocks give too few runs a side (at least 2)", field="--blocks"
        )
    if not 0 < threshold < 1:
        raise BisectError(
            f"{threshold:g} is not a fraction between 0 and 1 (0.05: 5%)",
            field="--threshold",
        )
    parsed = [
        builds.parse(s, venvs) for s in specs
    ]  # every spec's form checked before anything runs
    for b in parsed:
        if b.variant is not None and b.variant not in ab.VARIANTS:
            raise BisectError(
                f"build {b.spec!r}: no variant {b.variant!r} (known: {', '.join(sorted(ab.VARIANTS))})"
            )
    m = matrix_mod.load(matrix)
    cfgs = [c for c in m.configurations() if not tests or c.test.name in tests]
    if not cfgs:
        raise BisectError(
            f"matrix {m.name} has no test {', '.join(tests)} "
            f"(tests: {', '.join(dict.fromkeys(c.test.name for c in m.configurations()))})",
            field="--tests",
        )
    registry = models.load_registry()
    refs = {
        n: models.resolve(n, registry) for n in dict.fromkeys(c.model for c in cfgs)
    }
    for cfg in cfgs:
        runner.preflight(cfg, refs[cfg.model])
    names = {id(c): ab._work_id(c) for c in cfgs}
    hib = {names[id(c)]: headline(c.test.kind).higher_is_better for c in cfgs}
    key = {
        "builds": specs,
        "matrix": m.name,
        "tests": sorted(tests),
        "blocks": blocks,
        "threshold": threshold,
    }
    stamp = "-".join(
        s.replace("/", "_").replace(":", "_") for s in (specs[0], specs[-1])
    )
    state_path = Path(
        state_path or project_root() / "build" / "bisect" / f"{stamp}.json"
    )
    st = _load_state(state_path, key)
    root = Path(
        root or st.get("root") or project_root() / "build" / "bisect" / stamp / "runs"
    )
    st["root"] = str(root)
    fp = hostinfo.fingerprint()
    ready: dict[str, builds.Build] = {}
    t0 = time.perf_counter()
    wall0 = float(st.get("wall_s", 0.0))

    def stopped(msg: str, at: str) -> BisectError:
        st["stopped"] = {"build": at, "why": msg}
        st["wall_s"] = wall0 + time.perf_counter() - t0
        _save(state_path, st)
        return BisectError(
            f"{msg}; the search stopped at build {at} ({len(st['verdicts'])} build(s) decided). "
            f"Fix it and run the same command again to resume (state: {relpath(state_path)})"
        )

    def get(i: int) -> builds.Build:
        b = parsed[i]
        if b.spec in ready:
            return ready[b.spec]
        try:
            if install and not builds.installed(b):
                emit("install", {"build": b.spec})
                builds.install(b)
            ready[b.spec] = builds.probe(b)
        except builds.BuildError as e:
            raise stopped(str(e), b.spec) from None
        return ready[b.spec]

    def measure(i: int) -> dict[str, stats.Comparison]:
        """Build i against the good build, ABBA blocks; runs already in the state are not measured again."""
        good, x = get(0), get(i)
        done = {
            (r["config"], r["block"], r["slot"])
            for r in st["runs"]
            if r["against"] == x.spec
        }
        for block in range(1, blocks + 1):
            for slot, side in enumerate(SLOTS):
                b = good if side == "good" else x
                variant = ab.VARIANTS[b.variant]() if b.variant else None
                for cfg in cfgs:
                    name = names[id(cfg)]
                    if (name, block, slot) in done:
                        continue
                    try:
                        r = ab._one_run(
                            cfg, refs[cfg.model], fp, variant, root, build=b
                        )
                    except UserError as e:
                        raise stopped(f"build {b.spec}: {e}", x.spec) from None
                    st["runs"].append(
                        {"against": x.spec, "build": b.spec, "side": side, "config": name, "block": block,
                         "slot": slot, "mean": r["mean"], "id": r["id"], "path": r["path"], "wall_s": r["wall_s"]}
                    )  # fmt: skip
                    st["wall_s"] = wall0 + time.perf_counter() - t0
                    _save(state_path, st)
                    emit(
                        "run",
                        {
                            "against": x.spec,
                            "build": b.spec,
                            "block": block,
                            "config": name,
                            **r,
                        },
                    )
        return _held({n: _compare(st, x.spec, n, hib[n]) for n in hib})

    def record(spec: str, call: str, cmps: dict[str, stats.Comparison]) -> Verdict:
        v = Verdict(
            spec,
            call,
            {n: {"ratio": c.ratio, "ci95_low": c.ci95_low, "ci95_high": c.ci95_high, "verdict": c.verdict,
                 "runs": [c.n_baseline, c.n_candidate], "q": c.q_value} for n, c in cmps.items()},
        )  # fmt: skip
        st["verdicts"][spec] = {"call": v.call, "per_config": v.per_config}
        _save(state_path, st)
        emit("verdict", {"build": spec, "call": call, "per_config": v.per_config})
        return v

    def worse(c: stats.Comparison, h: bool) -> float:
        """How much worse than good, as a log ratio (positive: worse)."""
        return (
            0.0
            if not c.ratio or c.ratio <= 0
            else (-math.log(c.ratio) if h else math.log(c.ratio))
        )

    with runlock.run_lock(root, fp["id"]):
        order = [specs[-1]]
        bad_cmp = measure(len(specs) - 1)
        regressed = [
            n
            for n, c in bad_cmp.items()
            if c.verdict == "loss" and worse(c, hib[n]) >= -math.log(1 - threshold)
        ]
        verdicts = {
            specs[-1]: record(
                specs[-1], "regressed" if regressed else "not worse", bad_cmp
            )
        }
        if not regressed:
            detail = "; ".join(
                f"{n}: {c.ratio:.3f} [{c.ci95_low or float('nan'):.3f}, {c.ci95_high or float('nan'):.3f}] {c.verdict}"
                for n, c in bad_cmp.items()
                if c.ratio is not None
            )
            st["wall_s"] = wall0 + time.perf_counter() - t0
            # a result judged before (by an older rule) no longer stands
            st.pop("result", None)
            _save(state_path, st)
            raise BisectError(
                f"good ({specs[0]}) is not better than bad ({specs[-1]}) by {threshold:.0%} on any configuration "
                f"({detail}): nothing to search (state: {relpath(state_path)})"
            )
        lo, hi = 0, len(specs) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            order.append(specs[mid])
            cmps = measure(mid)
            is_bad = any(
                cmps[n].verdict == "loss"
                and worse(cmps[n], hib[n]) >= 0.5 * worse(bad_cmp[n], hib[n])
                for n in regressed
            )
            verdicts[specs[mid]] = record(specs[mid], "bad" if is_bad else "good", cmps)
            lo, hi = (lo, mid) if is_bad else (mid, hi)
    st["wall_s"] = wall0 + time.perf_counter() - t0
    st["result"] = {"first_bad": specs[hi], "last_good": specs[lo], "order": order}
    st.pop("stopped", None)
    _save(state_path, st)
    return Result(
        specs,
        specs[hi],
        specs[lo],
        order,
        verdicts,
        regressed,
        len(st["runs"]),
        st["wall_s"],
        relpath(state_path),
        relpath(root),
    )


def markdown(res: Result) -> str:
    lines = [
        f"First bad build: **{res.first_bad}** (last good: {res.last_good}); regressed: {', '.join(res.regressed)}.",
        (
            f"Measured {len(res.order)} build(s) against good ({res.builds[0]}), in this order: "
            f"{', '.join(res.order)}; {res.runs} runs, {res.wall_s / 60:.1f} min. Runs: {res.root}; state: {res.state}."
        ),
        "",
        "| build | call | configuration | build / good [CI95] | verdict | runs good, build |",
        "|---|---|---|--:|---|--:|",
    ]
    for spec in res.order:
        v = res.verdicts[spec]
        for n, d in v.per_config.items():
            ci = (
                f"{d['ratio']:.3f} [{d['ci95_low']:.3f}, {d['ci95_high']:.3f}]"
                if d["ci95_low"] is not None
                else ("—" if d["ratio"] is None else f"{d['ratio']:.3f}")
            )
            lines.append(
                f"| {spec} | {v.call} | {n} | {ci} | {d['verdict']} | {d['runs'][0]}, {d['runs'][1]} |"
            )
    return "\n".join(lines) + "\n"
