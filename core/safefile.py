"""Reading an input file safely: refused by type before it is opened, and read with a size bound.

A FIFO blocks ``open()`` until a writer comes (forever, for ``invoke validate``); a character
device such as ``/dev/zero`` (directly or through a symlink) never ends. Every reader of
user-supplied files (artifacts under data/, matrices and their includes, ``models.yaml``,
``hosts.yaml``, imported JSON) goes through :func:`read_bytes` or :func:`check_regular`, which
``stat`` the path (following symlinks, so a link is judged by what it points at) and refuse
anything that is not a regular file with one line naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from core.errors import UserError
from core.paths import relpath

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO (named pipe)", "a regular file", ...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def _name(path: Path) -> str:
    """The path as the user gave it (relative to the project where it lies inside it), not the
    target of a symlink: ``relpath`` resolves, which would name ``/dev/zero`` for a link to it."""
    try:
        return relpath(path.parent) + "/" + path.name if path.name else relpath(path)
    except OSError:
        return str(path)


def _a(words: str) -> str:
    return ("an " if words[:1] in "aeiou" else "a ") + words


def _refuse(
    path: Path, st: os.stat_result, what: str, error: type[UserError]
) -> UserError:
    via = f" (a symlink to {os.path.realpath(path)})" if path.is_symlink() else ""
    return error(
        f"is {kind_of(st.st_mode)}{via}, not {_a(what)}: refused without reading it",
        file=_name(path),
    )


def check_regular(
    path: Path | str, *, what: str = "file", error: type[UserError] = UserError
) -> os.stat_result:
    """``stat`` of ``path`` when it is a regular file (after symlinks); otherwise ``error``, one line."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise error("no such file", file=relpath(path)) from None
    except PermissionError:
        raise error("permission denied", file=relpath(path)) from None
    except OSError as exc:
        raise error(
            f"cannot be read: {exc.strerror or exc}", file=relpath(path)
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st, what, error)
    return st


def read_bytes(
    path: Path | str,
    *,
    max_bytes: int,
    what: str = "file",
    error: type[UserError] = UserError,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    The type is checked before opening, and again on the open descriptor (opened non-blocking, so
    a FIFO swapped in between cannot hang the open); a file larger than ``max_bytes`` (or one that
    grows past it while read) is refused. Every failure is one ``error`` line naming the file."""
    path = Path(path)
    check_regular(path, what=what, error=error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error("no such file", file=relpath(path)) from None
    except PermissionError:
        raise error("permission denied", file=relpath(path)) from None
    except OSError as exc:
        raise error(
            f"cannot be read: {exc.strerror or exc}", file=relpath(path)
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st, what, error)
        if st.st_size > max_bytes:
            raise error(
                f"is {st.st_size} bytes, more than the {max_bytes} {_a(what)} may have",
                file=relpath(path),
            )
        chunks, total = [], 0
        while True:
            block = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
            if total > max_bytes:
                raise error(
                    f"is more than the {max_bytes} bytes {_a(what)} may have",
                    file=relpath(path),
                )
        return b"".join(chunks)
    except IsADirectoryError:
        raise error(f"is a directory, not {_a(what)}", file=relpath(path)) from None
    except OSError as exc:
        raise error(
            f"cannot be read: {exc.strerror or exc}", file=relpath(path)
        ) from None
    finally:
        os.close(fd)
