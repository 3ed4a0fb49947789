"""`invoke noise`, `invoke ab` and `invoke bisect`: interleaved runs in fresh processes: this
host's run-to-run noise (an A/A), one A/B until decided, and the first bad build of a range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from invoke import Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import block, note, say, written


@task(
    name="noise",
    help={
        "runs": "The most runs of the noise matrix to count (each a fresh process; the warm-up run "
        "before them is not counted); the A/A stops earlier once its estimate is useful "
        "(at least 4; default 30).",
        "budget": "No run starts that would end past this many seconds (default 900; the warm-up and "
        "the first 4 counted runs always run).",
    },
)
@user_errors
def noise_task(c: Context, runs: int = 30, budget: float = 900.0) -> None:
    """Measure this host's run-to-run noise (an A/A of data/matrices/noise.yaml until useful) and store it in data/hosts/.

    The first run (a fresh process) is a warm-up, stored and not counted. The A/A stops as soon as, for every
    kind of test, a single run widened by the estimate gets a CI95 no wider than x1.25 each way with at least
    3 degrees of freedom; else at --runs or --budget, and the host is then recorded too noisy to rank."""  # noqa: E501 (the first line is the manual's synopsis)
    from core import artifacts
    from core.paths import relpath
    from runtime.execution import noise as noise_mod

    def on_run(i: int, s: float, est: dict[str, Any]) -> None:
        what = "warm-up (not counted)" if i == 0 else f"run {i}/{runs}"
        widths = ", ".join(
            f"{c} x{e['ci95_factor']:.2f}" for c, e in sorted(est.items())
        )
        note(
            f"{what}: {s:.1f} s"
            + (f"; a single run's CI95: {widths}" if widths else "")
        )

    path = noise_mod.run_noise(int(runs), float(budget), on_run=on_run)
    doc = artifacts.load(path)
    st = doc["stopping"]
    for cls, e in sorted(doc["estimates"].items()):
        say(
            f"{cls}: run-to-run noise {100 * e['sigma']:.2f}% (log sd of run means, {e['df']} df, {e['runs']} runs, "
            f"{e['warmup_dropped']} warm-up dropped): a single run's CI95 x{e['ci95_factor']:.2f} each way"
        )
    say(f"stopped: {st['reason']} after {st['counted_runs']} counted runs")
    say(f"noise: {relpath(path)}")
    line = noise_mod.too_noisy_line(doc)
    if line:
        note(line)


@task(
    name="ab",
    help={
        "a": "Side A: key=value pairs: build=ordinary|threads-halved, label=NAME (a build that changes "
        "nothing), test=, model= (a|b for several), or a backend setting (n_threads=1).",
        "b": "Side B, same syntax, e.g. build=threads-halved.",
        "matrix": "The matrix whose configurations both sides run (default: noise: pp64 and tg16).",
        "threshold": "Smallest change that matters, a fraction (default 0.05: ±5%): win/loss beyond it, "
        "equivalent within it.",
        "budget": "Time budget in seconds (default 600).",
        "out": "Write the result to OUT.md and OUT.json (default: build/ab/ab).",
        "runs": "Folder for the A/B's run artifacts (default: build/ab/<time>/runs; not data/runs).",
    },
)
@user_errors
def ab_task(
    c: Context,
    a: str,
    b: str,
    matrix: str = "noise",
    threshold: float = 0.05,
    budget: float = 600.0,
    out: str = "build/ab/ab",
    runs: str = "",
) -> None:
    """Interleaved A/B in fresh processes (ABBA blocks) until decided: win, loss, equivalent or undecided.

    Exit 2 with one line for identical sides, sides sharing no work, or a budget too short for one round."""
    from runtime.execution import ab as ab_mod

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "run":
            note(
                f"block {info['block']} {info['side']}: {info['configuration']} {info['mean']:.2f} "
                f"(n={info['n']}, {info['wall_s']:.1f} s)"
            )
        elif kind == "look":
            note(
                "look at block "
                + str(info["block"])
                + ": "
                + "; ".join(
                    f"{n}: {d.verdict}"
                    + (
                        f" {d.ratio:.3f} [{d.low:.3f}, {d.high:.3f}]"
                        if d.low is not None
                        else ""
                    )
                    for n, d in info["work"]
                )
            )

    res = ab_mod.run_ab(
        a,
        b,
        matrix=matrix,
        threshold=float(threshold),
        budget_s=float(budget),
        on_event=on_event,
        root=Path(runs) if runs else None,
    )
    block(ab_mod.markdown(res))
    paths = ab_mod.write_outputs(res, Path(out))
    written(paths)


@task(
    name="bisect",
    help={
        "builds": "The builds in order, oldest first, comma-separated: the first good, the last bad. Each a "
        "llama-cpp-python version (0.3.35: installed in its own venv under --venvs when missing), a venv "
        "folder, lib:/path (llama.cpp built as shared libraries) or variant:batch-of-one (a planted change).",
        "matrix": "The matrix whose configurations every build runs (default: noise: pp64 and tg16).",
        "tests": "Only these tests of the matrix (a|b for several; default: all).",
        "blocks": "ABBA blocks per build against the good one (2 runs a side each; default 3).",
        "threshold": "Smallest slowdown of the bad build searched for, a fraction (default 0.05).",
        "state": "State file (default: build/bisect/<good>-<bad>.json); the same command resumes from it.",
        "runs": "Folder for the run artifacts (default: build/bisect/<good>-<bad>/runs; data/runs to publish).",
        "venvs": "Where release builds are installed (default: build/venvs or $ALMANAC_BUILD_VENVS).",
    },
)
@user_errors
def bisect_task(
    c: Context,
    builds: str,
    matrix: str = "noise",
    tests: str = "",
    blocks: int = 3,
    threshold: float = 0.05,
    state: str = "",
    runs: str = "",
    venvs: str = "",
) -> None:
    """Find the first bad build between a good and a bad one: bisection order, interleaved against good, resumable.

    Exit 2 with one line for a range where good is not better than bad, a build that fails to install or load,
    or a version that does not exist (the line says where the search stopped and how to resume)."""
    from runtime.execution import bisect as bisect_mod

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "run":
            note(
                f"{info['against']} vs good, block {info['block']}: {info['build']} {info['config']} "
                f"{info['mean']:.2f} ({info['wall_s']:.1f} s)"
            )
        elif kind == "verdict":
            note(f"{info['build']}: {info['call']}")
        elif kind == "install":
            note(f"installing {info['build']} (pip builds llama.cpp: minutes)")

    res = bisect_mod.run_bisect(
        [s.strip() for s in builds.split(",") if s.strip()],
        matrix=matrix,
        tests=tuple(t for t in tests.split("|") if t),
        blocks=int(blocks),
        threshold=float(threshold),
        state_path=Path(state) if state else None,
        root=Path(runs) if runs else None,
        venvs=Path(venvs) if venvs else None,
    )
    block(bisect_mod.markdown(res))
