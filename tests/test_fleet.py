"""The Leaderboard answers "this workload, every machine" and Home answers first, both from the one
fact layer (pipelines.facts); a fresh host's reference rows land beside the committed hosts.

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

from pipelines import facts, hostnames
from pipelines.site import home_page, leaderboard_page
from tests.support.committed import committed_runs
from tests.support.fleet_host import NEW_HOST, fixture_host_runs


@pytest.fixture(scope="module")
def recs():
    return committed_runs() + fixture_host_runs()


@pytest.fixture(scope="module")
def fx(recs):
    return facts.of(recs)


def _ref(fx, model="synthetic-llama-1b-q8_0"):
    return next(b for b in fx.boards if b.reference and b.model == model)


def _gpu_hosts(recs, model="synthetic-llama-1b-q8_0"):
    """The GPU hosts that ran the reference board's model (a host that ran only split studies is not on it)."""
    return {r.host_id for r in recs if r.gpu_names and r.model.get("name") == model}


def test_a_fresh_host_is_on_the_reference_board_beside_the_committed_cpu_and_gpu_hosts(
    recs, fx
):
    b = _ref(fx)
    assert b.tests == ["pp512", "tg128"]  # prefill and decode side by side
    hosts = set(b.hosts)
    assert NEW_HOST["id"] in hosts and _gpu_hosts(recs) <= hosts and len(hosts) >= 4
    new = next(hr for hr in b.hosts_rows if hr.host_id == NEW_HOST["id"])
    row = new.representative
    assert set(row.groups) == {"pp512", "tg128"}
    # its method (a precision target) and environment (use_extra_bufts) differ; it shares the work anyway
    assert all(g.newest.method.get("precision") for g in row.groups.values())
    assert "use_extra_bufts" in row.any.environment
    # every figure is its group's, every run behind it is of that host and test
    by_id = {r.id: r for r in recs}
    for hr in b.hosts_rows:
        for r in hr.rows:
            for t, g in r.groups.items():
                f = r.figure(t)
                assert f == fx.figure_of(g.newest)
                assert all(
                    by_id[i].host_id == hr.host_id and by_id[i].test_name == t
                    for i in f.run_ids
                )
    labels = hostnames.labels(recs)
    assert {hr.host_label for hr in b.hosts_rows} == {labels[h] for h in b.hosts}


def test_ranks_come_from_the_verdicts(fx):
    """rank = 1 + the hosts that win against this one by the comparison every verdict uses; so no host
    ranked =1 loses to another, and a loss is always ranked below."""
    for b in fx.boards:
        for t, st in b.standings.items():
            for s in st:
                wins = [
                    o
                    for o in st
                    if o is not s and fx.compare(s.figure, o.figure).verdict == "win"
                ]
                if s.rank.rank is None:
                    assert not s.figure.has_interval and s.rank_label == "—"
                    continue
                assert s.rank.rank == 1 + len(wins), (b.model, t, s.host_id)
                for o in st:
                    if (
                        o is not s
                        and o.rank.rank is not None
                        and fx.compare(o.figure, s.figure).verdict == "loss"
                    ):
                        assert s.rank.rank > o.rank.rank
            ranks = [s.rank.rank for s in st if s.rank.rank is not None]
            assert ranks == sorted(ranks)


def test_a_host_is_ranked_once_its_other_configurations_under_it(recs, fx):
    """The H200 ran the reference 1B through llama.cpp and through transformers: one host, ranked once by
    its best ordinary configuration, the other listed under it, unranked."""
    b = _ref(fx)
    for t in b.tests:
        assert len({s.host_id for s in b.standings[t]}) == len(b.standings[t])
    multi = [hr for hr in b.hosts_rows if len(hr.rows) > 1]
    assert multi, "a host with two configurations on the reference board"
    for hr in multi:
        rep = hr.representative
        for t in b.tests:
            st = b.standing(t, hr.host_id)
            assert st.row is rep or rep.figure(t) is None
            for other in hr.others:
                f = other.figure(t)
                if (
                    f is not None
                    and rep.figure(t) is not None
                    and rep.variant is None
                    and other.variant is None
                ):
                    assert (
                        f.mean <= rep.figure(t).mean
                    )  # the representative is the best ordinary one


def test_a_single_run_without_host_noise_is_ranked_by_the_fleets_noise(fx):
    b = _ref(fx)
    singles = [
        s
        for s in b.standings["tg128"]
        if s.figure.runs == 1 and s.figure.basis == facts.BASIS_FLEET
    ]
    assert singles, (
        "the fixture host and the H200 have one run and no noise of their own"
    )
    for s in singles:
        assert s.rank.rank is not None and "fleet's pooled noise" in s.figure.note
        cls = "rate:tg"
        assert (
            math.isclose(
                s.figure.side.var, max(fx.fleet_noise[cls].sigma ** 2, 0.0), rel_tol=0.5
            )
            or s.figure.side.var > 0
        )


def test_the_page_shows_boards_first_and_lists_singles_apart(fx):
    md = leaderboard_page.leaderboard_page(fx, this_host=NEW_HOST["id"])
    boards = fx.boards
    ranked = [b for b in boards if not b.single]
    singles = [b for b in boards if b.single]
    assert ranked and singles
    assert (
        md.index("## Reference workload")
        < md.index("How to read a board")
        < md.index("## Every shared workload")
    )
    anchors = re.findall(
        r'^### .* \{#w-([0-9a-f]{12})\}$|^<span id="w-([0-9a-f]{12})"></span>$',
        md,
        re.M,
    )
    assert sorted(a or b for a, b in anchors) == sorted(b.key for b in ranked)
    for b in ranked:
        section = re.split(r"\n##+ |\n</div>", re.split(rf"\bw-{b.key}\b", md)[1])[0]
        rows = [
            ln
            for ln in section.splitlines()
            if ln.startswith('| <span class="almanac-r')
        ]
        assert len(rows) == len(b.rows) >= 2
    assert "## Measured on one configuration only" in md
    # this host is marked; hosts by label, linked to their own boards
    assert "this host</span>" in md
    h100 = next(h for b in ranked for h in b.hosts if h.startswith("lent-h100"))
    assert f"](boards/{h100}.md)" in md
    # the filters' data: every marker names a row that exists
    blob = json.loads(
        html.unescape(
            re.search(
                r'<script type="application/json" id="almanac-fleet-data">(.*?)</script>',
                md,
            ).group(1)
        ).replace("\\u003c", "<")
    )
    marked = re.findall(
        r'<span class="almanac-r(?: almanac-host)?" data-b="(\d+)" data-r="(\d+)" data-h="([^"]+)" data-k="([^"]+)">',
        md,
    )
    assert marked
    every_host = {h for b in fx.boards for h in b.hosts}
    for bi, _ri, host, backend in marked:
        assert int(bi) < len(blob) and set(blob[int(bi)]) == {"model", "tests"}
        assert html.unescape(host) in every_host and backend
    assert NEW_HOST["id"] in {html.unescape(h) for _, _, h, _ in marked}
    # every figure is marked with its value; the reference figures read as the fact layer's
    b = _ref(fx)
    for t in b.tests:
        for s in b.standings[t]:
            assert f'data-fact="{s.figure.key}" data-v="{s.figure.mean!r}"' in md


def test_scores_follow_their_formula(fx):
    b = _ref(fx)
    sc = facts.scores(b)
    assert len(sc) == len(b.standings["tg128"])
    for s in sc:
        p, d = s.prefill.mean, s.decode.mean
        ttft = 1000 * (512 / p + 1 / d)
        assert s.ttft_ms == pytest.approx(ttft)
        assert s.value == pytest.approx((p * d * 1000 / ttft) ** (1 / 3))
        assert s.ci95_low < s.value < s.ci95_high
    assert [s.rank.rank for s in sc] == sorted(s.rank.rank for s in sc)


def test_home_answers_fastest_runner_up_and_this_host(recs, fx):
    home = home_page.home(fx, NEW_HOST["id"])
    first = home.split("## Newest regressions")[0]
    assert first.index("Every reference workload") < first.index("One number per host")
    rows = home_page.answer_rows(fx, NEW_HOST["id"])
    refs = [b for b in fx.reference_boards if not b.single]
    assert len(rows) == sum(len(b.tests) for b in refs)
    b = _ref(fx)
    st = b.standings["tg128"]
    fast, second = st[0], st[1]
    c = fx.compare(second.figure, fast.figure)
    from pipelines.site import figures

    k = figures.ratio_digits(c.ci95_low, c.ci95_high, c.verdict)
    assert figures.ratio_text(c.ratio, c.ci95_low, c.ci95_high, k) in first
    assert f"{facts_sig(c.ratio)}×" in first or k > 2
    mine = b.standing("tg128", NEW_HOST["id"])
    assert (
        f'rank <span class="almanac-rank" data-board="{b.key}" data-test="tg128" data-host="{NEW_HOST["id"]}"'
        in first
    )
    assert mine.figure.key in first
    # when each host last measured, newest first
    table = home.split("## Hosts: when each last measured")[1]
    label = hostnames.labels(recs)[NEW_HOST["id"]]
    assert label.split(" ")[0] in table


def facts_sig(x):
    from pipelines.site.figures import sig

    return sig(x, 2)


def test_the_reference_chart_is_a_valid_vega_lite_spec_with_every_host(fx):
    b = _ref(fx)
    fig = leaderboard_page.reference_chart(b)
    spec = json.loads(
        re.search(
            r'<script type="application/json" id="chart-[0-9a-f]+-spec">(.*?)</script>',
            fig,
        )
        .group(1)
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
    )
    values = [v for vals in spec["datasets"].values() for v in vals]
    assert {v["id"] for v in values} == {
        s.figure.newest_id for t in b.tests for s in b.standings[t]
    }
    assert all(math.isfinite(v["mean"]) for v in values)
    assert len(spec["vconcat"]) == 2  # decode and prefill panels


def test_the_reference_chart_samples_a_large_fleet_evenly(fx, monkeypatch):
    b = _ref(fx)
    assert len(b.hosts_rows) >= 3
    monkeypatch.setattr(leaderboard_page, "CHART_HOSTS", 2)
    shown = leaderboard_page.chart_sample(b)
    assert shown == [
        b.hosts_rows[0].host_id,
        b.hosts_rows[-1].host_id,
    ]  # the first and the last
    fig = leaderboard_page.reference_chart(b)
    spec = json.loads(
        re.search(
            r'<script type="application/json" id="chart-[0-9a-f]+-spec">(.*?)</script>',
            fig,
        )
        .group(1)
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
    )
    hosts = {v["host"] for vals in spec["datasets"].values() for v in vals}
    assert len(hosts) == 2 and f"2 of the board's {len(b.hosts_rows)} hosts" in fig


def test_artifact_text_is_escaped_on_the_leaderboard(recs):
    import copy

    from core.records.run import RunRecord

    evil = copy.deepcopy(fixture_host_runs()[0].doc)
    evil["model"]["name"] = "<script>alert(1)</script>*x*"
    evil["model"]["sha256"] = evil["model"]["identity"] = (
        "ee" * 32
    )  # a workload of its own
    evil["host"] = {
        **evil["host"],
        "cpu": {**evil["host"]["cpu"], "model": "<img src=x onerror=alert(2)>"},
    }
    evil["id"] = "ffffffffffff-20261201T000001.000Z"
    md = leaderboard_page.leaderboard_page(
        facts.of(recs + [RunRecord(evil, "data/runs/x.json")])
    )
    assert "<script>alert" not in md
    assert "&lt;script&gt;alert" in md  # in the board's cells (cell())
    assert "&#60;script&#62;alert" in md  # in the filter's options (as_text())
    assert (
        "<img" not in md and "onerror=alert(2)" in md
    )  # the host's label (from its fingerprint), escaped


def test_invoke_all_ends_with_where_the_fresh_host_stands(recs, fx):
    lines = facts.host_summary(fx, NEW_HOST["id"])
    q8 = next(ln for ln in lines if "synthetic-llama-1b-q8_0" in ln)
    labels = hostnames.labels(recs)
    for other in _gpu_hosts(recs):
        assert labels[other] in q8
    b = _ref(fx)
    mine = b.standing("tg128", NEW_HOST["id"])
    assert (
        f"tg128 {mine.figure.mean:,.2f} " in q8
        and f"(rank {mine.rank_label} of {len(b.standings['tg128'])})" in q8
    )
    assert facts.host_summary(fx, "no-such-host") == []
