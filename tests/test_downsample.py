"""A time series drawn on the site is bounded (issue 30, "no HTML page over 1 MB"): the downsampler's
contract (pipelines/site/downsample.py), and the Real traffic folds of the committed serving runs under
a size bound, each bounded chart saying how many of how many samples it draws."""

from __future__ import annotations

import html
import math
import random
import re
from typing import Any

import pytest

from pipelines import traffic
from pipelines.runs import load_runs
from pipelines.site import downsample
from pipelines.site import traffic as traffic_page


def _y(r):
    return r["y"]


def _series(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{"x": i, "y": rng.gauss(0, 1) + math.sin(i / 7)} for i in range(n)]


@pytest.mark.parametrize("n", [101, 102, 150, 999, 10_000])
@pytest.mark.parametrize("cap", [4, 5, 60, 100])
def test_bounded_keeps_endpoints_and_extremes_in_order(n, cap):
    rows = _series(n, seed=n + cap)
    got = downsample.downsample(rows, _y, cap)
    assert len(got) <= cap
    assert got[0] is rows[0] and got[-1] is rows[-1]
    assert max(rows, key=_y) in got and min(rows, key=_y) in got
    xs = [r["x"] for r in got]
    assert xs == sorted(set(xs))  # a subsequence, in order, no row twice


def test_identity_under_the_cap():
    rows = _series(100)
    assert downsample.downsample(rows, _y, 100) == rows
    assert downsample.downsample(rows[:3], _y, 100) == rows[:3]
    assert downsample.downsample([], _y, 100) == []


def test_a_spike_is_drawn_and_a_flat_series_keeps_its_shape():
    rows = [{"x": i, "y": 0} for i in range(1000)]
    rows[617]["y"] = 42
    rows[333]["y"] = -5
    got = downsample.downsample(rows, _y, 20)
    assert rows[617] in got and rows[333] in got and len(got) <= 20


def test_rows_without_a_number_are_not_extremes():
    rows = [{"x": i, "y": None if i % 2 else i} for i in range(500)]
    got = downsample.downsample(rows, _y, 50)
    assert len(got) <= 50 and rows[0] in got and rows[-1] in got
    assert rows[498] in got  # the highest number (499's y is None)


def test_a_cap_under_four_is_refused():
    with pytest.raises(ValueError, match="cap 3 is under 4"):
        downsample.downsample(_series(10), _y, 3)


def test_per_series_bounds_each_series_and_counts():
    rows: list[dict[str, Any]] = [
        {"s": s, "x": i, "y": (i * 7919) % 101} for s in "ab" for i in range(250)
    ]
    rows += [{"s": "c", "x": i, "y": i} for i in range(30)]
    random.Random(1).shuffle(rows)
    got, n, of = downsample.per_series(rows, lambda r: r["s"], lambda r: r["x"], _y, 40)
    assert of == 530 and n == len(got)
    for s, size in (("a", 40), ("b", 40), ("c", 30)):
        xs = [r["x"] for r in got if r["s"] == s]
        assert len(xs) <= size and xs == sorted(xs)
        assert xs[0] == 0 and xs[-1] == (29 if s == "c" else 249)
    assert downsample.drawn_note(n, of).startswith(f"{n:,} of 530 samples drawn")
    assert downsample.drawn_note(30, 30) == ""


def test_rounded_rounds_only_the_named_floats():
    rows = [{"a": 0.123456789, "b": 3, "c": 1.987654321}]
    assert downsample.rounded(rows, {"a": 4, "b": 2}) == [
        {"a": 0.1235, "b": 3, "c": 1.987654321}
    ]
    assert rows[0]["a"] == 0.123456789  # copies, the input left alone


# -- the committed serving runs ------------------------------------------------------------------

FOLD_MAX = 100_000  # bytes of one run's fold (its levels' lines, tables and charts)
SECTION_MAX = 900_000  # bytes of one host's Real traffic section (vm-d4bbc016's: 15 runs, 51 levels)


def _fold_sizes(md: str) -> list[int]:
    return [len(m.encode()) for m in re.findall(r"<details.*?</details>", md, re.S)]


def test_the_telemetry_folds_of_the_committed_runs_are_bounded(session_data):
    runs = traffic.traffic_runs(load_runs(session_data / "runs"))
    levels = [lv for r in runs for lv in r["levels"]]
    scrapes = max(len((lv["telemetry"] or {}).get("samples") or []) for lv in levels)
    assert scrapes > downsample.POINTS_MAX  # the committed data is over the cap
    for lv in levels:
        for rows, n, of in (
            traffic_page.telemetry_points(lv),
            traffic_page.latency_points(lv),
            traffic_page.gpu_points(lv),
        ):
            assert len(rows) == n <= of
            by: dict = {}
            for r in rows:
                key = r.get("series", r.get("gpu", "")) + str(r.get("reading", ""))
                by[key] = by.get(key, 0) + 1
            assert all(v <= downsample.POINTS_MAX for v in by.values())
    for host in {r["host"] for r in runs}:
        section = traffic_page.traffic_section([r for r in runs if r["host"] == host])
        assert len("\n".join(section).encode()) < SECTION_MAX, host
    md = html.unescape("\n".join(traffic_page.traffic_section(runs)))
    folds = _fold_sizes(md)
    assert len(folds) == len(runs) and max(folds) < FOLD_MAX
    # a bounded chart says how many of how many it draws, from the artifact's counts
    over = next(
        lv
        for lv in levels
        if len((lv["telemetry"] or {}).get("samples") or []) > downsample.POINTS_MAX
    )
    _, n, of = traffic_page.telemetry_points(over)
    assert f"{n:,} of {of:,} scrape readings drawn" in md
    # a run of many levels charts a few of them and says which
    many = next(r for r in runs if len(r["levels"]) > traffic_page.LEVEL_CHARTS_MAX)
    assert (
        f"Charts for {traffic_page.LEVEL_CHARTS_MAX} of {len(many['levels'])} levels"
        in md
    )


def test_charted_levels_keep_the_lowest_highest_and_answer():
    run = {
        "levels": [{"level": float(i)} for i in range(1, 11)],
        "answer": {"answer": 3},
    }
    got = traffic_page.charted_levels(run, 4)
    assert len(got) == 4 and {0, 9, 2} <= got
    run["answer"] = {"answer": 0}
    assert {0, 9} <= traffic_page.charted_levels(run, 4)
    short = {"levels": [{"level": 1.0}, {"level": 2.0}]}
    assert traffic_page.charted_levels(short, 4) == {0, 1}


def test_swim_lanes_are_one_row_a_request():
    tl = traffic.timeline(
        [
            {
                "index": 0,
                "ok": True,
                "scheduled_ms": 0.0,
                "start_ms": 1.0,
                "first_token_ms": 100.0,
                "end_ms": 400.0,
            },
            {
                "index": 1,
                "ok": False,
                "scheduled_ms": 5.0,
                "start_ms": 6.0,
                "end_ms": 50.0,
            },
        ]
    )
    assert traffic_page.lane_rows(tl) == [
        {
            "lane": 0,
            "request": 0,
            "t0": 0.0,
            "queued": 0.001,
            "prefill": 0.1,
            "decode": 0.4,
        },
        {"lane": 1, "request": 1, "t0": 0.005, "queued": 0.006, "failed": 0.05},
    ]


def test_evenly_keeps_the_first_and_the_last():
    items = list(range(101))
    assert downsample.evenly(items, 5) == [0, 25, 50, 75, 100]
    assert downsample.evenly(items[:4], 5) == [0, 1, 2, 3]
    assert len(downsample.evenly(items, 40)) == 40
    with pytest.raises(ValueError):
        downsample.evenly(items, 1)


def test_no_committed_serving_page_is_cut_to_fit_its_budget(session_data, monkeypatch):
    """Each host's Serving page of the committed data fits markdown.PAGE_BUDGET as it is: past it the build
    cuts the page's tables to their first rows (pipelines/site/markdown.fit_page); vm-d4bbc016's, with its
    15 traffic runs of 51 levels, was 2.3 MB of HTML before its charts were bounded."""
    from pipelines import dataset
    from pipelines.site import markdown, per_host
    from tests.support.page_values import macros

    monkeypatch.setenv("ALMANAC_DATA", str(session_data))
    markdown.reset_tables()
    dataset.freeze(session_data)
    try:
        macros()
        hosts = sorted(per_host.hosts_of("serving"))
        assert "vm-d4bbc016" in hosts and per_host.is_split("serving")
        for host in hosts:
            text = per_host.render("serving", host)
            assert len(text.encode()) < 0.95 * markdown.PAGE_BUDGET, host
            assert markdown.fit_page(text, []) == text, host
    finally:
        dataset.thaw(session_data)
        markdown.reset_tables()
