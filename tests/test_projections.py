"""Projections: composition rules, applicability, weighting, verification against fixture
artifacts, projection records and their accuracy history, and bad catalogue input."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from core import artifacts
from core.errors import ConfigError
from core.records.noise import NoiseRecord
from core.records.projection import ProjectionRecord
from core.records.run import RunRecord
from pipelines import projections as P
from tests.support.planning_fixtures import (
    GEMMA_FACTS,
    MOE_FACTS,
    embedded_dataset,
    rate_test,
    requested,
    run_doc,
    run_record,
    write_dataset,
)

CATALOGUE = """
schema_version: 1
optimizations:
  - id: kv-q8
    name: KV q8_0
    effect: {metric: tokens_per_second, stage: decode, roofline: true}
    source: {kind: model, ref: roofline}
    applies_when: {recurrent: false}
    settings: {type_k: q8_0, type_v: q8_0}
  - id: double-decode
    name: Twice the decode speed
    effect: {metric: tokens_per_second, stage: decode, range: [1.5, 2.5]}
    source: {kind: paper, ref: arXiv:0000.00000}
    applies_when: {test_kinds: [chat]}
  - id: big-only
    name: Large models only
    effect: {metric: tokens_per_second, stage: decode, factor: 1.76}
    source: {kind: pr, ref: ggml-org/llama.cpp#18747}
    applies_when: {min_model_bytes: 39000000000}
  - id: prefill-fast
    name: Faster prefill
    effect: {metric: ttft_ms, stage: prefill, factor: 2.0}
    source: {kind: paper, ref: arXiv:2312.07104}
"""
MIX = """
schema_version: 1
name: fixture-mix
roles:
  - {role: frontdoor, weight: 0.6, model: gemma3-270m-q4_k_m, test: chat-short, metric: decode_tps, matrix: default}
  - {role: long-context, weight: 0.3, model: gemma3-270m-q4_k_m, test: tg128@d4096, metric: tokens_per_second,
     matrix: projections, settings: {type_k: f16}}
  - {role: worker, weight: 0.1, model: gemma3-270m-q4_k_m, test: tg128, metric: tokens_per_second, matrix: default}
"""


@pytest.fixture
def inputs(tmp_path):
    cat_p, mix_p = tmp_path / "optimizations.yaml", tmp_path / "usage_mix.yaml"
    cat_p.write_text(CATALOGUE)
    mix_p.write_text(MIX)
    cat = P.load_catalogue(cat_p)
    return cat, P.load_usage_mix(mix_p, cat), cat_p, mix_p


# -- composition ----------------------------------------------------------------------------
def test_factors_on_one_stage_multiply():
    assert P.compose(
        {"decode": 1.0}, [("decode", 1.5), ("decode", 2.0)]
    ) == pytest.approx(3.0)


def test_stages_compose_by_amdahl():
    # prefill 20% of the time made 2x faster, decode 80% made 1.5x faster:
    # new time = 0.2 / 2 + 0.8 / 1.5 = 0.6333 -> speed-up 1.5789
    assert P.compose(
        {"prefill": 0.2, "decode": 0.8}, [("prefill", 2.0), ("decode", 1.5)]
    ) == pytest.approx(1 / (0.1 + 0.8 / 1.5))
    # a stage outside the metric changes nothing
    assert P.compose({"decode": 1.0}, [("prefill", 10.0)]) == pytest.approx(1.0)
    # "all" speeds every stage
    assert P.compose({"prefill": 0.3, "decode": 0.7}, [("all", 2.0)]) == pytest.approx(
        2.0
    )


def test_weighted_average_is_tokens_over_time():
    # 50% of tokens at 10 t/s, 50% at 30 t/s: 1 / (0.5/10 + 0.5/30) = 15 t/s (not 20)
    assert P.weighted_average([(0.5, 10.0), (0.5, 30.0)], True) == pytest.approx(15.0)
    assert P.weighted_average([(1, 100.0), (3, 200.0)], False) == pytest.approx(175.0)
    assert P.weighted_average([], True) is None


# -- applicability -----------------------------------------------------------------------------
def _attrs(**over):
    a = {
        "model_bytes": 250_000_000,
        "architecture": "gemma3",
        "recurrent": False,
        "moe": False,
        "sliding_window": True,
        "drafts": [],
        "device": "cpu",
        "host_gpus": [],
        "test_kind": "chat",
        "depth": 19,
    }
    a.update(over)
    return a


def test_applicability_rules():
    A = P.Applicability
    assert P.applicability(A(), _attrs()) == []
    assert "39 GB" in P.applicability(A(min_model_bytes=39_000_000_000), _attrs())[0]
    assert (
        P.applicability(
            A(min_model_bytes=39_000_000_000), _attrs(model_bytes=40_000_000_000)
        )
        == []
    )
    assert (
        "recurrent"
        in P.applicability(
            A(recurrent=False), _attrs(architecture="mamba", recurrent=True)
        )[0]
    )
    assert "draft" in P.applicability(A(needs_draft_same_vocab=True), _attrs())[0]
    assert (
        P.applicability(A(needs_draft_same_vocab=True), _attrs(drafts=["small"])) == []
    )
    assert "GPU only" in P.applicability(A(device="gpu"), _attrs())[0]
    assert "dense" in P.applicability(A(moe=True), _attrs())[0]
    assert P.applicability(A(architectures=["llama"]), _attrs())[0].startswith(
        "architecture gemma3"
    )
    assert P.applicability(A(test_kinds=["chat"]), _attrs(test_kind="rate"))
    assert P.applicability(A(min_depth=1024), _attrs(depth=4096)) == []


def test_run_attributes_find_a_draft_of_the_same_vocabulary():
    big = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [1.0, 1.1]},
        model="big",
        sha="b" * 64,
        size=10**9,
    )
    small = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [1.0, 1.1]},
        model="small",
        sha="c" * 64,
        size=10**8,
    )
    other = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [1.0, 1.1]},
        model="moe",
        facts=MOE_FACTS,
        sha="d" * 64,
        size=10**7,
    )
    a = P.run_attributes(big, [big, small, other])
    assert a["drafts"] == ["small"] and not a["moe"] and a["sliding_window"]
    assert (
        P.run_attributes(small, [big, small])["drafts"] == []
    )  # a draft must be smaller
    assert P.run_attributes(other, [other])["moe"]


# -- projection on fixture artifacts -------------------------------------------------------------
def test_projection_on_fixture_data(inputs):
    cat, mix, _, _ = inputs
    runs = embedded_dataset()["runs"]
    ps = P.project(runs, cat, mix, "fixture-host-0000aaaa")
    roles = {r.role.role: r for r in ps.roles}
    front, long, worker = roles["frontdoor"], roles["long-context"], roles["worker"]
    assert front.baseline == pytest.approx((61.0 + 62.0 + 62.4) / 3)
    # stage split of a decode rate: decode 600, sample 30, detokenise 2 ms per request
    assert front.shares == pytest.approx(
        {"decode": 600 / 632, "sample": 30 / 632, "detokenise": 2 / 632}
    )
    assert front.shares_source == "measured stage timings"
    # double-decode applies to chat only; big-only to nobody; prefill-fast is outside a decode rate
    opts = {o.opt.id: o for o in front.opts}
    assert opts["double-decode"].applies and not opts["big-only"].applies
    assert opts["prefill-fast"].applies and not opts["prefill-fast"].in_metric
    assert not {o.opt.id: o for o in worker.opts}["double-decode"].applies
    p = front.projections["double-decode"]
    sp_lo = 1 / (1 - 600 / 632 + 600 / 632 / 1.5)
    sp_hi = 1 / (1 - 600 / 632 + 600 / 632 / 2.5)
    sp_mid = 1 / (1 - 600 / 632 + 600 / 632 / 2.0)
    # one run on a host with no run-to-run noise estimate for chats: its figure has no interval (the fact layer
    # says so), and the stated range is the effect's range on the baseline's value
    assert front.baseline_ci95 == (None, None)
    assert front.baseline_figure.note.startswith("one run, and no run-to-run noise")
    assert (p.low, p.mid, p.high) == pytest.approx(
        (front.baseline * sp_lo, front.baseline * sp_mid, front.baseline * sp_hi)
    )
    assert (
        p.status == "PROJECTED" and p.target_settings is None
    )  # no settings: cannot be run here
    assert front.projections["prefill-fast"].mid == pytest.approx(front.baseline)
    # kv-q8 on the long-context role: roofline factor and a verification run exists
    pl = long.projections["kv-q8"]
    measured = (31.0 + 31.5 + 32.0) / 3
    assert pl.status == ("VERIFIED" if pl.low <= measured <= pl.high else "MISSED")
    assert pl.verification["verdict"] == pl.status
    assert pl.verification["value"] == pytest.approx(measured)
    assert pl.verification["error"] == pytest.approx(pl.mid / measured - 1)
    assert (
        pl.target_settings["type_k"] == "q8_0"
        and pl.target_settings["type_v"] == "q8_0"
    )
    assert pl.speedup[1] > 1.0
    # the worker's kv-q8 projection has no run of its own configuration: the speed-up kv-q8 gave on the same
    # host, model and backend on another test (tg128@d4096, q8_0 ÷ f16) checks it
    wp = worker.projections["kv-q8"]
    assert wp.measured is None and wp.verification["basis"] == "speed-up"
    assert (
        wp.measured_speedup.test == "tg128@d4096"
        and wp.measured_speedup.ratio == pytest.approx(31.5 / 30.5)
    )
    ms = wp.measured_speedup
    assert (
        wp.status
        == P.ratio_verdict(*wp.speedup, ms.ratio, ms.ci95_low, ms.ci95_high)[0]
    )
    # scenarios: each applicable optimization alone, then all of them
    names = [n for n, _ in ps.scenarios]
    assert names == ["kv-q8", "double-decode", "prefill-fast", "all applicable"]
    assert (
        ps.last_updated() == "2026-01-02T00:00:00+00:00"
    )  # the verification run is the newest input


def test_baseline_is_the_fact_layers_figure_and_its_interval_carries_into_the_range(
    inputs,
):
    """A role's baseline is its work's group figure (the run as the unit, the Leaderboard's number): with the
    worker's configuration measured twice, its value is the geometric mean of the two run means, its CI95 the
    fact layer's, and the projected range carries that interval."""
    from pipelines import facts

    cat, mix, _, _ = inputs
    runs = embedded_dataset(repeated=True)["runs"]
    ps = P.project(runs, cat, mix, "fixture-host-0000aaaa")
    worker = next(r for r in ps.roles if r.role.role == "worker")
    fig = facts.of(runs).figure_of(worker.baseline_doc["id"], "tokens_per_second")
    assert fig.runs == 2 and worker.baseline == pytest.approx(
        math.sqrt(41.0 * 41.4)
    ) == pytest.approx(fig.mean)
    assert (
        worker.baseline_ci95 == (fig.ci95_low, fig.ci95_high)
        and fig.ci95_low < worker.baseline < fig.ci95_high
    )
    assert (
        worker.baseline_doc["id"] == fig.newest_id
    )  # the group's newest run, linked from the page
    p = worker.projections["kv-q8"]
    lo_sp, mid_sp, hi_sp = p.speedup
    assert (p.low, p.mid, p.high) == pytest.approx(
        (fig.ci95_low * lo_sp, fig.mean * mid_sp, fig.ci95_high * hi_sp)
    )
    # the long-context role's single run now has the host's noise for generation rates: an interval too
    long = next(r for r in ps.roles if r.role.role == "long-context")
    assert (
        long.baseline_figure.basis == facts.BASIS_HOST
        and long.baseline_ci95[0] < long.baseline
    )


def test_all_applicable_holds_back_an_optimization_until_its_gates_say_go(
    inputs, tmp_path
):
    # seed 000: an optimization with go/no-go gates joins the combined scenario only once they say GO
    _, mix0, _, _ = inputs
    runs = embedded_dataset()["runs"]
    gated = CATALOGUE.replace(
        """    settings: {type_k: q8_0, type_v: q8_0}
""",
        """    settings: {type_k: q8_0, type_v: q8_0}
    gates:
      - {id: speed, name: decode, concern: overhead, quantity: value, metric: tokens_per_second,
         model: gemma3-270m-q4_k_m, test: tg128@d4096, matrix: projections, direction: higher, target: TARGET, no_go: 5}
""",
        1,
    )

    def scenarios(target: str) -> P.ProjectionSet:
        p = tmp_path / f"cat-{target}.yaml"
        p.write_text(gated.replace("TARGET", target))
        cat = P.load_catalogue(p)
        return P.project(
            runs,
            cat,
            P.load_usage_mix(tmp_path / "usage_mix.yaml", cat),
            "fixture-host-0000aaaa",
        )

    # the fixture's q8_0 run decodes at 31.0-32.0 t/s: a target of 10 t/s is met (GO) ...
    go = scenarios("10")
    assert (
        dict(go.scenarios)["all applicable"]
        == ["kv-q8", "double-decode", "prefill-fast"]
        and go.held_back == []
    )
    # ... a target of 40 t/s is not (UNDECIDED: between the no-go 5 and the target): held back, still projected alone
    undecided = scenarios("40")
    assert undecided.held_back == [("kv-q8", "UNDECIDED")]
    assert dict(undecided.scenarios)["all applicable"] == [
        "double-decode",
        "prefill-fast",
    ]
    assert "kv-q8" in dict(undecided.scenarios)
    from pipelines.site.projections_page import projections_host

    md = projections_host(undecided, [])
    assert (
        "Not combined with the others (*all applicable*) until their go/no-go gates on this host say GO"
        in md
    )
    assert "<code>kv-q8</code> (UNDECIDED)" in md


def test_roofline_factor_is_the_bytes_ratio(inputs):
    from pipelines import roofline
    from pipelines.memory import ModelShape

    cat, mix, _, _ = inputs
    runs = embedded_dataset()["runs"]
    ps = P.project(runs, cat, mix, "fixture-host-0000aaaa")
    long = next(r for r in ps.roles if r.role.role == "long-context")
    shape = ModelShape.from_facts(GEMMA_FACTS)
    depths = list(range(4096, 4096 + 128))
    b16 = roofline.bytes_per_token(shape, depths, type_k="f16", type_v="f16")["total"]
    b8 = roofline.bytes_per_token(shape, depths, type_k="q8_0", type_v="q8_0")["total"]
    assert long.projections["kv-q8"].speedup[1] == pytest.approx(b16 / b8)


def test_weighted_average_of_scenarios(inputs):
    cat, mix, _, _ = inputs
    ps = P.project(embedded_dataset()["runs"], cat, mix, "fixture-host-0000aaaa")
    w = {x["scenario"]: x for x in ps.weighted()}
    base = {r.role.role: r.baseline for r in ps.roles}
    cur = 1 / (
        0.6 / base["frontdoor"] + 0.3 / base["long-context"] + 0.1 / base["worker"]
    )
    assert w["current"]["current"] == pytest.approx(cur)
    # double-decode: only the front door changes
    front_mid = (
        next(r for r in ps.roles if r.role.role == "frontdoor")
        .projections["double-decode"]
        .mid
    )
    assert w["double-decode"]["mid"] == pytest.approx(
        1 / (0.6 / front_mid + 0.3 / base["long-context"] + 0.1 / base["worker"])
    )
    assert w["double-decode"]["measured"] is None  # the front door is not verified


def test_missed_projection_is_never_verified():
    assert P.verdict(10.0, 12.0, 11.0) == "VERIFIED"
    assert P.verdict(10.0, 12.0, 12.0) == "VERIFIED"
    assert P.verdict(10.0, 12.0, 9.99) == "MISSED"
    role = P.Role(role="r", model="m", test="t", metric="tokens_per_second", weight=1.0)
    p = P.Projection(
        role,
        "s",
        ["x"],
        10.0,
        14.0,
        15.0,
        16.0,
        (1.4, 1.5, 1.6),
        {},
        verification={"value": 10.2, "error": 15.0 / 10.2 - 1},
    )
    assert (
        p.status == "MISSED" and p.verification["error"] > 0.4
    )  # signed: the projection was 47% high
    p.verification = {"value": 15.5, "error": 15.0 / 15.5 - 1}
    assert p.status == "VERIFIED"


def test_weighted_interval_propagates_input_intervals():
    # rates: harmonic mean; check the delta-method half-width against a numerical derivative
    vals = [(0.6, 60.0, 57.0, 63.0), (0.4, 30.0, 29.0, 31.0)]
    lo, hi = P.weighted_interval(vals, True)
    H = P.weighted_average([(w, v) for w, v, *_ in vals], True)
    eps = 1e-6
    grads = []
    for i in range(2):
        bumped = [
            (w, v + (eps if j == i else 0.0)) for j, (w, v, *_) in enumerate(vals)
        ]
        grads.append((P.weighted_average(bumped, True) - H) / eps)
    half = (sum((g * h) ** 2 for g, h in zip(grads, (3.0, 1.0)))) ** 0.5
    # the propagated half-width, applied on the log scale so that a rate stays positive
    assert (lo, hi) == pytest.approx(
        (H * math.exp(-half / H), H * math.exp(half / H)), rel=1e-5
    )
    # times: arithmetic mean, half-widths weighted
    lo, hi = P.weighted_interval(
        [(0.5, 100.0, 90.0, 110.0), (0.5, 200.0, 190.0, 210.0)], False
    )
    half = (25 + 25) ** 0.5  # 0.5 x 10 each
    assert (lo, hi) == pytest.approx(
        (150.0 * math.exp(-half / 150), 150.0 * math.exp(half / 150))
    )
    assert (
        P.weighted_interval([(1.0, 5.0, 0.1, 50.0)], True)[0] > 0
    )  # never below zero, however wide
    assert P.weighted_interval([(1.0, 5.0, None, None)], True) == (None, None)


def test_baseline_rule_ignores_verification_runs_of_the_same_matrix(inputs):
    """A role naming no settings keeps its baseline when a run of an optimization (a verification)
    shares its matrix, model and test."""
    cat, mix, _, _ = inputs
    runs = embedded_dataset()["runs"]
    worker_role = next(r for r in mix.roles if r.role == "worker")
    kv = next(o for o in cat.optimizations if o.id == "kv-q8")
    base, _ = P.find_baseline(worker_role, runs, "fixture-host-0000aaaa", cat)
    verif = run_doc(
        test=base["test"],
        metrics={"tokens_per_second": [70.0, 71.0, 72.0]},
        settings=requested(**kv.settings),
        created="2026-03-01T00:00:00+00:00",
    )
    verif["matrix"] = dict(base["matrix"])
    verif = RunRecord(verif)
    doc, problem = P.find_baseline(
        worker_role, runs + [verif], "fixture-host-0000aaaa", cat
    )
    assert problem is None and doc["id"] == base["id"]
    # without the rule the verification (the faster configuration) would be taken for the baseline
    assert (
        P.find_baseline(worker_role, runs + [verif], "fixture-host-0000aaaa")[0]["id"]
        == verif["id"]
    )
    ps = P.project(runs + [verif], cat, mix, "fixture-host-0000aaaa")
    worker = next(r for r in ps.roles if r.role.role == "worker")
    assert worker.baseline_doc["id"] == base["id"]
    assert worker.projections["kv-q8"].verification["run_id"] == verif["id"]


def test_no_data_and_ambiguous_baselines(inputs):
    cat, mix, _, _ = inputs
    runs = embedded_dataset()["runs"]
    ps = P.project(
        [r for r in runs if r["test"]["name"] != "tg128"],
        cat,
        mix,
        "fixture-host-0000aaaa",
    )
    worker = next(r for r in ps.roles if r.role.role == "worker")
    assert worker.baseline_doc is None and "no measured run" in worker.problem
    assert (
        worker.not_measured and worker.missing_work == ""
    )  # no group of that work on any host
    # the same test twice with different settings: the representative one (the best figure, as the
    # Leaderboard picks it) is the baseline, and the page says it represents two configurations
    base = next(r for r in runs if r["test"]["name"] == "tg128")
    slow = run_record(
        test=rate_test(n_gen=128),
        metrics={"tokens_per_second": [1.0, 2.0]},
        settings=requested(n_threads=1),
    )
    ps = P.project(runs + [slow], cat, mix, "fixture-host-0000aaaa")
    worker = next(r for r in ps.roles if r.role.role == "worker")
    assert worker.baseline_doc["id"] == base["id"] and worker.base.candidates == 2
    # the matrix names a preference, never a filter: the worker's work measured in another matrix is found
    moved = [
        RunRecord(
            dict(
                r, matrix={"name": "elsewhere", "file": "data/matrices/elsewhere.yaml"}
            )
        )
        if r is base
        else r
        for r in runs
    ]
    ps = P.project(moved, cat, mix, "fixture-host-0000aaaa")
    worker = next(r for r in ps.roles if r.role.role == "worker")
    assert worker.baseline_doc["id"] == base["id"] and worker.problem is None
    # every configuration of the work realises an optimization: no baseline, and it is no "not measured" either
    only_q8 = [r for r in runs if r is not base] + [
        run_record(
            test=rate_test(n_gen=128),
            metrics={"tokens_per_second": [9.0, 9.5]},
            settings=requested(type_k="q8_0", type_v="q8_0"),
        )
    ]
    ps = P.project(only_q8, cat, mix, "fixture-host-0000aaaa")
    worker = next(r for r in ps.roles if r.role.role == "worker")
    assert (
        worker.baseline_doc is None
        and not worker.not_measured
        and "realises an optimization (kv-q8)" in worker.problem
    )


# -- records and history --------------------------------------------------------------------------
def test_record_is_a_valid_artifact_and_history_checks_it_later(
    inputs, tmp_path, monkeypatch
):
    from pipelines import noise

    cat, mix, cat_p, mix_p = inputs
    runs = embedded_dataset()["runs"]
    # the fixture host's run-to-run noise (an A/A of 11 runs, 2%): its single runs get an interval, so a
    # projection's range has a width a measurement can fall within
    host = runs[0]["host"]
    nz = {
        "artifact": "noise",
        "host": host,
        "created": "2026-01-01T00:00:00+00:00",
        "id": "fixture-noise",
        "estimates": {"rate:tg": {"sigma": 0.02, "df": 10, "runs": 11, "groups": 1}},
    }
    monkeypatch.setattr(noise, "_noise_docs", lambda: [NoiseRecord(nz)])
    # first record: before the q8_0 verification run existed
    early = [r for r in runs if r["settings"]["requested"]["type_k"] != "q8_0"]
    ps = P.project(early, cat, mix, "fixture-host-0000aaaa")
    rec = P.record(
        ps,
        mix_file=mix_p,
        catalogue_file=cat_p,
        now=datetime(2026, 1, 1, 12, tzinfo=UTC),
    )
    artifacts.validate(rec)
    path = artifacts.write(P.record_path(rec, tmp_path / "projections"), rec)
    entry = next(
        e
        for e in rec["entries"]
        if e["role"] == "long-context" and e["scenario"] == "kv-q8"
    )
    assert (
        entry["status"] == "PROJECTED" and entry["target_settings"]["type_k"] == "q8_0"
    )
    records = P.load_records(tmp_path / "projections")
    assert [r["id"] for r in records] == [rec["id"]] and records[0]["_path"].endswith(
        path.name
    )
    # no measurement yet: nothing checked
    assert P.accuracy_history(records, early) == []
    # the verification run arrives later: the recorded projection is checked against it
    hist = P.accuracy_history(records, runs)
    assert (
        len(hist) == 1
        and hist[0]["when"] == "later"
        and hist[0]["role"] == "long-context"
    )
    assert hist[0]["error"] == pytest.approx(
        entry["projected"]["mid"] / ((31.0 + 31.5 + 32.0) / 3) - 1
    )
    # a record made with the run in place carries its verification
    rec2 = P.record(
        P.project(runs, cat, mix, "fixture-host-0000aaaa"),
        mix_file=mix_p,
        catalogue_file=cat_p,
        now=datetime(2026, 1, 3, tzinfo=UTC),
    )
    artifacts.validate(rec2)
    assert any(e["status"] == "VERIFIED" for e in rec2["entries"])
    hist = P.accuracy_history([ProjectionRecord(rec), ProjectionRecord(rec2)], runs)
    assert [h["when"] for h in hist if h["role"] == "long-context"] == [
        "later",
        "at projection",
    ]
    # the other roles' kv-q8 projections are checked by the speed-up measured on tg128@d4096 (q8_0 ÷ f16)
    others = [h for h in hist if h["role"] != "long-context"]
    assert others and all(
        h["basis"] == "speed-up" and h["speedup"] == pytest.approx(31.5 / 30.5)
        for h in others
    )


def test_write_records_task_path(data_env):
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for name in ("optimizations.yaml", "usage_mix.yaml"):
        shutil.copy(root / "data" / name, data_env / name)
    write_dataset(
        data_env, embedded_dataset(repeated=True)
    )  # a noise estimate: the baselines have an interval
    from pipelines.runs import load_runs

    paths = P.write_records(load_runs())
    assert len(paths) == 1 and paths[0].parent.name == "fixture-host-0000aaaa"
    doc = artifacts.load(paths[0])
    statuses = {(e["role"], e["scenario"]): e["status"] for e in doc["entries"]}
    assert statuses[("long-context", "kv-cache-q8-0")] == "VERIFIED"
    assert statuses[("frontdoor", "prompt-lookup")] == "PROJECTED"
    assert (
        "frontdoor",
        "paged-attention-pr18747",
    ) not in statuses  # never applies to a 0.25 GB model


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "patch,message",
    [
        (("factor: 1.76}", "factor: 1.76, range: [1, 2]}"), "exactly one of"),
        (("metric: ttft_ms", "metric: ttft"), "unknown metric 'ttft'"),
        (("stage: prefill", "stage: prefil"), "stage"),
        (("range: [1.5, 2.5]", "range: [2.5, 1.5]"), "low <= high"),
        (("id: big-only", "id: kv-q8"), "used twice"),
        (("id: big-only", "id: Big Only"), "lowercase"),
        (
            ("settings: {type_k: q8_0, type_v: q8_0}", ""),
            "roofline effect needs 'settings'",
        ),
    ],
)
def test_catalogue_errors_name_the_problem(tmp_path, patch, message):
    p = tmp_path / "optimizations.yaml"
    p.write_text(CATALOGUE.replace(*patch, 1))
    with pytest.raises(ConfigError) as e:
        P.load_catalogue(p)
    assert message in str(e.value) and "optimizations.yaml" in str(e.value)


def test_usage_mix_errors(inputs, tmp_path):
    cat = inputs[0]
    p = tmp_path / "usage_mix.yaml"
    p.write_text(MIX.replace("metric: decode_tps", "metric: ttft_ms"))
    with pytest.raises(ConfigError, match="one unit"):
        P.load_usage_mix(p, cat)
    p.write_text(MIX + "scenarios: {both: [kv-q9]}\n")
    with pytest.raises(ConfigError) as e:
        P.load_usage_mix(p, cat)
    assert "did you mean 'kv-q8'" in str(e.value) and "scenarios.both" in str(e.value)
    p.write_text(MIX.replace("role: worker", "role: frontdoor"))
    with pytest.raises(ConfigError, match="listed twice"):
        P.load_usage_mix(p, cat)


def test_committed_catalogue_and_mix_load():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data"
    cat = P.load_catalogue(root / "optimizations.yaml")
    mix = P.load_usage_mix(root / "usage_mix.yaml", cat)
    assert {o.id for o in cat.optimizations} >= {
        "kv-cache-q8-0",
        "prompt-lookup",
        "paged-attention-pr18747",
    }
    assert abs(sum(r.weight for r in mix.roles) - 1.0) < 1e-9
    # every runnable optimization's settings are valid settings of the backend
    from runtime.backends import settings_class

    for o in cat.optimizations:
        if o.settings:
            # a draft-model optimization is realised by any draft; a run names the one it uses
            draft = (
                {"draft_model": "gemma3-270m-q2_k"}
                if o.settings.get("speculative") == "draft_model"
                else {}
            )
            settings_class("llama_cpp").model_validate({**o.settings, **draft})
    assert next(o for o in cat.optimizations if o.id == "draft-model").settings == {
        "speculative": "draft_model"
    }


# -- the committed measurements (issue 27) ------------------------------------------------------------
@pytest.fixture(scope="module")
def committed():
    from pathlib import Path

    from tests.support.committed import committed_runs

    root = Path(__file__).resolve().parents[1] / "data"
    cat = P.load_catalogue(root / "optimizations.yaml")
    return committed_runs(), cat, P.load_usage_mix(root / "usage_mix.yaml", cat)


def test_committed_baselines_are_the_fact_layers_figures(committed):
    """Every host that measured a role's work outside an optimization has a baseline for that role, whatever
    matrix measured it, and its value and CI95 are the fact layer's figure of the representative group."""
    from pipelines import facts

    runs, cat, mix = committed
    fx = facts.of(runs)
    hosts = P.projection_hosts(mix, runs)
    assert hosts
    checked = 0
    for host in hosts:
        ps = P.project(runs, cat, mix, host)
        for rr in ps.roles:
            role = rr.role
            plain = [
                g
                for g in P.work_groups(fx, role, host)
                if not any(
                    P.realises(g.newest.requested, o.settings, role.settings)
                    for o in cat.optimizations
                )
            ]
            if not plain:
                assert (
                    rr.baseline_doc is None
                    and "no measured run" not in (rr.problem or "")
                    or rr.not_measured
                )
                continue
            rep = fx.representative(plain, role.metric)
            fig = rep.figure(role.metric)
            assert (
                rr.base.group is rep
                and rr.baseline == fig.mean
                and rr.baseline_ci95 == (fig.ci95_low, fig.ci95_high)
            )
            assert (
                rr.baseline_figure.key == fig.key
            )  # the key the page marks it with (the consistency check's)
            checked += 1
    assert checked >= 4
    # the host: tg128 of the embedded model was measured in the reference and ladder matrices, never in
    # the role's own matrix (default): the worker still has its baseline, the reference run's figure
    worker = next(r for r in mix.roles if r.role == "worker")
    host = next(
        h
        for h in hosts
        if not any(
            r.matrix_name == "default"
            for g in P.work_groups(fx, worker, h)
            for r in g.runs
        )
    )
    rr = next(
        r for r in P.project(runs, cat, mix, host).roles if r.role.role == "worker"
    )
    assert rr.problem is None and rr.baseline == pytest.approx(
        fx.group_of(rr.baseline_doc).figure("tokens_per_second").mean
    )


def test_committed_draft_model_projection_is_missed_by_its_measured_speed_up(committed):
    """The draft-model optimization was measured with llama.cpp in process on a host and model the usage mix
    runs (the optimization matrix's draft-model and draft-ladder sweeps): its projections there are MISSED by
    the most favourable measured speed-up (about ×0.6 against ×2–3), shown with the point it came from, and it
    is held back from "all applicable"."""
    from pipelines import facts

    runs, cat, mix = committed
    fx = facts.of(runs)
    draft = next(o for o in cat.optimizations if o.id == "draft-model")
    points = [
        g
        for g in fx.groups.values()
        if g.model == "gemma3-270m-q4_k_m"
        and g.newest.requested.get("speculative") == "draft_model"
    ]
    assert len(points) >= 2
    host = points[0].host_id
    points = [
        g for g in points if g.host_id == host
    ]  # a measurement checks a projection on its own host only
    ps = P.project(runs, cat, mix, host)
    projected = [
        (rr, rr.projections["draft-model"])
        for rr in ps.roles
        if "draft-model" in rr.projections
    ]
    assert projected
    for rr, p in projected:
        ms = p.measured_speedup
        assert (
            p.status == "MISSED"
            and p.missed_below
            and p.target_settings["speculative"] == "draft_model"
        )
        # the measured speed-up: the candidate group's figure ÷ its sweep baseline's figure (the fact layer's)
        assert ms.candidate_group.newest.baseline_key == ms.baseline_group.newest.key
        assert ms.ratio == pytest.approx(ms.candidate.mean / ms.baseline.mean)
        assert ms.ratio == pytest.approx(fx.compare(ms.baseline, ms.candidate).ratio)
        assert 0.4 < ms.ratio < 1.0 and ms.ratio < p.speedup[0] == draft.effect.range[0]
        # the most favourable of the measured points decides
        every = P.measured_speedups(draft, rr.base.group, rr.role.metric, runs)
        assert ms.points == len(every) >= len(points) - 1 and ms.ratio == max(
            m.ratio for m in every
        )
        assert (
            p.verification["speedup"] == ms.ratio
            and p.verification["verdict"] == "MISSED"
        )
    assert (
        "draft-model",
        "MISSED",
    ) in ps.held_back and "below the projected ×2.00–×3.00" in ps.missed["draft-model"]
    assert all(
        "draft-model" not in ids
        for name, ids in ps.scenarios
        if name == "all applicable"
    )
    from pipelines.site.projections_page import projections_host

    md = projections_host(ps, [])
    assert (
        "Held back from *all applicable*: measured on this host slower than projected"
        in md
    )
    assert (
        "<code>draft-model</code>" in md and "not runnable with this backend" not in md
    )
    assert (
        f'data-verdict="{ms.comparison.verdict}"' in md
        and "the most favourable of" in md
    )


def test_committed_weighted_average_of_a_partial_mix_says_partial_and_names_its_roles(
    committed,
):
    runs, cat, mix = committed
    labels = {r.role: r.label or r.role for r in mix.roles}
    seen_partial = False
    for host in P.projection_hosts(mix, runs):
        ps = P.project(runs, cat, mix, host)
        covered = [r.role.role for r in ps.roles if r.baseline is not None]
        for w in ps.weighted():
            assert w["roles"] == covered and w["partial"] == (
                len(covered) < len(mix.roles)
            )
        from pipelines.site.markdown import cell
        from pipelines.site.projections_page import projections_host

        md = projections_host(ps, [])
        assert "measured (all roles checked)" not in md
        if len(covered) < len(mix.roles):
            seen_partial = True
            assert (
                f"**partial**: {', '.join(cell(labels[r]) for r in covered)} only "
                f"({len(covered)} of {len(mix.roles)} roles"
            ) in md
        else:
            assert f"all {len(mix.roles)} roles (" in md
    assert (
        seen_partial
    )  # a committed host measured only some of the roles (the 1 of 3)


def test_weighted_average_covers_the_roles_with_a_baseline(inputs):
    cat, mix, _, _ = inputs
    runs = [r for r in embedded_dataset()["runs"] if r["test"]["name"] != "tg128"]
    ps = P.project(runs, cat, mix, "fixture-host-0000aaaa")
    w = ps.weighted()
    assert (
        w[0]["roles"] == ["frontdoor", "long-context"]
        and w[0]["partial"]
        and not w[0]["complete"]
    )
    from pipelines.site.projections_page import projections_host

    md = projections_host(ps, [])
    assert (
        "**partial**: frontdoor, long-context only (2 of 3 roles; no baseline for worker)"
        in md
    )
    assert (
        'class="almanac-missing"' in md
        and "not measured: gemma3-270m-q4\\_k\\_m · tg128" in md
    )
