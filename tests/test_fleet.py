"""Issue 19, items 4-6: the Leaderboard answers "this workload, every machine"; Home answers in ten
seconds; a fresh host's reference rows land beside the committed hosts.

The fresh host is a fixture (tests/support/fleet_host.py: no second machine here): reference rows
written by today's runner path (a precision block, extra_bufts) with a committed CPU row's figures.
Everything else is the committed artifacts (tests/support/committed.py).
"""

from __future__ import annotations

import html
import json
import math
import re

import pytest

from pipelines import fleet, hostnames
from pipelines.ranking import rank_with_ci
from pipelines.site import fleet_pages
from tests.support.committed import committed_runs
from tests.support.fleet_host import NEW_HOST, fixture_host_runs


@pytest.fixture(scope="module")
def recs():
    return committed_runs() + fixture_host_runs()


def _ref(recs, model="synthetic-llama-1b-q8_0"):
    return next(b for b in fleet.boards(recs) if b.reference and b.model == model)


def test_a_fresh_host_is_on_the_reference_board_beside_the_committed_cpu_and_gpu_hosts(recs):
    b = _ref(recs)
    assert b.tests == ["pp512", "tg128"]  # prefill and decode side by side
    hosts = {r.host_id for r in b.rows}
    assert {NEW_HOST["id"], "vm-0372cd29", "lent-h100-920a23c0", "lent-h200-c4a881f9"} <= hosts
    new = next(r for r in b.rows if r.host_id == NEW_HOST["id"])
    assert set(new.cells) == {"pp512", "tg128"}
    # its method (a precision target) and environment (use_extra_bufts) differ; it shares the work anyway
    assert all(c.method.get("precision") for c in new.cells.values())
    assert "use_extra_bufts" in new.environment
    # every figure is its artifact's
    by_id = {r.id: r for r in recs}
    for row in b.rows:
        for t, c in row.cells.items():
            r = by_id[c.id]
            assert r.host_id == row.host_id and r.test_name == t and r.work_key in b.work_keys
    # the labels people read
    labels = hostnames.labels(recs)
    assert {r.host_label for r in b.rows} >= {labels["lent-h100-920a23c0"], labels["vm-0372cd29"]}


def test_each_column_ranks_by_the_stated_rule(recs):
    """rank = 1 + the rows whose whole CI95 lies on the better side; recomputed here from the
    intervals on the page, for every column of every board."""
    for b in fleet.boards(recs):
        for t in b.tests:
            have = [r.cells[t] for r in b.rows if t in r.cells]
            hib = b.metrics[t].higher_is_better
            for c in have:
                if c.ci95_low is None or c.ci95_high is None:
                    assert c.rank is None and c.rank_label == "—"
                    continue
                better = sum(1 for o in have if o.ci95_low is not None and o.ci95_high is not None and
                             (o.ci95_low > c.ci95_high if hib else o.ci95_high < c.ci95_low))
                assert c.rank == better + 1, (b.model, t, c.id)
                tied = sum(1 for o in have if o.rank == c.rank) > 1
                assert c.rank_label == (f"={c.rank}" if tied else str(c.rank))
            # rows follow the last column's rank
        last = b.tests[-1]
        ranks = [r.cells[last].rank for r in b.rows if last in r.cells and r.cells[last].rank is not None]
        assert ranks == sorted(ranks)


def test_overlapping_intervals_share_a_rank():
    r = rank_with_ci([10, 9, 1], [12, 11, 2], True)
    assert [x.rank for x in r] == [1, 1, 3] and r[0].tied and not r[2].tied


def test_the_page_shows_rankings_only_with_two_rows_and_lists_singles_apart(recs):
    md = fleet_pages.leaderboard_page(recs)
    boards = fleet.boards(recs)
    ranked = [b for b in boards if not b.single]
    singles = [b for b in boards if b.single]
    assert ranked and singles
    # one heading per ranked board, each followed by a table with its rows (at least two)
    # (the reference boards under a heading, the others folded under a summary)
    anchors = re.findall(r'^### .* \{#w-([0-9a-f]{12})\}$|^<span id="w-([0-9a-f]{12})"></span>$', md, re.M)
    assert sorted(a or b for a, b in anchors) == sorted(b.key for b in ranked)
    assert "Each test column is ranked on its own" in md  # the rule, stated once
    for b in ranked:
        section = re.split(r"\n##+ |</details>", re.split(rf"\bw-{b.key}\b", md)[1])[0]
        rows = [ln for ln in section.splitlines() if ln.startswith("| <span class=\"almanac-r\"")]
        assert len(rows) == len(b.rows) >= 2
    assert "## Measured on one configuration only" in md
    single_part = md.split("## Measured on one configuration only")[1]
    assert "| # |" not in single_part and " #" not in single_part.split("\n| :--")[0]  # no rank column
    # hosts by label, id beside, linked to their own boards
    assert "[H100 HBM3 · 80 GiB](boards/lent-h100-920a23c0.md)<br><code>lent-h100-920a23c0</code>" in md
    # the filters' data: every marker names a row that exists
    blob = json.loads(html.unescape(re.search(r'<script type="application/json" id="almanac-fleet-data">(.*?)</script>',
                                              md).group(1)).replace("\\u003c", "<"))
    for bi, ri in re.findall(r'<span class="almanac-r" data-b="(\d+)" data-r="(\d+)"></span>', md):
        assert int(ri) < len(blob[int(bi)]["rows"])
    assert {r["host"] for d in blob for r in d["rows"]} >= {NEW_HOST["id"], "vm-0372cd29", "lent-h100-920a23c0"}


def test_home_answers_with_a_chart_and_ratios_with_their_ci(recs):
    b = _ref(recs)
    sentences = fleet_pages.headline_sentences(b)
    assert len(sentences) == 2 and "decodes" in sentences[0] and "prefills" in sentences[1]
    dec = [r for r in b.rows if "tg128" in r.cells]
    fast = max(dec, key=lambda r: r.cells["tg128"].mean)
    slow = min(dec, key=lambda r: r.cells["tg128"].mean)
    sp = fleet.speedup(b, "tg128", fast, slow)
    assert sp.ratio == pytest.approx(fast.cells["tg128"].mean / slow.cells["tg128"].mean)
    assert f"**{fleet_pages._fmt_ratio(sp.ratio)}×**" in sentences[0]
    assert f"run.md?id={fast.cells['tg128'].id}" in sentences[0]
    if sp.ci95_low is not None:
        assert sp.ci95_low < sp.ratio < sp.ci95_high
        assert f"[{fleet_pages._fmt_ratio(sp.ci95_low)}, {fleet_pages._fmt_ratio(sp.ci95_high)}] CI95" in sentences[0]
    else:  # the run is the unit: a side of one run on a host without measured noise has no interval, and says so
        assert "no CI95: the " in sentences[0]
    # between two rows that both have an interval, the ratio has one and lies inside it
    with_ci = [r for r in dec if r.cells["tg128"].ci95_low is not None]
    if len(with_ci) >= 2:
        a, z = with_ci[0], with_ci[-1]
        sp2 = fleet.speedup(b, "tg128", a, z)
        assert sp2.ci95_low is not None and sp2.ci95_low < sp2.ratio < sp2.ci95_high
    home = fleet_pages.home(recs)
    assert home.index("## The reference workload, every host") < home.index("## Newest regressions") < home.index(
        "## Hosts: when each last measured")
    assert '<div class="almanac-chart"' in home.split("## Newest regressions")[0]
    # when each host last measured, newest first, by label
    table = home.split("## Hosts: when each last measured")[1]
    assert table.index(NEW_HOST["id"]) < table.index("vm-0372cd29")  # the fixture host measured last


def test_the_reference_chart_is_a_valid_vega_lite_spec_with_every_host(recs):
    b = _ref(recs)
    fig = fleet_pages.reference_chart(b)
    spec = json.loads(re.search(r'<script type="application/json" id="chart-[0-9a-f]+-spec">(.*?)</script>', fig)
                      .group(1).replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&"))
    values = [v for vals in spec["datasets"].values() for v in vals]
    assert {v["id"] for v in values} == {c.id for r in b.rows for c in r.cells.values()}
    assert all(math.isfinite(v["mean"]) for v in values)
    assert len(spec["vconcat"]) == 2  # decode and prefill panels


def test_the_reference_chart_samples_a_large_fleet_evenly(recs, monkeypatch):
    b = _ref(recs)
    assert len(b.rows) >= 3
    monkeypatch.setattr(fleet_pages, "CHART_HOSTS", 2)
    shown = fleet_pages.chart_sample(b)
    assert [r.host_id for r in shown] == [b.rows[0].host_id, b.rows[-1].host_id]  # the first and the last
    fig = fleet_pages.reference_chart(b)
    spec = json.loads(re.search(r'<script type="application/json" id="chart-[0-9a-f]+-spec">(.*?)</script>', fig)
                      .group(1).replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&"))
    hosts = {v["host"] for vals in spec["datasets"].values() for v in vals}
    assert len(hosts) == 2 and f"2 of the board's {len(b.rows)} rows" in fig


def test_artifact_text_is_escaped_on_the_leaderboard(recs):
    import copy

    from core.records.run import RunRecord

    evil = copy.deepcopy(fixture_host_runs()[0].doc)
    evil["model"]["name"] = "<script>alert(1)</script>*x*"
    evil["model"]["sha256"] = evil["model"]["identity"] = "ee" * 32  # a workload of its own
    evil["host"] = {**evil["host"], "cpu": {**evil["host"]["cpu"], "model": "<img src=x onerror=alert(2)>"}}
    evil["id"] = "ffffffffffff-20261201T000001.000Z"
    md = fleet_pages.leaderboard_page(recs + [RunRecord(evil, "data/runs/x.json")])
    assert "<script>alert" not in md
    assert "&lt;script&gt;alert" in md  # in the board's cells (cell())
    assert "&#60;script&#62;alert" in md  # in the filter's options (as_text())
    assert "<img" not in md and "onerror=alert(2)" in md  # the host's label (from its fingerprint), escaped


def test_invoke_all_ends_with_where_the_fresh_host_stands(recs):
    lines = fleet.host_summary(recs, NEW_HOST["id"])
    q8 = next(ln for ln in lines if "synthetic-llama-1b-q8_0" in ln)
    labels = hostnames.labels(recs)
    for other in ("lent-h100-920a23c0", "lent-h200-c4a881f9", "vm-0372cd29"):
        assert labels[other] in q8
    b = _ref(recs)
    mine = next(r for r in b.rows if r.host_id == NEW_HOST["id"])
    assert f"tg128 {mine.cells['tg128'].mean:,.2f} t/s (rank {mine.cells['tg128'].rank_label} of {len(b.rows)})" in q8
    assert fleet.host_summary(recs, "no-such-host") == []
