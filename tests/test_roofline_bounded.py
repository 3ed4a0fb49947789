"""Issue 34 item 2: no page computation proportional to a reported value. The roofline kept one
list item per decoded token (a run reporting 10^7 tokens raised the site build's peak memory from
173 MB to 1.3 GB, 10^9 ended it in MemoryError); the depths are now ranges and the KV bytes a
closed-form sum, equal to the per-token sum it replaces."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from pipelines import memory as M
from pipelines import roofline as R
from tests.test_roofline import GEMMA_FACTS, MOE_FACTS


@pytest.fixture(scope="module")
def gemma():
    return M.ModelShape.from_facts(GEMMA_FACTS, "gemma")


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("n_ctx", [None, 100, 700, 2000, 5000])
def test_closed_form_equals_the_per_token_sum(gemma, flash, n_ctx):
    cache = M.kv_cache(gemma, n_ctx, "f16", "f16") if n_ctx else None
    rows = M.kv_rows(gemma, "f16", "f16")
    rnd = random.Random(n_ctx or 0)
    for _ in range(60):
        a = rnd.randint(0, 6000)
        b = a + rnd.randint(0, 1200)
        want = sum(
            M.kv_read_bytes(gemma, d, flash_attn=flash, cache=cache, rows=rows)
            for d in range(a, b)
        )
        assert (
            M.kv_read_bytes_sum(gemma, a, b, flash_attn=flash, cache=cache, rows=rows)
            == want
        )


@pytest.mark.parametrize("cap", [0, 1, 255, 256, 257, 511, 512, 1000, None])
def test_padded_sums_against_brute_force(cap):
    for lo, hi in [(1, 1), (1, 256), (255, 257), (3, 2000), (600, 601), (10, 9)]:
        want = sum(
            min(M.pad(x), cap) if cap is not None else M.pad(x)
            for x in range(lo, hi + 1)
        )
        assert M._sum_min_pad(lo, hi, cap) == want, (lo, hi, cap)


def test_depths_join_runs_and_say_count_mean_min():
    d = R.Depths.of([3, 4, 5, 9, 10])
    assert d.ranges == ((3, 6), (9, 11))
    assert (d.count, d.min, d.mean) == (5, 3, 31 / 5)
    assert R.Depths.of([range(20, 24), range(5, 5)]).ranges == ((20, 24),)
    assert not R.Depths.of([])


def test_a_billion_tokens_costs_what_ten_do(gemma):
    moe = M.ModelShape.from_facts(MOE_FACTS, "moe")
    tracemalloc.start()
    try:
        for shape in (gemma, moe):
            for flash in (True, False):
                b = R.bytes_per_token(
                    shape, R.Depths.of([range(10**9, 2 * 10**9)]), flash_attn=flash
                )
                assert b["kv"] > 0 and b["total"] == b["weights"] + b["kv"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # bytes: a list of 10^9 depths would be 8 GB
    small = R.bytes_per_token(gemma, list(range(16)))
    assert small == R.bytes_per_token(gemma, R.Depths.of([range(16)]))


def test_a_server_reporting_a_billion_output_tokens_is_one_range_per_request():
    """A chat run whose server reported usage.completion_tokens 10^9: the decode point holds one
    range per request (whether such an answer is plausible is the validity checks' to say)."""
    import json

    from core.records.run import as_record
    from tests.conftest import FIXTURES

    chat = (
        FIXTURES
        / "data/runs/golden-host-55ecea05/gemma3-270m-q4-k-m/chat-tiny--427a7b745acf4dd1-20261126T023449Z.json"
    )
    doc = json.loads(chat.read_text())
    for r in doc["samples"]["requests"]:
        r["output_tokens"] = 10**9
    tracemalloc.start()
    try:
        point = R.decode_point(as_record(doc))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    n = len(doc["samples"]["requests"])
    assert point is not None and len(point["depths"].ranges) <= n
    assert point["depths"].count == n * (10**9 - 1)
    assert peak < 2 << 20
