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
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    data = fleet_data(tmp_path_factory.mktemp("fleet") / "data")
    out = tmp_path_factory.mktemp("fleet-site")
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return data, out


def _visible_hosts(page) -> set[str]:
    """The hosts of the rows shown, read from each row's marker (the host the filters read)."""
    return set(
        page.evaluate("""() => {
        return Array.from(document.querySelectorAll('.almanac-board:not([hidden]) tr:not([hidden]) span.almanac-r'))
          .map(m => m.dataset.h);
    }""")
    )


def test_leaderboard_filters_by_host_and_test_and_ranks_by_the_rule(
    fleet_site, monkeypatch
):
    from playwright.sync_api import sync_playwright

    from pipelines import facts
    from pipelines.runs import load_runs

    data, out = fleet_site
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    fx = facts.of(load_runs(data / "runs"))
    boards = [b for b in fx.boards if not b.single]
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(out) as url, sync_playwright() as p:
        browser, page = open_page(p, url, errors, outside)
        page.goto(f"{url}/leaderboard/", wait_until="load")
        page.wait_for_selector("#almanac-fleet-filters[data-ready]")
        all_hosts = _visible_hosts(page)
        gpu = {h for b in boards for h in b.hosts if h.startswith("lent-h100")}
        assert {NEW_HOST["id"]} | gpu <= all_hosts and len(all_hosts) >= 4
        # ranks on the page: the fact layer's (checked against the verdicts in test_fleet), one per host and test
        for b in boards:
            sel = f"#w-{b.key}"
            assert page.locator(sel).count() == 1
            rows = page.eval_on_selector_all(
                f".almanac-board:has({sel}) tbody tr", "rows => rows.length"
            )
            assert rows == len(b.rows)
            shown = page.eval_on_selector_all(
                f".almanac-board:has({sel}) span.almanac-rank",
                "rs => rs.map(r => [r.dataset.test, r.dataset.host, r.dataset.rank, r.textContent.trim()])",
            )
            want = sorted(
                [t, s.host_id, s.rank_label, "#" + s.rank_label]
                for t in b.tests
                for s in b.standings[t]
            )
            assert sorted(shown) == want
        # filter by host: only that host's rows, boards without it hidden
        page.select_option("select[data-filter=host]", NEW_HOST["id"])
        assert _visible_hosts(page) == {NEW_HOST["id"]}
        assert "host=" + NEW_HOST["id"] in page.url
        ref = next(
            b for b in boards if b.reference and b.model == "synthetic-llama-1b-q8_0"
        )
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


@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 900}, {"width": 390, "height": 844}],
    ids=["desktop", "390px"],
)
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
        # the answer first: per reference workload the fastest host, the runner-up, their ratio with its CI95
        assert (
            text.index("Every reference workload")
            < text.index("One number per host")
            < text.index("Newest regressions")
        )
        assert re.search(r"[\d.]+× \[[\d.]+, [\d.]+\]", text) and (
            "told apart" in text or "within noise" in text
        )
        marks = page.locator(".almanac-chart svg .mark-symbol path")
        assert marks.count() >= 6  # a dot per host and test (4 hosts, 2 panels)
        assert (
            page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        )
        page.goto(f"{url}/leaderboard/", wait_until="load")
        page.wait_for_selector("#almanac-fleet-filters[data-ready]")
        assert (
            page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        )
        browser.close()
    assert errors == [] and outside == []
