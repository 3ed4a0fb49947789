"""Issue 10: one run record, like-with-like boards, ranks with CI95, history and regressions,
`invoke compare`.

Fixture artifacts are built through core.records.run.new_run (the writers' path) with chosen
samples, so the arithmetic of each assertion can be checked by hand; the GPU host among them
is a fixture (no GPU here). The real committed artifacts under data/runs are checked too.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import artifacts, stats
from core.kinds import headline
from core.records import run as record
from pipelines import compare as cmp
from pipelines import history, host_boards
from pipelines.ranking import rank_sides
from pipelines.site import history_pages, host_boards_page
from tests.support.committed import committed_runs

ROOT = Path(__file__).resolve().parents[1]
SHA = "ab" * 32
T0 = datetime(2026, 1, 1, tzinfo=UTC)
CPU = {
    "id": "cpu-box-0000aaaa",
    "name": "cpu-box",
    "cpu": {
        "model": "Fixture CPU",
        "physical_cores": 2,
        "logical_cores": 2,
        "flags": [],
    },
    "memory_bytes": 1 << 34,
    "numa_nodes": 1,
    "os": {},
    "gpus": [],
}
GPU = {
    **CPU,
    "id": "gpu-box-0000bbbb",
    "name": "gpu-box",
    "gpus": [{"name": "Fixture GPU (no GPU here: fixture)"}],
}
PP = {
    "kind": "rate",
    "name": "pp64",
    "n_prompt": 64,
    "n_gen": 0,
    "n_depth": 0,
    "repetitions": 5,
    "warmup": True,
}
TG = {
    "kind": "rate",
    "name": "tg16",
    "n_prompt": 0,
    "n_gen": 16,
    "n_depth": 0,
    "repetitions": 5,
    "warmup": True,
}


def run(
    samples,
    *,
    test=PP,
    host=CPU,
    minutes=0,
    backend="llama_cpp",
    requested=None,
    effective=None,
    label=None,
    commit="0c1e57098",
    model="m",
    sha=SHA,
    metric="tokens_per_second",
    almanac="0.1.0",
    server=None,
):
    req = {"n_threads": None, "flash_attn": "auto", **(requested or {})}
    eff = {
        "n_threads": 2,
        "flash_attn": "on",
        "flash_attn_requested": req["flash_attn"],
        **(effective or {}),
    }
    build = {
        "backend_version": "llama-cpp-python 0.3.36",
        "llama_cpp_commit": commit,
        "almanac": almanac,
        "in_process": server is None,
    }
    if label:
        build["label"] = label
    if server:
        build["server"] = server
    key = record.config_key(
        backend, sha, req, test, host["id"], build["backend_version"], build_label=label
    )
    key = record.digest([key, minutes])  # each fixture its own measurement
    doc = record.new_run(
        key=key,
        created=T0 + timedelta(minutes=minutes),
        status="ok",
        backend=backend,
        test=test,
        requested=req,
        effective=eff,
        host=host,
        build=build,
        matrix={"name": "fixture", "file": "data/matrices/fixture.yaml"},
        model={
            "name": model,
            "file_name": f"{model}.gguf",
            "sha256": sha,
            "size_bytes": 1,
            "source": "path",
            "synthetic": False,
            "gguf": {"quantization": "Q4_0"},
        },
        samples={"ts": list(samples)},
        summary={metric: stats.summarize(samples)},
        resources={"wall_s": 1.0, "exit_code": 0},
    )
    artifacts.validate(doc)
    return record.RunRecord(doc, f"data/runs/{doc['id']}.json")


# -- the record --------------------------------------------------------------------------------
def test_one_id_format_and_the_writers_docs_validate():
    r = run([10, 11, 12])
    assert re.fullmatch(r"[0-9a-f]{12}-\d{8}T\d{6}\.\d{3}Z", r.id)
    assert (
        record.run_id("f" * 64, datetime(2026, 11, 26, 4, 4, 30, 390500, tzinfo=UTC))
        == "ffffffffffff-20261126T040430.390Z"
    )
    assert (
        record.run_path(r.doc, Path("/x")).name
        == f"pp64--{r.key[:16]}-20260101T000000.000Z.json"
    )


@pytest.mark.parametrize(
    "requested,reported,expected",
    [
        (
            {"flash_attn": "auto"},
            {"flash_attn": "on"},
            "on",
        ),  # the backend's report wins
        ({"flash_attn": "on"}, {"flash_attn": "off"}, "off"),
        (
            {"flash_attn": "off"},
            {},
            "off",
        ),  # no report (a failed run): the requested value, not "on"
        ({"flash_attn": "auto"}, {}, "auto"),
        ({"flash_attn": True}, {}, "on"),  # llama-bench's boolean
        ({}, {}, None),  # a backend without the setting
    ],
)
def test_flash_attention_is_interpreted_once(requested, reported, expected):
    assert record.flash_attention(requested, reported) == expected
    assert record.flash_attention_on(requested, reported) is (expected != "off")
    if expected is not None:
        assert record.effective_settings(requested, reported)["flash_attn"] == expected


def test_comparability_key_parts():
    a = run([10, 11, 12])
    same_work = run(
        [10, 11, 12],
        minutes=1,
        test={**PP, "repetitions": 3},
        effective={
            "base_url": "http://127.0.0.1:5555",
            "llama_memory_mib": {"CPU": {"model": 1.0}},
        },
    )
    assert (
        a.key != same_work.key
        and a.comparability_key() == same_work.comparability_key()
    )
    assert (
        a.comparability_key() != run([10], label="threads-halved").comparability_key()
    )  # another build
    assert a.comparability_key() != run([10], backend="openai_http").comparability_key()
    assert (
        a.comparability_key()
        != run([10], effective={"n_threads": 1}).comparability_key()
    )
    assert a.comparability_key(exclude=("settings.n_threads",)) == run(
        [10], effective={"n_threads": 1}
    ).comparability_key(exclude=("settings.n_threads",))
    # history: the same configuration as asked, across builds
    assert (
        a.history_key
        == run([5], label="threads-halved", effective={"n_threads": 1}).history_key
    )
    assert a.history_key != run([5], requested={"n_threads": 1}).history_key


def test_committed_artifacts_load_as_records():
    recs = committed_runs()
    assert recs and all(isinstance(r, record.RunRecord) for r in recs)
    for r in recs:
        assert r.path.startswith("data/runs/") and r.effective is not None
        if r.backend == "llama_cpp" and r.ok:
            assert r.flash_attn in ("on", "off")


# -- boards ------------------------------------------------------------------------------------
def test_boards_never_mix_backends_test_definitions_or_duplicates():
    free = {
        "kind": "generate",
        "name": "free",
        "workload": "free",
        "max_tokens": 16,
        "ignore_eos": True,
        "repetitions": 2,
        "warmup": True,
    }
    docs = [
        run([10, 11, 12]),
        run([20, 21, 22], minutes=1),  # the same configuration twice: the newest only
        run([30, 31, 32], backend="openai_http", minutes=2, server="llama_cpp.server"),
        run([33, 34, 35], backend="openai_http", minutes=2, server="llama-server"),
        run([40, 41], test=free, metric="generation_tps", minutes=3),
        run(
            [50, 51],
            test={**free, "ignore_eos": False},
            metric="generation_tps",
            minutes=4,
        ),
    ]
    bs = host_boards.of(docs)
    assert sorted((b.test, b.backend) for b in bs) == [
        ("free", "llama_cpp"),
        ("free", "llama_cpp"),
        ("pp64", "llama_cpp"),
        ("pp64", "openai_http (llama-server)"),
        ("pp64", "openai_http (llama_cpp.server)"),
    ]
    pp = next(b for b in bs if b.test == "pp64" and b.backend == "llama_cpp")
    # one row per configuration: its two runs (means 11 and 21) as the unit, linked to the newest
    assert list(pp.rows["runs"]) == [2] and list(pp.rows["s_mean"]) == [
        pytest.approx(math.sqrt(11 * 21))
    ]
    assert list(pp.rows["id"]) == [docs[1].id]
    assert {b.definition.get("ignore_eos") for b in bs if b.test == "free"} == {
        True,
        False,
    }


def test_builds_and_differing_settings_are_columns_equal_settings_stated_once():
    docs = [
        run([10, 11, 12]),
        run(
            [14, 15, 16], label="threads-halved", effective={"n_threads": 1}, minutes=1
        ),
    ]
    (b,) = host_boards.of(docs)
    assert (
        b.build_varies
        and b.varying == ["n_threads"]
        and b.constant["flash_attn"] == "on"
    )
    md = host_boards_page.host_boards_page(docs)
    assert (
        "backend build" in md
        and "[threads-halved]" in md
        and "Settings on every row:" in md
    )


def test_ranks_count_the_results_significantly_better_and_need_an_interval():
    side = lambda m, v, df=10: stats.SideEstimate(math.log(m), v, df, 3, "runs")  # noqa: E731
    ranked = rank_sides(
        [
            side(100, 0.01),
            side(90, 0.01),
            side(50, 0.0004),
            stats.SideEstimate(math.log(70), None, None, 1),
        ],
        higher_is_better=True,
    )
    # 100 and 90 are not told apart (ratio 1.11, its CI95 reaches below 1); both beat 50; the last has no interval
    assert [(r.rank, r.tied) for r in ranked] == [
        (1, True),
        (1, True),
        (3, False),
        (None, False),
    ]
    ranked = rank_sides(
        [side(11, 0.01), side(12, 0.01), side(30, 0.0004)], higher_is_better=False
    )  # lower is better
    assert [(r.rank, r.tied) for r in ranked] == [(1, True), (1, True), (3, False)]
    # boards rank configurations with the run as the unit: two runs each give the spread between runs;
    # a configuration measured once on a host whose run-to-run noise was never measured has no interval
    docs = [
        run([100, 101, 102]),
        run([100.5, 101.5, 99.5], minutes=1),
        run([100.5, 101.5, 99.5], requested={"n_batch": 64}, minutes=2),
        run([99, 100, 101], requested={"n_batch": 64}, minutes=3),
        run([50, 51, 52], requested={"n_batch": 32}, minutes=4),
        run([51, 52, 53], requested={"n_batch": 32}, minutes=5),
        run([300, 301, 302], requested={"n_batch": 16}, minutes=6),
    ]
    (b,) = host_boards.of(docs)
    recs = host_boards.board_records(b)
    # the configurations measured twice give this host's run-to-run noise (its history): the one measured
    # once is widened by it, and ranks first (300 against about 100)
    assert [r["rank_label"] for r in recs] == ["1", "=2", "=2", "4"]
    assert [r["runs"] for r in recs] == [
        1,
        2,
        2,
        2,
    ] and "the host's run-to-run noise" in recs[0]["interval_note"]
    # alone on a host (and a fleet) whose noise nobody measured, a single run has no interval and no rank
    (b,) = host_boards.of([run([300, 301, 302], requested={"n_batch": 16}, minutes=6)])
    (rec,) = host_boards.board_records(b)
    assert (
        rec["rank_label"] == "—"
        and rec["ci95_low"] is None
        and "invoke noise" in rec["interval_note"]
    )


def _chart_values(md: str) -> list[dict]:
    out = []
    for spec in re.findall(
        r'<script type="application/json" id="[^"]+">(.*?)</script>', md, re.S
    ):
        spec = json.loads(
            spec.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&")
        )
        for ds in (spec.get("datasets") or {}).values():
            out += ds
        out += (spec.get("data") or {}).get("values", [])
    return out


def test_every_charted_value_is_an_artifacts_value():
    """The committed artifacts: each chart mark is one artifact (unique id) and its mean is that
    artifact's headline mean (the stacked-bar bug summed two artifacts into one bar)."""
    recs = committed_runs()
    by_id = {r.id: r for r in recs}
    for page in (
        history_pages.history_page(recs),
        history_pages.regressions_page(recs),
    ):
        values = _chart_values(page)
        assert values
        for v in values:
            r = by_id[v["id"]]
            s = r.stat(headline(r.test_kind).name)
            assert (
                v["mean"] == s.mean
                and v.get("ci95_low") == s.ci95_low
                and v["n"] == s.n
            )
    # a leaderboard mark is a configuration: the geometric mean of its runs' means (one run: that run's mean)
    rows = {
        r["id"]: r for b in host_boards.of(recs) for r in host_boards.board_records(b)
    }
    for v in _chart_values(host_boards_page.host_boards_page(recs)):
        row = rows[v["id"]]
        means = [
            by_id[i].stat(headline(by_id[i].test_kind).name).mean
            for i in row["run_ids"]
        ]
        geo = math.exp(sum(math.log(m) for m in means) / len(means))
        assert v["mean"] == pytest.approx(geo) and v["n"] == row["n"]
    values = _chart_values(host_boards_page.host_boards_page(recs))
    ids = [v["id"] for v in values]
    assert len(ids) == len(set(ids))  # one mark per configuration (its newest artifact)
    spec = host_boards_page.host_boards_page(recs)
    assert '"stack": "zero"' not in spec and "mark_bar" not in spec


def test_one_headline_per_kind_declared_once():
    from core import kinds

    assert headline("rate").name == "tokens_per_second" and headline("nope") is None
    # the headline is declared by the kind's own module, nowhere else
    assert (
        kinds.get("generate").headline == "generation_tps"
        and kinds.get("chat").columns[0] == "ttft_ms"
    )


# -- history and regressions ---------------------------------------------------------------------
def _slowed_history():
    fast = [[700, 705, 698, 702, 699], [701, 703, 697, 700, 704]]
    slow = [[380, 385, 379, 383, 381], [382, 384, 380, 378, 386]]
    docs = [run(s, minutes=i) for i, s in enumerate(fast)]
    docs += [
        run(s, minutes=10 + i, label="threads-halved", effective={"n_threads": 1})
        for i, s in enumerate(slow)
    ]
    docs += [run([701, 699, 702, 700, 698], minutes=20)]
    return docs


def test_a_slowed_build_is_a_regression_step_with_its_ci():
    """The ordinary build (three runs, one after the slowed ones) and the slowed build (two runs) are two
    figures of the fact layer: one step between them, the figures the Leaderboard shows, never a step
    back when the ordinary build is measured again (the same build is one figure)."""
    from pipelines import facts

    docs = _slowed_history()
    (ser,) = history.series(docs)
    assert len(ser.points) == 5 and len(ser.builds) == 2
    (reg,) = ser.steps
    assert reg.verdict == "regression" and reg.variant
    fx = facts.of(docs)
    before, after = fx.figure_of(docs[0]), fx.figure_of(docs[2])
    assert reg.before_figure == before and reg.after_figure == after
    assert (
        before.runs == 3
        and after.runs == 2
        and reg.pooled_before["runs"] == 3
        and reg.pooled_before["n"] == 15
    )
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    fast = [
        sum(s) / len(s)
        for s in (
            [700, 705, 698, 702, 699],
            [701, 703, 697, 700, 704],
            [701, 699, 702, 700, 698],
        )
    ]
    slow = [
        sum(s) / len(s) for s in ([380, 385, 379, 383, 381], [382, 384, 380, 378, 386])
    ]
    assert reg.pooled_before["mean"] == pytest.approx(geo(fast))
    c = fx.compare(before, after)
    assert reg.ratio == pytest.approx(geo(slow) / geo(fast)) == pytest.approx(c.ratio)
    assert (reg.ci95_low, reg.ci95_high) == (c.ci95_low, c.ci95_high)
    assert reg.ci95_low < reg.ratio < reg.ci95_high < 1.0
    assert reg.build_change == {
        "label": (None, "threads-halved")
    } and reg.settings_change["n_threads"] == (2, 1)
    page = history_pages.regressions_page(docs)
    assert (
        "Deliberate variants" in page
        and f"{reg.ratio:.3f}" in page
        and "threads-halved" in page
    )
    assert "label: ordinary → threads-halved" in page.replace("\\", "")


def test_the_regressions_page_charts_its_largest_steps_only(monkeypatch):
    """Past STEP_CHARTS stepped configurations the page charts those of its largest steps and says how many
    it leaves out (#30: 1,023 charts at 100,000 artifacts made a 9.2 MB page); each step stays in the tables."""

    def slowed(model, drop):
        fast = [[700, 705, 698, 702, 699], [701, 703, 697, 700, 704]]
        sha = hashlib.sha256(model.encode()).hexdigest()
        docs = [run(s, minutes=i, model=model, sha=sha) for i, s in enumerate(fast)]
        return docs + [
            run(
                [v * drop for v in s],
                minutes=10 + i,
                model=model,
                sha=sha,
                commit="newcommit",
            )
            for i, s in enumerate(fast)
        ]

    docs = slowed("small", 0.9) + slowed("large", 0.5) + slowed("middle", 0.7)
    steps = [st for st in history.all_steps(history.series(docs)) if not st.variant]
    assert [st.series.model for st in steps] == ["large", "middle", "small"]
    page = history_pages.regressions_page(docs)
    assert page.count('class="almanac-chart"') == 3 and "are not (a page" not in page
    monkeypatch.setattr(history_pages, "STEP_CHARTS", 2)
    page = history_pages.regressions_page(docs)
    over_time = page.split("## Over time", 1)[1]
    assert over_time.count('class="almanac-chart"') == 2
    assert (
        "The 2 configurations of the largest steps are charted here; the other 1 are not"
        in over_time
    )
    charted = [c for c in re.findall(r"<figcaption>([^:<]+):", over_time)]
    assert len(charted) == 2 and all("small" not in c for c in charted), charted
    # the step left uncharted is still a row of the steps' table
    assert "| small |" in page.split("## Over time", 1)[0]


def test_noise_is_not_a_step_and_old_builds_are_stale():
    docs = [
        run([700, 705, 698], minutes=0),
        run([701, 699, 704], minutes=5, commit="newcommit"),
    ]
    (ser,) = history.series(docs)
    assert ser.steps == []
    assert history.stale_ids(docs) == {docs[0].id}
    assert ser.points[0].stale and not ser.stale
    # a build variant does not make the ordinary build stale
    assert history.stale_ids(_slowed_history()) == set()


# -- compare ---------------------------------------------------------------------------------
def test_compare_two_builds_and_two_hosts():
    docs = _slowed_history()
    res = cmp.compare(
        docs,
        cmp.parse_selection("build=ordinary"),
        cmp.parse_selection("build=threads-halved"),
    )
    (row,) = res.rows
    assert (
        row.a_id == docs[-1].id and row.b_id == docs[3].id
    )  # the newest on each side, linked
    means = lambda ds: [d.stat("tokens_per_second").mean for d in ds]  # noqa: E731
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    assert (row.a_runs, row.b_runs) == (
        3,
        2,
    ) and row.method == "host noise"  # every run of each side, the host's pooled noise
    assert row.verdict == "loss" and row.ratio == pytest.approx(
        geo(means(docs[2:4])) / geo(means(docs[:2] + docs[4:]))
    )
    assert res.losses_beyond(40) and not res.losses_beyond(60)
    cross = [
        run([10, 11, 12], test=TG),
        run([900, 910, 905], test=TG, host=GPU, effective={"n_threads": 16}, minutes=1),
        run([5, 6, 7], test=PP, minutes=2),
    ]
    res = cmp.compare(
        cross, cmp.parse_selection("host=cpu-box"), cmp.parse_selection("host=gpu")
    )
    (row,) = (
        res.rows
    )  # one run a side, neither host's run-to-run noise measured: no verdict, and why
    assert (row.test, row.verdict, row.host_a, row.host_b) == (
        "tg16",
        "insufficient data",
        CPU["id"],
        GPU["id"],
    )
    assert "invoke noise" in row.note
    cross += [
        run([10.5, 11.5, 12], test=TG, minutes=3),
        run([905, 900, 902], test=TG, host=GPU, effective={"n_threads": 16}, minutes=4),
    ]
    res = cmp.compare(
        cross, cmp.parse_selection("host=cpu-box"), cmp.parse_selection("host=gpu")
    )
    (row,) = res.rows
    assert (row.test, row.verdict, row.a_runs, row.b_runs) == ("tg16", "win", 2, 2)
    assert "n_threads: 2→16" in row.effective_diff and "host" in res.compared_on
    md = cmp.markdown(res)
    assert "| tg16 |" in md and "win" in md and f"{row.ratio:.3f}" in md


def test_compare_refuses_empty_and_disjoint_selections():
    docs = [run([10, 11, 12])]
    with pytest.raises(cmp.CompareError, match="matches no measured result"):
        cmp.compare(
            docs, cmp.parse_selection("host=nowhere"), cmp.parse_selection("host=cpu")
        )
    with pytest.raises(cmp.CompareError, match="share no configuration"):
        cmp.compare(
            docs + [run([1, 2, 3], test=TG, host=GPU)],
            cmp.parse_selection("host=cpu"),
            cmp.parse_selection("host=gpu"),
        )
    for bad in ("", "host", "colour=red", "host=", "since=yesterday"):
        with pytest.raises(cmp.CompareError):
            cmp.parse_selection(bad)


def test_host_vs_host_page_ranks_each_host_against_the_fleet():
    cross = [
        run([10, 11, 12], test=TG),
        run([900, 910, 905], test=TG, host=GPU, minutes=1),
        run([10.5, 11.5, 12], test=TG, minutes=2),
        run([880, 890, 900], test=TG, host=GPU, minutes=3),
    ]
    page = history_pages.host_vs_host_page(cross)
    assert "2 of 2 hosts" in page and "1 workload(s)" in page
    # each host's value links to its newest run
    assert (
        f"runs/run.md?id={cross[2].id}" in page
        and f"runs/run.md?id={cross[3].id}" in page
    )
    # the slower host is the median host of two; the GPU host's ratio to it is `invoke compare`'s, a win
    # (every run of each host, the run as the unit: core.stats.compare_runs, as the page states)
    (row,) = cmp.compare(
        cross,
        cmp.parse_selection(f"host={CPU['id']}"),
        cmp.parse_selection(f"host={GPU['id']}"),
    ).rows
    assert (
        row.verdict == "win"
        and row.method == "host noise"
        and (row.a_runs, row.b_runs) == (2, 2)
    )
    assert (
        f"{row.ratio:,.3f} [{row.ci95_low:,.3f}, {row.ci95_high:,.3f}]" in page
        and "1 (median host)" in page
    )
    assert "n 6 · 2 runs" in page.replace(
        "\\", ""
    )  # each host's figure: its CI95, n and runs, as every page shows it
    # the picker's data carries both hosts (the browser compares any two from it)
    data = json.loads(
        re.search(
            r'<script type="application/json" id="almanac-fleet-data">(.*?)</script>',
            page,
        ).group(1)
    )
    assert data["hosts"] == [CPU["id"], GPU["id"]] and len(data["workloads"]) == 1
    # a third host that ran another model shares nothing: named once, in no workload
    other = {**GPU, "id": "other-host", "name": "other"}
    alone = run([5, 6, 7], test=TG, host=other, minutes=2, model="n", sha="c" * 64)
    page = history_pages.host_vs_host_page(cross + [alone])
    assert "2 of 3 hosts" in page and "1 host(s) ran nothing another host ran: " in page
    line = next(ln for ln in page.splitlines() if "ran nothing another host ran" in ln)
    assert (
        "<code>other-host</code>" in line
        and page.replace(line, "").count("other-host") == 0
    )  # named once, in no workload


# -- invoke compare end to end (a real subprocess) -------------------------------------------
def _invoke(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "compare", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_invoke_compare_end_to_end(tmp_path):
    runs = tmp_path / "runs"
    for r in _slowed_history() + [run([900, 910, 905], test=TG, host=GPU, minutes=30)]:
        record.write(r.doc, runs)
    out = tmp_path / "out" / "cmp"
    p = _invoke(
        "-b",
        "build=ordinary,host=cpu",
        "-c",
        "build=threads-halved",
        "-r",
        str(runs),
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert "| m | pp64 |" in p.stdout and "loss" in p.stdout
    data = json.loads(out.with_suffix(".json").read_text())
    assert (
        data["rows"][0]["verdict"] == "loss"
        and out.with_suffix(".csv").read_text().count("\n") == 2
    )
    assert out.with_suffix(".md").read_text() in p.stdout
    gate = _invoke(
        "-b",
        "build=ordinary,host=cpu",
        "-c",
        "build=threads-halved",
        "-r",
        str(runs),
        "-o",
        str(out),
        "--fail-on-loss",
        "5",
        cwd=tmp_path,
    )
    assert gate.returncode == 1 and "lost more than 5%" in gate.stderr
    for args, msg in [
        (("-b", "host=nowhere", "-c", "build=ordinary"), "matches no measured result"),
        (("-b", "host=cpu", "-c", "host=gpu"), "share no configuration"),
    ]:
        bad = _invoke(*args, "-r", str(runs), "-o", str(tmp_path / "bad"), cwd=tmp_path)
        assert (
            bad.returncode == 2 and msg in bad.stderr and "Traceback" not in bad.stderr
        )
        assert len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad.md").exists()


def test_committed_regression_example_is_on_the_regressions_page():
    """benchmarks/regression_example.py measured a deliberately slowed build (threads halved)
    on this project's CPU host: its step is on the Regressions page with its CI95 and sources."""
    recs = committed_runs()
    steps = [
        st
        for st in history.all_steps(history.series(recs))
        if st.build_change.get("label") == (None, "threads-halved")
    ]
    assert steps
    st = steps[0]
    assert (
        st.verdict == "regression"
        and st.ci95_high < 1.0
        and st.settings_change["n_threads"][1] < st.settings_change["n_threads"][0]
    )
    page = history_pages.regressions_page(recs)
    assert all(f"runs/run.md?id={p.id}" in page for p in st.before + st.after)
    assert (
        f"{st.ratio:.3f} \\[{st.ci95_low:.3f}, {st.ci95_high:.3f}\\]" in page
        or f"{st.ratio:.3f} [{st.ci95_low:.3f}, {st.ci95_high:.3f}]" in page
    )


def test_committed_cpu_and_h100_share_reference_rows():
    """The reference workload (data/matrices/reference.yaml) measured on the CPU VM and the lent
    H100: the host-vs-host table has shared rows, and every value is its artifact's."""
    recs = committed_runs()
    cpu = next(
        r.host_id
        for r in recs
        if r.matrix_name == "reference" and not r.host.get("gpus")
    )
    res = cmp.compare(
        recs, cmp.parse_selection(f"host={cpu}"), cmp.parse_selection("host=lent-h100")
    )
    assert res.rows and res.compared_on == ["host"]
    by_id = {r.id: r for r in recs}
    for row in res.rows:
        a, b = by_id[row.a_id], by_id[row.b_id]
        assert (
            a.host_id == cpu
            and b.host_id.startswith("lent-h100")
            and a.model_sha256 == b.model_sha256
        )
        assert a.requested == b.requested and a.test_definition == b.test_definition
        # one run: its own mean; several: their geometric mean, between the runs' means
        for side_mean, runs_, r in (
            (row.a_mean, row.a_runs, a),
            (row.b_mean, row.b_runs, b),
        ):
            same = [
                x.stat(row.metric).mean
                for x in recs
                if x.ok
                and x.host_id == r.host_id
                and x.key == r.key
                or (x.ok and x.host_id == r.host_id and x.history_key == r.history_key)
            ]
            assert (
                side_mean == r.stat(row.metric).mean
                if runs_ == 1
                else min(same) <= side_mean <= max(same)
            )
    assert f"runs/run.md?id={res.rows[0].b_id}" in history_pages.host_vs_host_page(recs)
