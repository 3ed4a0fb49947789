"""The recommender on fixture artifacts (assignment, fallbacks, every rejection reason,
no data, degenerate, ties), the roles registry's validation, and the Quality and Roles
pages rendered from fixtures (escaped, linked)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.records.run import RunRecord
from pipelines import roles
from pipelines.site import quality_pages
from tests.support.quality_fixtures import (
    HOST,
    base_settings,
    quality_doc,
    speed_doc,
    write_all,
)

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

ROLES_YAML = """
schema_version: 1
defaults: {max_degenerate_rate: 0.2, min_items: 3}
roles:
  frontdoor:
    tier: HOT
    prefer: speed
    capabilities: [chat]
    quality:
      - {suite: ip, min: 0.5}
    speed:
      - {test: tg128, metric: tokens_per_second, min: 20}
    memory_max: 24 GiB
    escalates_to: architect
  architect:
    tier: WARM
    prefer: quality
    quality:
      - {suite: ip, min: 0.5}
    speed:
      - {test: tg128, metric: tokens_per_second, min: 3}
    escalates_to: oracle
  oracle:
    quality:
      - {suite: never-run, min: 0.5}
  strict_t1:
    quality:
      - {suite: ip, tag: T1, min: 1.0}
"""

CAPS = {
    m: ["chat"]
    for m in ("fast-good", "fast-garbage", "slow-good", "big", "no-quality", "second")
}


def fixture_docs():
    runs = [
        speed_doc("fast-good", mean=60),
        speed_doc("fast-garbage", mean=90),
        speed_doc("slow-good", mean=5),
        speed_doc("big", mean=30, peak_rss=30 * GIB),
        speed_doc("no-quality", mean=100),
        speed_doc("second", mean=40),
    ]
    nine = [True] * 9 + [False]
    quality = [
        quality_doc("fast-good", "ip", nine, tags=[["T1"]] * 3 + [["T2"]] * 7),
        quality_doc(
            "fast-garbage",
            "ip",
            [True] + [False] * 9,
            degenerate=[False] * 4 + [True] * 6,
        ),
        quality_doc("slow-good", "ip", [True] * 10, tags=[["T1"]] * 3 + [["T2"]] * 7),
        quality_doc("big", "ip", nine),
        quality_doc("second", "ip", nine, tags=[["T1"]] * 2 + [["T2"]] * 8),
    ]
    return runs, quality


@pytest.fixture
def reg(tmp_path):
    p = tmp_path / "roles.yaml"
    p.write_text(ROLES_YAML)
    return roles.load_roles(p)


@pytest.fixture
def assignments(reg):
    runs, quality = fixture_docs()
    out = roles.recommend(reg, quality, runs, CAPS, sorted(CAPS) + ["registered-only"])
    return {a.role: a for a in out}


def reasons(a, model):
    c = next(c for c in a.rejected if c.model == model)
    return c.reasons


def test_frontdoor_takes_the_fastest_that_meets_everything(assignments):
    a = assignments["frontdoor"]
    assert a.host_id == HOST and a.status == "assigned"
    assert a.chosen.model == "fast-good"
    assert [c.model for c in a.fallbacks] == [
        "second"
    ]  # 40 t/s, also eligible: the fallback chain


def test_every_rejection_has_its_reason(assignments):
    a = assignments["frontdoor"]
    assert reasons(a, "fast-garbage") == ["below quality floor", "degenerate"]
    assert reasons(a, "slow-good") == ["too slow"]
    assert reasons(a, "big") == ["does not fit"]
    assert reasons(a, "no-quality") == ["no data"]
    assert reasons(a, "registered-only") == ["no data"]
    big = next(c for c in a.rejected if c.model == "big")
    mem = next(e for e in big.evidence if e.kind == "memory")
    assert "30.0 GiB" in mem.message and mem.artifacts and mem.artifacts[0][0] == "run"


def test_a_fast_garbage_configuration_is_rejected_as_degenerate_even_above_the_floor(
    reg,
):
    runs, _ = fixture_docs()
    garbage = quality_doc(
        "fast-garbage", "ip", [True] * 9 + [False], degenerate=[True] * 5 + [False] * 5
    )
    a = {x.role: x for x in roles.recommend(reg, [garbage], runs, CAPS)}["frontdoor"]
    c = next(c for c in a.rejected if c.model == "fast-garbage")
    assert c.reasons == ["degenerate"]
    ev = next(e for e in c.evidence if e.kind == "degeneration")
    assert ev.value.startswith("50%") and "repetition_loop" in ev.message


def test_prefer_quality_and_the_tie_break(assignments):
    a = assignments["architect"]
    # 100% (10/10) against 90% (9/10) on the same ten items: one discordant item, exact McNemar p = 1,
    # within noise; the stated tie rule breaks it by speed: fast-good (60 t/s) over slow-good (5 t/s)
    assert a.chosen.model == "fast-good"
    assert a.tie is not None and "slow-good" in {c.model for c in a.tie.others}
    assert a.tie.decided_by.startswith("speed")
    # and so on down the chain: every remaining candidate is within noise of the best one on quality
    assert [c.model for c in a.fallbacks] == ["second", "big", "slow-good"]


def test_prefer_quality_a_real_difference_is_not_a_tie(reg):
    """On 40 shared items, 40/40 against 30/40 (ten discordant, all one way: p = 0.002) is a
    difference: quality decides, the slowest candidate is assigned and nothing is tied."""
    runs, _ = fixture_docs()
    quality = [
        quality_doc("slow-good", "ip", [True] * 40),
        quality_doc("fast-good", "ip", [True] * 30 + [False] * 10),
    ]
    a = {x.role: x for x in roles.recommend(reg, quality, runs, CAPS)}["architect"]
    assert a.chosen.model == "slow-good" and a.tie is None
    assert [c.model for c in a.fallbacks] == ["fast-good"]


def test_no_data_role_never_guesses(assignments):
    a = assignments["oracle"]
    # the role reads only suite never-run: nothing it needs was measured, so degeneration elsewhere does not count
    assert a.chosen is None and a.status == "no data"
    assert {c.state for c in a.rejected} == {"not measured"}
    assert all("no data" in c.reasons for c in a.rejected)
    assert reasons(a, "fast-garbage") == [
        "no data"
    ]  # its degenerate outputs are in a suite this role does not read
    ev = next(e for c in a.rejected for e in c.evidence if e.kind == "quality")
    assert ev.ok is None and "no quality run of suite never-run" in ev.message


def test_tag_requirement_and_min_items(assignments):
    a = assignments["strict_t1"]
    assert a.chosen.model == "slow-good" or a.chosen.model == "fast-good"
    second = next(
        c for c in a.rejected if c.model == "second"
    )  # 2 T1 items < min_items 3
    assert second.reasons == ["no data"]
    big = next(c for c in a.rejected if c.model == "big")  # no T1 items at all
    assert big.reasons == ["no data"]


def test_escalation_chain(reg):
    assert roles.escalation_chains(reg) == [["frontdoor", "architect", "oracle"]]


def test_join_ignores_speed_only_settings_but_not_output_settings(reg):
    runs = [
        speed_doc("fast-good", mean=60, settings=base_settings(n_threads=2, n_ctx=None))
    ]
    q_same = quality_doc(
        "fast-good",
        "ip",
        [True] * 9 + [False],
        settings=base_settings(n_threads=1, n_ctx=8192),
    )
    a = {x.role: x for x in roles.recommend(reg, [q_same], runs, CAPS)}["frontdoor"]
    assert a.chosen is not None and a.chosen.model == "fast-good"
    q_other = quality_doc(
        "fast-good", "ip", [True] * 10, settings=base_settings(type_k="q8_0")
    )
    a = {x.role: x for x in roles.recommend(reg, [q_other], runs, CAPS)}["frontdoor"]
    assert (
        a.chosen is None
    )  # quality of a q8_0 KV cache says nothing about the f16 configuration measured
    labels = sorted(c.config_label for c in a.rejected)
    assert (
        len(labels) == 2
        and any("type_k=q8_0" in x for x in labels)
        and any("type_k=f16" in x for x in labels)
    )
    assert {tuple(c.reasons) for c in a.rejected} == {("no data",)}


def test_incomplete_quality_runs_are_not_used(reg):
    runs, _ = fixture_docs()
    partial = quality_doc("fast-good", "ip", [True] * 9 + [False], status="failed")
    a = {x.role: x for x in roles.recommend(reg, [partial], runs, CAPS)}["frontdoor"]
    assert reasons(a, "fast-good") == ["no data"]


@pytest.mark.parametrize(
    "body,field",
    [
        ("schema_version: 1\nroles:\n  a: {escalates_to: b}\n", "roles.a.escalates_to"),
        (
            "schema_version: 1\nroles:\n  a: {escalates_to: b}\n  b: {escalates_to: a}\n",
            "roles.a.escalates_to",
        ),
    ],
)
def test_roles_registry_errors_name_the_field(tmp_path, body, field):
    p = tmp_path / "roles.yaml"
    p.write_text(body)
    with pytest.raises(ConfigError) as exc:
        roles.load_roles(p)
    assert exc.value.field == field


@pytest.mark.parametrize(
    "body,needle",
    [
        (
            "schema_version: 1\nroles:\n  a:\n    speed: [{test: tg128, metric: tokens_per_secnd, min: 1}]\n",
            "did you mean 'tokens_per_second'",
        ),
        (
            "schema_version: 1\nroles:\n  a:\n    speed: [{test: tg128, metric: ttft_ms}]\n",
            "exactly one of min or max",
        ),
        ("schema_version: 1\nroles:\n  a: {memory_max: lots}\n", "not a size"),
    ],
)
def test_roles_registry_bad_values(tmp_path, body, needle):
    p = tmp_path / "roles.yaml"
    p.write_text(body)
    with pytest.raises(ConfigError, match=needle):
        roles.load_roles(p)


def test_shipped_roles_registry_loads():
    reg = roles.load_roles(ROOT / "data" / "roles.yaml")
    assert [
        "frontdoor",
        "coder_escalation",
        "architect_coding",
    ] in roles.escalation_chains(reg)


# -- pages -------------------------------------------------------------------------------------
HOSTILE = '<script>alert("x")</script> **bold** [link](http://evil)'


def test_quality_page_shows_n_ci_and_links(tmp_path):
    _, quality = fixture_docs()
    body = quality_pages.quality_page(quality)
    text = body.replace("\\", "")  # Markdown escapes of ( ) in link texts
    assert "90% (9/10)" in text and "CI95 60–98%" in body  # Wilson interval of 9/10
    for d in quality:
        assert f"quality-runs/run.md?id={d['id']}" in body
    assert "degenerate 6/10" in text


def test_quality_browser_index_is_inert():
    """Quality runs are shown by the viewer from their JSON (text only); the browser's index, a
    script, carries hostile strings as inert JSON."""
    from pipelines import index
    from pipelines.site import browser

    doc = quality_doc("m", "ip", [False, True], outputs=[HOSTILE, "fine"])
    doc["model"]["name"] = HOSTILE
    rows = browser.index_rows(
        "quality", index.rows_of([dict(doc, _data_path="quality/x.json")])
    )
    script = browser.index_script("quality", browser.index_data("quality", rows))
    assert (
        "<script>" not in script
        and "\\u003cscript\\u003e" in script
        and rows[0]["json"] == "data/quality/x.json"
    )


def test_roles_page_explains_and_links_every_decision(reg):
    runs, quality = fixture_docs()
    assignments = roles.recommend(reg, quality, runs, CAPS, sorted(CAPS))
    body = quality_pages.roles_page(reg, assignments).replace("\\", "")
    # architect prefers quality, but 10/10 against 9/10 is within noise: speed breaks the tie (fast-good)
    assert (
        "frontdoor (fast-good, 60.00 t/s) → architect (fast-good, 60.00 t/s) → oracle (no data)"
        in body
    )
    assert (
        "too slow" in body
        and "does not fit" in body
        and "degenerate" in body
        and "no data" in body
    )
    assert "below quality floor" in body
    fast = next(d for d in runs if d["model"]["name"] == "fast-good")
    assert f"runs/run.md?id={fast['id']}" in body
    assert f"quality-runs/run.md?id={quality[0]['id']}" in body


def test_site_builds_with_quality_and_roles_pages(tmp_path, monkeypatch):
    """mkdocs --strict on fixture data: macros run, generated quality pages exist, links resolve."""
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(ROOT / "data" / "models.yaml", d / "models.yaml")
    (d / "roles.yaml").write_text(ROLES_YAML)
    runs, quality = fixture_docs()
    quality[0]["items"][0]["output"] = HOSTILE
    quality[0]["items"][1]["output"] = (
        "```python\nprint('fenced')\n"  # an unterminated fence in model output
    )
    quality[0]["items"][0]["passed"] = False
    quality[0]["items"][0]["score"] = 0.0
    from core.records.quality import summarize_items

    quality[0].doc["summary"] = summarize_items(quality[0]["items"])
    write_all(d, runs, quality)
    site = tmp_path / "site"
    env = {**__import__("os").environ, "ALMANAC_DATA": str(d)}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    roles_html = (site / "roles" / "index.html").read_text()
    assert "fast-good" in roles_html and "too slow" in roles_html
    # every quality run is in the browser's index and published as JSON (the viewer shows it as text)
    index = (site / "quality-runs" / "index-data.js").read_text()
    for q in quality:
        assert f'"{q["id"]}"' in index
    published = {
        p["id"]: p
        for p in (
            json.loads(f.read_text())
            for f in (site / "data" / "quality").rglob("*.json")
        )
    }
    assert set(published) == {q["id"] for q in quality}
    assert published[quality[0]["id"]]["items"][0]["output"] == HOSTILE
    assert "<script>alert" not in index
    assert (site / "quality" / "index.html").exists()


def test_a_role_whose_candidates_all_fail_something_measured_is_not_no_data(reg):
    runs, quality = fixture_docs()
    bad = [q for q in quality if q["model"]["name"] == "fast-garbage"]
    a = {x.role: x for x in roles.recommend(reg, bad, [], CAPS)}["frontdoor"]
    assert a.host_id is None and a.status == "no candidate meets every requirement"
    assert reasons(a, "fast-garbage") == [
        "below quality floor",
        "degenerate",
        "no data",
    ]


def test_an_edited_suite_supersedes_older_runs_of_it(reg):
    runs, _ = fixture_docs()
    old = quality_doc(
        "fast-good",
        "ip",
        [False] * 10,
        degenerate=[True] * 10,
        stamp="20250101T000000Z",
    )
    old["suite"]["content_sha256"] = "0" * 64
    new = quality_doc("fast-good", "ip", [True] * 9 + [False], stamp="20260101T000000Z")
    a = {x.role: x for x in roles.recommend(reg, [old, new], runs, CAPS)}["frontdoor"]
    assert (
        a.chosen is not None and a.chosen.model == "fast-good"
    )  # the old, degenerate version is not counted
    ev = next(e for e in a.chosen.evidence if e.kind == "degeneration")
    assert ev.value == "0% (0/10)" and ("quality", old["id"]) not in ev.artifacts


def test_quality_grid_prefers_the_newest_complete_run():
    old = quality_doc("m", "ip", [True] * 3, stamp="20250101T000000Z")
    new = quality_doc("m", "ip", [False] * 4, stamp="20260101T000000Z")
    partial = quality_doc("m", "ip", [True], stamp="20270101T000000Z", status="failed")
    body = quality_pages.quality_page([old, new, partial]).replace("\\", "")
    grid = body.split("## Runs")[0]
    assert (
        f"quality-runs/run.md?id={new['id']}" in grid
        and old["id"] not in grid
        and partial["id"] not in grid
    )
    assert "0% (0/4)" in grid


def test_a_configuration_measured_only_elsewhere_is_judged_on_its_own_host(reg):
    """A speed role on host B does not list (or evaluate) configurations measured only on host A:
    they are judged on A's assignment, so the work stays linear in configurations, not
    hosts x configurations. A configuration measured nowhere stays visible, rejected."""
    runs, quality = fixture_docs()
    other = speed_doc("second", mean=400).doc
    other["host"] = {**other["host"], "id": "host-b"}
    other["key"] = "b" * 64
    other["id"] = "bbbbbbbbbbbb-20260101T000000Z"
    other = RunRecord(other)
    out = roles.recommend(
        reg,
        quality,
        [r for r in runs if r["model"]["name"] != "second"] + [other],
        CAPS,
    )
    by = {(a.role, a.host_id): a for a in out}
    on_b = by[("frontdoor", "host-b")]
    assert on_b.chosen is not None and on_b.chosen.model == "second"
    assert {
        c.model for c in on_b.fallbacks + on_b.rejected
    } == set()  # nothing measured only on HOST
    on_a = by[("frontdoor", HOST)]
    assert "second" not in {
        c.model for c in [on_a.chosen] + on_a.fallbacks + on_a.rejected if c
    }
    assert on_a.chosen.model == "fast-good"


def test_an_assignment_within_noise_of_its_runner_up_says_so(reg):
    """Speed is judged with the run as the unit: two runs each give the spread between runs. When the
    first two's run-level CI95s on what ranks them first overlap, they are tied and the stated
    secondary rule decides (here both pass 90%, use as much memory: the name); the page says so.
    One run each on a host whose run-to-run noise was never measured has no interval: no tie."""
    runs, quality = fixture_docs()
    a = {x.role: x for x in roles.recommend(reg, quality, runs, CAPS)}["frontdoor"]
    assert a.chosen.model == "fast-good" and a.within_noise() is None and a.tie is None
    fast2 = speed_doc("fast-good", mean=61.0, stamp="20260102T000000Z")
    apart = runs + [fast2, speed_doc("second", mean=40.5, stamp="20260102T000000Z")]
    a = {x.role: x for x in roles.recommend(reg, quality, apart, CAPS)}["frontdoor"]
    ev = next(e for e in a.chosen.evidence if e.kind == "speed")
    assert ev.n == 2 and "2 runs" in ev.note and ev.ci[0] < 60.0 < 61.0 < ev.ci[1]
    assert (
        a.chosen.model == "fast-good" and a.tie is None
    )  # 60, 61 against 40, 40.5: apart
    close = [r for r in runs if r["model"]["name"] != "second"] + [
        fast2,
        speed_doc("second", mean=59.0),
        speed_doc("second", mean=60.5, stamp="20260102T000000Z"),
    ]
    a = {x.role: x for x in roles.recommend(reg, quality, close, CAPS)}["frontdoor"]
    assert a.chosen.model == "fast-good" and a.fallbacks[0].model == "second"
    requirement, runner = a.within_noise()
    assert runner.model == "second" and "tg128" in requirement
    assert a.tie.decided_by.startswith("mean pass rate")
    body = quality_pages.roles_page(reg, [a])
    assert "Within noise" in body and "within noise of second" in body


def test_speed_evidence_is_the_fact_layers_figure(reg):
    """A configuration's speed is its group's figure (pipelines.facts: the run as the unit, the Leaderboard's
    number), never the newest run's own mean: two runs of fast-good give the geometric mean of their means
    and the fact layer's interval, and the Roles page marks the figure for the consistency check."""
    import math

    from pipelines import facts

    runs, quality = fixture_docs()
    runs = runs + [speed_doc("fast-good", mean=64.0, stamp="20260102T000000Z")]
    a = {x.role: x for x in roles.recommend(reg, quality, runs, CAPS)}["frontdoor"]
    ev = next(e for e in a.chosen.evidence if e.kind == "speed")
    newest = next(
        r
        for r in runs
        if r["model"]["name"] == "fast-good" and r["id"].endswith("20260102T000000Z")
    )
    fig = facts.of(runs).figure_of(newest["id"], "tokens_per_second")
    assert fig.runs == 2 and fig.mean == pytest.approx(math.sqrt(60.0 * 64.0))
    assert (
        ev.figure.key == fig.key
        and ev.figure.mean == fig.mean
        and a.chosen.speed_key == fig.mean
    )
    assert ev.ci == (fig.ci95_low, fig.ci95_high) and ev.n == 2 and ev.note == fig.note
    assert [aid for _, aid in ev.artifacts] == list(reversed(fig.run_ids))
    body = quality_pages.roles_page(reg, [a])
    assert f'data-fact="{fig.key}" data-v="{fig.mean!r}"' in body


def test_a_fleets_quality_chart_draws_a_bounded_few_over_the_ranking():
    """A fleet's Quality page has a cell per (configuration, host, suite): thousands at 500 hosts
    (Altair refuses a chart of over 5,000 rows; no reader reads 6,000 bars). The chart draws
    QUALITY_CHART_MAX of them spread over the pass-rate ranking, the best and the worst included,
    and says so; the table lists every cell."""
    import json
    import re

    from pipelines.site.charts import _values

    cap = quality_pages.QUALITY_CHART_MAX
    n = cap * 2 + 11
    docs = [
        quality_doc(f"model-{i:03d}", "ip", [True] * (i % 10) + [False] * (10 - i % 10))
        for i in range(n)
    ]
    body = quality_pages.quality_page(docs)
    specs = re.findall(
        r'<script type="application/json" id="[^"]+-spec">(.*?)</script>', body
    )
    assert len(specs) == 1
    rows = _values(json.loads(specs[0]))
    assert len(rows) == cap
    means = sorted(r["mean"] for r in rows)
    assert means[0] == 0.0 and means[-1] == 90.0  # the worst and the best drawn
    assert f"{cap:,} of {n:,} scores drawn" in body
    # every cell stays in the table
    assert all(f"model-{i:03d}" in body for i in range(n))
    # under the cap, every cell is drawn and nothing is said
    few = quality_pages.quality_page(docs[:5])
    assert "scores drawn" not in few
    assert (
        len(
            _values(
                json.loads(
                    re.findall(
                        r'<script type="application/json" id="[^"]+-spec">(.*?)</script>',
                        few,
                    )[0]
                )
            )
        )
        == 5
    )
