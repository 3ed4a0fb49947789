"""The lanes stay honest (tests/support/lanes.py): a test left in the fast lane neither starts a
process, builds a site nor drives a server, in its body or through a helper or fixture of its own
module (followed call by call) or a helper imported from an integration or end-to-end test module;
such a test belongs to the integration or end-to-end lane (list its module there, or give it the
marker)."""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import cast

import pytest

from tests.support import lanes

TESTS = Path(__file__).resolve().parent
#: Names whose use in a test's body means a process, a site build or a server.
HEAVY = {
    "subprocess",
    "Popen",
    "build_site",
    "mkdocs",
    "run_matrix",
    "ssh",
    "chromium",
    "uvicorn",
    "HTTPServer",  # a loopback server in process (http.server)
    "ThreadingHTTPServer",
    "FAULT",  # tests/fault_server.py, started as a server_command (tests/test_load.py)
}
LANE_FIXTURES = lanes.E2E_FIXTURES | lanes.INTEGRATION_FIXTURES


def _marked(fn: ast.FunctionDef) -> bool:
    """Whether a decorator gives the test a lane (a lane marker, model or browser)."""
    for d in fn.decorator_list:
        for node in ast.walk(d):
            if isinstance(node, ast.Attribute) and node.attr in (
                *lanes.LANES,
                "model",
                "browser",
            ):
                return True
    return False


def _names(fn: ast.FunctionDef) -> set[str]:
    """Every name and attribute a function uses, and its parameters (a fixture is used by naming it)."""
    return (
        {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        | {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
        | {a.arg for a in fn.args.args}
    )


def _reach(
    path: Path, _seen: dict[Path, dict[str, set[str]]] | None = None
) -> dict[str, set[str]]:
    """Each top-level function of a test module (test, helper or fixture) and every name it reaches:
    its own, those of the module's functions it uses (followed call by call), and those of the
    helpers it imports from another test module (followed the same way)."""
    seen = {} if _seen is None else _seen
    if path in seen:
        return seen[path]
    seen[path] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reach = {fn.name: _names(fn) for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    for n in tree.body:
        if not isinstance(n, ast.ImportFrom):
            continue
        source = n.module or ""
        if source.startswith("tests.test_"):
            other = _reach(TESTS / f"{source.rsplit('.', 1)[-1]}.py", seen)
            for alias in n.names:
                if alias.name in other:
                    reach.setdefault(alias.asname or alias.name, set()).update(
                        other[alias.name] | {alias.name}
                    )
    grew = True
    while grew:  # helpers calling helpers
        grew = False
        for name, used in reach.items():
            more = set().union(*(reach[c] for c in used & set(reach) if c != name))
            if more - used:
                used |= more
                grew = True
    seen[path] = reach
    return reach


def heavy_fast_tests() -> list[str]:
    out = []
    for path in sorted(TESTS.glob("test_*.py")):
        module = path.stem
        if module in lanes.E2E_MODULES or module in lanes.INTEGRATION_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marked = any(
            isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
            for n in tree.body
        )
        if module_marked:
            continue
        reach = _reach(path)
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
                continue
            used = reach[fn.name]
            if _marked(fn) or used & LANE_FIXTURES:
                continue
            if used & HEAVY:
                out.append(
                    f"{module}::{fn.name} uses {', '.join(sorted(used & HEAVY))}"
                )
    return out


def test_fast_lane_tests_start_no_process_and_build_no_site():
    assert not heavy_fast_tests()


def test_every_listed_module_exists():
    names = {p.stem for p in TESTS.glob("test_*.py")}
    assert (lanes.E2E_MODULES | lanes.INTEGRATION_MODULES) <= names, sorted(
        (lanes.E2E_MODULES | lanes.INTEGRATION_MODULES) - names
    )


def test_a_helper_or_fixture_that_starts_a_process_makes_its_callers_heavy(tmp_path):
    """The rule follows the module's own helpers and fixtures, call by call."""
    p = tmp_path / "test_x.py"
    p.write_text(
        "import subprocess\n"
        "def _go():\n    return _inner()\n"
        "def _inner():\n    subprocess.run(['true'])\n"
        "def srv():\n    return _go()\n"
        "def test_a(srv):\n    pass\n"
        "def test_b():\n    _go()\n"
        "def test_c(tmp_path):\n    pass\n"
    )
    reach = _reach(p)
    assert "subprocess" in reach["test_a"] and "subprocess" in reach["test_b"]
    assert not reach["test_c"] & HEAVY


def test_a_helper_imported_from_another_test_module_is_followed():
    """test_traffic drives the fault server through tests/test_load.py's helpers."""
    reach = _reach(TESTS / "test_traffic.py")
    assert "FAULT" in reach["test_trace_replay_keeps_the_trace_s_arrival_times"]
    assert not reach["test_the_three_layouts_read_as_published"] & HEAVY


class _Item:
    """What lanes.is_serial reads of a collected test: its markers, fixtures and module."""

    def __init__(self, module: str, fixtures=(), markers=()):
        self.module = types.SimpleNamespace(__name__=f"tests.{module}")
        self.fixturenames = list(fixtures)
        self._markers = set(markers)

    def get_closest_marker(self, name):
        return name if name in self._markers else None


def _serial(module: str, fixtures=(), markers=()) -> bool:
    return lanes.is_serial(cast(pytest.Item, _Item(module, fixtures, markers)))


def test_serial_tests_are_the_load_sensitive_the_machine_wide_and_the_real_model_s():
    # rates and queueing off loopback servers; munged, slurmctld and slurmd; the real model
    assert _serial("test_load") and _serial("test_slurm")
    assert _serial("test_verdicts", markers={"model"})
    assert _serial("test_quality_styles", fixtures={"embedded_model"})
    assert _serial("test_site", markers={"serial"})
    assert not _serial("test_site", fixtures={"committed_site"})
    assert not _serial("test_browser", fixtures={"served"})
    assert not _serial("test_stats")


def test_serial_modules_name_test_modules_that_exist():
    assert {
        m for m in lanes.SERIAL_MODULES if not (TESTS / f"{m}.py").is_file()
    } == set()


def _runs(monkeypatch, **kw) -> list[list[str]]:
    """The pytest command lines `invoke test` runs (each answered 'nothing collected')."""
    import shlex

    from invoke import Context

    from almanac_tasks import test as test_task

    ran: list[list[str]] = []

    def nothing_collected(c: Context, cmd: str) -> int:
        ran.append(shlex.split(cmd))
        return 5

    monkeypatch.setattr(test_task, "exit_code", nothing_collected)
    test_task.test.body(Context(), checks=False, lane="fast", **kw)
    return [argv[argv.index("pytest") :] for argv in ran]


def test_invoke_test_runs_the_parallel_part_on_workers_then_the_serial_part_alone(
    monkeypatch,
):
    parallel, serial = _runs(monkeypatch, k="site")
    assert parallel == [
        "pytest", "-q", "-n", "2", "--dist", "loadscope", "-k", "site",
        "-m", "(fast and not timing) and (not serial)",
    ]  # fmt: skip
    assert serial == [
        "pytest",
        "-q",
        "-k",
        "site",
        "-m",
        "(fast and not timing) and (serial)",
    ]
    assert _runs(monkeypatch, workers=0) == [
        ["pytest", "-q", "-m", "(fast and not timing)"]
    ]
