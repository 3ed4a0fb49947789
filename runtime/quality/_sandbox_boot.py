"""Sandbox boot, run by ``python -I -S`` as the sandboxed process (see sandbox.py, layer 2).

argv: WORKDIR MAIN.PY [--no-hook]. Installs an audit hook that refuses network, writes outside
WORKDIR, process creation and ctypes, then runs MAIN.PY as ``__main__``. Never imported.
"""

import os
import sys


def _make_hook(workdir):
    deny = frozenset({
        "socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyaddr",
        "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
        "os.kill", "os.killpg", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
        "sys.setprofile", "sys.settrace", "os.chroot", "os.setuid", "os.setgid",
    })
    path_mutations = frozenset({
        "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.chmod", "os.chown",
        "os.truncate", "os.utime", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.move", "shutil.copyfile",
        "shutil.copytree", "os.setxattr", "os.removexattr",
    })
    deny_imports = frozenset({"ctypes", "_ctypes", "cffi", "_posixsubprocess", "multiprocessing", "_multiprocessing"})
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
            writing = (isinstance(flags, int) and flags & write_flags) or (
                isinstance(mode, str) and any(c in mode for c in "wax+"))
            if writing and not isinstance(path, int) and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} outside the work directory is not allowed")
        elif event in path_mutations:
            for a in args[:2]:
                if a is not None and not isinstance(a, int) and not inside(a):
                    raise PermissionError(f"sandbox: {event} on {a!r} outside the work directory is not allowed")

    return hook


def _on_cpu_limit(signum, frame, _write=os.write, _exit=os._exit):
    _write(2, b"sandbox: CPU time limit exceeded\n")
    _exit(128 + signum)  # reported as SIGXCPU (a wrapper such as unshare cannot pass the signal on)


def _start():
    import signal

    signal.signal(signal.SIGXCPU, _on_cpu_limit)
    workdir, main, options = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    with open(main, encoding="utf-8") as fh:
        code = compile(fh.read(), main, "exec")
    sys.path.insert(0, workdir)
    os.chdir(workdir)
    sys.argv = [main]
    if "--no-hook" not in options:  # tests switch the hook off to check the kernel layer alone
        sys.addaudithook(_make_hook(workdir))
    return code, main


_code, _main = _start()
# The program runs as __main__ in this module's namespace, without the boot's own names.
for _name in [n for n in globals() if not n.startswith("__") and n not in ("_code", "_main")]:
    del globals()[_name]
globals()["__file__"] = _main
del _name, _main
exec(_code, globals())
