"""Issue 33: the seed rows measured here (error-retry per rate, flash attention against depth, acceptance
against temperature, parallel slots per role), from the committed artifacts, and the rule for a setting a
backend cannot honour (one line naming the matrix and the setting, nothing measured, the sweep goes on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core.kinds.generate import GenerateTest
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.backends.openai_http.config import OpenAIHttpSettings
from tests.conftest import ROOT, tree_snapshot, write_matrix


def test_generate_temperature_keeps_greedy_identity():
    """A greedy generate test stores no temperature or seed (the tests measured before keep their key);
    a sampled one stores both."""
    greedy = GenerateTest(workload="edit").to_dict()
    assert "temperature" not in greedy and "seed" not in greedy
    hot = GenerateTest(workload="edit", id="t", temperature=0.7, seed=3).to_dict()
    assert hot["temperature"] == 0.7 and hot["seed"] == 3
    with pytest.raises(ValueError):
        GenerateTest(workload="edit", temperature=2.5)


def _chat(chars: int, max_tokens: int):
    from core.kinds.concurrency import ConcurrencyTest

    return ConcurrencyTest(
        id="c",
        messages=[{"role": "user", "content": "x" * chars}],
        max_tokens=max_tokens,
        levels=[1, 2],
    )


def test_slots_beyond_the_context_cannot_be_honoured():
    s = lambda np_: OpenAIHttpSettings(server="llama-server", parallel=np_, n_ctx=4096)  # noqa: E731
    # 3,600 characters at 3 per token + 16 = 1,216 tokens a request: 2 slots fit 4,096, 4 do not
    assert OpenAIHttpBackend.cannot_honour(s(2), None, _chat(3600, 16)) is None
    setting, why = OpenAIHttpBackend.cannot_honour(s(4), None, _chat(3600, 16))
    assert setting == "parallel=4"
    assert "4 slots × about 1,216 tokens" in why and "4,864" in why and "4,096" in why
    assert (
        OpenAIHttpBackend.cannot_honour(s(1), None, _chat(30000, 16)) is None
    )  # one slot: never refused here
    other = OpenAIHttpSettings(
        parallel=8, n_ctx=512
    )  # llama_cpp.server: no slots to fill
    assert OpenAIHttpBackend.cannot_honour(other, None, _chat(3600, 16)) is None


def test_rope_scaling_within_the_trained_context_cannot_be_honoured():
    from types import SimpleNamespace

    from core.kinds.rate import RateTest
    from runtime.backends.llama_cpp.backend import LlamaCppBackend, rope_kwargs
    from runtime.backends.llama_cpp.config import LlamaCppSettings

    model = SimpleNamespace(facts={"context_length": 512})
    test = RateTest.parse("tg32@d960")
    s = lambda **kw: LlamaCppSettings(**kw)  # noqa: E731
    assert (
        LlamaCppBackend.cannot_honour(s(n_ctx=1024, rope_scaling="yarn"), model, test)
        is None
    )
    assert (
        LlamaCppBackend.cannot_honour(s(n_ctx=512), model, test) is None
    )  # no scaling asked
    setting, why = LlamaCppBackend.cannot_honour(
        s(n_ctx=512, rope_scaling="linear"), model, test
    )
    assert (
        setting == "rope_scaling=linear"
        and "within the model's trained context of 512" in why
    )
    # the factor is n_ctx / trained context: 4x -> a quarter of the frequencies; YaRN keeps the original context
    kw = rope_kwargs(s(n_ctx=2048, rope_scaling="yarn"), {"context_length": 512}, 2048)
    assert kw["rope_freq_scale"] == 0.25 and kw["yarn_orig_ctx"] == 512
    assert rope_kwargs(s(n_ctx=2048), {"context_length": 512}, 2048) == {}
    assert (
        "rope_scaling" not in s().recorded()
    )  # the configurations measured before keep their key


def test_bench_skips_a_point_it_cannot_honour(data_env):
    """The real runner and task: a sweep whose every point needs more slots than the context has room
    for prints one line per point naming the matrix and the setting, measures nothing, exits 0."""
    write_matrix(
        data_env,
        "np-room",
        "schema_version: 1\nname: np-room\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\n"
        "settings: {server: llama-server, n_ctx: 1024}\n"
        "sweeps:\n  - name: slots\n    sweep: {parallel: [4, 8]}\n    baseline: {parallel: 4}\n"
        "    tests:\n      - kind: concurrency\n        id: long\n        messages:\n"
        f"          - {{role: user, content: '{'word ' * 200}'}}\n"
        "        max_tokens: 16\n        levels: [1, 2]\n",
    )
    before = tree_snapshot(data_env)
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "np-room"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "cannot be honoured" in ln]
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(
        "matrix np-room: setting parallel=4 (long) cannot be honoured: 4 slots"
    )
    assert lines[1].startswith(
        "matrix np-room: setting parallel=8 (long) cannot be honoured: 8 slots"
    )
    assert all(ln.endswith("not measured, the sweep goes on") for ln in lines)
    after = {
        k: v for k, v in tree_snapshot(data_env).items() if not k.endswith(".run.lock")
    }  # the host's run lock
    assert after == before  # no artifact written


# -- the rows, from the committed artifacts -------------------------------------------------------
HOST = "vm-d4bbc016"  # the 2-core host these rows were measured on (issue 33)


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


def test_retry_plan_per_error_rate(runs):
    """Seed 003's phase-3 table: the error-free row, then 5%, 10% and 20% injected; the measured error
    rate matches the injected one (every k-th attempt, counted over warm-ups and retries too)."""
    from pipelines import retries as rt
    from pipelines.site.retries import rate_plan_table
    from pipelines.whatif import load_whatif

    f = load_whatif()
    rows, missing = rt.rate_plans(f.error_rates, runs, HOST, (0.5, 2.0))
    assert not missing
    assert [r.fault_every for r in rows] == [None, 20, 10, 5]
    for r in rows[1:]:
        assert (
            abs(r.p["mean"] - 1 / r.fault_every) < 0.05
        )  # 20 requests: the pattern is exact up to its phase
        lo, mid, hi = r.speedup
        assert (
            lo <= mid <= hi and mid > 1.0
        )  # a caller's re-send after 0.5-2 s costs more than the back-off
        assert r.auto["n"] == 20 and r.backoff_s == 0.05
    md = rate_plan_table(rows)
    assert (
        "1 in 20 attempts fails (5.0% injected)" in md
        and "1 in 5 attempts fails (20.0% injected)" in md
    )
    assert md.count("runs/run.md?id=") == 8  # every row links both of its runs


def test_flash_attention_against_depth(runs):
    from pipelines import optimization as opt
    from pipelines.site import flash_depth

    sw = next(
        s
        for s in opt.sweeps(runs)
        if s.host_id == HOST and s.matrix == "flash-attention-depth"
    )
    assert flash_depth.is_flash_depth_sweep(sw)
    md = "\n".join(flash_depth.flash_depth_section(sw))
    for depth in ("0 (empty context)", "512 tokens", "4,096 tokens", "16,384 tokens"):
        assert depth in md
    # one context size for every point: depth is the only thing that changes along the column
    assert {p.requested.get("n_ctx") for p in sw.points} == {16448}
    text, point = flash_depth.quality_check(sw)
    assert point is not None and ("identical" in text or "differs" in text)


def test_acceptance_against_temperature(runs):
    from pipelines import optimization as opt
    from pipelines.site import temperature

    sw = next(
        s
        for s in opt.sweeps(runs)
        if s.host_id == HOST and s.matrix == "temperature-acceptance"
    )
    assert temperature.is_temperature_sweep(sw)
    spec = [
        p for p in sw.points if (p.requested.get("speculative") or "none") != "none"
    ]
    assert sorted(float(p.doc.test_param("temperature", 0.0)) for p in spec) == [
        0.0,
        0.3,
        0.7,
        1.0,
    ]
    assert all(p.acceptance is not None and 0 <= p.acceptance <= 100 for p in spec)
    greedy = next(p for p in spec if float(p.doc.test_param("temperature", 0.0)) == 0.0)
    assert greedy.lossless[
        "identical"
    ]  # greedy prompt lookup reproduces plain decoding token for token


def test_slots_per_role(runs):
    from pipelines import slots as sl
    from pipelines.site.slots import slots_table

    plan = sl.load_slots()
    rows = {r.role: r for r in sl.role_slots(plan, runs, HOST)}
    assert set(rows) == {"frontdoor", "worker", "ingest_long_context"}
    for r in rows.values():
        assert r.baseline is not None and r.recommended in (1, 2, 4)
        for p in r.points:
            assert p.p95_multiplier is not None and p.gain is not None
            assert p.accepted == (
                p.gain["lo"] > plan.min_gain
                and p.p95_multiplier <= plan.max_p95_multiplier
            )
    # four slots of the long document do not fit the context: not measured, and said so in the role's rows
    assert [p.slots for p in rows["ingest_long_context"].points] == [2]
    assert any(
        m.startswith("-np 4: no run") for m in rows["ingest_long_context"].missing
    )
    assert "recommended -np" in slots_table(plan, list(rows.values()))


def test_one_task_per_model():
    from pipelines.quality import load_quality
    from pipelines.site.quality_pages import quality_link
    from pipelines.site.task_models import task_rows, task_table

    rows = [q for q in task_rows(load_quality()) if q.host_id == HOST]
    assert {q.model_name for q in rows} == {
        "gemma3-270m-q4_k_m",
        "gemma3-270m-q3_k_m",
        "gemma3-270m-q2_k",
    }
    md = task_table(rows, quality_link)
    assert md.count("quality-runs/run.md?id=") == 3 and " words" in md


def test_best_configuration_carries_quality(runs):
    from pipelines import optimization as opt
    from pipelines.quality import load_quality
    from pipelines.site.optimization import best_table

    md = best_table(opt.sweeps(runs), load_quality())
    assert "quality (model)" in md and "output check" in md
    assert "lossless: greedy text identical to the baseline's" in md
    assert "no text: a rate test decodes random tokens" in md
