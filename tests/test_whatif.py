"""What-if: stage profiles from artifacts, Amdahl arithmetic, workload mixes."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from pipelines import whatif as W
from tests.support.planning_fixtures import (
    CHAT_SHORT,
    STAGES_A,
    chat_requests,
    rate_test,
    run_record,
)


def test_amdahl():
    g = W.amdahl(0.8, 0.5)  # 80% of the time in a stage made 2x faster
    assert (
        g["time_ratio"] == pytest.approx(0.6)
        and g["speedup"] == pytest.approx(1 / 0.6)
        and g["saved"] == pytest.approx(0.4)
    )
    assert W.amdahl(0.25, 1.0)["speedup"] == pytest.approx(
        4 / 3
    )  # the limit: 1 / (1 - p)
    with pytest.raises(ValueError):
        W.amdahl(1.5, 0.5)


def test_stage_profiles():
    chat = run_record(
        test=CHAT_SHORT,
        metrics={"e2e_ms": [700.0, 700.0], "load_time_s": [2.0]},
        samples={"requests": chat_requests([STAGES_A, {**STAGES_A, "decode": 700.0}])},
    )
    prof = W.stage_profile(chat)
    assert (
        prof["decode"] == pytest.approx(650.0)
        and prof["prefill"] == 60.0
        and prof["load"] == pytest.approx(2000.0)
    )
    tg = run_record(
        test=rate_test(n_prompt=64, n_gen=16),
        metrics={"tokens_per_second": [1.0, 1.0]},
        details={
            "perf_counters": [
                {"t_p_eval_ms": 100.0, "t_eval_ms": 300.0},
                {"t_p_eval_ms": 110.0, "t_eval_ms": 310.0},
            ]
        },
    )
    assert W.stage_profile(tg) == {"prefill": 105.0, "decode": 305.0}
    old = run_record(
        test=CHAT_SHORT,
        metrics={"e2e_ms": [700.0, 700.0]},
        samples={
            "requests": [
                {k: v for k, v in r.items() if k != "stages_ms"}
                for r in chat_requests([STAGES_A])
            ]
        },
    )
    assert W.stage_profile(old) is None  # an artifact from before stage timing


def test_mix_with_cold_starts():
    chat = run_record(
        test=CHAT_SHORT,
        metrics={"e2e_ms": [700.0, 700.0], "load_time_s": [2.0]},
        samples={"requests": chat_requests([STAGES_A])},
    )
    mix = W.Mix(
        name="m",
        entries=[
            W.MixEntry(model="gemma3-270m-q4_k_m", test="chat-short", weight=0.9),
            W.MixEntry(
                model="gemma3-270m-q4_k_m",
                test="chat-short",
                weight=0.1,
                loads_per_request=1,
            ),
        ],
    )
    res = W.evaluate_mix(mix, [chat], "fixture-host-0000aaaa")
    per_request = sum(STAGES_A.values())  # 700 ms
    assert res.per_request_ms["load"] == pytest.approx(0.1 * 2000.0)
    assert res.total_ms == pytest.approx(per_request + 200.0)
    shares = res.shares()
    assert shares["load"] == pytest.approx(200 / 900) and sum(
        shares.values()
    ) == pytest.approx(1.0)
    grid = {g["stage"]: g for g in res.grid([0.5])}
    assert grid["decode"]["gains"][0.5]["speedup"] == pytest.approx(
        1 / (1 - 0.5 * 600 / 900)
    )
    assert res.grid([0.5])[0]["stage"] == "decode"  # largest share first
    empty = W.evaluate_mix(mix, [], "fixture-host-0000aaaa")
    assert empty.per_request_ms == {} and "no measured run" in empty.missing[0]


def test_whatif_file_errors(tmp_path):
    p = tmp_path / "whatif.yaml"
    p.write_text("mixes: [{name: a, entries: [{model: m, test: t, weight: 0}]}]\n")
    with pytest.raises(ConfigError, match="weight"):
        W.load_whatif(p)
    p.write_text(
        "reductions: [1.5]\nmixes: [{name: a, entries: [{model: m, test: t, weight: 1}]}]\n"
    )
    with pytest.raises(ConfigError, match="fraction"):
        W.load_whatif(p)
    p.write_text(
        "mixes: [{name: a, entries: [{model: m, test: t, weight: 1}]}, {name: a, "
        "entries: [{model: m, test: t, weight: 1}]}]\n"
    )
    with pytest.raises(ConfigError, match="used twice"):
        W.load_whatif(p)


def test_committed_whatif_loads():
    from pathlib import Path

    f = W.load_whatif(Path(__file__).resolve().parents[1] / "data" / "whatif.yaml")
    assert {m.name for m in f.mixes} >= {"warm-chat-server", "one-shot-cli"}


def test_time_per_request_carries_a_propagated_interval():
    """The weighted time per request has a CI95 from its entries' per-unit samples (quadrature)."""
    from core import stats
    from tests.support.planning_fixtures import embedded_dataset

    docs = embedded_dataset()["runs"]
    chat = next(d for d in docs if d["test"]["kind"] == "chat" and W.stage_profile(d))
    units = W.unit_totals(chat)
    prof = W.stage_profile(chat)
    assert sum(v for k, v in prof.items() if k != "load") == pytest.approx(
        sum(units) / len(units)
    )
    entry = type("E", (), {"loads_per_request": 0})()
    res = W.MixResult(
        None,
        "h",
        {k: v for k, v in prof.items() if k != "load"},
        [{"entry": entry, "run": chat, "profile": prof, "weight": 1.0}],
    )
    s = stats.summarize(units)
    assert res.total_ci95() == pytest.approx((s["ci95_low"], s["ci95_high"]))
    entry.loads_per_request = 1  # a load measured once: no interval claimed
    assert res.total_ci95() == (None, None)


def test_entries_read_the_fact_layer_whatever_matrix_measured_them():
    """An entry's matrix is a preference, never a filter: a host that measured the entry's work only in
    another matrix has its stage timings and its measured load time (the group's figure of load_time_s)."""
    from pipelines import facts

    chat = run_record(
        test=CHAT_SHORT,
        matrix="projections",
        metrics={"e2e_ms": [700.0, 700.0], "load_time_s": [2.0]},
        samples={"requests": chat_requests([STAGES_A])},
    )
    again = run_record(
        test=CHAT_SHORT,
        matrix="projections",
        metrics={"e2e_ms": [700.0, 700.0], "load_time_s": [3.0]},
        samples={"requests": chat_requests([STAGES_A])},
        created="2026-01-02T00:00:00+00:00",
    )
    mix = W.Mix(
        name="cli",
        entries=[
            W.MixEntry(
                model="gemma3-270m-q4_k_m",
                test="chat-short",
                matrix="default",
                weight=1,
                loads_per_request=1,
            )
        ],
    )
    assert W.mix_hosts(mix, [chat, again]) == ["fixture-host-0000aaaa"]
    res = W.evaluate_mix(mix, [chat, again], "fixture-host-0000aaaa")
    assert res.missing == []
    load = facts.of([chat, again]).figure_of(chat["id"], "load_time_s")
    assert load.runs == 2 and load.mean == pytest.approx(
        (2.0 * 3.0) ** 0.5
    )  # geometric mean of the run means
    assert res.per_request_ms["load"] == pytest.approx(1000.0 * load.mean)
    assert res.entries[0]["load"].key == load.key and len(res.entries[0]["runs"]) == 2


def test_committed_hosts_with_load_times_have_a_measured_load_time():
    """On the committed measurements: every host whose artifacts of the embedded model record load_time_s
    gets a load stage in the one-shot mix, and the model-cache plan is judged there (not NOT MEASURED:
    the issue's host measured chat-short only outside the mix's matrix)."""
    from pathlib import Path

    from pipelines import facts, retries
    from tests.support.committed import committed_runs

    runs = committed_runs()
    fx = facts.of(runs)
    f = W.load_whatif(Path(__file__).resolve().parents[1] / "data" / "whatif.yaml")
    cli = next(m for m in f.mixes if m.name == "one-shot-cli")
    e = cli.entries[0]
    hosts = sorted(
        {
            g.host_id
            for g in fx.groups_of(model=e.model, test=e.test)
            if g.figure("load_time_s") is not None
        }
    )
    assert len(hosts) >= 2 and W.mix_hosts(cli, runs) == hosts
    assert any(
        not any(
            r.matrix_name == e.matrix
            for g in fx.groups_of(h, model=e.model, test=e.test)
            for r in g.runs
        )
        for h in hosts
    )  # a host that measured the entry's work only in another matrix
    for h in hosts:
        res = W.evaluate_mix(cli, runs, h)
        u = res.entries[0]
        assert res.missing == [] and u["load"] is not None
        assert res.per_request_ms["load"] == pytest.approx(
            1000.0 * u["group"].figure("load_time_s").mean
        )
        plan = next(
            p for p in retries.evaluate_plans(f, runs, h) if p.plan.id == "model-cache"
        )
        assert (
            plan.verdict != "NOT MEASURED"
            and "no measured load time" not in plan.reason
        )
