"""Unpacking a tar archive the safe way on every Python 3.11.

``tarfile``'s ``filter="data"`` (no absolute paths, nothing outside the destination, no device files,
links only inside, no set-uid bits) came with Python 3.11.4; before it, ``extractall`` takes no
``filter``. :func:`extract` uses the filter where it exists and otherwise checks every member by the
same rules (stricter: regular files and folders only) before unpacking.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath


class UnsafeMember(tarfile.TarError):
    """A member the data filter would refuse."""


def _checked(members: Iterable[tarfile.TarInfo]) -> list[tarfile.TarInfo]:
    out = []
    for m in members:
        p = PurePosixPath(m.name)
        if p.is_absolute() or ".." in p.parts:
            raise UnsafeMember(f"{m.name!r} would be unpacked outside the destination")
        if not (m.isfile() or m.isdir()):
            raise UnsafeMember(f"{m.name!r} is not a regular file or a folder")
        m.mode = (m.mode | 0o600) & 0o755 if m.isdir() else (m.mode | 0o600) & 0o644
        m.uid = m.gid = 0
        m.uname = m.gname = ""
        out.append(m)
    return out


def extract(
    tar: tarfile.TarFile,
    dest: Path | str,
    members: Iterable[tarfile.TarInfo] | None = None,
) -> None:
    """``tar.extractall(dest, members)`` with the data filter's rules."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=members, filter="data")
        return
    tar.extractall(
        dest, members=_checked(tar.getmembers() if members is None else members)
    )
