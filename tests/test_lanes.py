"""The lanes stay honest (tests/support/lanes.py): a test left in the fast lane neither starts a
process, builds a site nor drives a server, directly in its body; such a test belongs to the
integration or end-to-end lane (list its module there, or give it the marker)."""

from __future__ import annotations

import ast
from pathlib import Path

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
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
                continue
            if _marked(fn) or {a.arg for a in fn.args.args} & LANE_FIXTURES:
                continue
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)
            }
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
