"""Decode roofline arithmetic and the host bandwidth probe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts
from core.errors import ConfigError
from pipelines import roofline as R
from pipelines.memory import ModelShape
from runtime.hosts import probe as hostprobe
from tests.support.planning_fixtures import (
    CHAT_SHORT,
    GEMMA_FACTS,
    MOE_FACTS,
    STAGES_A,
    chat_requests,
    host_doc,
    rate_test,
    run_record,
)

ROOT = Path(__file__).resolve().parents[1]
ROW = 1024  # gemma3 270M: f16 K + V per cell and layer (256 + 256 values x 2 bytes)


def test_bytes_per_token_hand_computed():
    gemma = ModelShape.from_facts(GEMMA_FACTS)
    w = sum(
        GEMMA_FACTS["tensor_bytes_by_type"].values()
    )  # tied embedding: every byte once per token
    b = R.bytes_per_token(gemma, [0, 1, 2, 3])
    # depths 0..3 attend 1..4 cells on all 18 layers (all within the 512 window): mean 2.5 cells
    assert (
        b["weights"] == w
        and b["kv"] == pytest.approx(18 * 2.5 * ROW)
        and b["total"] == pytest.approx(w + 18 * 2.5 * ROW)
    )
    deep = R.bytes_per_token(gemma, [4095])
    assert deep["kv"] == (3 * 4096 + 15 * 512) * ROW
    q8 = R.bytes_per_token(gemma, [4095], type_k="q8_0", type_v="q8_0")
    assert q8["kv"] == (3 * 4096 + 15 * 512) * 544


def test_moe_reads_only_the_used_experts():
    moe = ModelShape.from_facts(MOE_FACTS)
    experts = MOE_FACTS["tensor_bytes_by_role"]["experts"]["Q8_0"]
    b2 = R.bytes_per_token(moe, [0])["weights"]
    b8 = R.bytes_per_token(moe, [0], expert_used=8)["weights"]
    assert b8 - b2 == pytest.approx(experts * 6 / 8)


def test_bound_and_efficiency_per_run():
    gemma = ModelShape.from_facts(GEMMA_FACTS)
    tg = run_record(
        test=rate_test(n_gen=4), metrics={"tokens_per_second": [40.0, 42.0]}
    )
    chat = run_record(
        test=CHAT_SHORT,
        metrics={"decode_tps": [60.0, 62.0]},
        samples={
            "requests": chat_requests(
                [STAGES_A, STAGES_A], prompt_tokens=19, output_tokens=5
            )
        },
    )
    host = host_doc({1: [19.0, 19.4], 2: [24.0, 25.0]})
    rows = {r["test_name"]: r for r in R.roofline_rows([tg, chat], [host])}
    r = rows["tg4"]
    total = R.bytes_per_token(gemma, [0, 1, 2, 3])["total"]
    assert r["bytes"]["total"] == pytest.approx(total)
    assert r["bound"] == pytest.approx(
        25.0e9 / total
    )  # best sample of any thread count
    assert r["bound_single"] == pytest.approx(19.4e9 / total)
    assert r["efficiency"] == pytest.approx(41.0 / (25.0e9 / total))
    # the CEO's figure: 19.4 GB/s over these bytes is about 79 t/s
    assert 78 < r["bound_single"] < 80
    c = rows["chat-short"]
    assert c["depth_mean"] == pytest.approx(
        sum(range(20, 24)) / 4
    )  # tokens after the first: depths 20..23
    assert c["measured"] == pytest.approx(61.0)


def test_read_bandwidth_is_the_bound_and_the_copy_stays_beside_it():
    gemma = ModelShape.from_facts(GEMMA_FACTS)
    tg = run_record(
        test=rate_test(n_gen=4), metrics={"tokens_per_second": [40.0, 42.0]}
    )
    host = host_doc(
        {1: [19.0, 19.4], 2: [24.0, 25.0]},
        read={1: [23.0, 23.5], 2: [30.0, 30.5]},
        llc_bytes=32 * 2**20,
    )
    r = R.roofline_rows([tg], [host])[0]
    total = R.bytes_per_token(gemma, [0, 1, 2, 3])["total"]
    assert r["bound_uses"] == "read"
    assert r["bound"] == pytest.approx(30.5e9 / total) and r[
        "bound_single"
    ] == pytest.approx(23.5e9 / total)
    assert r["bound_copy"] == pytest.approx(25.0e9 / total)
    assert r["efficiency"] == pytest.approx(41.0 / (30.5e9 / total))
    assert r["efficiency_copy"] / r["efficiency"] == pytest.approx(
        30.5 / 25.0
    )  # the copy bound reads 22% high here
    assert r["fits_llc"] is False  # ~260 MB per token against a 32 MiB cache
    old = host_doc(
        {1: [19.0, 19.4]}
    )  # a probe without a read pass: the copy bounds it, and says so
    assert R.roofline_rows([tg], [old])[0]["bound_uses"] == "copy"


def test_a_model_inside_the_last_level_cache_is_flagged_not_memory_bound():
    moe = run_record(
        test=rate_test(n_gen=4),
        metrics={"tokens_per_second": [900.0, 910.0]},
        model="moe",
        facts=MOE_FACTS,
        sha="d" * 64,
        size=10**7,
    )
    b = R.bytes_per_token(ModelShape.from_facts(MOE_FACTS), [0, 1, 2, 3])["total"]
    big = host_doc({1: [19.0, 19.4]}, read={1: [23.0, 23.5]}, llc_bytes=int(b) + 1)
    small = host_doc({1: [19.0, 19.4]}, read={1: [23.0, 23.5]}, llc_bytes=int(b) - 1)
    r = R.roofline_rows([moe], [big])[0]
    assert r["fits_llc"] is True and "not bound by memory bandwidth" in r["note"]
    assert R.roofline_rows([moe], [small])[0]["fits_llc"] is False


def test_llc_from_fingerprint_sizes():
    fp = {
        "cpu": {"cache": {"L1d": "48K", "L1i": "64K", "L2": "2048K", "L3": "491520K"}}
    }
    assert hostprobe.llc_bytes(fp) == 491520 * 1024
    assert hostprobe.default_buffer_mib(fp) == 960  # twice the 480 MiB L3
    assert hostprobe.default_buffer_mib({"cpu": {"cache": {"L2": "1 MiB"}}}) == 256
    assert hostprobe.llc_bytes({"cpu": {}}) is None


def test_runs_without_probe_or_on_gpu_are_not_bounded():
    tg = run_record(
        test=rate_test(n_gen=4), metrics={"tokens_per_second": [40.0, 42.0]}
    )
    r = R.roofline_rows([tg], [])[0]
    assert r["bound"] is None and "host.probe" in r["note"]
    pp = run_record(
        test=rate_test(n_prompt=64), metrics={"tokens_per_second": [400.0, 420.0]}
    )
    assert R.roofline_rows([pp], []) == []  # prefill is not a decode rate
    gpu = run_record(
        test=rate_test(n_gen=4),
        metrics={"tokens_per_second": [400.0, 420.0]},
        effective={"n_gpu_layers": 19, "n_layers_total": 19},
    )
    host = host_doc({1: [19.0, 19.4]})
    assert R.roofline_rows([gpu], [host])[0]["bound"] is None


def test_latest_bandwidth_takes_the_newest_probe_of_each_kind():
    old = host_doc({1: [10.0, 11.0]}, created="2026-01-01T00:00:00+00:00")
    new = host_doc(
        {1: [20.0, 21.0], 2: [30.0, 29.0]}, created="2026-02-01T00:00:00+00:00"
    )
    gpu = host_doc(
        {1: [3000.0, 3010.0]},
        created="2026-03-01T00:00:00+00:00",
        kind="gpu_memory_bandwidth",
    )
    bw = R.latest_bandwidth([new, old, gpu])["fixture-host-0000aaaa"]
    assert (bw.best_gbs, bw.best_threads, bw.single_gbs) == (30.0, 2, 21.0)
    assert (
        R.latest_bandwidth([new, gpu], "gpu_memory_bandwidth")[
            "fixture-host-0000aaaa"
        ].best_gbs
        == 3010.0
    )


def test_host_probe_measures_and_validates(data_env):
    doc = hostprobe.probe(buffer_mib=4, repetitions=2, threads=[1, 2])
    artifacts.validate(doc)
    assert [b["threads"] for b in doc["bandwidth"]] == [1, 2]
    assert all(
        len(b["samples_gbs"]) == 2 and min(b["samples_gbs"]) > 0
        for b in doc["bandwidth"]
    )
    assert (
        doc["probe"]["buffer_bytes"] == 4 * 2**20
        and doc["probe"]["bytes_counted"] == "read + written"
    )
    assert [b["threads"] for b in doc["read_bandwidth"]] == [1, 2] and doc["probe"][
        "read_bytes_counted"
    ] == "read"
    assert all(
        len(b["samples_gbs"]) == 2 and min(b["samples_gbs"]) > 0
        for b in doc["read_bandwidth"]
    )
    # the fastest read kernel is kept per thread count, and every kernel's mean is on record
    for b in doc["read_bandwidth"]:
        k = doc["probe"]["read_kernels"][str(b["threads"])]
        assert set(k["means_gbs"]) == set(hostprobe.READ_KERNELS)
        assert (
            k["means_gbs"][k["kernel"]]
            == max(k["means_gbs"].values())
            == pytest.approx(b["summary"]["mean"])
        )
    path = artifacts.write(hostprobe.artifact_path(doc), doc)
    assert path.parent.parent == data_env / "hosts"
    assert R.load_hosts()[0]["id"] == doc["id"]


def test_host_probe_refuses_bad_input(data_env):
    with pytest.raises(ConfigError, match="repetitions"):
        hostprobe.probe(buffer_mib=4, repetitions=1)
    with pytest.raises(ConfigError, match="size_mib"):
        hostprobe.probe(buffer_mib=0)
    env = {"ALMANAC_DATA": str(data_env), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "invoke", "host.probe", "--threads", "one"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        out.returncode == 2
        and "threads" in out.stderr
        and "Traceback" not in out.stderr
    )
    assert not (data_env / "hosts").exists()


def test_roofline_page_states_the_bound_and_uses_a_log_scale_across_magnitudes():
    from pipelines.site import roofline_page

    slow = run_record(
        test=rate_test(n_gen=4), metrics={"tokens_per_second": [40.0, 42.0]}
    )
    host = host_doc(
        {1: [19.0, 19.4], 2: [24.0, 25.0]},
        read={1: [23.0, 23.5], 2: [30.0, 30.5]},
        llc_bytes=32 * 2**20,
    )
    md = roofline_page.roofline_page([slow], [host])
    assert (
        "read-only pass" in md and "30.50" in md and "25.00" in md
    )  # bound uses read; copy kept beside
    # 40 t/s measured against a bound of ~117 t/s: within one order of magnitude, linear axis
    assert '"log"' not in md
    moe = run_record(
        test=rate_test(n_gen=4),
        metrics={"tokens_per_second": [900.0, 910.0]},
        model="moe",
        facts=MOE_FACTS,
        sha="d" * 64,
        size=10**7,
    )
    md = roofline_page.roofline_page([slow, moe], [host])
    assert '"log"' in md and "log scale" in md


def test_a_fleet_of_runs_draws_a_bounded_few_over_the_efficiency_ranking(monkeypatch):
    """Issue 30: the roofline chart of a fleet draws at most ROOFLINE_CHART_MAX runs, the most and the
    least efficient included, and says so; the table lists every run."""
    import json
    import re

    from pipelines.site import roofline_page

    host = host_doc(
        {1: [19.0, 19.4], 2: [24.0, 25.0]},
        read={1: [23.0, 23.5], 2: [30.0, 30.5]},
        llc_bytes=32 * 2**20,
    )
    speeds = [10.0, 20.0, 30.0, 40.0, 50.0]
    runs = [
        run_record(
            test=rate_test(n_gen=4 + i),
            metrics={"tokens_per_second": [v, v]},
        )
        for i, v in enumerate(speeds)
    ]
    assert len({r.id for r in runs}) == len(runs)
    monkeypatch.setattr(roofline_page, "ROOFLINE_CHART_MAX", 3)
    md = roofline_page.roofline_page(runs, [host])
    found = re.search(
        r'<script type="application/json" id="[^"]+-spec">(.*?)</script>', md
    )
    assert found is not None
    spec = json.loads(
        found.group(1)
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
    )
    drawn = [v["measured"] for vals in spec["datasets"].values() for v in vals]
    assert sorted(drawn) == [
        10.0,
        30.0,
        50.0,
    ]  # the least, the middle, the most efficient
    assert drawn == sorted(drawn, reverse=True)  # best first
    assert "3 of 5 runs drawn" in md
    assert all(r.id in md for r in runs)  # the table lists every run
