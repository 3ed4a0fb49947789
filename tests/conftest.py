"""Shared fixtures: temporary data dirs, golden artifacts, committed data, the embedded model.

Tests read committed data only (issues 19 and 28): never what a user measured into data/.

* **The session's data folder.** At start-up the suite copies the committed data folder (the files
  git tracks under data/: tests/support/committed.py says the rule, and why it refuses outside a git
  checkout) to a temporary folder and points ``ALMANAC_DATA`` at it, overriding any value the shell
  had. Whatever reads ``core.paths.data_dir()`` without a folder of its own (``load_runs()``, the
  registries, an ``invoke`` or ``mkdocs`` subprocess inheriting the environment) reads that copy. A
  test that needs its own folder sets ``ALMANAC_DATA`` itself (``monkeypatch.setenv``, or the
  fixtures below: ``data_env`` empty, ``golden_data`` golden artifacts); a writable committed copy is
  ``committed.committed_data(tmp_path / "data")``. ``session_data`` is the shared copy, to read only: a
  test that changes it fails (and the copy is made anew for the next test).
* **The guard.** An audit hook (``committed.LiveDataGuard``) makes any open of an artifact (``*.json``
  outside data/schema/) under the live data/ folder that git does not track raise
  ``UntrackedDataRead`` in the test that did it: a ``ROOT / "data"`` read that would meet a user's
  measurements fails on any machine that has some, not only on theirs. Subprocesses are not hooked:
  they inherit ``ALMANAC_DATA``, and ``build_site`` refuses the live folder. A test that packs the
  working tree as bytes (the remote snapshot) asks for the ``live_tree`` fixture, which pauses it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import committed, lanes

os.environ.setdefault(
    "ALMANAC_VALIDATE_CHARTS", "1"
)  # charts are validated by Altair in tests (the site build skips it)
# the suite's runs do not wait for a quiet machine nor measure again (core.quiet; tests/test_quiet.py
# turns it on): a busy CI machine would otherwise triple every end-to-end test
os.environ.setdefault("ALMANAC_QUIET", "off")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = (
    FIXTURES / "data"
)  # golden artifacts measured for real, committed (asv's example_results)
ARTIFACT_DIRS = committed.ARTIFACT_DIRS

_SESSION: dict = {}  # "data": the session's committed copy, "snapshot": its files when made, "tmp": its parent


def pytest_configure(config):
    """Code scoring refuses to run without kernel isolation (runtime.quality.sandbox). The code
    the suite runs is its own (reference solutions, and hostile snippets that the audit hook is
    tested to contain), so on a host without namespaces or bubblewrap the suite accepts that
    risk for itself; tests of the refusal itself clear the variable.

    Then the session's data folder and the live-data guard (the module's docstring)."""
    from runtime.quality import sandbox

    if not sandbox.kernel_isolation_available():
        os.environ.setdefault(sandbox.ACCEPT_ENV, "1")
    try:
        tracked = committed.tracked_files()
    except committed.NoCommittedData as exc:
        raise pytest.UsageError(str(exc)) from None
    tmp = Path(tempfile.mkdtemp(prefix="almanac-committed-"))
    _SESSION.update(tmp=tmp, data=committed.committed_data(tmp / "data"))
    _SESSION["snapshot"] = tree_snapshot(_SESSION["data"])
    os.environ["ALMANAC_DATA"] = str(_SESSION["data"])
    if "guard" not in _SESSION:  # an audit hook cannot be removed: one per process
        _SESSION["guard"] = committed.LiveDataGuard(
            ROOT / "data",
            frozenset()
            if os.environ.get(committed.OVERRIDE_ENV)
            else frozenset(tracked),
        )
        sys.addaudithook(lambda event, args: _SESSION["guard"](event, args))


def pytest_collection_modifyitems(config, items):
    """Every test gets its lane's marker (tests/support/lanes.py says the rule)."""
    lanes.mark_lanes(items)


def pytest_unconfigure(config):
    tmp = _SESSION.pop("tmp", None)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def session_data() -> Path:
    """The session's committed data folder (``ALMANAC_DATA`` unless a test sets its own): read it, never write it."""
    return _SESSION["data"]


@pytest.fixture
def live_tree() -> Path:
    """For a test that packs the working tree as it is (runtime.remote.snapshot ships it, its bytes
    unread): the live-data guard stands aside for it. Never for a test that reads artifacts."""
    with _SESSION["guard"].paused():
        yield ROOT


@pytest.fixture(autouse=True)
def _session_data_unchanged():
    """Fail a test that wrote into the session's committed copy (and make the copy anew)."""
    yield
    data = _SESSION.get("data")
    if data is None:
        return
    now, was = tree_snapshot(data), _SESSION["snapshot"]
    if now != was:
        changed = sorted(k for k in set(now) | set(was) if now.get(k) != was.get(k))
        shutil.rmtree(data)
        committed.committed_data(data)
        _SESSION["snapshot"] = tree_snapshot(data)
        pytest.fail(
            f"the test changed the session's committed data folder ({', '.join(changed[:5])}): give it a "
            "folder of its own (data_env, golden_data, or committed.committed_data(tmp_path / 'data'))",
            pytrace=False,
        )


@pytest.fixture
def data_env(tmp_path, monkeypatch):
    """An empty data dir with the real model registry; ALMANAC_DATA points at it."""
    d = tmp_path / "data"
    (d / "matrices").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    return d


def make_golden_data(dest: Path) -> Path:
    """A data dir made of the project's committed inputs (registries, matrices, suites, schemas)
    and the committed golden artifacts instead of the project's own measurements."""
    committed.committed_data(dest, artifacts=False)
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
    """Every file under ``d`` (its path relative to ``d``) and its mtime in ns: what
    ``d.rglob("*")`` finds, read with ``os.scandir`` (about 5 times faster: it runs after every
    test, on the session's data folder)."""
    out: dict[str, float] = {}
    root = str(d)
    cut = len(root) + 1
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if e.is_dir():
                stack.append(e.path)
            elif e.is_file():
                out[e.path[cut:]] = e.stat().st_mtime_ns
    return out


def build_site(data: Path, out: Path) -> subprocess.CompletedProcess:
    """Build the site (strict) from ``data`` into ``out``; never from the live data/ folder (the guard
    cannot see into the build's process): the committed data is ``session_data``."""
    if Path(data).resolve() == (ROOT / "data").resolve():
        raise committed.UntrackedDataRead(
            f"build_site({data}): the live data/ folder may hold a user's measurements; "
            "build from the committed copy (the session_data fixture)"
        )
    env = dict(os.environ, ALMANAC_DATA=str(data), DISABLE_MKDOCS_2_WARNING="true")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site built (strict) from the golden artifacts alone."""
    out = tmp_path_factory.mktemp("site")
    data = make_golden_data(tmp_path_factory.mktemp("golden") / "data")
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def committed_site(tmp_path_factory, session_data):
    """The site built (strict) from the committed data (the session's copy, ``session_data``: never
    the live data/ folder), once for every test that reads it: read it, never write it (a test that
    plants something copies it first)."""
    out = tmp_path_factory.mktemp("committed-site")
    proc = build_site(session_data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
