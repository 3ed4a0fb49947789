"""The code-execution sandbox: a malicious snippet cannot write outside its temporary
directory, open a socket, fork, or run past its timeout, with both layers together and
with each layer alone (the kernel layer only where this host allows namespaces)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from runtime.quality import sandbox
from runtime.quality.sandbox import Limits, run_python

KERNEL = sandbox.kernel_isolation_available()
LAYERS = [pytest.param({}, id="both-layers")]
LAYERS.append(
    pytest.param(
        {"audit_hook": False},
        id="kernel-layer-only",
        marks=pytest.mark.skipif(
            not KERNEL, reason="no namespaces here (not root, or no unshare)"
        ),
    )
)
LAYERS.append(
    pytest.param({"namespaces": False, "accept_risk": True}, id="audit-hook-only")
)
LIMITS = Limits(timeout_s=5, cpu_s=5)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A path outside any sandbox directory that the test process itself can write."""
    return tmp_path / f"escaped-{uuid.uuid4().hex}.txt"


@pytest.fixture
def world_writable(tmp_path_factory):
    """A world-writable directory in /tmp: only the read-only mount (or the audit hook) keeps
    a sandboxed process from writing there, not file permissions."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="almanac-open-", dir="/tmp"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("layers", LAYERS)
def test_cannot_write_outside_its_directory(layers, outside, world_writable):
    for target in (outside, world_writable / "escaped.txt"):
        for code in (
            f"open({str(target)!r}, 'w').write('pwned')",
            f"import os; fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT); os.write(fd, b'pwned')",
            f"import pathlib; pathlib.Path({str(target)!r}).write_text('pwned')",
        ):
            r = run_python(code, LIMITS, **layers)
            assert r.exit_code == 1 and not r.timed_out, r.stderr
            expected = (
                ["not allowed"]
                if layers.get("namespaces") is False
                else (
                    ["Read-only file system", "Permission denied"]
                    if layers.get("audit_hook") is False
                    else ["not allowed", "Read-only file system"]
                )
            )
            assert any(e in r.stderr for e in expected), r.stderr
            assert not target.exists()
    if (
        layers.get("audit_hook") is False
    ):  # the world-writable dir is refused by the mount, not by permissions
        r = run_python(f"open({str(world_writable / 'x')!r}, 'w')", LIMITS, **layers)
        assert "Read-only file system" in r.stderr


@pytest.mark.parametrize("layers", LAYERS)
def test_can_write_inside_its_own_directory(layers):
    r = run_python(
        "open('result.txt', 'w').write('ok'); print(open('result.txt').read())",
        LIMITS,
        **layers,
    )
    assert r.ok and r.stdout.strip() == "ok"


@pytest.mark.parametrize("layers", LAYERS)
def test_cannot_open_a_network_connection(layers):
    code = (
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.settimeout(2)\n"
        "s.connect(('127.0.0.1', 9))\nprint('connected')"
    )
    r = run_python(code, LIMITS, **layers)
    assert r.exit_code == 1 and "connected" not in r.stdout
    assert "Network is unreachable" in r.stderr or "not allowed" in r.stderr, r.stderr


@pytest.mark.parametrize("layers", LAYERS)
def test_cannot_start_processes(layers, outside):
    r = run_python(
        f"import subprocess; subprocess.run(['touch', {str(outside)!r}])",
        LIMITS,
        **layers,
    )
    assert r.exit_code == 1 and not outside.exists()
    r = run_python(
        "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint('forked')",
        LIMITS,
        **layers,
    )
    assert r.exit_code == 1 and "forked" not in r.stdout


@pytest.mark.parametrize("layers", LAYERS)
def test_cannot_run_past_its_timeout(layers):
    t0 = time.perf_counter()
    r = run_python(
        "import time\nwhile True:\n    time.sleep(0.01)",
        Limits(timeout_s=1.0, cpu_s=5),
        **layers,
    )
    assert r.timed_out and not r.ok and r.signal == "SIGKILL"
    assert time.perf_counter() - t0 < 8


def test_cpu_limit_stops_a_busy_loop_even_without_the_wall_clock():
    r = run_python("while True:\n    pass", Limits(timeout_s=60, cpu_s=1))
    assert not r.ok and not r.timed_out and r.signal in ("SIGXCPU", "SIGKILL"), r


def test_memory_limit():
    r = run_python(
        "x = bytearray(3 << 30)\nprint('allocated')",
        Limits(timeout_s=10, memory_bytes=512 << 20),
    )
    assert (
        r.exit_code == 1 and "MemoryError" in r.stderr and "allocated" not in r.stdout
    )


def test_runs_in_a_fresh_directory_never_in_this_process():
    a = run_python("import os; print(os.getcwd()); print(os.getpid())", LIMITS)
    b = run_python("import os; print(os.getcwd())", LIMITS)
    cwd_a, pid_a = a.stdout.split()
    assert cwd_a != b.stdout.strip() and not os.path.exists(
        cwd_a
    )  # a new temp dir each time, removed after
    assert int(pid_a) != os.getpid()


@pytest.mark.skipif(not KERNEL, reason="no namespaces here")
def test_kernel_layer_hides_the_interpreter_home_and_drops_root():
    r = run_python(
        # a home the sandbox does not mount at all (the interpreter lives elsewhere) lists as nothing
        "import os\nprint(os.getuid())\ntry:\n    print(sorted(os.listdir(os.path.expanduser('~root'))))\n"
        "except OSError:\n    print([])",
        LIMITS,
    )
    uid, listing = r.stdout.splitlines()
    assert int(uid) == sandbox.NOBODY
    home = Path(os.path.expanduser("~root"))
    secret_names = {p.name for p in home.iterdir()} - set(eval(listing))
    assert secret_names or not any(
        home.iterdir()
    )  # whatever else lives there is not visible
