"""One more host's runs, rebuilt with the caches of the last build (the page cache, the whole-set macros,
the run answers, what MkDocs made of each page), is the site a build without any cache makes of the same
data, file for file; and so is a rebuild with nothing new. Real site builds of committed artifacts of a
few hosts; nothing mocked."""

from __future__ import annotations

import pytest

from tests.support import two_hosts
from tests.test_html_cache import _build, _same_tree

NEW_HOST = two_hosts.NEW_HOST


@pytest.mark.integration  # four site builds
def test_a_rebuild_after_one_more_host_is_the_site_built_without_caches(tmp_path):
    data = two_hosts.two_host_data(tmp_path / "data")
    cache = tmp_path / "cache"
    _build(data, cache, tmp_path / "cold", cached=True)
    assert list((cache / "pages").rglob("m-*.json.z"))  # the whole-set macros kept
    assert list((cache / "answers").glob("*.pickle"))  # and the runs' answers
    _build(data, cache, tmp_path / "warm", cached=True)
    assert _same_tree(tmp_path / "cold", tmp_path / "warm") == []
    two_hosts.add_host(data, tmp_path / "more")
    _build(data, cache, tmp_path / "rebuilt", cached=True)
    _build(data, tmp_path / "none", tmp_path / "plain", cached=False)
    assert _same_tree(tmp_path / "plain", tmp_path / "rebuilt") == []
    assert _same_tree(tmp_path / "plain", tmp_path / "cold") != []  # the new host shows
