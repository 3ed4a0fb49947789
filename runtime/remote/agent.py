"""What runs on a remote host (started over SSH by runtime.remote.controller).

    python -m runtime.remote.agent prepare --mode venv|system --workdir W --requirements R [--reuse-llama]
    python -m runtime.remote.agent run --matrix PATH [--force] [--retry-failed]

``prepare`` makes the Python that will run the benchmarks: ``venv`` creates
``W/venv`` (seeing the host's site-packages when an existing llama-cpp-python may be
reused) and pip-installs the pinned requirements only when they changed since the last
run (a stamp file); ``system`` installs nothing and checks that the host's Python
imports every requirement at the pinned version. ``run`` measures a matrix through
runtime.execution.runner. Both report to the controller with lines ``@@almanac {json}`` on stdout;
anything else is log. Only the standard library is imported until ``run`` starts, so
``prepare`` works on a host that has nothing installed yet.

Exit codes: 0 done (failed configurations are artifacts, not errors); 2 bad input (one
line); 4 the host's Python lacks what ``system`` needs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

PREFIX = "@@almanac "


def emit(event: str, **info: Any) -> None:
    sys.stdout.write(PREFIX + json.dumps({"event": event, **info}, default=str) + "\n")
    sys.stdout.flush()


_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")


def _dist_version(python: str, dist: str) -> str | None:
    code = (
        "import importlib.metadata as m, sys\n"
        "try:\n    print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError:\n    pass\n"
    )
    out = subprocess.run(
        [python, "-c", code, dist], capture_output=True, text=True, timeout=120
    )
    return out.stdout.strip() or None


def check(python: str, requirements: list[str]) -> list[str]:
    """Problems with ``python`` for these requirements ([] when every one is satisfied)."""
    code = r"""
import importlib.metadata as m, json, sys
reqs = json.loads(sys.argv[1])
try:
    from packaging.requirements import Requirement
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        Requirement = None
problems = []
for line in reqs:
    if Requirement is not None:
        r = Requirement(line)
        name, spec = r.name, r.specifier
    else:
        name, spec = line.split("=")[0].split(">")[0].split("<")[0].strip(), None
    try:
        v = m.version(name)
    except m.PackageNotFoundError:
        problems.append(f"{name} is not installed")
        continue
    if spec is not None and not spec.contains(v, prereleases=True):
        problems.append(f"{name} {v} does not satisfy {spec}")
print(json.dumps(problems))
"""
    out = subprocess.run(
        [python, "-c", code, json.dumps(requirements)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        return [
            f"{python} could not check its packages: {out.stderr.strip().splitlines()[-1:] or out.returncode}"
        ]
    return json.loads(out.stdout)


def _see_outer_venv(py: Path) -> None:
    """When this Python is itself a virtualenv (the normal way to install the project), a new
    venv made from it with --system-site-packages sees the *base* interpreter's packages, not
    this venv's, where llama-cpp-python lives: a .pth file adds this venv's site-packages
    after the new venv's own (so what the new venv installs still wins)."""
    if sys.prefix == sys.base_prefix:
        return
    import site

    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    if not outer:
        return
    inner = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(inner, "_almanac_outer_venv.pth").write_text("\n".join(outer) + "\n")
    print("the venv also sees", ", ".join(outer), flush=True)


def prepare(
    mode: str,
    workdir: Path,
    requirements_file: Path,
    reuse_llama: bool,
    cmake_args: str,
) -> int:
    reqs = [
        ln.strip()
        for ln in requirements_file.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    if mode == "system":
        problems = check(sys.executable, reqs)
        if problems:
            emit("incompatible", python=sys.executable, problems=problems)
            print("install: system, but " + "; ".join(problems), file=sys.stderr)
            return 4
        emit("python", path=sys.executable, mode=mode, installed=False)
        return 0
    venv = workdir / "venv"
    py = venv / "bin" / "python"
    stamp_file = venv / ".almanac-requirements"
    stamp = hashlib.sha256(
        json.dumps([reqs, reuse_llama, cmake_args, sys.version]).encode()
    ).hexdigest()
    cfg = venv / "pyvenv.cfg"
    if py.exists() and cfg.exists():
        sees_system = "include-system-site-packages = true" in cfg.read_text()
        if (
            sees_system != reuse_llama
        ):  # the reuse setting changed: a fresh venv, not a half-matching one
            import shutil

            print("recreating", venv, "(llama_cpp.reuse changed)", flush=True)
            shutil.rmtree(venv)
    if not py.exists():
        args = (
            [sys.executable, "-m", "venv"]
            + (["--system-site-packages"] if reuse_llama else [])
            + [str(venv)]
        )
        print("creating", venv, flush=True)
        subprocess.run(args, check=True)
        if reuse_llama:
            _see_outer_venv(py)
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        emit("python", path=str(py), mode=mode, installed=False)
        return 0
    llama = next(
        (r for r in reqs if r.lower().replace("_", "-").startswith("llama-cpp-python")),
        None,
    )
    if llama and reuse_llama:
        have = _dist_version(str(py), "llama-cpp-python")
        print(f"llama-cpp-python visible to the venv: {have or 'none'}", flush=True)
    env = dict(os.environ)
    if cmake_args:
        env["CMAKE_ARGS"] = cmake_args
    print("pip install -r", requirements_file, flush=True)
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-r",
            str(requirements_file),
        ],
        check=True,
        env=env,
    )
    problems = check(str(py), reqs)
    if problems:
        emit("incompatible", python=str(py), problems=problems)
        return 4
    stamp_file.write_text(stamp + "\n")
    emit("python", path=str(py), mode=mode, installed=True)
    return 0


def run(matrix: str, force: bool, retry_failed: bool) -> int:
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from core.errors import UserError
    from core.paths import runs_dir
    from runtime import backends
    from runtime.execution import matrix as matrix_mod
    from runtime.execution import runner
    from runtime.hosts import fingerprint as hostinfo

    try:
        m = matrix_mod.load(matrix)
        fp = hostinfo.fingerprint()
        versions = {
            b: backends.version(b) for b in {c.backend for c in m.configurations()}
        }
        emit("host", host=fp, backend_versions=versions)

        report = runner.run_matrix(
            matrix, force=force, retry_failed=retry_failed, on_event=_emitter()
        )
    except UserError as exc:
        emit("error", message=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def rel(ps):
        return [str(Path(p).resolve().relative_to(runs_dir().resolve())) for p in ps]

    emit(
        "end",
        measured=rel(report.measured),
        failed=rel(report.failed),
        skipped=rel(report.skipped),
    )
    return 0


def _emitter():
    """Forward runner events, paths made relative to data/runs (the runner gives them relative
    to the project root, or absolute when the data dir lies elsewhere)."""
    from core.paths import project_root, runs_dir

    def wrapped(kind: str, info: dict[str, Any]) -> None:
        info = dict(info)
        p = info.get("path")
        if p:
            path = Path(p) if Path(p).is_absolute() else project_root() / p
            try:
                info["path"] = str(path.resolve().relative_to(runs_dir().resolve()))
            except ValueError:
                pass
        emit(kind, **info)

    return wrapped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="runtime.remote.agent")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--mode", choices=("venv", "system"), required=True)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--requirements", type=Path, required=True)
    p.add_argument("--reuse-llama", action="store_true")
    p.add_argument("--cmake-args", default="")
    r = sub.add_parser("run")
    r.add_argument("--matrix", required=True)
    r.add_argument("--force", action="store_true")
    r.add_argument("--retry-failed", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        return prepare(a.mode, a.workdir, a.requirements, a.reuse_llama, a.cmake_args)
    return run(a.matrix, a.force, a.retry_failed)


if __name__ == "__main__":
    sys.exit(main())
