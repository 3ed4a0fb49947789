"""The sandbox under attack: a program passes only when it ran to its end (no early exit,
signal or harness tampering passes), the per-run secret cannot be reached, output is capped
while it is read, and without kernel isolation code does not run unless the risk is accepted
(checked for real as user nobody when this suite runs as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.quality import sandbox
from runtime.quality.sandbox import Limits, run_python

ROOT = Path(__file__).resolve().parents[1]
LIMITS = Limits(timeout_s=5, cpu_s=5)
CODE_DIR = Path(__file__).parent / "hostile" / "code"
needs_kernel = pytest.mark.skipif(
    not sandbox.kernel_isolation_available(), reason="no kernel isolation here"
)


def test_output_is_capped_while_it_is_read():
    r = run_python(
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
        Limits(timeout_s=30, cpu_s=30),
        accept_risk=True,
    )
    assert not r.ok and "output limit" in r.reason and not r.timed_out
    assert len(
        r.stdout
    ) <= sandbox.MAX_CAPTURE and r.output_bytes < sandbox.OUTPUT_LIMIT + (1 << 20)


@pytest.mark.parametrize(
    "early_exit",
    [
        "import sys; sys.exit(0)",
        "raise SystemExit(0)",
        "import os; os._exit(0)",
        "import atexit, os; atexit.register(os._exit, 0)",
        "import signal; signal.raise_signal(signal.SIGKILL)",
        "import sys, os; sys.excepthook = lambda *a: os._exit(0)",
    ],
)
def test_an_early_exit_never_passes(early_exit):
    r = run_python(
        "def f():\n    return 0\n" + early_exit + "\n",
        LIMITS,
        tests="assert f() == 1\n",
        accept_risk=True,
    )
    assert not r.ok and not r.completed and r.reason, r
    good = run_python(
        "def f():\n    return 1\n", LIMITS, tests="assert f() == 1\n", accept_risk=True
    )
    assert good.ok and good.completed and good.reason == ""


@pytest.mark.parametrize(
    "probe",
    [
        "import sys; sys._getframe(1)",
        "try:\n    1/0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
        "def g():\n    yield 1\ng().gi_frame",
        "import gc",
        "open('/proc/self/mem', 'rb')",
        "import sys; sys._current_frames()",
        "import ctypes",
    ],
)
def test_the_secret_cannot_be_reached(probe):
    r = run_python(probe, LIMITS, accept_risk=True)
    assert not r.ok and "not allowed" in r.stderr, r


def test_code_cannot_swallow_the_tests():
    r = run_python(
        "def f():\n    return 0\nx = '''",
        LIMITS,
        tests="assert f() == 1\n",
        accept_risk=True,
    )
    assert (
        not r.ok and not r.completed
    )  # an open string is the code's syntax error, not a string around the tests


@pytest.mark.parametrize("path", sorted(CODE_DIR.glob("*.py")), ids=lambda p: p.stem)
def test_hostile_snippets_never_pass_and_never_escape(path, tmp_path):
    """tests/hostile/code/*.py: each tries an escape or a forged pass; its first line names
    a marker file it would create outside the sandbox."""
    marker = tmp_path / "escaped"
    code = path.read_text().replace("MARKER", str(marker))
    r = run_python(code, LIMITS, tests="assert solution() == 42\n")
    assert not r.ok, (path.name, r)
    assert not marker.exists(), path.name


def test_refuses_without_kernel_isolation_unless_the_risk_is_accepted(monkeypatch):
    monkeypatch.setattr(sandbox, "kernel_isolation", lambda: None)
    monkeypatch.delenv(sandbox.ACCEPT_ENV, raising=False)
    with pytest.raises(sandbox.SandboxUnavailable, match="accept-sandbox-risk"):
        run_python("print(1)", LIMITS)
    with pytest.raises(sandbox.SandboxUnavailable):
        run_python("print(1)", LIMITS, namespaces=False)
    r = run_python("print(1)", LIMITS, accept_risk=True)
    assert r.ok and "netns" not in r.isolation


NOBODY_PY = "/usr/bin/python3"


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(NOBODY_PY),
    reason="needs root (to become nobody) and setpriv",
)
@pytest.mark.parametrize("bwrap", [True, False], ids=["with-bwrap", "without-bwrap"])
def test_as_nobody_it_isolates_with_bwrap_or_fails_closed(bwrap, tmp_path):
    """The non-root path for real: as user nobody, bubblewrap gives kernel isolation where it is
    installed; without it (PATH without bwrap) code scoring refuses with one line."""
    if bwrap and not shutil.which("bwrap"):
        pytest.skip("bubblewrap not installed")
    work = tmp_path / "w"
    work.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(work, 0o777)
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from runtime.quality import sandbox\n"
        "from core.errors import UserError\n"
        "try:\n"
        "    r = sandbox.run_python(\"open('/tmp/x-escape', 'w')\\nprint('ran')\", sandbox.Limits(timeout_s=10))\n"
        "except UserError as exc:\n"
        "    print('REFUSED', exc); sys.exit(2)\n"
        "print('KERNEL', sandbox.kernel_isolation(), 'OK', r.ok, 'OUT', r.stdout.strip())\n"
    )
    path = "/usr/bin:/bin" if bwrap else str(tmp_path / "empty")
    if not bwrap:
        (tmp_path / "empty").mkdir()
        os.chmod(tmp_path / "empty", 0o755)
    env = {"PATH": path, "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8"}
    p = subprocess.run(
        [
            shutil.which("setpriv"),
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            NOBODY_PY,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(work),
    )
    if bwrap:
        assert p.returncode == 0 and "KERNEL bwrap OK False" in p.stdout, (
            p.stdout + p.stderr
        )
        assert "ran" not in p.stdout
    else:
        assert p.returncode == 2 and p.stdout.startswith("REFUSED"), p.stdout + p.stderr
        assert (
            len(p.stdout.strip().splitlines()) == 1
            and "--accept-sandbox-risk" in p.stdout
        )
    assert not os.path.exists("/tmp/x-escape")
