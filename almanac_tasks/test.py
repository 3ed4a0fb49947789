"""`invoke test`: the static checks, then a test lane (tests/support/lanes.py), after
installing what the real-part tests drive (Chromium, sshd, IFBench data, llama.cpp's tools in CI)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys

from invoke import Context, Exit, task

from almanac_tasks.quality import ensure_ifbench
from almanac_tasks.report import note, say
from almanac_tasks.shell import exit_code

#: The test lanes (tests/support/lanes.py gives every test one): a pytest -m expression each.
#: ``default`` is every gating lane (what the README's `invoke test` and CI run); the timing lane
#: holds tests whose verdict depends on how busy the machine is (real A/B timings), never gating.
TEST_LANES = {
    "default": "not timing",
    "fast": "fast and not timing",
    "integration": "integration and not timing",
    "e2e": "e2e and not timing",
    "timing": "timing",
    "all": "",
}


#: What runs before pytest (skipped with --no-checks, and for the timing lane alone): formatting,
#: lint, types and the import layers, each configured in pyproject.toml.
CHECKS = (
    ("ruff format", ["ruff", "format", "--check", "--quiet", "."]),
    ("ruff check", ["ruff", "check", "--quiet", "."]),
    ("mypy", ["mypy"]),
    ("lint-imports", ["lint-imports"]),
)


@task(
    help={
        "k": "Only tests matching this pytest -k expression.",
        "fast": "Skip tests that run the real model.",
        "lane": "Which tests: default (every gating lane: fast, integration, e2e), fast (pure and golden tests), "
        "integration (site builds, subprocesses, loopback servers), e2e (real model, servers, sshd, Chromium), "
        "timing (real A/B timings: their verdict depends on how busy the machine is, so run them on a quiet "
        "one) or all.",
        "report": "Report the lane's failures without failing (exit 0 when tests fail; a usage or internal error "
        "still fails): how .ci/run runs the timing lane. Its verdicts cannot be made reliable on a loaded "
        "machine (2 cores shared with other work turn them undecided or reverse them; its tests xfail "
        "when they measured the load), so it never gates CI.",
        "checks": "Run ruff (format and lint), mypy and lint-imports before the tests (default: yes).",
        "workers": "pytest-xdist workers for the tests not marked serial (default 2; 0 or 1: one process). "
        "The serial tests (load-sensitive verdicts, machine-wide services) run after them, alone.",
    }
)
def test(
    c: Context,
    k: str = "",
    fast: bool = False,
    lane: str = "default",
    report: bool = False,
    checks: bool = True,
    workers: int = 2,
) -> None:
    """Run the test suite's default lane (first installs what the real-part tests drive: Chromium, sshd, IFBench data).

    The default lane is every gating lane (fast, integration, e2e); `--lane fast|integration|e2e`
    runs one; `--lane timing` the tests whose verdict depends on machine load (marker `timing`),
    which the default leaves out; `--lane all` runs everything. Before the tests, the static checks
    (ruff format, ruff check, mypy, lint-imports) unless `--no-checks` or the timing lane alone."""
    if lane not in TEST_LANES:
        raise Exit(f"error: unknown lane {lane!r}: {', '.join(TEST_LANES)}", code=2)
    if checks and lane != "timing":
        for name, argv in CHECKS:
            tool = shutil.which(argv[0])
            if tool is None:
                raise Exit(
                    f"error: {argv[0]} is not installed: pip install -e '.[dev]'",
                    code=2,
                )
            if exit_code(c, shlex.join([tool, *argv[1:]])):
                raise Exit(
                    f"error: {name} failed (above); the tests did not run", code=1
                )
    if lane not in ("fast", "timing"):
        _ensure_chromium(c)
        _ensure_sshd(c)
        ensure_ifbench(c)
        _ensure_llama_tools(c)
    marks = [m for m in (TEST_LANES[lane], "not model" if fast else "") if m]
    codes = [
        _pytest(c, k, marks, part, workers) for part, workers in _parts(lane, workers)
    ]
    code = max(codes) if codes else 0
    if code == 1 and report:
        say(f"lane {lane}: some tests failed (reported, not failing: --report)")
        code = 0
    if code:
        raise Exit(code=code)


def _parts(lane: str, workers: int) -> list[tuple[str, int]]:
    """The pytest runs of a lane, as (extra -m expression, workers): with workers, the tests not
    marked ``serial`` on that many pytest-xdist workers, then the serial ones in one process
    (tests/support/lanes.py says which, and why); without, or for the timing lane, one run."""
    if workers < 2 or lane == "timing":
        return [("", 0)]
    if importlib.util.find_spec("xdist") is None:  # installed with the dev extras
        note("pytest-xdist is not installed (pip install -e '.[dev]'): one process")
        return [("", 0)]
    return [("not serial", workers), ("serial", 0)]


def _pytest(c: Context, k: str, marks: list[str], part: str, workers: int) -> int:
    """One pytest run: its exit code, 0 when it collected nothing (5)."""
    args = [sys.executable, "-m", "pytest", "-q"]
    if workers:
        # loadscope: a module's tests stay on one worker (its module fixtures are made once)
        args += ["-n", str(workers), "--dist", "loadscope"]
    if k:
        args += ["-k", k]
    expr = [m for m in (*marks, part) if m]
    if expr:
        args += ["-m", " and ".join(f"({m})" for m in expr)]
    code = exit_code(c, shlex.join(args))
    if code == 5:  # no tests collected
        say(f"no tests collected{f' ({part})' if part else ''}")
        code = 0
    return code


def _ensure_llama_tools(c: Context) -> None:
    """In CI (``CI`` set, as .ci/run and GitHub Actions do): llama.cpp's own tools (llama-server,
    llama-perplexity, llama-bench) from the source vendored in the pinned llama-cpp-python sdist,
    reused from the cache when built before (about 15 minutes on 2 cores the first time). Their
    tests skip, saying so, where they are not built (a local run builds them with
    `python3 benchmarks/llama_bench_build.py`)."""
    if not os.environ.get("CI"):
        return
    build = shlex.join([sys.executable, "benchmarks/llama_bench_build.py"])
    if exit_code(c, f"{build} >/dev/null"):
        note("llama.cpp tools not built: their tests will skip")


def _ensure_chromium(c: Context) -> None:
    if shutil.which("chromium") or os.environ.get("ALMANAC_NO_APT"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        note("installing Debian's chromium for the browser test (one time)…")
        c.run(
            (
                "apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q "
                ">/dev/null && apt-get install -y -q chromium >/dev/null)"
            ),
            warn=True,
            pty=False,
        )


def _ensure_sshd(c: Context) -> None:
    if os.path.exists("/usr/sbin/sshd") or os.environ.get("ALMANAC_NO_APT"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        note("installing Debian's openssh-server for the remote-host tests (one time)…")
        c.run(
            (
                "apt-get install -y -q openssh-server >/dev/null 2>&1 || (apt-get update -q "
                ">/dev/null && apt-get install -y -q openssh-server >/dev/null)"
            ),
            warn=True,
            pty=False,
        )
