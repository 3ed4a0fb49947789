"""Two committed hosts' artifacts as a data folder of their own: the small fleet the page-cache tests
(page cache, whole-set macros, run answers, a rebuild after one more host) build and rebuild."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.committed import committed_data, tracked_files

HOSTS = ("vm-55ecea05", "lent-h200-c4a881f9")
#: a third committed host: the one more host a rebuild adds
NEW_HOST = "vm-fafe2774"


def host_files(hosts: tuple[str, ...]) -> list[str]:
    """The committed run and host artifacts of these hosts (paths under data/)."""
    return [
        f
        for f in tracked_files()
        if f.startswith(tuple(f"{d}/{h}/" for d in ("runs", "hosts") for h in hosts))
    ]


def two_host_data(dest: Path, hosts: tuple[str, ...] = HOSTS) -> Path:
    """A data folder at ``dest`` with the committed registries and only these hosts' artifacts."""
    return committed_data(dest, only=host_files(hosts))


def use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: Path | None = None
) -> Path:
    """Point the almanac at the two hosts' data (made under ``tmp_path`` unless given) and a cache of its
    own, with the page cache on; the data folder."""
    data = data or two_host_data(tmp_path / "data")
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ALMANAC_PAGE_CACHE", raising=False)
    return data


def add_host(data: Path, scratch: Path, host: str = NEW_HOST) -> None:
    """One more committed host's runs and host artifact, copied into ``data`` as they are committed
    (``scratch``: a folder for the copy's staging)."""
    more = two_host_data(scratch, (host,))
    for d in ("runs", "hosts"):
        if (more / d / host).is_dir():
            shutil.copytree(more / d / host, data / d / host)
