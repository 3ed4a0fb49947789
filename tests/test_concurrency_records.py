"""Concurrency sweeps whose request records are bounded in the artifact (core.request_records): the four
readers that counted stored records (the slot plan's aggregate, count, p95 and per-request rates, the
precision fallback, the corpus totals of RunRecord.generation, the sweep recompute) read the level's
summary computed over every request, and give the same values from it as from all the records, on the
committed slot sweep (issue 33's artifacts, unsampled); a run against the real llama-server on loopback
through the runner with requests_kept below a level's count (skipped, with the reason, where it is not
built)."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from core import artifacts, request_records
from core.kinds.request_stats import Slo, stored_sweep, sweep_stats
from core.records.run import RunRecord

HOST = (
    "vm-d4bbc016"  # the committed slot sweep (data/slots.yaml; tests/test_seed_rows.py)
)
KEPT = 1  # fewer than every level above one client sends (the slot sweep: 1 round a client)


@pytest.fixture(scope="module")
def slot_runs() -> list[RunRecord]:
    from pipelines import slots
    from pipelines.runs import load_runs

    plan = slots.load_slots()
    assert plan is not None
    runs = [
        r
        for r in load_runs()
        if r.test_kind == "concurrency" and r.matrix_name == plan.matrix
    ]
    assert len(runs) >= 6 and not any(
        "sampled" in lv for r in runs for lv in r["samples"]["levels"]
    )
    return runs


def _measured_today(r: RunRecord) -> dict[str, Any]:
    """The artifact as a run measured today writes it: the sweep (with the totals the readers need)
    computed from every request, then the records bounded to KEPT a level."""
    doc = copy.deepcopy(r.stored)
    slo = Slo.from_dict(doc["details"].get("slo"))
    doc["details"]["sweep"] = sweep_stats(doc["samples"]["levels"], slo)
    new, data = request_records.bound(doc, request_records.RecordPolicy(kept=KEPT))
    assert data is None and new["details"]["request_records"]["sampled"] is True
    return new


def _sampled(runs: list[RunRecord]) -> list[RunRecord]:
    return [RunRecord(_measured_today(r), r.path) for r in runs]


def test_the_slot_plan_reads_the_summary_not_the_sample(slot_runs):
    from pipelines import slots

    plan = slots.load_slots()
    assert plan is not None
    want = slots.role_slots(plan, slot_runs, HOST)
    got = slots.role_slots(plan, _sampled(slot_runs), HOST)
    assert [len(r.points) for r in got] == [len(r.points) for r in want]
    assert sum(len(r.points) for r in want) >= 4
    for a, b in zip(want, got):
        assert (a.recommended, a.reason, a.missing) == (
            b.recommended,
            b.reason,
            b.missing,
        )
        for p, q in zip(a.points, b.points):
            # the count, wall-clock aggregates and p95s are the same arithmetic on the same numbers
            assert (p.slots, p.n, p.agg_tps, p.base_agg_tps) == (
                q.slots,
                q.n,
                q.agg_tps,
                q.base_agg_tps,
            )
            assert (p.p95_ms, p.base_p95_ms, p.p95_multiplier) == (
                q.p95_ms,
                q.base_p95_ms,
                q.p95_multiplier,
            )
            # the gain from (n, mean, stddev) of the per-request rates: equal to the last bits
            assert q.gain is not None and p.gain is not None
            assert q.gain["verdict"] == p.gain["verdict"]
            for k in ("mean", "lo", "hi"):
                assert q.gain[k] == pytest.approx(p.gain[k], rel=1e-12, abs=1e-12)
            assert (p.accepted, p.why) == (q.accepted, q.why)
            assert (
                q.n > KEPT
            )  # more requests than the sample holds: counted from the summary


def test_the_precision_fallback_reads_the_summary(slot_runs):
    from pipelines import serving

    for r in slot_runs:
        whole = dict(copy.deepcopy(r.stored))
        whole["details"].pop(
            "precision", None
        )  # an artifact from before repeat-to-precision
        part = _measured_today(r)
        part["details"].pop("precision", None)
        want = serving.level_precision(RunRecord(whole, r.path))
        got = serving.level_precision(RunRecord(part, r.path))
        assert got == want
        assert [p["n"] for p in got.values()] == [
            len(lv["requests"]) for lv in r["samples"]["levels"]
        ]


def test_the_corpus_totals_read_the_summary(slot_runs):
    for r in slot_runs:
        part = RunRecord(_measured_today(r), r.path)
        assert part.generation() == r.generation()
        assert part.generation()["requests"] > sum(
            len(lv["requests"]) for lv in part["samples"]["levels"]
        )
    # an artifact whose sweep lacks the totals (every one measured before them) counts its records
    r = slot_runs[0]
    assert r._sweep_totals() is None


def test_the_sweep_is_never_recomputed_from_the_sample(slot_runs, monkeypatch):
    from core.kinds import request_stats
    from pipelines import serving

    for r in slot_runs:
        part = _measured_today(r)
        whole = sweep_stats(
            r["samples"]["levels"], Slo.from_dict(r["details"].get("slo"))
        )
        assert serving.sweep_of(RunRecord(part, r.path)) == whole
    # stored by other arithmetic and no record kept beside it: the sweep as the run computed it over all
    part = _measured_today(slot_runs[0])
    monkeypatch.setattr(request_stats, "SWEEP_STATS_VERSION", 999)
    got = serving.sweep_of(RunRecord(part, slot_runs[0].path))
    assert got is not None and got == part["details"]["sweep"] and got["version"] == 2
    # an unsampled artifact of other arithmetic is recomputed from its records, as before
    again = serving.sweep_of(slot_runs[0])
    assert again is not None and again["version"] == 999


def test_the_serving_page_says_what_a_sweep_stores():
    from pipelines.site.serving import records_line

    assert records_line({"request_records": None}) == ""
    assert (
        records_line({"request_records": {"sampled": False, "kept": 7, "of": 7}}) == ""
    )
    line = records_line(
        {
            "request_records": {"sampled": True, "kept": 2000, "of": 25600},
            "records_file": None,
        }
    )
    assert line == (
        "Request records: 2,000 of 25,600 stored in the artifact (a seeded reservoir sample per "
        "level); every figure here is over all 25,600."
    )


def test_a_level_s_summary_holds_the_totals_its_readers_need():
    from core import stats

    recs = [
        {
            "ok": True,
            "output_tokens": 4,
            "prompt_tokens": 10,
            "e2e_ms": 200.0,
            "ttft_ms": 50.0,
        },
        {
            "ok": True,
            "output_tokens": 8,
            "prompt_tokens": 12,
            "e2e_ms": 400.0,
            "ttft_ms": 60.0,
        },
        {"ok": False, "output_tokens": 3, "prompt_tokens": 9, "e2e_ms": 100.0},
    ]
    (lv,) = sweep_stats([{"level": 2, "wall_s": 0.5, "requests": recs}], Slo())[
        "levels"
    ]
    assert (lv["requests"], lv["output_tokens"], lv["prompt_tokens"]) == (3, 12, 22)
    assert lv["request_tps"] == {"n": 2, "mean": 20.0, "stddev": 0.0}
    assert stats.ci95_half_width_rel_of(lv["e2e_ms"]) == stats.ci95_half_width_rel(
        [200.0, 400.0]
    )
    # a stored sweep without the added keys is still today's (not recomputed on every build)
    old = sweep_stats([{"level": 2, "wall_s": 0.5, "requests": recs}], Slo())
    for row in old["levels"]:
        del row["prompt_tokens"], row["request_tps"]
    assert stored_sweep(old) is old


# -- the real llama-server on loopback, through the runner ----------------------------------------
MATRIX = """schema_version: 1
name: bounded-conc
backend: openai_http
models: [gemma3-270m-q4_k_m]
precision: null
timeout_s: 600
requests_kept: 2
keep_all_requests: true
settings: {server: llama-server, parallel: 2, n_ctx: 1024, n_threads: 1, retries: 0}
tests:
  - kind: concurrency
    id: bounded-conc
    levels: [1, 2]
    rounds: 3
    max_tokens: 4
    ignore_eos: true
    warmup_requests: 0
    messages: [{role: user, content: Say hello.}]
"""


def _built() -> bool:
    from runtime.backends.openai_http import llama_server

    return bool(os.environ.get(llama_server.ENV) or llama_server.cached_builds())


@pytest.mark.model
@pytest.mark.skipif(
    not _built(),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` "
    "(or set ALMANAC_LLAMA_SERVER)",
)
def test_llama_server_concurrency_run_keeps_a_sample_and_its_figures_over_all(
    data_env, monkeypatch
):
    from core.kinds import request_stats
    from pipelines import serving
    from pipelines.dataset import load as load_set
    from runtime.execution import runner
    from tests.conftest import write_matrix

    write_matrix(data_env, "bounded-conc", MATRIX)
    report = runner.run_matrix("bounded-conc")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    (path,) = report.measured
    count, problems = artifacts.validate_tree(data_env)
    assert count == 1 and not problems
    doc = artifacts.load(path)
    levels = doc["samples"]["levels"]
    # 3 and 6 requests sent, 2 stored a level (level 1 sent 3: sampled too)
    assert [len(lv["requests"]) for lv in levels] == [2, 2]
    assert [lv["sampled"]["of"] for lv in levels] == [3, 6]
    assert [lv["sampled"]["seed"] for lv in levels] == [
        0,
        1,
    ]  # no test seed: the level's index
    rr = doc["details"]["request_records"]
    assert (rr["kept"], rr["of"], rr["sampled"], rr["full"]["records"]) == (
        4,
        9,
        True,
        9,
    )
    # every figure is over all the requests, not the 2 stored
    sweep = doc["details"]["sweep"]
    assert [s["requests"] for s in sweep["levels"]] == [3, 6]
    assert [s["ok"] for s in sweep["levels"]] == [3, 6]
    assert [s["output_tokens"] for s in sweep["levels"]] == [12, 24]
    assert [s["request_tps"]["n"] for s in sweep["levels"]] == [3, 6]
    assert [p["n"] for p in doc["details"]["precision"]["levels"]] == [3, 6]
    full = request_records.load_full(path, doc)
    assert [len(x) for x in full] == [3, 6]
    assert all(r in full[i] for i, lv in enumerate(levels) for r in lv["requests"])
    recomputed = sweep_stats(
        [{**lv, "requests": recs} for lv, recs in zip(levels, full)],
        Slo.from_dict(doc["details"]["slo"]),
    )
    assert [s["e2e_ms"]["p95"] for s in recomputed["levels"]] == [
        s["e2e_ms"]["p95"] for s in sweep["levels"]
    ]
    (run,) = load_set(data_env).runs
    g = run.generation()
    assert (g["requests"], g["tokens"]) == (9, 36)
    assert g["prompt_tokens"] == sum(s["prompt_tokens"] for s in sweep["levels"]) > 0
    (row,) = serving.sweeps([run])
    assert [s["requests"] for s in row["sweep"]["levels"]] == [3, 6]
    # the Serving page says what the artifact stores and links every record
    from pipelines.site.serving import serving_page

    rel = request_records.sidecar_rel(run.data_path, doc)
    assert rel and row["records_file"] == rel
    md = serving_page(load_set(data_env).runs)
    assert (
        "Request records: 4 of 9 stored in the artifact (a seeded reservoir sample per level); "
        "every figure here is over all 9; every record: [JSON lines, gzip]("
    ) in md
    assert rel in md
    # a stored sweep of another arithmetic is recomputed from every record beside it, never the sample
    monkeypatch.setattr(request_stats, "SWEEP_STATS_VERSION", 999)
    (run,) = load_set(data_env).runs
    again = serving.sweep_of(run)
    assert again is not None and again["version"] == 999
    assert [s["requests"] for s in again["levels"]] == [3, 6]
