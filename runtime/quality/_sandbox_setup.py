"""Sandbox setup, run as root inside fresh namespaces (see sandbox.py, layer 1); never imported.

argv: WORKDIR UID NPROC PYTHON_PREFIX -- PROGRAM ARGS...

Makes every mount read-only except WORKDIR, hides the first non-traversable directory
above the interpreter behind a tmpfs that shows only the interpreter's prefix, drops to
UID with no capabilities and no_new_privs, lowers RLIMIT_NPROC and execs PROGRAM. Any
failure exits 121 before the untrusted program starts.
"""

import ctypes
import os
import resource
import sys

MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = (
    0x1000,
    0x2000,
    0x4000,
    1 << 18,
    0x2,
    0x4,
)
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_MOUNT_SETATTR = 442  # same number on x86_64 and aarch64 (generic syscall table)
PR_SET_NO_NEW_PRIVS = 38

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def fail(what, path=""):
    err = ctypes.get_errno()
    sys.stderr.write(f"sandbox setup: {what} {path}: {os.strerror(err)}\n")
    sys.exit(121)


def mount(src, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if (
        libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
        != 0
    ):
        fail("mount", target)


def mount_setattr(path, set_, clr, flags):
    attr = MountAttr(set_, clr, 0, 0)
    if (
        libc.syscall(
            SYS_MOUNT_SETATTR,
            AT_FDCWD,
            path.encode(),
            flags,
            ctypes.byref(attr),
            ctypes.sizeof(attr),
        )
        != 0
    ):
        fail("mount_setattr", path)


def hidden_ancestor(prefix):
    """The topmost directory above ``prefix`` that others cannot traverse (e.g. /root), or None."""
    parts = prefix.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        d = "/" + "/".join(parts[:i])
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def main():
    sep = sys.argv.index("--")
    workdir, uid, nproc, prefix = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        os.path.realpath(sys.argv[4]),
    )
    program = sys.argv[sep + 1 :]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    anc = hidden_ancestor(prefix)
    if anc is not None:
        if (workdir + "/").startswith(anc + "/"):
            sys.stderr.write(
                f"sandbox setup: work directory {workdir} lies under {anc}\n"
            )
            sys.exit(121)
        stage = os.path.join(workdir, ".prefix")
        os.mkdir(stage)
        mount(prefix, stage, None, MS_BIND | MS_REC)
        mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        os.makedirs(prefix, mode=0o755)
        mount(stage, prefix, None, MS_MOVE)
        os.rmdir(stage)
    mount(workdir, workdir, None, MS_BIND | MS_REC)
    mount_setattr(
        "/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, AT_RECURSIVE
    )
    mount_setattr(workdir, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY, 0)
    os.chdir(workdir)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # leaving uid 0 clears every capability
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("prctl(PR_SET_NO_NEW_PRIVS)")
    os.execv(program[0], program)


main()
