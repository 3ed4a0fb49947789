"""The planning pipelines on the real embedded model: memory prediction against measured RSS
and llama.cpp's own buffer report, stage timings of a chat request, the roofline of a run."""

from __future__ import annotations

import pytest

from core.records.host import HostRecord
from core.records.run import read as read_run
from pipelines import memory as mem
from pipelines import roofline, whatif
from runtime.execution import runner
from runtime.hosts import probe as hostprobe
from tests.conftest import write_matrix

MATRIX = """
schema_version: 1
name: planning-e2e
models: [gemma3-270m-q4_k_m]
repetitions: 2
tests:
  - tg8
  - {kind: chat, id: chat-tiny, max_tokens: 8, requests: 2, warmup_requests: 0}
"""


@pytest.fixture(scope="module")
def measured(tmp_path_factory, embedded_model):
    import os
    import shutil
    from pathlib import Path

    d = tmp_path_factory.mktemp("planning") / "data"
    (d / "matrices").mkdir(parents=True)
    shutil.copy(
        Path(__file__).resolve().parents[1] / "data" / "models.yaml", d / "models.yaml"
    )
    old = os.environ.get("ALMANAC_DATA")
    os.environ["ALMANAC_DATA"] = str(d)
    try:
        write_matrix(d, "planning-e2e", MATRIX)
        report = runner.run_matrix("planning-e2e")
        assert not report.failed
        docs = {r.test_name: r for r in map(read_run, report.measured)}
        probe = HostRecord(hostprobe.probe(buffer_mib=32, repetitions=2))
    finally:
        if old is None:
            os.environ.pop("ALMANAC_DATA", None)
        else:
            os.environ["ALMANAC_DATA"] = old
    return docs, probe


@pytest.mark.model
def test_rss_prediction_within_10_percent(measured):
    docs, _ = measured
    for doc in docs.values():
        r = doc["resources"]
        assert r["peak_rss_method"] == "VmHWM of the child"
        assert (
            0
            < r["baseline_rss_bytes"]
            < r["rss_after_load_bytes"]
            <= r["peak_rss_bytes"]
        )
        p = mem.run_prediction(doc)
        assert p["has_baseline"]
        assert abs(p["error"]) <= 0.10, (
            doc["test"]["name"],
            p["predicted"],
            p["measured"],
        )


@pytest.mark.model
def test_kv_and_buffers_match_llamacpp_report(measured):
    docs, _ = measured
    shape = mem.ModelShape.from_facts(docs["tg8"]["model"]["gguf"])
    for doc in docs.values():
        eff = doc["settings"]["effective"]
        rep = eff["llama_memory_mib"]
        kv = mem.kv_cache(
            shape,
            eff["n_ctx"],
            eff["type_k"],
            eff["type_v"],
            swa_full=eff["swa_full"],
            n_ubatch=eff["n_ubatch"],
        )
        assert sum(rep["kv"].values()) == pytest.approx(
            kv.bytes / 2**20, abs=0.01
        )  # the KV formula, exactly
        if eff.get("use_extra_bufts", True):
            assert rep["model"]["CPU_REPACK"] == pytest.approx(
                shape.repack_bytes() / 2**20, abs=0.01
            )
        else:  # the library policy turned extra buffer types off (AMX): no repacked weights
            assert "CPU_REPACK" not in rep["model"]
        comp = (
            mem.compute_buffer(
                shape,
                eff["n_ubatch"],
                kv.cells,
                flash_attn=eff["flash_attn"] == "on",
                n_kv_swa=kv.swa_cells,
            )["total"]
            / 2**20
        )
        assert comp == pytest.approx(sum(rep["compute"].values()), rel=0.05)


@pytest.mark.model
def test_chat_stage_timings(measured):
    docs, _ = measured
    for req in docs["chat-tiny"]["samples"]["requests"]:
        s = req["stages_ms"]
        assert s["prefill"] > 0 and s["decode"] > 0 and s["sample"] > 0
        assert sum(v for k, v in s.items() if k != "other") <= req["e2e_ms"] + 5.0
        assert req["stage_calls"]["prefill"] == 1 and req["stage_calls"]["decode"] >= 1
        assert req["llama_perf"]["n_p_eval"] == req["prompt_tokens"]
    prof = whatif.stage_profile(docs["chat-tiny"])
    assert prof["load"] > 0 and prof["decode"] > 0


@pytest.mark.model
def test_roofline_of_a_real_run(measured):
    docs, probe = measured
    rows = {
        r["test_name"]: r for r in roofline.roofline_rows(list(docs.values()), [probe])
    }
    r = rows["tg8"]
    assert r["bytes"]["weights"] == sum(
        docs["tg8"]["model"]["gguf"]["tensor_bytes_by_type"].values()
    )
    assert r["bound"] > 0 and 0 < r["efficiency"]
