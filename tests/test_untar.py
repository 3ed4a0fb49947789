"""core.untar: the data filter's rules on every Python 3.11 (before 3.11.4 ``extractall`` has no
``filter``: the members are checked here instead)."""

from __future__ import annotations

import io
import tarfile

import pytest

from core import untar


def _tar(*members: tarfile.TarInfo, data: bytes = b"x") -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for m in members:
            t.addfile(m, io.BytesIO(data) if m.isfile() else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def _file(name: str, mode: int = 0o4755) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.size, m.mode = 1, mode
    return m


def test_the_fallback_unpacks_files_without_set_uid_bits(tmp_path):
    d = tarfile.TarInfo("pkg")
    d.type = tarfile.DIRTYPE
    with _tar(d, _file("pkg/a.py")) as t:
        t.extractall(tmp_path, members=untar._checked(t.getmembers()))
    assert (tmp_path / "pkg" / "a.py").read_bytes() == b"x"
    assert (tmp_path / "pkg" / "a.py").stat().st_mode & 0o7777 == 0o644


@pytest.mark.parametrize(
    "member, words",
    [
        (_file("../evil"), "outside the destination"),
        (_file("/etc/evil"), "outside the destination"),
        (tarfile.TarInfo("link"), None),
    ],
)
def test_the_fallback_refuses_what_the_data_filter_refuses(tmp_path, member, words):
    if words is None:
        member.type, member.linkname, words = (
            tarfile.SYMTYPE,
            "/etc/passwd",
            "not a regular file",
        )
    with _tar(member) as t, pytest.raises(untar.UnsafeMember, match=words):
        untar._checked(t.getmembers())
    assert not any(tmp_path.iterdir())


def test_extract_takes_the_filter_where_python_has_it(tmp_path):
    with _tar(_file("ok.txt")) as t:
        untar.extract(t, tmp_path)
    assert (tmp_path / "ok.txt").read_bytes() == b"x"
    with _tar(_file("../evil")) as t, pytest.raises(tarfile.TarError):
        untar.extract(t, tmp_path / "sub")
