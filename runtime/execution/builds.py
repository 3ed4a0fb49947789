"""Installable builds of the llama.cpp backend: which Python and which libraries a measuring child runs.

A build spec is one of:

* ``0.3.35``: a llama-cpp-python release, installed in its own virtual environment
  ``<venvs>/lcp-0.3.35`` (created on demand by ``install``: pip builds llama.cpp from the release's source,
  about 10 minutes on 2 cores; the project's own dependencies come from the running environment through a
  ``.pth`` line placed after the venv's own site-packages, so the venv's llama_cpp wins);
* a folder holding ``bin/python`` (a virtual environment someone built);
* ``lib:/path/to/libdir``: the running environment's binding with llama.cpp shared libraries loaded from
  that folder (``LLAMA_CPP_LIB_PATH``: llama.cpp commits built as libraries);
* ``variant:batch-of-one`` (or ``variant:threads-halved``): the running build with a deliberate change
  (runtime.execution.ab.VARIANTS): a planted regression to test a search with;
* ``current``: the running environment as it is.

``probe`` loads the build in a child process and reads its binding version and vendored llama.cpp
commit; a build that fails to load is a ``BuildError`` with one line naming the spec.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.paths import project_root

VERSION_RE = re.compile(r"^\d+(\.\d+)+([a-z]+\d*)?$")
DIST = "llama-cpp-python"


class BuildError(UserError):
    """A build that cannot be installed or loaded, or a spec that names none."""


@dataclass(frozen=True)
class Build:
    """One installable build: the spec as written, the Python a child runs with, extra environment, and
    (for a variant) the settings it changes."""

    spec: str
    python: str
    env: tuple[tuple[str, str], ...] = ()
    variant: str | None = None
    venv: Path | None = None  # where a release is (to be) installed
    info: dict[str, Any] = field(
        default_factory=dict, compare=False
    )  # probe(): version, commit

    @property
    def name(self) -> str:
        return self.spec

    def child_env(self) -> dict[str, str]:
        return dict(self.env)

    def backend_version(self) -> str:
        """The backend version this build's results are keyed by ("llama-cpp-python 0.3.35"; after probe)."""
        return f"{DIST} {self.info.get('llama_cpp_python', 'unknown')}"


def default_venvs() -> Path:
    return Path(
        os.environ.get("ALMANAC_BUILD_VENVS") or project_root() / "build" / "venvs"
    )


def parse(spec: str, venvs: Path | None = None) -> Build:
    """A spec as a Build (nothing is run); BuildError names a spec that is none of the forms."""
    s = spec.strip()
    if not s:
        raise BuildError(
            "a build spec is empty (write a version such as 0.3.35, a venv folder or lib:/path)"
        )
    if s == "current":
        return Build(s, sys.executable)
    if s.startswith(
        "variant:"
    ):  # the name is checked against runtime.execution.ab.VARIANTS by the caller
        return Build(s, sys.executable, variant=s.split(":", 1)[1])
    if s.startswith("lib:"):
        lib = Path(s.split(":", 1)[1]).expanduser()
        if not lib.is_dir():
            raise BuildError(
                f"build {s!r}: {lib} is not a folder of llama.cpp shared libraries"
            )
        return Build(s, sys.executable, (("LLAMA_CPP_LIB_PATH", str(lib.resolve())),))
    if VERSION_RE.match(s):
        venv = (venvs or default_venvs()) / f"lcp-{s}"
        return Build(s, str(venv / "bin" / "python"), venv=venv)
    p = Path(s).expanduser()
    if (p / "bin" / "python").exists():
        return Build(s, str(p / "bin" / "python"))
    raise BuildError(
        f"build {s!r} is not a version (0.3.35), a folder with bin/python, lib:/path or variant:NAME"
    )


def installed(b: Build) -> bool:
    return Path(b.python).exists()


def install(b: Build, log: Path | None = None) -> None:
    """Install a release build into its venv (nothing for the other forms). BuildError with one line when the
    release does not exist or fails to build; the log keeps pip's output."""
    if b.venv is None or installed(b):
        return
    b.venv.parent.mkdir(parents=True, exist_ok=True)
    log = log or b.venv.parent / f"install-{b.spec}.log"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(b.venv)], check=True, capture_output=True)
    site = Path(
        subprocess.run(
            [
                b.python,
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "zz_almanac_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    with open(log, "wb") as out:
        rc = subprocess.run(
            [
                b.python,
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--ignore-installed",
                f"{DIST}=={b.spec}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    if rc != 0:
        text = log.read_text(errors="replace")
        import shutil

        shutil.rmtree(b.venv, ignore_errors=True)  # nothing half-installed stays behind
        if "No matching distribution" in text or "Could not find a version" in text:
            raise BuildError(
                f"build {b.spec}: {DIST} {b.spec} does not exist on the package index (log: {log})"
            )
        raise BuildError(
            f"build {b.spec}: pip could not install {DIST} {b.spec} (exit {rc}; log: {log})"
        )


PROBE = (
    "import json, importlib.metadata as m, llama_cpp;"
    "from runtime.backends.llama_cpp.backend import VENDORED_LLAMA_CPP as V;"
    "v = m.version('llama-cpp-python');"
    "print(json.dumps({'llama_cpp_python': v, 'llama_cpp_commit': V.get(v, 'unknown'), 'module': llama_cpp.__file__}))"
)


def probe(b: Build) -> Build:
    """The build loaded in a child: its binding version and vendored llama.cpp commit (``info``)."""
    if not installed(b):
        raise BuildError(f"build {b.spec}: not installed ({b.python} is missing)")
    env = {**os.environ, **b.child_env()}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(project_root())] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    r = subprocess.run(
        [b.python, "-c", PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(project_root()),
        timeout=120,
        check=False,
    )
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"build {b.spec}: llama_cpp fails to load ({last})")
    info = json.loads(r.stdout.strip().splitlines()[-1])
    return Build(b.spec, b.python, b.env, b.variant, b.venv, info)
