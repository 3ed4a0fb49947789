"""The shell and Python that workflows and scripts embed cannot rot unseen (issue 28).

Nothing else runs them on every change: the commands in .github/workflows/test.yml and site.yml,
.ci/run, and the benchmarks/*.py entry points. Here every such shell script parses (`bash -n`),
every `invoke` command it runs names a task and options that exist, every pytest target exists
and selects tests, and every benchmark script answers `--help` and imports only modules and
names that exist (lazy imports inside functions included: a moved module fails here, not on a
GPU host). bench-self-hosted.yml and benchmarks/gpu_*.sh have their own owners and tests.
"""

from __future__ import annotations

import ast
import importlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = [ROOT / ".github" / "workflows" / n for n in ("test.yml", "site.yml")]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
OUR_PACKAGES = ("core", "runtime", "pipelines", "tests")


def workflow_scripts() -> list[tuple[str, str]]:
    """(label, shell script) for every `run:` step of the workflows, and .ci/run."""
    out = []
    for wf in WORKFLOWS:
        doc = yaml.safe_load(wf.read_text(encoding="utf-8"))
        for job_name, job in doc["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    label = f"{wf.name}:{job_name}:{step.get('name', i)}"
                    out.append((label, step["run"]))
    out.append((".ci/run", (ROOT / ".ci" / "run").read_text(encoding="utf-8")))
    return out


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script, split into words (one per line or `&&` part;
    comments, blank lines and shell syntax lines left out)."""
    out = []
    for line in script.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            if words:
                out.append(words)
    return out


SHELL = workflow_scripts()


@pytest.mark.parametrize("label,script", SHELL, ids=[s[0] for s in SHELL])
def test_embedded_shell_parses(label, script):
    res = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert res.returncode == 0, f"{label}: {res.stderr}"


def _invoke_calls() -> list[tuple[str, list[str]]]:
    return [
        (label, w[1:]) for label, s in SHELL for w in commands(s) if w[0] == "invoke"
    ]


def test_the_workflows_run_invoke():
    called = {args[0] for _, args in _invoke_calls()}
    assert {"test", "validate", "site.build"} <= called, called


@pytest.mark.parametrize(
    "label,args",
    _invoke_calls(),
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_invoke_commands_name_real_tasks_and_options(label, args):
    from invoke import Collection
    from invoke.parser import Parser

    from pipelines.site.manual import load_collection

    ns: Collection = load_collection()
    name, rest = args[0], args[1:]
    assert name in ns.task_names or any(name in a for a in ns.task_names.values()), (
        f"{label}: no task {name!r}"
    )
    context = ns.to_contexts(ignore_unknown_help=True)
    parser = Parser(contexts=context)
    result = parser.parse_argv(
        [name, *rest]
    )  # raises ParseError on an unknown option or value
    assert result[0].name in ns.task_names or result[0].aliases, label


def test_ci_runs_the_readmes_exact_test_command_and_installs_once():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_line = next(
        line.split("#", 1)[0].strip()
        for line in readme.splitlines()
        if line.strip().endswith("# run the test suite")
    )
    assert test_line in ci.splitlines()
    installs = [w for w in commands(ci) if w[:4] == ["python3", "-m", "pip", "install"]]
    assert len(installs) == 1, installs


def _pytest_targets() -> list[tuple[str, list[str]]]:
    out = []
    for label, script in SHELL:
        for w in commands(script):
            if w[:3] == ["python3", "-m", "pytest"]:
                out.append((label, w[3:]))
    return out


@pytest.mark.parametrize(
    "label,args",
    _pytest_targets(),
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_pytest_commands_select_tests(label, args):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # pytest exits 5 when the selection is empty, 4 on a missing file or bad option
    assert res.returncode == 0, f"{label}: {res.stdout[-1500:]}{res.stderr[-1500:]}"


def imported_names(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import of our packages or of a sibling script,
    at any depth of the file (lazy imports in functions too)."""
    siblings = {p.stem for p in path.parent.glob("*.py")}
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.lineno, node.module, a.name) for a in node.names]
    return [
        (ln, mod, name)
        for ln, mod, name in out
        if mod.split(".")[0] in OUR_PACKAGES or mod.split(".")[0] in siblings
    ]


def missing_imports(script: Path) -> list[str]:
    """What ``script`` imports from our packages (or a sibling) that does not exist."""
    missing = []
    sys.path.insert(0, str(script.parent))
    try:
        for line, mod, name in imported_names(script):
            try:
                module = importlib.import_module(mod)
            except ImportError as exc:
                top = (exc.name or "").split(".")[0]
                if (
                    top
                    and top not in OUR_PACKAGES
                    and not (script.parent / f"{top}.py").exists()
                ):
                    continue  # an optional third-party library (torch, pynvml) absent here
                missing.append(f"{script.name}:{line}: import {mod}: {exc}")
                continue
            if name is not None and name != "*" and not hasattr(module, name):
                try:
                    importlib.import_module(f"{mod}.{name}")
                except ImportError:
                    missing.append(f"{script.name}:{line}: {mod} has no {name}")
    finally:
        sys.path.remove(str(script.parent))
    return missing


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_imports_exist(script):
    assert not missing_imports(script)


def test_a_moved_module_is_seen(tmp_path):
    """The check is not vacuous: the import that broke bench-self-hosted.yml's propose step
    (`from runtime import artifacts`, a module that moved to core/) and a lazy import of a name
    that does not exist are both found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from runtime import artifacts\n"
        "def main():\n    from core.paths import no_such_name\n    import runtime.no_such_module\n"
    )
    found = missing_imports(bad)
    assert len(found) == 3 and "bad.py:1" in found[0] and "no_such_name" in found[1], (
        found
    )


_HELP_RUNNER = """
import json, runpy, sys, io, contextlib
out = {}
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    buf = io.StringIO()
    code = None
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:
        code = f"{type(exc).__name__}: {exc}"
    out[path] = [code, buf.getvalue()[:300]]
print(json.dumps(out))
"""


def test_every_script_answers_help():
    """One process runs every script's `--help` (argparse prints usage and exits 0 before the
    script does anything)."""
    res = subprocess.run(
        [sys.executable, "-c", _HELP_RUNNER, *map(str, SCRIPTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.splitlines()[-1])
    bad = {
        Path(p).name: v
        for p, v in got.items()
        if v[0] not in (0, None) or "usage:" not in v[1]
    }
    assert not bad, bad
