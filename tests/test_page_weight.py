"""No HTML page over 1 MB (issue 30): the site-wide consistency check (``invoke site.build`` and
``invoke site.check``, and the committed-site test) and benchmarks/site_check.py each name a page over
``consistency.MAX_PAGE_BYTES`` with its size, and pass a page at the limit."""

from __future__ import annotations

import sys

from pipelines.site import consistency
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import site_check

LIMIT = consistency.MAX_PAGE_BYTES


def _page(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "<html><body><p>page</p><!--"
    tail = "--></body></html>"
    path.write_text(head + "x" * (size - len(head) - len(tail)) + tail)
    assert path.stat().st_size == size


def test_a_page_over_1_mb_is_named_with_its_size(tmp_path):
    site = tmp_path / "site"
    _page(site / "index.html", 2_000)
    _page(site / "serving" / "vm-a" / "index.html", LIMIT + 1)
    _page(site / "memory" / "index.html", LIMIT)  # at the limit: passes
    got = consistency.heavy_pages(site)
    assert got == [
        "serving/vm-a/index.html: 1.00 MB of HTML (1,000,001 bytes), over the 1 MB a page may weigh"
    ]
    # the site-wide check says it among its findings (the page is otherwise consistent)
    assert consistency.check(site) == got
    assert site_check.page_weight_defects(site, "serving/vm-a/") == [
        "page weight: 1.00 MB of HTML (1,000,001 bytes), over the 1 MB a page may weigh"
    ]
    assert site_check.page_weight_defects(site, "memory/") == []
    assert site_check.page_weight_defects(site, "") == []


def test_the_limit_is_1_mb():
    assert LIMIT == 1_000_000
