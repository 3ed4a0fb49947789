"""Sandbox boot, run by ``python -I -S`` as the sandboxed process (see sandbox.py, layer 2).

argv: WORKDIR MAIN.PY --secret-fd=N --proof-fd=M [--tests=TESTS.PY] [--no-hook]. Reads this run's
secret from fd N and closes it, compiles MAIN.PY and TESTS.PY apart, installs an audit hook that
refuses network, writes outside WORKDIR, process creation, ctypes and every way to reach the
boot's frames or memory (frames, gc, /proc), runs MAIN.PY then TESTS.PY as ``__main__`` and,
only when the last statement returned, writes the secret to fd M. Never imported.
"""

import os
import sys


def _make_hook(workdir):
    deny = frozenset(
        {
            "socket.__new__",
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
            "socket.getaddrinfo",
            "socket.gethostbyname",
            "socket.gethostbyaddr",
            "subprocess.Popen",
            "os.system",
            "os.exec",
            "os.posix_spawn",
            "os.spawn",
            "os.fork",
            "os.forkpty",
            "os.kill",
            "os.killpg",
            "pty.spawn",
            "ctypes.dlopen",
            "ctypes.dlsym",
            "ctypes.cdata",
            "sys.setprofile",
            "sys.settrace",
            "os.chroot",
            "os.setuid",
            "os.setgid",
            # whatever could reach the boot's frame (and this run's secret) or the interpreter's state
            "sys._getframe",
            "sys._current_frames",
            "sys._getframemodulename",
            "gc.get_objects",
            "gc.get_referrers",
            "gc.get_referents",
            "object.__getattr__",  # restricted attributes: tb_frame, gi_frame, cr_frame, __code__
        }
    )
    path_mutations = frozenset(
        {
            "os.remove",
            "os.rename",
            "os.rmdir",
            "os.mkdir",
            "os.symlink",
            "os.link",
            "os.chmod",
            "os.chown",
            "os.truncate",
            "os.utime",
            "os.mkfifo",
            "os.mknod",
            "shutil.rmtree",
            "shutil.move",
            "shutil.copyfile",
            "shutil.copytree",
            "os.setxattr",
            "os.removexattr",
        }
    )
    deny_imports = frozenset(
        {
            "ctypes",
            "_ctypes",
            "cffi",
            "_posixsubprocess",
            "multiprocessing",
            "_multiprocessing",
            "gc",
            "_xxsubinterpreters",
            "_testcapi",
            "_testinternalcapi",
            "faulthandler",
        }
    )
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    realpath, fspath = os.path.realpath, os.fspath
    prefix = workdir + "/"

    def inside(path):
        try:
            p = fspath(path)
        except TypeError:
            return False
        if isinstance(p, bytes):
            p = p.decode("utf-8", "surrogateescape")
        if not isinstance(p, str):
            return False
        full = realpath(p if p.startswith("/") else prefix + p)
        return full == workdir or full.startswith(prefix)

    def hook(event, args):
        if event in deny:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args and str(args[0]).split(".")[0] in deny_imports:
            raise PermissionError(f"sandbox: importing {args[0]} is not allowed")
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            if not isinstance(
                path, int
            ):  # /proc/self/mem and friends would show the boot's memory
                try:
                    p = fspath(path)
                    p = (
                        p.decode("utf-8", "surrogateescape")
                        if isinstance(p, bytes)
                        else p
                    )
                    full = realpath(p if p.startswith("/") else prefix + p)
                except Exception:
                    full = ""
                if full == "/proc" or full.startswith("/proc/"):
                    raise PermissionError(f"sandbox: reading {path!r} is not allowed")
            writing = (isinstance(flags, int) and flags & write_flags) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writing and not isinstance(path, int) and not inside(path):
                raise PermissionError(
                    f"sandbox: writing {path!r} outside the work directory is not allowed"
                )
        elif event in path_mutations:
            for a in args[:2]:
                if a is not None and not isinstance(a, int) and not inside(a):
                    raise PermissionError(
                        f"sandbox: {event} on {a!r} outside the work directory is not allowed"
                    )

    return hook


PREIMPORT = (
    "typing",
    "collections",
    "collections.abc",
    "enum",
    "dataclasses",
    "functools",
    "itertools",
    "math",
    "re",
    "string",
    "heapq",
    "bisect",
    "fractions",
    "decimal",
    "statistics",
    "random",
    "hashlib",
    "operator",
    "copy",
    "json",
    "datetime",
    "numbers",
    "warnings",
    "abc",
    "types",
    "contextlib",
    "array",
    "textwrap",
)


def _on_cpu_limit(signum, frame, _write=os.write, _exit=os._exit):
    _write(2, b"sandbox: CPU time limit exceeded\n")
    _exit(
        128 + signum
    )  # reported as SIGXCPU (a wrapper such as unshare cannot pass the signal on)


def _start():
    import signal

    signal.signal(signal.SIGXCPU, _on_cpu_limit)
    workdir, main, options = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    opts = dict(o[2:].split("=", 1) for o in options if o.startswith("--") and "=" in o)
    secret = b""
    if "secret-fd" in opts:  # read and closed before any untrusted code exists
        fd = int(opts["secret-fd"])
        while True:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            secret += chunk
        os.close(fd)
    proof_fd = int(opts["proof-fd"]) if "proof-fd" in opts else None
    with open(main, encoding="utf-8") as fh:
        code = compile(fh.read(), main, "exec", dont_inherit=True)
    tests = None
    if "tests" in opts:
        with open(opts["tests"], encoding="utf-8") as fh:
            tests = compile(fh.read(), opts["tests"], "exec", dont_inherit=True)
    for name in (
        PREIMPORT
    ):  # their import-time code looks at frames, which the hook refuses afterwards
        try:
            __import__(name)
        except ImportError:
            pass
    sys.path.insert(0, workdir)
    os.chdir(workdir)
    sys.argv = [main]
    if (
        "--no-hook" not in options
    ):  # tests switch the hook off to check the kernel layer alone
        sys.addaudithook(_make_hook(workdir))
    return code, tests, main, secret, proof_fd


def _run(
    code,
    tests,
    main,
    secret,
    proof_fd,
    _exec=exec,
    _write=os.write,
    _close=os.close,
    _flush=None,
):
    import types

    module = types.ModuleType("__main__")
    module.__file__ = main
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]  # not in ModuleType's stub
    sys.modules["__main__"] = (
        module  # the program's own module; the boot's globals are not reachable from it
    )
    namespace = module.__dict__
    _exec(code, namespace)
    if tests is not None:
        _exec(tests, namespace)
    # Reached only when the code and every test statement returned: the proof of completion.
    if proof_fd is not None:
        _write(proof_fd, secret)
        _close(proof_fd)


_run(*_start())
