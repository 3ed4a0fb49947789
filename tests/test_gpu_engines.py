"""Issue 31, the GPU parts: the same random weights for two engine families (runtime.models.synth_hf),
transformers serve recognised by what it serves (detect), NVML sampled during load levels
(runtime.load.gpu_telemetry: no GPU here for real; a recorded H200 replayed), and the committed
H200 runs of both engines on the Serving and Comparisons pages' builders."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from core import telemetry
from core.errors import ModelError
from core.records.run import as_record
from runtime.load import gpu_telemetry
from runtime.models import synth, synth_hf
from tests.conftest import ROOT
from tests.support.nvml_replay import ReplayNvml

H200 = (
    ROOT / "data" / "runs" / "gpu-2x-h200-b0085864"
)  # one H200 of two (CUDA_VISIBLE_DEVICES=0)


# -- the same weights as a Hugging Face checkpoint ---------------------------------------------
def test_unpermute_undoes_llama_cpp_rope_permutation():
    w = np.arange(8 * 64 * 3, dtype=np.float32).reshape(8 * 64, 3)
    for heads in (1, 4, 8):
        back = synth_hf.unpermute(synth_hf.permute(w, heads), heads)
        assert np.array_equal(back, w)
    assert not np.array_equal(synth_hf.permute(w, 8), w)


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F16"
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a : 8 + n + b], np.float16).reshape(
            h["shape"]
        )
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("hf")
    gguf = d / "tiny.gguf"
    synth.write_gguf("tiny-llama", "F16", gguf, seed=0)
    return gguf, synth_hf.write_checkpoint(gguf, d / "hub", "almanac/tiny"), d


def test_checkpoint_holds_the_gguf_numbers_under_llama_names(checkpoint):
    from gguf import GGUFReader

    gguf, ck, _ = checkpoint
    snap = Path(ck["snapshot"])
    cfg = json.loads((snap / "config.json").read_text())
    shape = synth.get_shape("tiny-llama")
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (
        shape.n_embd,
        shape.n_layer,
    )
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (
        shape.n_head,
        shape.n_head_kv,
    )
    assert cfg["vocab_size"] == shape.n_vocab and cfg["dtype"] == "float16"
    st = _safetensors(snap / "model.safetensors")
    g = {t.name: np.asarray(t.data) for t in GGUFReader(str(gguf)).tensors}
    assert len(st) == len(g)
    q = st["model.layers.0.self_attn.q_proj.weight"]
    k = st["model.layers.0.self_attn.k_proj.weight"]
    assert np.array_equal(synth_hf.permute(q, shape.n_head), g["blk.0.attn_q.weight"])
    assert np.array_equal(
        synth_hf.permute(k, shape.n_head_kv), g["blk.0.attn_k.weight"]
    )
    assert np.array_equal(
        st["model.layers.1.mlp.down_proj.weight"], g["blk.1.ffn_down.weight"]
    )
    assert cfg["tie_word_embeddings"] == ("lm_head.weight" not in st)


def test_checkpoint_sits_in_a_hub_cache_named_by_its_weights(checkpoint):
    _, ck, d = checkpoint
    repo = d / "hub" / "models--almanac--tiny"
    assert ck["revision"] == ck["sha256"][:40]
    assert ck["served_name"] == f"almanac/tiny@{ck['revision']}"
    assert (repo / "refs" / ck["revision"]).read_text() == ck["revision"]
    snap = Path(ck["snapshot"])
    for f in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (snap / f).is_symlink() and (snap / f).resolve().parent == repo / "blobs"
    tok = json.loads((snap / "tokenizer.json").read_text())
    conf = json.loads((snap / "tokenizer_config.json").read_text())
    assert len(tok["model"]["vocab"]) == synth.get_shape("tiny-llama").n_vocab
    assert conf["bos_token"] == "<s>" and "<|im_start|>" in conf["chat_template"]


def test_a_file_that_cannot_convert_is_one_line(tmp_path):
    q = tmp_path / "q.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", q, seed=0)
    with pytest.raises(ModelError, match="Q8_0; convert an F16"):
        synth_hf.write_checkpoint(q, tmp_path / "hub", "almanac/q")
    moe = tmp_path / "m.gguf"
    synth.write_gguf("tiny-qwen3moe", "F16", moe, seed=0)
    with pytest.raises(ModelError, match="only dense 'llama'"):
        synth_hf.write_checkpoint(moe, tmp_path / "hub", "almanac/m")
    with pytest.raises(ModelError, match="not '<org>/<name>'"):
        synth_hf.write_checkpoint(q, tmp_path / "hub", "no-org")
    assert not (tmp_path / "hub" / "models--almanac--q" / "snapshots").exists()
    with pytest.raises(ModelError, match="no such GGUF file"):
        synth_hf.write_checkpoint(tmp_path / "none.gguf", tmp_path / "hub", "almanac/n")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(ModelError, match="not a readable GGUF file"):
        synth_hf.write_checkpoint(tmp_path / "junk.gguf", tmp_path / "hub", "almanac/j")


# -- NVML during load levels --------------------------------------------------------------------
def test_a_host_without_nvml_records_that_it_has_none():
    s = gpu_telemetry.GpuSampler(0.1)  # this machine: no NVIDIA driver
    s.start(time.perf_counter_ns())
    out = s.stop()
    assert out["available"] is False and out["reason"]
    assert telemetry.gpu_summary(out) == {"available": False, "reason": out["reason"]}
    assert telemetry.gpu_samples(out) == []


def test_a_server_on_another_host_is_not_sampled_here():
    s = gpu_telemetry.GpuSampler(0.1, ReplayNvml(), base_url="http://10.0.0.7:8000/v1")
    s.start(time.perf_counter_ns())
    assert s.stop() == {
        "available": False,
        "reason": "the server is not on this host: its GPUs cannot be sampled from here",
    }
    assert gpu_telemetry.on_this_host("http://127.0.0.1:8011/v1")
    assert gpu_telemetry.on_this_host("http://localhost:8011/v1")


def test_recorded_h200_readings_become_the_series_and_its_summary():
    nv = ReplayNvml()
    s = gpu_telemetry.GpuSampler(0.5, nv, base_url="http://127.0.0.1:8012/v1")
    s._origin = time.perf_counter_ns()
    for _ in range(4):
        s.take()
    out = s.stop()
    assert out["available"] and out["gpus"] == [
        {"index": 0, "nvml_index": 0, "name": "NVIDIA H200"}
    ]
    first = [x["g"][0] for x in out["samples"]]
    assert first[1] == {
        "util_pct": 54.0,
        "mem_util_pct": 26.0,
        "power_w": 232.0,
        "mem_used_mib": 4383.9,
    }
    summ = telemetry.gpu_summary(out)
    assert summ is not None
    g = summ["gpus"][0]
    assert summ["samples"] == 4
    assert g["util_pct"]["max"] == 62.0
    assert g["power_w"]["mean"] == pytest.approx((137.7 + 232.0 + 336.4 + 338.2) / 4)


def test_sampling_runs_beside_the_level_and_a_failing_reading_is_counted():
    nv = ReplayNvml(fail={"util"})
    s = gpu_telemetry.GpuSampler(0.05, nv)
    s.start(time.perf_counter_ns())
    time.sleep(0.3)
    out = s.stop()
    assert len(out["samples"]) >= 3 and out["failures"] >= 3
    assert "util_pct" not in out["samples"][0]["g"][0]
    assert out["samples"][0]["g"][0]["power_w"] > 0


# -- the H200 runs on the pages -----------------------------------------------------------------
@pytest.fixture(scope="module")
def h200_docs():
    return [
        as_record(json.loads(p.read_text()))
        for p in sorted(H200.glob("*-synthetic-llama-1b-f16/*.json"))
    ]


def test_both_engines_were_identified_by_what_they_serve(h200_docs):
    servers = {
        (d.model["server"], d.model.get("server_version_stated")) for d in h200_docs
    }
    assert servers == {("transformers serve", True), ("llama-server", None)}
    for d in h200_docs:
        assert d.model["synthetic"] is True and d.status == "ok"
        levels = d.samples.levels or []
        gpu = [lv.gpu_telemetry for lv in levels]
        assert all(
            g and g["available"] and g["gpus"][0]["name"] == "NVIDIA H200" for g in gpu
        )


def test_engine_groups_put_the_two_families_side_by_side(h200_docs):
    from pipelines import engines

    groups = engines.engine_groups(h200_docs)
    assert [g["test_name"] for g in groups] == [
        "engines-capacity",
        "engines-concurrent",
    ]
    conc = groups[1]
    assert [e["server"] for e in conc["engines"]] == [
        "transformers serve",
        "llama-server",
    ]
    assert [lv["level"] for lv in conc["levels"]] == [1.0, 4.0, 16.0]
    one = conc["levels"][0]
    t, ls = one["engines"]
    assert one["tps_ratio"] == pytest.approx(ls["output_tps"] / t["output_tps"])
    assert one["tps_ratio"] > 5 and one["itl_ratio"] > 5
    assert t["gpu_util_pct"] is not None and ls["gpu_power_w"] > 100
    # the BPE tokenizer synth_hf writes counts the prompts as llama.cpp does (within 10%)
    assert conc["prompt_lengths_differ"] is None
    for lv in conc["levels"]:
        a, b = (e["prompt_tokens_mean"] for e in lv["engines"])
        assert 0.95 < a / b < 1.05


def test_the_pages_show_both_engines_with_their_caveats(h200_docs):
    from pipelines.site import engines as site

    serving = "\n".join(site.serving_section(h200_docs))
    comparisons = "\n".join(site.comparisons_section(h200_docs))
    for text in (serving, comparisons):
        assert r"transformers serve 5.17.0 \(stated\)" in text
        assert "llama-server b0-0c1e57098" in text
        assert "Random weights" in text and "Not the same prompt length" not in text
    assert "## Engine families on one GPU" in serving
    assert "throughput ratio" in comparisons


def test_tokenizer_merges_follow_the_pieces_scores(checkpoint):
    """BPE merges ranked by the union's score tokenize as llama.cpp's SPM tokenizer does (checked off
    this suite with the tokenizers package: 135 of 200 lines of data/texts identical, the rest lines
    that start with spaces, token counts within 1%)."""
    from gguf import GGUFReader

    gguf, _, _ = checkpoint
    files = synth_hf.tokenizer_files(GGUFReader(str(gguf)))
    model = files["tokenizer.json"]["model"]
    assert model["type"] == "BPE" and model["byte_fallback"] is True
    vocab, merges = model["vocab"], model["merges"]
    tokens, scores, _ = synth.make_vocab(synth.get_shape("tiny-llama").n_vocab)
    union = [scores[vocab[a + b]] for a, b in merges]
    assert union == sorted(union, reverse=True) and len(merges) > len(tokens)
    assert all(a in vocab and b in vocab for a, b in merges)
