"""The whole built site agrees with itself (issue 27, "one truth per figure"): every figure reads the same
value wherever it appears, no rank contradicts a verdict, "not measured" only where nothing was measured,
one lossless verdict per artifact, one name per host, no Python None and no "first N of M" anywhere.

Checked over three built sites: the golden artifacts, the committed measurements (git's, not whatever the
live data/ folder holds) and a generated fleet of eight hosts (benchmarks/site_scale.py's fleet mode);
and the check itself is shown to fail on a planted contradiction of each kind.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from pipelines import facts, hostnames
from pipelines.runs import load_runs
from pipelines.site import consistency
from tests.conftest import build_site


def _check(site: Path, data: Path) -> list[str]:
    return consistency.check(
        site, missing=consistency.missing_in(facts.of(load_runs(data / "runs")))
    )


def test_the_golden_site_agrees_with_itself(built_site, golden_data):
    assert _check(built_site, golden_data) == []


@pytest.fixture(scope="module")
def committed_site(committed_site, session_data):
    """(data, site): the committed data and the site built from it once for the whole suite
    (tests/conftest.py); the planted tests below copy the site before writing."""
    return session_data, committed_site


def test_the_committed_site_agrees_with_itself(committed_site):
    data, site = committed_site
    problems = _check(site, data)
    assert problems == [], "\n".join(problems)
    # and it shows what it checks: figures on several pages, ranks, verdicts
    marks = [
        m for p in consistency.pages(site) for m in consistency.read_page(p, site).marks
    ]
    kinds = {m.kind for m in marks}
    assert {"fact", "rank", "verdict"} <= kinds
    pages_with_facts = {m.page for m in marks if m.kind == "fact"}
    assert {
        "index.html",
        "leaderboard/index.html",
        "host-vs-host/index.html",
    } <= pages_with_facts
    # one figure, several pages: the reference figures are on Home, the Leaderboard and Host vs host alike
    by_key: dict[str, set[str]] = {}
    for m in marks:
        if m.kind == "fact":
            by_key.setdefault(m.attrs["data-fact"], set()).add(m.page)
    assert max(len(v) for v in by_key.values()) >= 3
    # one host, one name, on every page that names it: each host of the data is named on its own page, the
    # Leaderboard and Host vs host, with the label the hosts page gives it
    named: dict[str, dict[str, set[str]]] = {}
    for m in marks:
        if m.kind == "host":
            hid = m.attrs.get("data-host") or m.attrs["data-h"]
            named.setdefault(hid, {}).setdefault(" ".join(m.text.split()), set()).add(
                m.page
            )
    labels = hostnames.labels(load_runs(data / "runs"))
    assert set(named) == set(labels)
    for hid, by_name in named.items():
        assert list(by_name) == [labels[hid]], (hid, by_name)
        pages = next(iter(by_name.values()))
        assert {"leaderboard/index.html", "hosts/index.html"} <= pages, (hid, pages)


def _agreeing_fleet(tmp_path: Path, hosts: int, **kw) -> tuple[Path, Path]:
    """(data, site): a generated fleet (tests.test_host_vs_fleet.write_fleet) built, its site agreeing with itself."""
    from tests.test_host_vs_fleet import _inputs, write_fleet

    data = _inputs(tmp_path / "data")
    write_fleet(data, hosts, **kw)
    site = tmp_path / "site"
    proc = build_site(data, site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = _check(site, data)
    assert problems == [], "\n".join(problems)
    return data, site


def test_a_generated_fleet_agrees_with_itself(tmp_path):
    _agreeing_fleet(tmp_path, 8, extra=3)


def test_a_fleet_with_twins_names_each_host_once(tmp_path):
    """Forty hosts, some the same hardware (twins, told apart by their names): each is named on its own
    pages as on the fleet's. Labels resolved among a page's own artifacts named two twins without what
    tells them apart on their hosts pages only (#30); this fleet found it."""
    data, site = _agreeing_fleet(tmp_path, 40, rounds=1)
    labels = hostnames.labels(load_runs(data / "runs"))
    twins = {h for h, label in labels.items() if label.endswith(f" · {h[:9]}")}
    assert len(twins) >= 2, labels
    for h in twins:
        own = consistency.read_page(site / "hosts" / h / "index.html", site)
        names = {m.text for m in own.marks if m.kind == "host"}
        assert names == {labels[h]}, (h, names)


def test_a_fleet_sharing_every_kind_agrees_with_itself(tmp_path):
    """Seven hosts that share every configuration a committed CPU host ran (rate, chat, generate, serve,
    concurrency; its library setups and its deliberate variant too), each measured in two rounds of the same
    build: the pages agree, and the same build measured twice is never a step."""
    from benchmarks.site_scale import fleet_artifacts, fleet_templates
    from core import artifacts
    from pipelines import history
    from tests.test_host_vs_fleet import _base, _inputs

    base = _base()
    refs, _, _ = fleet_templates(base, every_kind=True)
    assert {"rate", "chat", "generate", "serve", "concurrency"} <= {
        d["test"]["kind"] for d in refs if d["artifact"] == "run"
    } and any(d["artifact"] == "quality" for d in refs)
    data = _inputs(tmp_path / "data")
    hosts, rounds = 6, 2
    for k, (rel, doc) in enumerate(fleet_artifacts(base, hosts, every_kind=True)):
        if k >= hosts + rounds * hosts * len(refs):
            break
        artifacts.write(data / rel, doc)
    site = tmp_path / "site"
    proc = build_site(data, site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = _check(site, data)
    assert problems == [], "\n".join(problems)
    marks = [
        m for p in consistency.pages(site) for m in consistency.read_page(p, site).marks
    ]
    assert (
        sum(m.kind == "fact" for m in marks) > 1000
        and sum(m.kind == "verdict" for m in marks) > 100
    )
    # an A/A: every round of one build is one figure; a step is only ever at a change of build
    for st in history.all_steps(history.series(load_runs(data / "runs"))):
        assert st.build_change, st.series.label


# -- the check fails on a planted contradiction of each kind --------------------------------------------
def _planted(committed_site, tmp_path) -> tuple[Path, Path]:
    data, site = committed_site
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    return data, copy


def test_a_planted_second_value_is_found(committed_site, tmp_path):
    data, site = _planted(committed_site, tmp_path)
    page = site / "host-vs-host" / "index.html"
    text = page.read_text()
    m = re.search(r'data-fact="([^"]+)" data-v="([^"]+)"', text)
    key, v = m.group(1), float(m.group(2))
    page.write_text(
        text.replace(
            f'data-fact="{key}" data-v="{m.group(2)}"',
            f'data-fact="{key}" data-v="{v * 1.14!r}"',
            1,
        )
    )
    problems = _check(site, data)
    assert any(p.startswith(f"figure {key} has 2 values") for p in problems), problems


def test_a_planted_misrounded_figure_is_found():
    assert (
        consistency.shows("616.60", 616.6)
        and consistency.shows("620", 616.6)
        and consistency.shows("1,100", 1106.7)
    )
    assert not consistency.shows("540.16", 616.6) and not consistency.shows(
        "616.61", 616.6
    )


def test_a_planted_rank_against_a_verdict_is_found(committed_site, tmp_path):
    data, site = _planted(committed_site, tmp_path)
    page = site / "host-vs-host" / "index.html"
    text = page.read_text()
    # a host that loses to the median host, made =1
    loss = re.search(
        r'class="almanac-verdict" data-a="([^"]+)" data-b="([^"]+)" data-verdict="loss"',
        text,
    )
    assert loss, (
        "the committed data has a host that loses to its workload's median host"
    )
    b = loss.group(2)
    planted = re.sub(
        rf'(data-fact="{re.escape(b)}" data-rank=")[^"]+(">)[^<]+',
        r"\g<1>=1\g<2>=1",
        text,
    )
    assert planted != text
    page.write_text(planted)
    problems = _check(site, data)
    assert any("loses to" in p and "ranked =1" in p for p in problems), problems


def test_planted_none_truncation_and_false_not_measured_are_found(
    committed_site, tmp_path
):
    data, site = _planted(committed_site, tmp_path)
    page = site / "history" / "index.html"
    text = page.read_text()
    some = next(iter(facts.of(load_runs(data / "runs")).groups.values()))
    page.write_text(
        text.replace(
            "</article>",
            "<p>label: None → x</p><p>Showing the first 100 of 180 rows</p>"
            f'<span class="almanac-missing" data-work="{some.work_key}" data-host="{some.host_id}">'
            "not measured</span><p>no measured run of it</p></article>",
            1,
        )
    )
    problems = _check(site, data)
    assert any("a Python None" in p for p in problems)
    assert any("a truncated list" in p for p in problems)
    assert any("which the fact layer has" in p for p in problems)
    assert any("no measured run" in p for p in problems)


def test_a_planted_second_lossless_verdict_is_found(committed_site, tmp_path):
    data, site = _planted(committed_site, tmp_path)
    page = site / "optimization" / "index.html"
    page.write_text(
        page.read_text().replace(
            "</article>",
            '<span class="almanac-lossless" data-artifact="x-1" '
            'data-verdict="lossless">lossless</span><span class="almanac-lossless" '
            'data-artifact="x-1" data-verdict="not lossless">no</span></article>',
            1,
        )
    )
    problems = _check(site, data)
    assert any(
        p.startswith("artifact x-1 has 2 lossless verdicts") for p in problems
    ), problems


def test_a_planted_second_name_for_a_host_is_found(committed_site, tmp_path):
    """A host named otherwise on one page than on the rest (what a page that resolved labels among its own
    artifacts did: #30, 106 of 208 hosts at 10,000) is found, naming the host, both names and the page."""
    data, site = _planted(committed_site, tmp_path)
    page = site / "hosts" / "index.html"
    text = page.read_text()
    m = re.search(
        r'<span class="almanac-host" data-host="([^"]+)">(?:<a [^>]*>)?([^<]+)<', text
    )
    assert m, "the hosts page names its hosts with host marks"
    hid, name = m.group(1), m.group(2)
    page.write_text(text.replace(m.group(0), m.group(0).replace(name, "Twin"), 1))
    problems = _check(site, data)
    mine = [p for p in problems if p.startswith(f"host {hid} has 2 names")]
    assert len(mine) == 1 and "'Twin' on hosts/index.html" in mine[0], problems
    assert f"{html.unescape(name)!r} on " in mine[0]
