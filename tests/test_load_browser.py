"""The Serving page's throughput–latency chart in real headless Chromium, offline: the site built
(strict) from the golden artifacts plus a capacity search and a swept load test written through
the real path; the chart draws a point per level, the SLO as a dashed line and circles the answer,
with no request leaving loopback and no console error."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import build_site, make_golden_data
from tests.support.browser import open_page, serve_site
from tests.test_load_pages import write_load_runs

pytestmark = pytest.mark.browser


@pytest.fixture
def site_with_capacity(tmp_path):
    data = make_golden_data(tmp_path / "data")
    write_load_runs(data / "runs")
    out = tmp_path / "site"
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_throughput_latency_chart_renders_offline(site_with_capacity):
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site_with_capacity) as served, sync_playwright() as p:
        browser, page = open_page(p, served, errors, outside)
        page.goto(f"{served}/serving/", wait_until="load")
        assert page.locator("h2#capacity-at-slo").count() == 1
        page.wait_for_selector(".almanac-chart.almanac-chart-ready svg", timeout=30_000)
        chart = page.locator(".almanac-chart.almanac-chart-ready").first
        assert (
            chart.locator("svg .mark-symbol path").count() >= 6
        )  # a point per level of both runs
        assert (
            chart.locator("svg .mark-rule line").count() >= 1
        )  # the SLO line and the CI bars
        assert (
            "SLO p90 TTFT ≤ 500 ms" in chart.inner_text()
            or "SLO p90 TTFT ≤ 500 ms"
            in (chart.locator("svg").first.text_content() or "")
        )
        browser.close()
    assert errors == []
    assert outside == []
