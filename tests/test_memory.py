"""Memory planner: weights, the KV cache formula against hand-computed cases (sliding-window
layers, quantized caches), compute buffer estimates, LoRA, and predicted vs measured."""

from __future__ import annotations

import copy

import pytest

from core.errors import ConfigError, ModelError
from core.records.run import RunRecord
from pipelines import memory as mem
from tests.support.planning_fixtures import (
    GEMMA_FACTS,
    MOE_FACTS,
    rate_test,
    requested,
    run_record,
)

MiB = 2**20


@pytest.fixture(scope="module")
def gemma() -> mem.ModelShape:
    return mem.ModelShape.from_facts(GEMMA_FACTS, "gemma3-270m-q4_k_m")


def llama8b_facts(**over) -> dict:
    """Llama 3 8B's attention shape (32 layers, 8 KV heads of 128), as a GGUF's facts."""
    f = {
        "architecture": "llama",
        "block_count": 32,
        "embedding_length": 4096,
        "head_count": 32,
        "head_count_kv": 8,
        "feed_forward_length": 14336,
        "vocab_size": 128256,
        "context_length": 8192,
        "tensor_bytes_by_type": {"Q4_K": 4_000_000_000, "F32": 1_000_000},
        "tensor_bytes_by_role": {
            "token_embd": {"Q4_K": 290_000_000},
            "output": {"Q6_K": 400_000_000},
            "experts": {},
            "other": {"Q4_K": 3_710_000_000, "F32": 1_000_000},
        },
    }
    f.update(over)
    return f


# -- shape ------------------------------------------------------------------------------------
def test_gemma3_sliding_window_layers_follow_llamacpp_pattern(gemma):
    # llama.cpp's gemma3: period 6, the last layer of each period is global -> layers 5, 11, 17
    assert [i for i, swa in enumerate(gemma.swa_layers) if not swa] == [5, 11, 17]
    assert gemma.n_swa == 512 and sum(gemma.swa_layers) == 15
    assert gemma.tied_output and not gemma.is_moe
    assert gemma.head_k == gemma.head_v == 256 and gemma.n_head_kv == (1,) * 18


def test_gguf_pattern_overrides_architecture_default():
    f = dict(GEMMA_FACTS, sliding_window_pattern=[True, False] * 9)
    s = mem.ModelShape.from_facts(f)
    assert [i for i, swa in enumerate(s.swa_layers) if not swa] == list(range(1, 18, 2))
    s = mem.ModelShape.from_facts(dict(GEMMA_FACTS, sliding_window_pattern=3))
    assert [i for i, swa in enumerate(s.swa_layers) if not swa] == [2, 5, 8, 11, 14, 17]


def test_unknown_swa_architecture_is_an_upper_bound_with_a_note():
    s = mem.ModelShape.from_facts(
        llama8b_facts(architecture="madeup", sliding_window=4096)
    )
    assert not any(s.swa_layers)
    assert any("upper bound" in n for n in s.notes)


def test_missing_fact_names_the_key():
    f = dict(GEMMA_FACTS)
    del f["block_count"]
    with pytest.raises(ModelError, match="block.count"):
        mem.ModelShape.from_facts(f, "m")


def test_per_layer_arrays_of_the_wrong_length_are_refused_as_llamacpp_refuses_them():
    # found by the property test: a head-count array shorter than the layer count crashed the Memory page
    with pytest.raises(
        ModelError, match="head.count.kv.layers has 1 entries for 4 layers"
    ):
        mem.ModelShape.from_facts(
            llama8b_facts(block_count=4, head_count_kv_layers=[8]), "m"
        )
    with pytest.raises(
        ModelError, match="sliding.window.pattern has 19 entries for 18 layers"
    ):
        mem.ModelShape.from_facts(
            dict(GEMMA_FACTS, sliding_window_pattern=[True] * 19), "m"
        )
    with pytest.raises(ModelError, match="negative"):
        mem.ModelShape.from_facts(
            llama8b_facts(block_count=2, head_count_kv_layers=[8, -1]), "m"
        )


# -- KV cache: hand-computed --------------------------------------------------------------------
def test_kv_dense_llama8b_f16_4k_is_512_mib():
    s = mem.ModelShape.from_facts(llama8b_facts())
    kv = mem.kv_cache(s, 4096, "f16", "f16")
    # 32 layers x 4096 cells x (K 8x128 + V 8x128 values) x 2 bytes
    assert kv.bytes == 32 * 4096 * (1024 + 1024) * 2 == 512 * MiB
    assert kv.swa_layers == 0 and kv.full_layers == 32


def test_kv_context_is_padded_to_256_cells():
    s = mem.ModelShape.from_facts(llama8b_facts())
    assert mem.kv_cache(s, 1000).cells == 1024
    assert mem.kv_cache(s, 1000).bytes == 32 * 1024 * 2048 * 2


def test_kv_gemma3_sliding_window_cache(gemma):
    # 3 global layers x 4096 cells x (256 + 256 values) x 2 B = 12 MiB;
    # 15 SWA layers x pad256(min(4096, 512 + 512)) = 1024 cells x 1024 B = 15 MiB
    kv = mem.kv_cache(gemma, 4096, "f16", "f16", swa_full=False, n_ubatch=512)
    assert (kv.cells, kv.swa_cells) == (4096, 1024)
    assert kv.full_bytes == 12 * MiB and kv.swa_bytes == 15 * MiB
    # swa_full: every layer holds the full context: 18 x 4096 x 1024 B = 72 MiB (llama.cpp's log: 12.00 + 60.00 MiB)
    full = mem.kv_cache(gemma, 4096, "f16", "f16", swa_full=True)
    assert (full.full_bytes, full.swa_bytes) == (12 * MiB, 60 * MiB)
    # a smaller micro-batch shrinks the window cache: pad256(512 + 128) = 768 cells
    assert mem.kv_cache(gemma, 4096, n_ubatch=128).swa_cells == 768
    # a context smaller than the window: the SWA cache is the context
    assert mem.kv_cache(gemma, 256).swa_cells == 256


def test_kv_quantized_caches_match_ggml_block_sizes(gemma):
    # q8_0: 34 bytes per 32 values -> a 256-value row is 272 B; K+V = 544 B per cell and layer.
    # llama.cpp's log at n_ctx 32768, swa_full: 51.00 MiB (3 layers) + 255.00 MiB (15 layers)
    q8 = mem.kv_cache(gemma, 32768, "q8_0", "q8_0", swa_full=True)
    assert q8.full_bytes == 3 * 32768 * 544 == 51 * MiB
    assert q8.swa_bytes == 15 * 32768 * 544 == 255 * MiB
    # q4_0: 18 bytes per 32 -> 144 B a row; llama.cpp's log at 8192: 6.75 + 33.75 MiB
    q4 = mem.kv_cache(gemma, 8192, "q4_0", "q4_0", swa_full=True)
    assert q4.full_bytes == int(6.75 * MiB) and q4.swa_bytes == int(33.75 * MiB)
    # mixed K/V types
    mixed = mem.kv_cache(gemma, 4096, "q8_0", "f16", swa_full=True)
    assert mixed.bytes == 18 * 4096 * (272 + 512)


def test_kv_quantized_cache_needs_row_divisible_by_block():
    s = mem.ModelShape.from_facts(
        llama8b_facts(head_count=32, embedding_length=3040, head_count_kv=1)
    )  # head 95
    with pytest.raises(ConfigError, match="divisible by 32"):
        mem.kv_cache(s, 4096, "q8_0", "q8_0")
    assert mem.kv_cache(s, 256, "f16", "f16").bytes == 32 * 256 * 95 * 2 * 2


def test_kv_per_layer_heads_and_mla():
    s = mem.ModelShape.from_facts(
        llama8b_facts(block_count=4, head_count_kv_layers=[8, 0, 4, 8])
    )
    assert mem.kv_cache(s, 256).bytes == 256 * (8 + 0 + 4 + 8) * 128 * 2 * 2
    mla = mem.ModelShape.from_facts(
        llama8b_facts(block_count=2, kv_lora_rank=512, rope_dimension_count=64)
    )
    # MLA caches the compressed latent (512) plus the rope part (64), no V
    assert mem.kv_cache(mla, 256).bytes == 2 * 256 * 576 * 2


def test_kv_read_per_token_with_and_without_flash_attention(gemma):
    row = 1024  # f16 K+V per cell and layer
    # flash attention skips masked cells: SWA layers read min(depth + 1, 512) cells
    assert mem.kv_read_bytes(gemma, 99, flash_attn=True) == 18 * 100 * row
    assert (
        mem.kv_read_bytes(gemma, 4095, flash_attn=True) == (3 * 4096 + 15 * 512) * row
    )
    # without it every layer reads the padded view of used cells (at least 256)
    assert mem.kv_read_bytes(gemma, 99, flash_attn=False) == 18 * 256 * row
    cache = mem.kv_cache(gemma, 4096)
    assert (
        mem.kv_read_bytes(gemma, 4095, flash_attn=False, cache=cache)
        == (3 * 4096 + 15 * 1024) * row
    )


# -- weights, compute, tokenizer ---------------------------------------------------------------------
def test_weights_read_per_token(gemma):
    assert (
        gemma.weights_read_per_token() == gemma.weight_bytes
    )  # tied: the embedding is the output matrix
    s = mem.ModelShape.from_facts(llama8b_facts())
    # untied: one embedding row instead of the whole matrix
    assert (
        s.weights_read_per_token()
        == 3_710_000_000 + 1_000_000 + 400_000_000 + round(290_000_000 / 128256)
    )
    moe = mem.ModelShape.from_facts(MOE_FACTS)
    experts = MOE_FACTS["tensor_bytes_by_role"]["experts"]["Q8_0"]
    full = moe.weight_bytes
    assert moe.weights_read_per_token() == full - experts + experts * 2 // 8
    assert (
        moe.weights_read_per_token(expert_used=4) == full - experts + experts * 4 // 8
    )


def test_repack_bytes(gemma):
    assert (
        gemma.repack_bytes() == GEMMA_FACTS["tensor_bytes_by_type"]["Q4_K"]
    )  # llama.cpp's log: 12.66 MiB
    f = llama8b_facts(
        tensor_bytes_by_role={
            "token_embd": {"Q4_0": 100},
            "output": {},
            "experts": {},
            "other": {"Q4_0": 1000, "Q6_K": 50, "F32": 5},
        }
    )
    assert (
        mem.ModelShape.from_facts(f).repack_bytes() == 1100
    )  # tied Q4_0 embedding is repacked as the output


@pytest.mark.parametrize(
    "n_ctx,n_ubatch,flash,reported_mib",
    [
        (4096, 512, False, 514.50),
        (32768, 512, False, 514.50),
        (8192, 128, False, 128.63),
        (2048, 2048, True, 2058.01),
    ],
)
def test_compute_buffer_estimate_close_to_llamacpp(
    gemma, n_ctx, n_ubatch, flash, reported_mib
):
    # reported_mib: "CPU compute buffer size" printed by llama.cpp 0c1e57098 loading the embedded model
    # (swa_full, the library default, at the time of these readings)
    kv = mem.kv_cache(gemma, n_ctx, n_ubatch=n_ubatch, swa_full=True)
    est = mem.compute_buffer(
        gemma, n_ubatch, kv.cells, flash_attn=flash, n_kv_swa=kv.swa_cells
    )["total"]
    assert abs(est / MiB - reported_mib) / reported_mib < 0.02


def test_tokenizer_estimate(gemma):
    assert (
        mem.tokenizer_bytes(gemma) == 192 * 262144 + 3 * GEMMA_FACTS["vocab_text_bytes"]
    )


# -- LoRA ---------------------------------------------------------------------------------------------
def test_lora_seed_formula_done_right():
    # seed 002: r=16, 28 layers, q/v/o of 896 x 896, 2 bytes -> 16 x 1792 x 28 x 3 x 2 bytes = 4.8 MB
    # (the seed prints "~0.045 GB ~ 45 MB": its arithmetic is off by ten)
    s = mem.ModelShape.from_facts(
        llama8b_facts(
            block_count=28, embedding_length=896, head_count=14, head_count_kv=14
        )
    )
    assert (
        mem.lora_bytes(s, 16, ("q", "v", "o"))
        == 16 * (896 + 896) * 28 * 3 * 2
        == 4_816_896
    )
    with pytest.raises(ConfigError, match="unknown LoRA module"):
        mem.lora_bytes(s, 16, ("qq",))


def test_lora_uses_real_shapes(gemma):
    dims = mem.lora_module_dims(gemma)
    assert (
        dims["q"] == (640, 1024)
        and dims["k"] == (640, 256)
        and dims["down"] == (2048, 640)
    )
    assert mem.lora_bytes(gemma, 8, ("k",), 2.0) == 8 * (640 + 256) * 18 * 2


# -- plans ------------------------------------------------------------------------------------------------
def test_cpu_plan_components(gemma):
    plan = mem.cpu_plan(gemma, 4096, max_batch=19, runtime_baseline=60 * MiB)
    c = plan.components
    assert c["weights (mapped)"] == gemma.weight_bytes
    assert c["KV cache"] == 27 * MiB
    assert c["output buffer"] == 4 * 262144
    assert c["process before load (measured)"] == 60 * MiB
    assert plan.total == sum(c.values())
    assert not any("baseline" in n for n in plan.notes)
    assert any("baseline" in n for n in mem.cpu_plan(gemma, 4096).notes)


def test_run_prediction_uses_the_runs_settings():
    base = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [40.0, 41.0]},
        effective={"n_ctx": 256, "n_ubatch": 16},
        resources={"peak_rss_bytes": 380 * MiB, "baseline_rss_bytes": 60 * MiB},
    )
    p = mem.run_prediction(RunRecord(base))
    gemma = mem.ModelShape.from_facts(GEMMA_FACTS)
    assert (
        p["plan"].components["KV cache"]
        == mem.kv_cache(gemma, 256, n_ubatch=16).bytes
        == 18 * 256 * 1024
    )
    assert p["error"] == pytest.approx((p["predicted"] - 380 * MiB) / (380 * MiB))
    q8 = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [40.0, 41.0]},
        settings=requested(type_k="q8_0", type_v="q8_0"),
        effective={"n_ctx": 256, "n_ubatch": 16},
        resources={"peak_rss_bytes": 380 * MiB},
    )
    pq = mem.run_prediction(q8)
    assert pq["plan"].components["KV cache"] == 18 * 256 * 544
    assert not pq["has_baseline"]
    gpu = copy.deepcopy(base)
    gpu["settings"]["effective"]["n_gpu_layers"] = 19
    assert mem.run_prediction(gpu) is None


def test_fits_rows_headroom(gemma):
    s = mem.PlannerSettings(
        contexts=[4096, 65536], cache_types=["f16"], gpu_sizes_gb=[0.5, 8], headroom=0.1
    )
    rows = mem.fits_rows(gemma, s, host_memory=2**30, runtime_baseline=None)
    # 65536 exceeds the trained context (32768): shown with a warning, never dropped
    assert [(r["n_ctx"], r["beyond_training"]) for r in rows] == [
        (4096, False),
        (65536, True),
    ]
    assert rows[1]["kv_bytes"] > rows[0]["kv_bytes"]
    r = rows[0]
    assert r["host_fit"] == (r["cpu"].total <= 0.9 * 2**30)
    assert r["gpu_fit"] == {
        "0.5 GB": r["gpu"].total <= 0.45e9,
        "8 GB": True,
    }  # gpu_sizes_gb: 10^9 bytes, as named
    cards = mem.PlannerSettings(
        contexts=[4096],
        cache_types=["f16"],
        gpu_cards=[{"name": "tiny", "memory": "0.5 GiB"}],
    )
    (row,) = mem.fits_rows(gemma, cards, host_memory=None, runtime_baseline=None)
    assert row["gpu_fit"] == {"tiny": row["gpu"].total <= 0.9 * 0.5 * 2**30}
    # tiny host: does not fit
    assert (
        mem.fits_rows(gemma, s, host_memory=100 * MiB, runtime_baseline=None)[0][
            "host_fit"
        ]
        is False
    )


def test_sweet_spots_per_card_are_the_largest_that_fit():
    # Llama 3 8B's shape at Q4_K (about 4 GB of weights): rank-16 adapters on all seven
    # projections are 16 x (8192 + 5120 + 5120 + 8192 + 3 x 18432) x 32 layers x 2 bytes = 80 MiB
    shape = mem.ModelShape.from_facts(llama8b_facts())
    s = mem.PlannerSettings(
        contexts=[2048, 8192, 131072],
        cache_types=["f16"],
        gpu_cards=[
            {"name": "4 GB", "memory": "4 GiB"},
            {"name": "8 GB", "memory": "8 GiB"},
            {"name": "24 GB", "memory": "24 GiB"},
        ],
        sweet_spot={"context": 4096, "max_batch": 256, "max_adapters": 1024},
    )
    small, mid, big = mem.sweet_spots(shape, s)
    assert (
        small.fits is False and small.batch is None
    )  # the base alone is over 90% of 4 GiB
    assert mid.adapter_bytes == 80 * MiB

    def total(n_ctx: int, n_seq: int = 1) -> int:
        return mem.gpu_plan(shape, n_ctx, n_seq=n_seq, n_ubatch=512).total

    for spot in (mid, big):
        keep = 0.9 * spot.card.bytes
        assert spot.fits and spot.base_bytes == total(4096)
        b = spot.batch
        assert total(b * 4096, b) <= keep < total((b + 1) * 4096, b + 1)
        k = spot.adapters
        assert (
            spot.base_bytes + k * 80 * MiB
            <= keep
            < spot.base_bytes + (k + 1) * 80 * MiB
        )
        # the largest planned context at one sequence; the next planned one does not fit
        ctxs = s.contexts
        i = ctxs.index(spot.max_context)
        assert total(spot.max_context) <= keep
        assert i == len(ctxs) - 1 or total(ctxs[i + 1]) > keep
    # 8 GiB: 8192 tokens fit (1 GiB of KV) but not 131072 (16 GiB); 4096-token sequences: 6 (3 GiB of KV)
    assert (mid.max_context, mid.batch, mid.adapters) == (8192, 6, 38)
    assert (big.max_context, big.batch, big.adapters) == (131072, 35, 222)
    assert not big.capped_batch and not big.capped_adapters


def test_planner_settings_bad_input(tmp_path):
    p = tmp_path / "memory_planner.yaml"
    p.write_text("contexts: [4096]\ncache_types: [f16, q9]\ngpu_sizes_gb: [8]\n")
    with pytest.raises(ConfigError) as e:
        mem.load_planner_settings(p)
    assert "cache_types.1" in str(e.value) and "q9" in str(e.value)
    p.write_text("contexts: []\ncache_types: [f16]\ngpu_sizes_gb: [8]\n")
    with pytest.raises(ConfigError, match="contexts"):
        mem.load_planner_settings(p)
    p.write_text(
        "contexts: [1]\ncache_types: [f16]\ngpu_sizes_gb: [8]\nlora_targets: {x: [q, zz]}\n"
    )
    with pytest.raises(ConfigError, match="lora_targets.x"):
        mem.load_planner_settings(p)
    p.write_text(
        "contexts: [1]\ncache_types: [f16]\ngpu_sizes_gb: [8]\nsweet_spot: {adapter_targets: [q, zz]}\n"
    )
    with pytest.raises(ConfigError, match="sweet_spot.adapter_targets"):
        mem.load_planner_settings(p)
    p.write_text(
        "contexts: [1]\ncache_types: [f16]\ngpu_sizes_gb: [8]\nsweet_spot: {cache_type: q9}\n"
    )
    with pytest.raises(ConfigError, match="sweet_spot.cache_type"):
        mem.load_planner_settings(p)


def test_committed_planner_settings_load():
    from pathlib import Path

    s = mem.load_planner_settings(
        Path(__file__).resolve().parents[1] / "data" / "memory_planner.yaml"
    )
    assert [c.bytes for c in s.cards][:5] == [
        g * 2**30 for g in (8, 12, 16, 24, 40)
    ]  # cards sold in GB are GiB of chips
    by_name = {c.name: c.bytes for c in s.cards}
    assert (
        by_name["H100 80GB HBM3"] == 85520809984
    )  # the H100 80GB: what its driver reports usable
    assert (
        by_name["H200 141GB HBM3e"] == 150754820096
    )  # the lent H200's, from its fingerprint


def test_vram_prediction_residual():
    d = run_record(
        test=rate_test(n_gen=16),
        metrics={"tokens_per_second": [400.0, 410.0]},
        effective={
            "n_ctx": 256,
            "n_ubatch": 16,
            "n_gpu_layers": 19,
            "n_layers_total": 19,
        },
        resources={"peak_vram_bytes": 900 * MiB},
    )
    p = mem.vram_prediction(RunRecord(d), runtime_overhead=0)
    assert p["residual"] == 900 * MiB - p["predicted"]
    assert (
        p["plan"].components["weights"]
        == mem.ModelShape.from_facts(GEMMA_FACTS).weight_bytes
    )  # tied: duplicated
    overhead, n = mem.gpu_overhead_from_runs([d])
    assert (overhead, n) == (p["residual"], 1)


def test_speculative_runs_keep_logits_for_every_token():
    from tests.support.planning_fixtures import CHAT_SHORT, STAGES_A, chat_requests

    d = run_record(
        test=CHAT_SHORT,
        metrics={"decode_tps": [10.0, 11.0]},
        settings=requested(speculative="prompt_lookup", draft_max=16),
        effective={"logits_all": True},
        samples={
            "requests": chat_requests([STAGES_A], prompt_tokens=19, output_tokens=64)
        },
        resources={"peak_rss_bytes": 480 * MiB},
    )
    c = mem.run_prediction(RunRecord(d))["plan"].components
    row = 4 * 262144  # one row of float logits
    assert (
        c["output buffer"] == row * 19
    )  # the prompt batch's outputs (> 16 + 1 drafted)
    assert c["logits kept per token (llama-cpp-python)"] == row * (19 + 64 + 17)
    plain = run_record(
        test=CHAT_SHORT,
        metrics={"decode_tps": [10.0, 11.0]},
        samples={
            "requests": chat_requests([STAGES_A], prompt_tokens=19, output_tokens=64)
        },
        resources={"peak_rss_bytes": 400 * MiB},
    )
    c = mem.run_prediction(plain)["plan"].components
    assert (
        c["output buffer"] == row
        and "logits kept per token (llama-cpp-python)" not in c
    )


def test_plan_text_warns_beyond_the_training_context(gemma):
    s = mem.PlannerSettings(
        contexts=[4096, 131072], cache_types=["f16"], gpu_sizes_gb=[8]
    )
    text = mem.plan_text(gemma, s)
    line = next(x for x in text.splitlines() if x.strip().startswith("131072"))
    assert "beyond the training context (32,768)" in line


def test_draft_model_and_logits_rows_are_in_the_plan(gemma):
    """A draft model adds its own plan; logits for every token add the compute buffer's logits rows."""
    plain = mem.cpu_plan(gemma, 1024, max_batch=130)
    lookup = mem.cpu_plan(gemma, 1024, max_batch=130, n_outputs=130, logits_rows=170)
    row = 4 * gemma.n_vocab
    assert (
        lookup.components["compute, touched (est.)"]
        >= 130 * row
        > plain.components["compute, touched (est.)"]
    )
    assert lookup.components["output buffer"] == 130 * row
    assert lookup.components["logits kept per token (llama-cpp-python)"] == 170 * row
    draft = mem.cpu_plan(gemma, 1024, max_batch=130, draft=gemma)
    alone = mem.cpu_plan(gemma, 1024, max_batch=130)
    assert draft.total == 2 * alone.total
    assert draft.components["draft model: weights (mapped)"] == gemma.weight_bytes


def test_draft_run_prediction_needs_the_drafts_facts():
    from tests.support.planning_fixtures import (
        GEMMA_FACTS,
        GEMMA_SHA,
        rate_test,
        requested,
        run_record,
    )

    gen = {"kind": "generate", "name": "edit", "id": "edit", "max_tokens": 24}
    doc = run_record(
        test=gen,
        metrics={"generation_tps": [30.0, 31.0]},
        settings=requested(
            speculative="draft_model", draft_model="gemma3-270m-q4_k_m", draft_max=4
        ),
        effective={
            "speculative": "draft_model",
            "draft_model": "gemma3-270m-q4_k_m",
            "draft_model_sha256": GEMMA_SHA,
            "logits_all": True,
        },
        samples={"requests": [{"prompt_tokens": 130, "output_tokens": 24}]},
        resources={"peak_rss_bytes": 900 * MiB, "baseline_rss_bytes": 58 * MiB},
    )
    other = run_record(
        test=rate_test(n_gen=4), metrics={"tokens_per_second": [40.0, 41.0]}
    )
    blind = mem.run_prediction(RunRecord(doc))
    seen = mem.run_prediction(RunRecord(doc), mem.facts_by_sha([RunRecord(other)]))
    assert blind["incomplete"] and not seen["incomplete"]
    assert (
        seen["predicted"]
        > blind["predicted"] + mem.ModelShape.from_facts(GEMMA_FACTS).weight_bytes - 1
    )
    assert seen["run_type"] == "generate + draft model"
