"""One more host's runs, rebuilt with the caches of the last build (the page cache, the whole-set macros,
the run answers, what MkDocs made of each page), is the site a build without any cache makes of the same
data, file for file; and so is a rebuild with nothing new. Real site builds of committed artifacts of a
few hosts; nothing mocked."""

from __future__ import annotations

import shutil

import pytest

from tests.support.committed import committed_data, tracked_files
from tests.test_html_cache import _build, _same_tree

HOSTS = ("vm-55ecea05", "lent-h200-c4a881f9")
NEW_HOST = "vm-fafe2774"


def _host_files(hosts: tuple[str, ...]) -> list[str]:
    return [
        f
        for f in tracked_files()
        if f.startswith(tuple(f"{d}/{h}/" for d in ("runs", "hosts") for h in hosts))
    ]


@pytest.mark.integration  # four site builds
def test_a_rebuild_after_one_more_host_is_the_site_built_without_caches(tmp_path):
    data = committed_data(tmp_path / "data", only=_host_files(HOSTS))
    cache = tmp_path / "cache"
    _build(data, cache, tmp_path / "cold", cached=True)
    assert list((cache / "pages").rglob("m-*.json.z"))  # the whole-set macros kept
    assert list((cache / "answers").glob("*.pickle"))  # and the runs' answers
    _build(data, cache, tmp_path / "warm", cached=True)
    assert _same_tree(tmp_path / "cold", tmp_path / "warm") == []
    more = committed_data(tmp_path / "more", only=_host_files((NEW_HOST,)))
    for d in ("runs", "hosts"):
        if (more / d / NEW_HOST).is_dir():
            shutil.copytree(more / d / NEW_HOST, data / d / NEW_HOST)
    _build(data, cache, tmp_path / "rebuilt", cached=True)
    _build(data, tmp_path / "none", tmp_path / "plain", cached=False)
    assert _same_tree(tmp_path / "plain", tmp_path / "rebuilt") == []
    assert _same_tree(tmp_path / "plain", tmp_path / "cold") != []  # the new host shows
