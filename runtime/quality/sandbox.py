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

Kernel isolation comes from ``unshare`` as root (layer 1 above) or, for any user, from
bubblewrap (``bwrap``: user, network, mount, IPC, PID namespaces, every mount read-only but
the work directory, the interpreter's home hidden, all capabilities dropped) where it is
installed and a trial run succeeds. **Without either, code does not run**: ``run_python``
raises :class:`SandboxUnavailable` (one line, naming the flag) unless the caller accepts
the risk explicitly (``accept_risk=True``, or ``ALMANAC_ACCEPT_SANDBOX_RISK=1``, which
``invoke quality --accept-sandbox-risk`` sets).

**Proof of completion.** A program passes only when it demonstrably ran to its end: the
parent hands the boot a per-run secret on a pipe, the boot reads and closes it before any
untrusted code runs, compiles the code and the tests separately (no string or comment in
the code can swallow the tests), runs them, and only after the last test statement returns
writes the secret to a second pipe. The audit hook refuses what could find the secret in
memory (frames, ``gc``, tracebacks' frames, ``/proc``). An early exit (``sys.exit``,
``raise SystemExit``, ``os._exit``, a signal to itself, an ``atexit`` trick) or tampering
with the harness leaves no proof: ``completed`` is False and the reason says why.

Output is read while the program runs and capped: past ``OUTPUT_LIMIT`` bytes the program
is killed (``output_limit``), and only the first ``MAX_CAPTURE`` characters are kept.

Always: ``resource`` limits set in ``preexec_fn`` before exec (RLIMIT_AS address space,
RLIMIT_CPU seconds, RLIMIT_FSIZE largest file, RLIMIT_NOFILE, RLIMIT_CORE 0,
RLIMIT_NPROC), a new session so the whole process group is killed on timeout, stdin
closed, a minimal environment, output captured and truncated.
"""

from __future__ import annotations

import functools
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError

_HERE = Path(__file__).resolve().parent
SETUP_SCRIPT = _HERE / "_sandbox_setup.py"
BOOT_SCRIPT = _HERE / "_sandbox_boot.py"
NOBODY = 65534
MAX_CAPTURE = 20_000  # characters of stdout / stderr kept
OUTPUT_LIMIT = (
    4 << 20
)  # bytes of stdout + stderr a program may write before it is killed
ACCEPT_ENV = "ALMANAC_ACCEPT_SANDBOX_RISK"
ACCEPT_FLAG = "--accept-sandbox-risk"


class SandboxUnavailable(UserError):
    """Code would run without kernel isolation and the caller did not accept that risk."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    timeout_s: float = (
        10.0  # wall clock, then the process group (or PID namespace) is killed
    )
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
    completed: bool = False  # the boot wrote this run's secret after the last statement
    reason: str = ""  # why it did not pass, in words ("" when it did)
    output_bytes: int = 0  # stdout + stderr as written (before capping)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.completed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _interpreter() -> Path:
    """The base interpreter (not a venv shim): the sandbox needs only the standard library."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(exe))


@functools.lru_cache(maxsize=1)
def kernel_isolation() -> str | None:
    """Which kernel layer works here: ``"unshare"`` (root, namespaces), ``"bwrap"`` (bubblewrap,
    any user), or None. Probed once per process with a trial run."""
    if os.environ.get("ALMANAC_SANDBOX_NO_NAMESPACES") or not sys.platform.startswith(
        "linux"
    ):
        return None
    candidates = []
    if os.geteuid() == 0 and shutil.which("unshare"):
        candidates.append("unshare")
    if os.geteuid() != 0 and shutil.which(
        "bwrap"
    ):  # as root, bwrap would leave root's file ownership in place
        candidates.append("bwrap")
    for kind in candidates:
        with tempfile.TemporaryDirectory(
            prefix=f"almanac-sbx-{os.getpid()}-probe-"
        ) as td:
            res = _run(
                Path(td),
                "import sys",
                None,
                Limits(timeout_s=20, cpu_s=10),
                kernel=kind,
            )
        if res.ok:
            return kind
    return None


def kernel_isolation_available() -> bool:
    return kernel_isolation() is not None


def unavailable_reason() -> str:
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.environ.get("ALMANAC_SANDBOX_NO_NAMESPACES"):
        return "ALMANAC_SANDBOX_NO_NAMESPACES is set"
    if os.geteuid() != 0 and not shutil.which("bwrap"):
        return "not root and bubblewrap (bwrap) is not installed"
    return "namespaces could not be created here (unshare/bwrap trial run failed)"


def require_isolation(accept_risk: bool = False) -> None:
    """Raise SandboxUnavailable unless kernel isolation works here or the risk is accepted."""
    if kernel_isolation() is None and not (
        accept_risk or os.environ.get(ACCEPT_ENV) == "1"
    ):
        raise SandboxUnavailable(
            f"code scoring refused: no kernel isolation for untrusted code ({unavailable_reason()}); "
            f"install bubblewrap, run as root, or pass {ACCEPT_FLAG} to run it behind the "
            "audit hook alone",
            file="sandbox",
        )


def _preexec(limits: Limits, use_namespaces: bool):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(
            resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes)
        )
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes)
        )
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)
        )
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not use_namespaces and os.geteuid() != 0:
            # Without the uid drop, NPROC binds only a non-root caller (the kernel exempts root).
            resource.setrlimit(
                resource.RLIMIT_NPROC, (max(limits.processes, 1) + 32,) * 2
            )

    return apply


def _minimal_env(workdir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def _bwrap_argv(workdir: Path, python: Path) -> list[str]:
    argv = [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    prefix = str(python.parent.parent)
    anc = _hidden_ancestor(prefix)
    if (
        anc is not None
    ):  # e.g. /root holding a pyenv interpreter: show only the interpreter's prefix
        argv += ["--tmpfs", anc, "--ro-bind", prefix, prefix]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    return argv + ["--"]


def _hidden_ancestor(prefix: str) -> str | None:
    parts = prefix.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        d = "/" + "/".join(parts[:i])
        try:
            if not os.stat(d).st_mode & 0o001:
                return d
        except OSError:
            return None
    return None


def _reader(
    stream: Any, keep: int, state: dict[str, Any], name: str, limit: int, on_limit: Any
) -> threading.Thread:
    """Read a pipe while the program runs: keep the first ``keep`` bytes (and the last ``keep`` for
    stderr), count the rest, call ``on_limit`` once past ``limit`` bytes in total."""

    def run() -> None:
        head = bytearray()
        tail = bytearray()
        while True:
            try:
                chunk = (
                    stream.read1(65536)
                    if hasattr(stream, "read1")
                    else stream.read(65536)
                )
            except (OSError, ValueError):
                break
            if not chunk:
                break
            with state["lock"]:
                state["bytes"] += len(chunk)
                over = state["bytes"] > limit and not state["over"]
                if over:
                    state["over"] = True
            if over:
                on_limit()
            if len(head) < keep:
                head += chunk[: keep - len(head)]
            tail += chunk
            if len(tail) > keep:
                del tail[: len(tail) - keep]
        state[name] = (bytes(head), bytes(tail))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _run(
    workdir: Path,
    code: str,
    tests: str | None,
    limits: Limits,
    *,
    kernel: str | None,
    audit_hook: bool = True,
) -> SandboxResult:
    (workdir / "main.py").write_text(code, encoding="utf-8")
    if tests is not None:
        (workdir / "tests.py").write_text(tests, encoding="utf-8")
    shutil.copy(BOOT_SCRIPT, workdir / "_boot.py")
    python = _interpreter()
    secret = secrets.token_hex(16)
    secret_r, secret_w = os.pipe()
    proof_r, proof_w = os.pipe()
    os.write(secret_w, secret.encode())
    os.close(secret_w)
    boot_argv = [
        str(python),
        "-I",
        "-S",
        "-B",
        str(workdir / "_boot.py"),
        str(workdir),
        str(workdir / "main.py"),
        f"--secret-fd={secret_r}",
        f"--proof-fd={proof_w}",
    ]
    if tests is not None:
        boot_argv.append(f"--tests={workdir / 'tests.py'}")
    isolation = [
        "tempdir",
        "rlimits",
        "timeout",
        "audit-hook",
        "isolated-interpreter",
        "proof-of-completion",
        "output-cap",
    ]
    if not audit_hook:
        boot_argv.append("--no-hook")
        isolation.remove("audit-hook")
    if kernel == "unshare":
        shutil.copy(SETUP_SCRIPT, workdir / "_setup.py")
        os.chown(workdir, NOBODY, NOBODY)
        os.chmod(workdir, 0o700)
        for f in ("main.py", "_boot.py", "tests.py"):
            if (workdir / f).exists():
                os.chmod(workdir / f, 0o644)
        argv = [
            "unshare",
            "--net",
            "--mount",
            "--ipc",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            str(python),
            "-I",
            "-S",
            "-B",
            str(workdir / "_setup.py"),
            str(workdir),
            str(NOBODY),
            str(limits.processes),
            str(python.parent.parent),
            "--",
        ] + boot_argv
        isolation = [
            "netns",
            "mountns-readonly",
            "pidns",
            "uid-nobody",
            "no-capabilities",
        ] + isolation
    elif kernel == "bwrap":
        for f in ("main.py", "_boot.py", "tests.py"):
            if (workdir / f).exists():
                os.chmod(workdir / f, 0o644)
        argv = _bwrap_argv(workdir, python) + boot_argv
        isolation = [
            "bwrap",
            "userns",
            "netns",
            "mountns-readonly",
            "pidns",
            "no-capabilities",
        ] + isolation
    else:
        argv = boot_argv
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(workdir),
            env=_minimal_env(workdir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_preexec(limits, kernel is not None),
            pass_fds=(secret_r, proof_w),
        )
    finally:
        os.close(secret_r)
        os.close(proof_w)
    state: dict[str, Any] = {"lock": threading.Lock(), "bytes": 0, "over": False}
    readers = [
        _reader(
            proc.stdout,
            MAX_CAPTURE,
            state,
            "out",
            OUTPUT_LIMIT,
            lambda: _kill_group(proc.pid),
        ),
        _reader(
            proc.stderr,
            MAX_CAPTURE,
            state,
            "err",
            OUTPUT_LIMIT,
            lambda: _kill_group(proc.pid),
        ),
    ]
    proof = bytearray()

    def read_proof() -> None:
        while len(proof) <= 256:
            chunk = os.read(proof_r, 256)
            if not chunk:
                break
            proof.extend(chunk)

    proof_reader = threading.Thread(target=read_proof, daemon=True)
    proof_reader.start()
    timed_out = False
    try:
        try:
            proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        for t in readers:
            t.join(5)
        _kill_group(proc.pid)  # anything of its group still holding the pipes
        proof_reader.join(2)
        os.close(proof_r)
    wall = time.perf_counter() - t0
    code_ = proc.returncode
    sig = None
    if code_ is not None and code_ < 0:
        sig = signal.Signals(-code_).name
    elif (
        code_ is not None and code_ > 128
    ):  # 128+N: killed by N under unshare, or the boot's SIGXCPU handler
        try:
            sig = signal.Signals(code_ - 128).name
        except ValueError:
            sig = None
    completed = bytes(proof) == secret.encode()
    out_head, _ = state.get("out", (b"", b""))
    _, err_tail = state.get("err", (b"", b""))
    exit_code = code_ if code_ is not None and code_ >= 0 else None
    if timed_out:
        reason = f"timed out after {limits.timeout_s:g} s"
    elif state["over"]:
        reason = f"output limit: wrote more than {OUTPUT_LIMIT} bytes"
    elif sig:
        reason = f"ended by {sig}"
    elif exit_code != 0:
        reason = f"exit code {exit_code}"
    elif not completed:
        reason = (
            "exited with code 0 before its last statement (early exit or tampering: no proof of completion)"
            if not proof
            else "wrong proof of completion (tampering)"
        )
    else:
        reason = ""
    return SandboxResult(
        exit_code=exit_code,
        signal=sig,
        timed_out=timed_out,
        stdout=out_head.decode("utf-8", "replace")[:MAX_CAPTURE],
        stderr=err_tail.decode("utf-8", "replace")[-MAX_CAPTURE:],
        wall_s=wall,
        isolation=isolation,
        completed=completed,
        reason=reason,
        output_bytes=state["bytes"],
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_python(
    code: str,
    limits: Limits | None = None,
    *,
    tests: str | None = None,
    namespaces: bool | None = None,
    audit_hook: bool = True,
    accept_risk: bool = False,
) -> SandboxResult:
    """Run ``code`` (then ``tests``, compiled apart, when given) as a Python program in a fresh
    sandbox; never raises for what the code does. ``result.ok`` needs exit code 0 and the
    proof that the last statement was reached.

    Without kernel isolation it refuses (:class:`SandboxUnavailable`) unless ``accept_risk``.
    ``namespaces`` (default: whenever available) and ``audit_hook`` exist so tests can check
    each layer on its own; ``namespaces=False`` is running without kernel isolation, so it
    too needs ``accept_risk``. Scoring always uses both where the host allows."""
    limits = limits or Limits()
    kernel = kernel_isolation()
    if namespaces is False:
        kernel = None
    elif namespaces and kernel is None:
        raise SandboxUnavailable(
            f"kernel isolation is not available on this host ({unavailable_reason()})",
            file="sandbox",
        )
    if kernel is None and not (accept_risk or os.environ.get(ACCEPT_ENV) == "1"):
        if namespaces is False:
            raise SandboxUnavailable(
                f"running without kernel isolation needs {ACCEPT_FLAG} (accept_risk=True)",
                file="sandbox",
            )
        require_isolation(False)
    with tempfile.TemporaryDirectory(prefix=f"almanac-sbx-{os.getpid()}-") as td:
        return _run(Path(td), code, tests, limits, kernel=kernel, audit_hook=audit_hook)


def isolation_layers() -> list[str]:
    """What a sandboxed run gets on this host (for the methodology page and artifacts)."""
    base = [
        "tempdir",
        "rlimits",
        "timeout",
        "audit-hook",
        "isolated-interpreter",
        "proof-of-completion",
        "output-cap",
    ]
    kind = kernel_isolation()
    if kind == "unshare":
        return [
            "netns",
            "mountns-readonly",
            "pidns",
            "uid-nobody",
            "no-capabilities",
        ] + base
    if kind == "bwrap":
        return [
            "bwrap",
            "userns",
            "netns",
            "mountns-readonly",
            "pidns",
            "no-capabilities",
        ] + base
    return base
