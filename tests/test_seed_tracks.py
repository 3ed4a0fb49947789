"""Corpus totals, error/retry recommendations, MoE x speculation and the draft Pareto front,
computed from artifacts whose numbers the tests state."""

from __future__ import annotations

import pytest

from core import artifacts
from core.records.run import RunRecord
from pipelines import corpus, retries, speculation
from pipelines import optimization as opt
from tests.support.planning_fixtures import (
    CHAT_SHORT,
    HOST,
    rate_test,
    requested,
    run_doc,
)


# -- corpus totals --------------------------------------------------------------------------------
def test_corpus_totals_count_timed_generation_only():
    tg = run_doc(
        test=rate_test(n_gen=128),
        metrics={"tokens_per_second": [64.0, 64.0]},
        samples={"ns": [2_000_000_000, 2_000_000_000], "ts": [64.0, 64.0]},
    )
    pp = run_doc(
        test=rate_test(n_prompt=512),
        metrics={"tokens_per_second": [512.0]},
        samples={"ns": [1_000_000_000], "ts": [512.0]},
        created="2026-01-02T00:00:00+00:00",
    )
    chat = run_doc(
        test=CHAT_SHORT,
        metrics={"e2e_ms": [1000.0, 1000.0]},
        created="2026-01-03T00:00:00+00:00",
        samples={
            "requests": [
                {"output_tokens": 40, "prompt_tokens": 19, "e2e_ms": 1000.0},
                {"output_tokens": 40, "prompt_tokens": 19, "e2e_ms": 1000.0},
            ],
            "warmup": [{"output_tokens": 40, "e2e_ms": 5000.0}],
        },
    )
    failed = run_doc(
        test=rate_test(n_gen=128),
        metrics={},
        status="failed",
        created="2026-01-04T00:00:00+00:00",
    )
    t = corpus.totals([RunRecord(d) for d in (tg, pp, chat, failed)])
    assert t["runs"] == 3  # the failed run counts nothing
    assert t["tokens"] == 2 * 128 + 0 + 2 * 40  # warm-ups left out
    assert t["seconds"] == pytest.approx(4.0 + 0.0 + 2.0)
    assert t["rate"] == pytest.approx(336 / 6.0)
    assert t["prompt_tokens"] == 512 + 2 * 19
    assert (
        t["by_kind"]["rate"]["tokens"] == 256 and t["by_kind"]["chat"]["tokens"] == 80
    )


def test_corpus_section_carries_the_caveat():
    from pipelines.site.corpus import corpus_section

    tg = run_doc(
        test=rate_test(n_gen=128),
        metrics={"tokens_per_second": [64.0]},
        samples={"ns": [2_000_000_000], "ts": [64.0]},
    )
    md = corpus_section([RunRecord(tg)])
    assert (
        "128 tokens generated" in md
        and "64.0 t/s" in md
        and "Not a production figure" in md
    )
    assert corpus_section([]) == ""


# -- errors and retries ------------------------------------------------------------------------------
def _chat_run(records, *, fault_every, retries_, created):
    doc = run_doc(
        test={**CHAT_SHORT, "id": "chat-faults", "name": "chat-faults"},
        metrics={"e2e_ms": [1.0]},
        matrix="serving-faults",
        created=created,
        settings={
            **requested(),
            "fault_every": fault_every,
            "retries": retries_,
            "retry_backoff_s": 0.25,
        },
        samples={"requests": records},
    )
    return doc


def _ok(ms, attempts=1):
    return {
        "ok": True,
        "e2e_ms": ms,
        "output_tokens": 32,
        "attempts": attempts,
        "retries": [{}] * (attempts - 1),
    }


def _fail(ms):
    return {
        "ok": False,
        "e2e_ms": None,
        "elapsed_ms": ms,
        "output_tokens": None,
        "attempts": 1,
        "retries": [],
    }


@pytest.fixture
def fault_runs():
    clean = _chat_run(
        [_ok(1000 + i) for i in range(8)],
        fault_every=None,
        retries_=0,
        created="2026-01-01T00:00:00+00:00",
    )
    clean_r = _chat_run(
        [_ok(1001 + i) for i in range(8)],
        fault_every=None,
        retries_=1,
        created="2026-01-01T00:01:00+00:00",
    )
    faulty = _chat_run(
        [_ok(1000 + i) if i % 4 != 3 else _fail(5.0 + i) for i in range(8)],
        fault_every=4,
        retries_=0,
        created="2026-01-01T00:02:00+00:00",
    )
    faulty_r = _chat_run(
        [_ok(1000 + i) if i % 4 != 3 else _ok(1260 + i, attempts=2) for i in range(8)],
        fault_every=4,
        retries_=1,
        created="2026-01-01T00:03:00+00:00",
    )
    return [RunRecord(d) for d in (clean, clean_r, faulty, faulty_r)]


def test_error_rate_and_retry_cost_from_the_runs(fault_runs):
    from pipelines.whatif import ErrorRuns

    m = retries.measure_errors(
        ErrorRuns(
            model="gemma3-270m-q4_k_m", test="chat-faults", matrix="serving-faults"
        ),
        fault_runs,
        HOST["id"],
    )
    assert not m.missing
    assert m.p["failed"] == 2 and m.p["n"] == 8 and m.p["mean"] == pytest.approx(0.25)
    assert m.p["lo"] < 0.25 < m.p["hi"]
    assert m.t_fail["mean"] == pytest.approx((8.0 + 12.0) / 2)
    assert m.retry_cost["mean"] == pytest.approx(
        (1263 + 1267) / 2 - (1000 + 1001 + 1002 + 1004 + 1005 + 1006) / 6
    )
    assert m.happy_cost["ms"] == pytest.approx(1.0)
    assert m.backoff_s == 0.25


def test_retry_gain_by_hand(fault_runs):
    from pipelines.whatif import ErrorRuns

    m = retries.measure_errors(
        ErrorRuns(model="gemma3-270m-q4_k_m", test="chat-faults"),
        fault_runs,
        HOST["id"],
    )
    lo, mid, hi = retries.retry_gain(m, (0.5, 2.0))
    manual = m.t_ok["mean"] + 0.25 / 0.75 * (m.t_fail["mean"] + 1250.0)
    assert mid == pytest.approx(manual / m.t_auto["mean"] - 1)
    assert lo < mid < hi


def test_recommendation_rule():
    assert (
        retries.recommend((0.05, 0.1, 0.15), (0.0, 0.01, 0.02), 0.01)[0] == "IMPLEMENT"
    )
    assert retries.recommend((-0.1, -0.05, 0.0), (0.0, 0.01, 0.02), 0.01)[0] == "SKIP"
    assert (
        retries.recommend((0.001, 0.002, 0.004), (None, None, None), 0.01)[0] == "SKIP"
    )
    assert (
        retries.recommend((0.0, 0.05, 0.1), (0.0, 0.01, 0.02), 0.01)[0] == "UNDECIDED"
    )
    assert (
        retries.recommend((None, None, None), (None, None, None), 0.01)[0]
        == "NOT MEASURED"
    )


def test_whatif_file_refuses_a_plan_on_an_unknown_mix(tmp_path):
    from core.errors import ConfigError
    from pipelines.whatif import load_whatif

    p = tmp_path / "whatif.yaml"
    p.write_text(
        "schema_version: 1\nmixes:\n  - {name: a, entries: [{model: m, test: t, weight: 1}]}\n"
        "planned:\n  - {id: x, name: x, kind: stage, mix: b, stage: load}\n"
    )
    with pytest.raises(ConfigError, match=r"planned\.0\.mix.*unknown mix 'b'"):
        load_whatif(p)


# -- MoE x speculation ----------------------------------------------------------------------------------
def _gen(
    experts,
    mode,
    rates,
    tokens,
    acc=None,
    created="2026-01-01T00:00:00+00:00",
    synthetic=False,
):
    from tests.support.planning_fixtures import MOE_FACTS

    test = {
        "kind": "generate",
        "id": "free",
        "name": "free",
        "workload": "free",
        "prompts": ["a", "b"],
        "max_tokens": 8,
        "ignore_eos": True,
        "repetitions": 3,
        "warmup": True,
    }
    req = requested(n_expert_used=experts, speculative=mode, draft_max=4)
    reps = [
        {
            "repetition": i,
            "generation_tps": r,
            **({"draft_acceptance": acc} if acc is not None else {}),
        }
        for i, r in enumerate(rates)
    ]
    metrics = {
        "generation_tps": rates,
        **({"draft_acceptance": [acc] * len(rates)} if acc is not None else {}),
    }
    doc = run_doc(
        test=test,
        metrics=metrics,
        model="synthetic-moe" if synthetic else "real-moe",
        facts=MOE_FACTS,
        synthetic=synthetic,
        settings=req,
        matrix="optimization",
        created=created,
        samples={"repetitions": reps, "requests": []},
        details={
            "outputs": [
                {
                    "prompt_index": 0,
                    "token_ids": tokens,
                    "finish_reason": "length",
                    "text": "x",
                }
            ]
        },
    )
    return doc


def test_moe_speculation_table_compares_with_the_baseline_and_with_plain_decoding():
    base = _gen(2, "none", [100.0, 101.0, 99.0], [1, 2, 3, 4])
    plain1 = _gen(1, "none", [150.0, 151.0, 149.0], [1, 2, 9, 9])
    look1 = _gen(1, "prompt_lookup", [120.0, 121.0, 119.0], [1, 2, 9, 9], acc=10.0)
    look2 = _gen(2, "prompt_lookup", [130.0, 131.0, 129.0], [1, 2, 3, 5], acc=60.0)
    docs = [base, plain1, look1, look2]
    for d in docs:
        d["matrix"].update(sweep="moe-spec", baseline_key=base["key"])
    for d, swept in zip(
        docs,
        [
            {"n_expert_used": 2, "speculative": "none"},
            {"n_expert_used": 1, "speculative": "none"},
            {"n_expert_used": 1, "speculative": "prompt_lookup"},
            {"n_expert_used": 2, "speculative": "prompt_lookup"},
        ],
    ):
        d["settings"]["swept"] = swept
        artifacts.validate(d)
    (sw,) = opt.sweeps([RunRecord(d) for d in docs])
    assert sw.track == "moe-speculation"
    cells = speculation.moe_speculation(sw)["free"]
    by = {(c.experts, c.mode): c for c in cells}
    assert by[(1, "none")].vs_baseline["verdict"] == "win"
    assert (
        by[(1, "prompt_lookup")].vs_plain["verdict"] == "loss"
    )  # lookup on top of 1 expert hurts
    assert by[(1, "prompt_lookup")].lossless_vs_plain["identical"]
    assert by[(2, "prompt_lookup")].vs_plain["verdict"] == "win"
    assert not by[(2, "prompt_lookup")].lossless_vs_plain[
        "identical"
    ]  # differs from plain decoding at token 3
    findings = " ".join(speculation.moe_speculation_findings(cells))
    assert (
        "hurts with 1 expert per token" in findings
        and "helps with 2 experts per token" in findings
        and "Not lossless" in findings
    )
    from pipelines.site.tracks import moe_spec_section

    md = "\n".join(moe_spec_section(sw))
    assert "experts per token" in md and "not lossless" in md
    # one lossless verdict per artifact: the MoE table's and the Failed approaches' are the same point's
    failed = {f["point"].id for f in opt.failures([sw]) if f["kind"] == "not lossless"}
    assert failed == {by[(2, "prompt_lookup")].point.id}


def test_moe_speculation_on_synthetic_weights_is_speed_only():
    """Random weights: the text judges nothing, so no conclusion on speculation's benefit or losslessness."""
    docs = [
        _gen(2, "none", [100.0, 101.0, 99.0], [1, 1, 1, 1], synthetic=True),
        _gen(
            1,
            "prompt_lookup",
            [150.0, 151.0, 149.0],
            [1, 1, 1, 1],
            acc=90.0,
            synthetic=True,
        ),
        _gen(1, "none", [110.0, 111.0, 109.0], [1, 1, 1, 1], synthetic=True),
    ]
    for d, swept in zip(
        docs,
        [
            {"n_expert_used": 2, "speculative": "none"},
            {"n_expert_used": 1, "speculative": "prompt_lookup"},
            {"n_expert_used": 1, "speculative": "none"},
        ],
    ):
        d["matrix"].update(sweep="moe-spec", baseline_key=docs[0]["key"])
        d["settings"]["swept"] = swept
        artifacts.validate(d)
    (sw,) = opt.sweeps([RunRecord(d) for d in docs])
    cells = speculation.moe_speculation(sw)["free"]
    assert speculation.moe_speculation_findings(cells) == [speculation.SPEED_ONLY]
    assert "helps" not in " ".join(speculation.moe_speculation_findings(cells))


# -- draft Pareto -------------------------------------------------------------------------------------------
def test_pareto_front():
    R = speculation.DraftRow

    def row(name, ratio, q):
        return R(
            point=None,
            draft=name,
            draft_sha256=None,
            acceptance=50.0,
            speedup={"ratio": ratio},
            quality={"pass_rate": q},
        )

    rows = [
        row("fast-bad", 1.2, 0.3),
        row("slow-good", 0.9, 0.6),
        row("dominated", 0.8, 0.5),
        row("mid", 1.0, 0.6),
    ]
    speculation.pareto_front(rows)
    assert {r.draft: r.front for r in rows} == {
        "fast-bad": True,
        "slow-good": False,
        "dominated": False,
        "mid": True,
    }


def test_pick_score_needs_every_draft():
    scores = {"a": {"s1 · ll": {"n": 80}, "s2": {"n": 10}}, "b": {"s1 · ll": {"n": 80}}}
    assert speculation.pick_score(["a", "b"], scores) == "s1 · ll"
    assert speculation.pick_score(["a", "c"], scores) is None


def _draft_run(draft, sha, rates, created, acc=None):
    test = {
        "kind": "generate",
        "id": "free",
        "name": "free",
        "workload": "free",
        "prompts": ["a", "b"],
        "max_tokens": 8,
        "ignore_eos": True,
        "repetitions": 3,
        "warmup": True,
    }
    mode = "none" if draft is None else "draft_model"
    req = requested(speculative=mode, draft_model=draft)
    reps = [
        {
            "repetition": i,
            "generation_tps": r,
            **({"draft_acceptance": acc} if acc is not None else {}),
        }
        for i, r in enumerate(rates)
    ]
    metrics = {
        "generation_tps": rates,
        **({"draft_acceptance": [acc] * len(rates)} if acc is not None else {}),
    }
    return run_doc(
        test=test,
        metrics=metrics,
        settings=req,
        matrix="optimization",
        created=created,
        effective={"draft_model_sha256": sha} if sha else None,
        samples={"repetitions": reps, "requests": []},
        details={
            "outputs": [
                {
                    "prompt_index": 0,
                    "token_ids": [1, 2, 3],
                    "finish_reason": "length",
                    "text": "x",
                }
            ]
        },
    )


def _draft_sweep(rates_a, rates_b):
    base = _draft_run(None, None, [100.0, 101.0, 99.0], "2026-01-01T00:00:00+00:00")
    a = _draft_run("draft-a", "a" * 64, rates_a, "2026-01-01T00:01:00+00:00", acc=80.0)
    b = _draft_run("draft-b", "b" * 64, rates_b, "2026-01-01T00:02:00+00:00", acc=40.0)
    for d, swept in (
        (base, {"speculative": "none", "draft_model": None}),
        (a, {"speculative": "draft_model", "draft_model": "draft-a"}),
        (b, {"speculative": "draft_model", "draft_model": "draft-b"}),
    ):
        d["matrix"].update(sweep="draft-ladder", baseline_key=base["key"])
        d["settings"]["swept"] = swept
        artifacts.validate(d)
    (sw,) = opt.sweeps([RunRecord(d) for d in (base, a, b)])
    return sw


def _draft_quality(sha, passed, n=20):
    from tests.support.quality_fixtures import quality_doc

    d = quality_doc(
        f"draft-{sha[0]}", "basic_facts", [True] * passed + [False] * (n - passed)
    )
    d["model"]["sha256"] = sha
    artifacts.validate(d.doc)
    return d


def test_draft_pareto_from_artifacts():
    """Two drafts of one target: a fast one of low quality and a slower one of high quality are both on
    the front; the speed-up is each draft point over the sweep's plain baseline, the quality the draft
    file's own pass rate (read from quality records, joined by the draft's sha256)."""
    from core.records.quality import as_quality
    from pipelines.site.tracks import draft_pareto_section

    sw = _draft_sweep([150.0, 151.0, 149.0], [120.0, 121.0, 119.0])
    assert speculation.is_draft_sweep(sw)
    quality = [
        as_quality(_draft_quality("a" * 64, 5)),
        as_quality(_draft_quality("b" * 64, 15)),
    ]
    res = speculation.draft_pareto(sw, quality)
    assert res["score"] == "basic_facts · chat"
    rows = {r.draft: r for r in res["tests"]["free"]}
    assert (
        rows["draft-a"].speedup["ratio"] == pytest.approx(1.5)
        and rows["draft-a"].speedup["verdict"] == "win"
    )
    assert rows["draft-b"].speedup["ratio"] == pytest.approx(1.2)
    assert (
        rows["draft-a"].quality["pass_rate"] == pytest.approx(0.25)
        and rows["draft-b"].quality["n"] == 20
    )
    assert rows["draft-a"].front and rows["draft-b"].front
    assert [r.draft for r in res["tests"]["free"]] == [
        "draft-a",
        "draft-b",
    ]  # fastest first
    md = "\n".join(draft_pareto_section(sw, quality))
    assert (
        "Faster than plain decoding: draft-a, draft-b." in md
        and "<code>basic_facts · chat</code>" in md
    )


def test_draft_pareto_says_when_no_draft_helps_and_without_scores():
    from pipelines.site.tracks import draft_pareto_section

    sw = _draft_sweep([60.0, 61.0, 59.0], [50.0, 51.0, 49.0])
    res = speculation.draft_pareto(sw, [])
    assert res["score"] is None and not any(
        r.front for r in res["tests"]["free"]
    )  # no quality: no front
    md = "\n".join(draft_pareto_section(sw, []))
    assert "No draft of this sweep makes the target faster here" in md
    assert "no suite and prompt style is measured for every draft yet" in md
