"""Smoke test in real headless Chromium: the built site, served on loopback, shows the
leaderboard table and renders its chart offline, with no console errors."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture
def served(built_site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_leaderboard_renders_offline_in_chromium(served):
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (invoke test installs it when run as root)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        def guard(route):
            if route.request.url.startswith(served):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", guard)
        page.goto(f"{served}/leaderboard/", wait_until="load")
        table = page.locator("table").first
        assert table.is_visible()
        assert "tg16" in page.content()
        page.wait_for_selector(".almanac-chart.almanac-chart-ready svg", timeout=30_000)
        marks = page.locator(".almanac-chart svg .mark-symbol path")
        assert marks.count() >= 2  # one dot per artifact (no bars: nothing is stacked)
        link = page.locator("table a[href*='../runs/']").first
        link.click()
        page.wait_for_load_state("load")
        assert "/runs/" in page.url and page.locator("h2#raw-samples").count() == 1
        browser.close()
    assert errors == []
    assert outside == []
