"""benchmarks/site_check.py reads the golden site as a reader does (every page at 1366 and 390 px,
light and dark, each scheme reached once at load and once by the toggle) and finds nothing: no chart
clipped, none without units, no chart text under 11 px, no page wider than its window, no light chart
panel in the dark scheme, no page too tall. Its defect detection is shown on a page made to fail."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import site_check


def test_axis_labels_are_read_as_vega_writes_them():
    assert (
        site_check.axis_defect(
            "X-axis titled 'decode rate (t/s, log scale)' for a log scale with values from 10 to 1,000"
        )
        is None
    )
    assert (
        site_check.axis_defect("X-axis for a log scale with values from 10 to 1,000")
        == "X axis (log) has no title"
    )
    assert "names no unit" in site_check.axis_defect(
        "Y-axis titled 'concurrent clients' for a linear scale with values from 1 to 4"
    )
    assert "does not say so" in site_check.axis_defect(
        "Y-axis titled 'TTFT (ms)' for a log scale with values from 1 to 9"
    )
    assert (
        site_check.axis_defect(
            "Y-axis titled 'host' for a discrete scale with 2 values: a, b"
        )
        is None
    )
    assert (
        site_check.axis_defect(
            "X-axis titled 'measured' for a time scale with values from 1 to 2"
        )
        is None
    )


@pytest.mark.browser
def test_every_page_of_the_golden_site_reads_well(built_site, tmp_path):
    pytest.importorskip("playwright")
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    pages = site_check.pages(built_site)
    assert (
        "memory/" in pages
        and "leaderboard/" in pages
        and not any(p.endswith("run/") for p in pages)
    )
    views = site_check.check_site(built_site)
    assert len(views) == 4 * len(
        pages
    )  # two widths, each scheme at load and by the toggle
    assert {(v.width, v.scheme, v.toggled) for v in views} == {
        (1366, "light", False),
        (1366, "dark", True),
        (390, "dark", False),
        (390, "light", True),
    }
    drawn = [v for v in views if v.charts]
    assert drawn and {v.scheme for v in drawn} == {"light", "dark"}
    assert min(v.min_text_px for v in drawn) >= site_check.MIN_TEXT_PX
    defects = [f"{v.page} {v.width} {v.scheme}: {d}" for v in views for d in v.defects]
    assert defects == []


BAD_PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width"></head>
<body data-md-color-scheme="slate" style="margin:0;background:#1e2129">
<div style="width:1200px">a line wider than a phone</div>
<div class="almanac-chart almanac-chart-ready" style="width:300px">
<svg width="600" height="100" style="background-color:white">
<g aria-roledescription="axis" aria-label="X-axis titled 'concurrent clients' for a linear scale with values from 1 to 4"></g>
<text x="10" y="50" font-size="6" fill="#eeeeee">6 px, light on white</text>
<text x="560" y="80" font-size="12">cut off at the right edge of the drawing</text>
</svg></div></body></html>"""


@pytest.mark.browser
def test_the_checker_sees_each_kind_of_defect(tmp_path):
    pytest.importorskip("playwright")
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    (tmp_path / "index.html").write_text(BAD_PAGE)
    with site_check.serve_quietly(tmp_path) as base, sync_playwright() as p:
        browser, page = site_check.open_page(
            p, base, [], [], viewport={"width": 390, "height": 844}
        )
        page.goto(f"{base}/index.html")
        view = site_check.View(page="bad", width=390, scheme="dark", toggled=False)
        site_check.judge(view, site_check.measure(page))
        browser.close()
    kinds = {d.split(":")[0] for d in view.defects}
    assert kinds == {
        "page overflows",
        "chart clipped",
        "axis without unit",
        "chart text too small",
        "chart text low contrast",
        "light chart panel in dark mode",
    }, view.defects
