"""Issue 19 in real headless Chromium (network blocked but the site on loopback): the site built
(strict) from the committed artifacts plus a fresh fixture host's reference rows
(tests/support/fleet_host.py). The Leaderboard filters by host and by test in the browser and says
when a selection matches nothing; each board's ranks on the page are those the stated rule gives;
the Home chart renders offline, on a desktop and at 390 px; no console error."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import build_site
from tests.support.browser import open_page, serve_site
from tests.support.fleet_host import NEW_HOST, fleet_data

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def fleet_site(tmp_path_factory):
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (invoke test installs it when run as root)")
    data = fleet_data(tmp_path_factory.mktemp("fleet") / "data")
    out = tmp_path_factory.mktemp("fleet-site")
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return data, out


def _visible_hosts(page) -> set[str]:
    return set(page.eval_on_selector_all(
        ".almanac-board:not([hidden]) tr:not([hidden]) span.almanac-r",
        "els => els.map(e => e.closest('tr').querySelector('code').textContent)"))


def test_leaderboard_filters_by_host_and_test_and_ranks_by_the_rule(fleet_site, monkeypatch):
    from playwright.sync_api import sync_playwright

    from pipelines import fleet
    from pipelines.runs import load_runs

    data, out = fleet_site
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    boards = [b for b in fleet.boards(load_runs(data / "runs")) if not b.single]
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(out) as url, sync_playwright() as p:
        browser, page = open_page(p, url, errors, outside)
        page.goto(f"{url}/leaderboard/", wait_until="load")
        page.wait_for_selector("#almanac-fleet-filters[data-ready]")
        all_hosts = _visible_hosts(page)
        assert {NEW_HOST["id"], "vm-0372cd29", "lent-h100-920a23c0"} <= all_hosts
        # ranks on the page: those of the rule (pipelines.fleet, checked against the rule in test_fleet)
        for b in boards:
            sel = f'#w-{b.key}'
            assert page.locator(sel).count() == 1
            shown = page.eval_on_selector_all(
                f'.almanac-board:has({sel}) tbody tr',
                "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent.trim()))")
            assert len(shown) == len(b.rows)
            heads = page.eval_on_selector_all(f'.almanac-board:has({sel}) thead th', "hs => hs.map(h => h.textContent.trim())")
            rank_cols = [i for i, h in enumerate(heads) if h == "#"]  # a rank column after each test's value
            assert len(rank_cols) == len(b.tests)
            for row, cells in zip(b.rows, shown):
                assert row.host_id in cells[0]
                ranks = [cells[i] for i in rank_cols]
                assert ranks == [row.cells[t].rank_label if t in row.cells else "—" for t in b.tests]
        # filter by host: only that host's rows, boards without it hidden
        page.select_option("select[data-filter=host]", NEW_HOST["id"])
        assert _visible_hosts(page) == {NEW_HOST["id"]}
        assert "host=" + NEW_HOST["id"] in page.url
        ref = next(b for b in boards if b.reference and b.model == "synthetic-llama-1b-q8_0")
        assert page.locator(f".almanac-board:has(#w-{ref.key})").is_visible()
        # ... and by test: tg128 keeps the paired reference boards
        page.select_option("select[data-filter=test]", "tg128")
        assert page.locator(f".almanac-board:has(#w-{ref.key})").is_visible()
        assert page.locator(".almanac-nomatch").is_hidden()
        # a selection that matches nothing says so
        page.select_option("select[data-filter=test]", "chat-serving")
        assert page.locator(".almanac-nomatch").is_visible()
        assert _visible_hosts(page) == set()
        page.click("[data-filter-reset]")
        assert _visible_hosts(page) == all_hosts
        # a host's detail is one click away: its own boards
        page.click(f'a[href*="boards/{NEW_HOST["id"]}"]')
        page.wait_for_load_state("load")
        assert f"/boards/{NEW_HOST['id']}/" in page.url and "tg128" in page.content()
        browser.close()
    assert errors == [] and outside == []


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "390px"])
def test_home_chart_renders_offline(fleet_site, viewport):
    from playwright.sync_api import sync_playwright

    _, out = fleet_site
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(out) as url, sync_playwright() as p:
        browser, page = open_page(p, url, errors, outside, viewport=viewport)
        page.goto(f"{url}/", wait_until="load")
        page.wait_for_selector(".almanac-chart.almanac-chart-ready svg", timeout=30_000)
        text = page.locator("article").inner_text()
        assert re.search(r"decodes synthetic-llama-1b-q8_0 [\d,.]+× faster than", text)
        assert "CI95" in text
        marks = page.locator(".almanac-chart svg .mark-symbol path")
        assert marks.count() >= 6  # a dot per host and test (4 hosts + a second backend, 2 panels)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        page.goto(f"{url}/leaderboard/", wait_until="load")
        page.wait_for_selector("#almanac-fleet-filters[data-ready]")
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        browser.close()
    assert errors == [] and outside == []
