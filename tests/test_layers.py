"""The layers are enforced, not described: import-linter's contracts (pyproject.toml) pass on
the code, and fail, naming the import, when a stage reaches into another."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports")
pytestmark = pytest.mark.skipif(
    LINT is None, reason="import-linter is not installed (pip install -e '.[dev]')"
)


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [LINT, "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_contracts_hold_on_the_code():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Contracts: 6 kept, 0 broken." in r.stdout


def _copy_tree(tmp_path: Path) -> Path:
    for pkg in ("core", "runtime", "pipelines"):
        shutil.copytree(
            ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    "victim, line, broken",
    [
        (
            "pipelines/host_boards.py",
            "from runtime.execution import runner  # a page that runs a benchmark",
            "pipelines is not allowed to import runtime",
        ),
        (
            "core/stats.py",
            "import pipelines.history  # the core reading an analysis",
            "core is not allowed to import pipelines",
        ),
        (
            "core/kinds/rate.py",
            "import llama_cpp  # a kind that loads the library",
            "core imports no inference",
        ),
        (
            "runtime/backends/llama_cpp/embedding.py",
            "from core.precision import Repeater  # a backend deciding how many samples to take",
            "backends run one request or decode step; kinds own the loops",
        ),
        (
            "runtime/agents/loop.py",
            "from runtime.backends.openai_http import server  # the kind's loop reaching into a backend",
            "runtime's loops take a backend's primitive and import no backend",
        ),
        (
            "runtime/quality/items.py",
            "from runtime.quality import suites  # a cycle",
            "No cycles are allowed in runtime.quality",
        ),
    ],
)
def test_a_deliberate_violation_breaks_a_contract(tmp_path, victim, line, broken):
    tree = _copy_tree(tmp_path)
    path = tree / victim
    path.write_text(path.read_text() + "\n" + line + "\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert broken in r.stdout, r.stdout[-3000:]
    assert "BROKEN" in r.stdout
