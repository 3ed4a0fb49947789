"""The Serving page's Real traffic section, from the committed serving-traffic artifacts (measured
against llama-server -np 4 with the embedded model on a busy 2-core host): the trace replay with its
drift, conversations with TTFT against context and the cache hit rate, the gamma ramp with its
steady-state window, the over-saturation stop, the capacity run's Prometheus series drawn under its
latency chart, swim lanes; then in real headless Chromium, offline, desktop and 390 px."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines import traffic
from pipelines.runs import load_runs
from pipelines.site.serving import serving_page
from tests.conftest import build_site, make_golden_data

TESTS = (
    "trace-small",
    "conversations",
    "gamma-ramp",
    "oversaturation",
    "capacity-telemetry",
)


def _traffic_files(session_data: Path) -> list[Path]:
    files = [
        p
        for p in (session_data / "runs").rglob("*.json")
        if p.name.split("--")[0] in TESTS
    ]
    assert {p.name.split("--")[0] for p in files} == set(TESTS), (
        "the serving-traffic artifacts are committed"
    )
    return files


def test_real_traffic_rows_from_the_committed_runs(session_data):
    runs = {
        r["test_name"]: r
        for r in traffic.traffic_runs(load_runs(session_data / "runs"))
    }
    assert set(TESTS) <= set(runs)
    assert "trace replay" in runs["trace-small"]["features"]
    assert (
        runs["gamma-ramp"]["arrivals"].startswith("gamma bursts (burstiness 0.5")
        and "ramping up linearly" in runs["gamma-ramp"]["arrivals"]
    )
    over = runs["oversaturation"]["levels"][0]["stats"]
    assert (
        over["stop_reason"].startswith("oversaturated: TTFT +")
        and over["steady"] is not None
    )
    turns = runs["conversations"]["levels"][0]["stats"]["turns"]["per_turn"]
    assert [t["prompt_tokens_median"] for t in turns] == sorted(
        t["prompt_tokens_median"] for t in turns
    )
    assert turns[-1]["cache_hit_rate"] > turns[0]["cache_hit_rate"]
    cap = runs["capacity-telemetry"]
    assert any((lv["telemetry"] or {}).get("samples") for lv in cap["levels"])
    for run in runs.values():
        if run["test_name"] in TESTS:
            assert run["cache_state"]["cold"] is True
            for lv in run["levels"]:
                assert lv["timeline"]["shown"] <= traffic.TIMELINE_MAX


def test_serving_page_shows_the_real_traffic_section(session_data):
    md = serving_page(load_runs(session_data / "runs"))
    sec = md[md.index("## Real traffic") :]
    for words in (
        "gamma bursts",
        "Steady-state window:",
        "Stopped: oversaturated: TTFT",
        "Schedule kept: dispatch lag",
        "TTFT against context:",
        "Server telemetry (/metrics every",
        "not reported by this server: ",
        "Each request: queued, prefill, decode",
        "prefix cache hit (server)",
    ):
        assert words in sec, words


@pytest.mark.browser
def test_real_traffic_charts_render_offline_desktop_and_phone(tmp_path, session_data):
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    from tests.support.browser import open_page, serve_site

    data = make_golden_data(tmp_path / "data")
    for f in _traffic_files(session_data):
        dest = data / f.relative_to(session_data)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    out = tmp_path / "site"
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(out) as served, sync_playwright() as p:
        for viewport in ({"width": 1280, "height": 900}, {"width": 390, "height": 844}):
            browser, page = open_page(p, served, errors, outside, viewport=viewport)
            page.goto(f"{served}/serving/", wait_until="load")
            assert page.locator("h2#real-traffic").count() == 1
            section = page.locator("h2#real-traffic ~ details")
            assert section.count() >= len(TESTS)
            # each run is folded (the page stays readable): a reader opens them, the charts draw then
            page.evaluate(
                "() => document.querySelectorAll('h2#real-traffic ~ details').forEach(d => { d.open = true; })"
            )
            page.wait_for_function(
                "() => [...document.querySelectorAll('h2#real-traffic ~ details .almanac-chart')]"
                ".every(c => c.classList.contains('almanac-chart-ready') && c.querySelector('svg'))",
                timeout=60_000,
            )
            # the swim lanes draw bars, the telemetry chart its lines, nothing wider than the page
            assert (
                page.locator("h2#real-traffic ~ details svg .mark-rect path").count()
                > 0
            )
            assert (
                page.locator("h2#real-traffic ~ details svg .mark-line path").count()
                > 0
            )
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= viewport["width"] + 1
            browser.close()
    assert errors == []
    assert outside == []
