"""Shared fixtures: temporary data dirs, golden artifacts, the embedded model."""

from __future__ import annotations

import subprocess
import sys
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("ALMANAC_VALIDATE_CHARTS", "1")  # charts are validated by Altair in tests (the site build skips it)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "data"  # golden artifacts measured for real, committed (asv's example_results)


def pytest_configure(config):
    """Code scoring refuses to run without kernel isolation (runtime.quality.sandbox). The code
    the suite runs is its own (reference solutions, and hostile snippets that the audit hook is
    tested to contain), so on a host without namespaces or bubblewrap the suite accepts that
    risk for itself; tests of the refusal itself clear the variable."""
    from runtime.quality import sandbox

    if not sandbox.kernel_isolation_available():
        os.environ.setdefault(sandbox.ACCEPT_ENV, "1")


@pytest.fixture
def data_env(tmp_path, monkeypatch):
    """An empty data dir with the real model registry; ALMANAC_DATA points at it."""
    d = tmp_path / "data"
    (d / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    return d


ARTIFACT_DIRS = ("runs", "hosts", "projections", "quality", "perplexity")


def make_golden_data(dest: Path) -> Path:
    """A data dir made of the project's current inputs (registries, matrices, suites, schemas)
    and the committed golden artifacts instead of the project's own measurements."""
    shutil.copytree(ROOT / "data", dest, ignore=lambda d, names: [n for n in names if Path(d) == ROOT / "data" and n in ARTIFACT_DIRS])
    shutil.copytree(GOLDEN, dest, dirs_exist_ok=True)
    return dest


@pytest.fixture
def golden_data(tmp_path, monkeypatch):
    """A copy of the golden artifacts (with the current inputs) as the data dir."""
    d = make_golden_data(tmp_path / "golden")
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    return d


@pytest.fixture(scope="session")
def embedded_model():
    """The embedded default model, fetched and verified (needs only the installed package)."""
    from runtime.models import registry as models

    return models.resolve(models.DEFAULT_MODEL)


def write_matrix(data_dir: Path, name: str, body: str) -> Path:
    p = data_dir / "matrices" / f"{name}.yaml"
    p.write_text(body)
    return p


def tree_snapshot(d: Path) -> dict[str, float]:
    return {str(p.relative_to(d)): p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()}


def build_site(data: Path, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALMANAC_DATA=str(data), DISABLE_MKDOCS_2_WARNING="true")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site built (strict) from the golden artifacts alone."""
    out = tmp_path_factory.mktemp("site")
    data = make_golden_data(tmp_path_factory.mktemp("golden") / "data")
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
