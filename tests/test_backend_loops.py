"""A backend sends one request or runs one decode step; a kind owns its loop (core/kinds/*.py:
``run_rate``, ``run_requests``, ``run_levels``, ``run_embed``, ``run_generate``).

Two guards. import-linter's ``kinds-own-loops`` contract (pyproject.toml; tests/test_layers.py)
keeps ``core.precision`` - how many samples a test takes - out of every backend module. This
test reads every backend module's syntax tree for the other half of a timing loop: a loop whose
every iteration times a region of its own (two clock reads per pass: a start and an end), the
shape of the repetition loops that lived in the backends before. The few loops that legitimately
read the clock twice per pass are named here with the reason; one that is no longer there fails
the test too, so the list cannot go stale."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ROOT / "runtime" / "backends"
#: the backend a contributor copies (tests/test_example_kind.py adds it from outside the package)
EXAMPLE = ROOT / "tests" / "support" / "example_backend.py"
CLOCKS = {
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "time",
    "time_ns",
    "process_time",
    "process_time_ns",
}

#: (module relative to the repository, function holding the loop) -> why it is not a kind's loop
ALLOWED = {
    (
        "runtime/backends/llama_cpp/backend.py",
        "LlamaCppBackend._attach_adapters",
    ): "loading: each LoRA adapter's load time, once per adapter (part of load, not a test)",
    (
        "runtime/backends/openai_http/client.py",
        "_attempt",
    ): "one request: each streamed chunk's arrival and its parse time",
    (
        "runtime/backends/openai_http/server.py",
        "ManagedServer.start",
    ): "starting a server: polling its health endpoint until a deadline",
}


class _Strip(ast.NodeTransformer):
    """A loop's body without the functions defined inside it (a callee is not the loop)."""

    def visit_FunctionDef(self, node: ast.AST) -> None:
        return None

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.AST) -> ast.AST:
        return ast.Constant(None)


def _clock_reads(node: ast.AST) -> int:
    n = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = (
                f.attr
                if isinstance(f, ast.Attribute)
                else f.id
                if isinstance(f, ast.Name)
                else None
            )
            n += name in CLOCKS
    return n


def timing_loops(source: str) -> list[tuple[str, int]]:
    """(enclosing function's qualified name, line) of every loop that reads a clock at least twice
    per pass, in the code of one module."""
    found: list[tuple[str, int]] = []

    def walk(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                walk(child, [*scope, child.name])
                continue
            if isinstance(child, ast.For | ast.AsyncFor | ast.While):
                body = _Strip().visit(
                    ast.Module(body=copy.deepcopy(child.body), type_ignores=[])
                )
                if _clock_reads(body) >= 2:
                    found.append((".".join(scope) or "<module>", child.lineno))
            walk(child, scope)

    walk(ast.parse(source), [])
    return found


def _found() -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for path in [*sorted(BACKENDS.rglob("*.py")), EXAMPLE]:
        rel = path.relative_to(ROOT).as_posix()
        for func, line in timing_loops(path.read_text()):
            out.setdefault((rel, func), line)
    return out


def test_no_backend_module_times_repetitions_in_a_loop():
    found = _found()
    loops = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not loops, (
        "a backend loop times a region on every pass (a kind's loop: move it to core/kinds/ and "
        "give the backend one request or one decode step): "
        + ", ".join(f"{m}:{line} in {f}" for (m, f), line in loops.items())
    )
    stale = [k for k in ALLOWED if k not in found]
    assert not stale, f"allowed loops no longer there (drop them from ALLOWED): {stale}"


@pytest.mark.parametrize(
    "source, expected",
    [
        (  # the shape that lived in the backends: a repetition loop around a timed region
            "import time\n"
            "def run(work, n):\n"
            "    out = []\n"
            "    for _ in range(n):\n"
            "        t0 = time.perf_counter_ns()\n"
            "        work()\n"
            "        out.append(time.perf_counter_ns() - t0)\n"
            "    return out\n",
            [("run", 4)],
        ),
        (  # one request's per-chunk timestamps read the clock once a pass: a primitive
            "import time\n"
            "class B:\n"
            "    def request(self, stream):\n"
            "        stamps = []\n"
            "        for chunk in stream:\n"
            "            stamps.append(time.perf_counter_ns())\n"
            "        return stamps\n",
            [],
        ),
        (  # a primitive defined inside a loop is not the loop
            "import time\n"
            "def run(items):\n"
            "    while items:\n"
            "        def one():\n"
            "            t0 = time.perf_counter(); return time.perf_counter() - t0\n"
            "        items.pop()\n",
            [],
        ),
    ],
)
def test_the_check_tells_a_timing_loop_from_a_primitive(source, expected):
    assert timing_loops(source) == expected
