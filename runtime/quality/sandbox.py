"""Run untrusted Python (model output) in a sandbox: never in the calling process.

Every call gets a fresh temporary directory, a child process with a wall-clock timeout,
resource limits, no network, and a filesystem it cannot write outside that directory.
Two layers, and the result says which were active:

1. **Kernel layer** (Linux, as root, where ``unshare`` can create namespaces; probed once
   per process): the child runs in new network, mount, IPC and PID namespaces
   (``unshare --net --mount --ipc --pid --fork --kill-child``). Before the untrusted code
   starts, a small setup program (``_sandbox_setup.py``) makes every mount read-only
   recursively (``mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)``) except the temporary
   directory, hides the directory holding the interpreter behind a fresh tmpfs that shows
   only the interpreter's own prefix (so secrets beside it, e.g. in /root, are not
   readable), drops to user ``nobody`` with no capabilities and ``no_new_privs``, lowers
   ``RLIMIT_NPROC`` (no fork once dropped) and execs a clean interpreter. The network
   namespace has no interface but a down loopback; killing the namespace's init on
   timeout kills every process in it.
2. **Interpreter layer** (always): the untrusted code runs under ``python -I -S`` behind
   an audit hook (``_sandbox_boot.py``, installed before the code is compiled) that
   refuses socket creation and connection, opening files for writing outside the
   temporary directory, file-system mutation outside it (remove, rename, mkdir, chmod,
   ...), process creation (fork, exec, subprocess, os.system, posix_spawn), signals to
   other processes, and importing ctypes (which could undo all of the above). Audit hooks
   are not a security boundary on their own (CPython's docs say so); without layer 1
   they are what remains, and the result says so.

Always: ``resource`` limits set in ``preexec_fn`` before exec (RLIMIT_AS address space,
RLIMIT_CPU seconds, RLIMIT_FSIZE largest file, RLIMIT_NOFILE, RLIMIT_CORE 0,
RLIMIT_NPROC), a new session so the whole process group is killed on timeout, stdin
closed, a minimal environment, output captured and truncated.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
SETUP_SCRIPT = _HERE / "_sandbox_setup.py"
BOOT_SCRIPT = _HERE / "_sandbox_boot.py"
NOBODY = 65534
MAX_CAPTURE = 20_000  # characters of stdout / stderr kept


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    timeout_s: float = 10.0  # wall clock, then the process group (or PID namespace) is killed
    cpu_s: int = 10  # RLIMIT_CPU
    memory_bytes: int = 1 << 30  # RLIMIT_AS
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE
    open_files: int = 64  # RLIMIT_NOFILE
    processes: int = 1  # RLIMIT_NPROC once running as nobody (1 = no fork)


@dataclass
class SandboxResult:
    exit_code: int | None
    signal: str | None
    timed_out: bool
    stdout: str
    stderr: str
    wall_s: float
    isolation: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _interpreter() -> Path:
    """The base interpreter (not a venv shim): the sandbox needs only the standard library."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(exe))


@functools.lru_cache(maxsize=1)
def kernel_isolation_available() -> bool:
    """Whether layer 1 works here: root, ``unshare`` present, and a trial run succeeds."""
    if os.environ.get("ALMANAC_SANDBOX_NO_NAMESPACES"):
        return False
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="almanac-sbx-probe-") as td:
        res = _run(Path(td), "import sys; sys.exit(0)", Limits(timeout_s=20, cpu_s=10), use_namespaces=True)
    return res.exit_code == 0


def _preexec(limits: Limits, use_namespaces: bool):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not use_namespaces:
            # Without the uid drop, NPROC binds only a non-root caller (the kernel exempts root).
            resource.setrlimit(resource.RLIMIT_NPROC, (max(limits.processes, 1) + 32,) * 2)

    return apply


def _minimal_env(workdir: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def _run(workdir: Path, code: str, limits: Limits, *, use_namespaces: bool, audit_hook: bool = True) -> SandboxResult:
    (workdir / "main.py").write_text(code, encoding="utf-8")
    shutil.copy(BOOT_SCRIPT, workdir / "_boot.py")
    python = _interpreter()
    boot_argv = [str(python), "-I", "-S", "-B", str(workdir / "_boot.py"), str(workdir), str(workdir / "main.py")]
    isolation = ["tempdir", "rlimits", "timeout", "audit-hook", "isolated-interpreter"]
    if not audit_hook:
        boot_argv.append("--no-hook")
        isolation.remove("audit-hook")
    if use_namespaces:
        shutil.copy(SETUP_SCRIPT, workdir / "_setup.py")
        os.chown(workdir, NOBODY, NOBODY)
        os.chmod(workdir, 0o700)
        for f in ("main.py", "_boot.py"):
            os.chmod(workdir / f, 0o644)
        argv = ["unshare", "--net", "--mount", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc",
                str(python), "-I", "-S", "-B", str(workdir / "_setup.py"), str(workdir), str(NOBODY),
                str(limits.processes), str(python.parent.parent), "--"] + boot_argv
        isolation = ["netns", "mountns-readonly", "pidns", "uid-nobody", "no-capabilities"] + isolation
    else:
        argv = boot_argv
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=str(workdir), env=_minimal_env(workdir), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_preexec(limits, use_namespaces))
    timed_out = False
    try:
        out, err = proc.communicate(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        out, err = proc.communicate()
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    code_ = proc.returncode
    sig = None
    if code_ is not None and code_ < 0:
        sig = signal.Signals(-code_).name
    elif code_ is not None and code_ > 128:  # 128+N: killed by N under unshare, or the boot's SIGXCPU handler
        try:
            sig = signal.Signals(code_ - 128).name
        except ValueError:
            sig = None
    return SandboxResult(exit_code=code_ if code_ is not None and code_ >= 0 else None, signal=sig,
                         timed_out=timed_out, stdout=out.decode("utf-8", "replace")[:MAX_CAPTURE],
                         stderr=err.decode("utf-8", "replace")[-MAX_CAPTURE:], wall_s=wall, isolation=isolation)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_python(code: str, limits: Limits | None = None, *, namespaces: bool | None = None,
               audit_hook: bool = True) -> SandboxResult:
    """Run ``code`` as a Python program in a fresh sandbox; never raises for what the code does.

    ``namespaces`` (default: whenever available) and ``audit_hook`` exist so tests can check
    each layer on its own; scoring always uses both where the host allows."""
    limits = limits or Limits()
    use_ns = kernel_isolation_available() if namespaces is None else namespaces
    if use_ns and not kernel_isolation_available():
        raise RuntimeError("kernel isolation (namespaces) is not available on this host")
    with tempfile.TemporaryDirectory(prefix="almanac-sbx-") as td:
        return _run(Path(td), code, limits, use_namespaces=use_ns, audit_hook=audit_hook)


def isolation_layers() -> list[str]:
    """What a sandboxed run gets on this host (for the methodology page and artifacts)."""
    base = ["tempdir", "rlimits", "timeout", "audit-hook", "isolated-interpreter"]
    if kernel_isolation_available():
        return ["netns", "mountns-readonly", "pidns", "uid-nobody", "no-capabilities"] + base
    return base
