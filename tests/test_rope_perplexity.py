"""Issue 33, seed 002's long context by RoPE scaling: the embedded model's perplexity with linear and
YaRN scaling at 2x, 4x and 8x its trained context, scored in short windows of the scaled context,
beside its own RoPE on the same windows (runtime.quality.perplexity, pipelines.perplexity)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError

EMBEDDED = "gemma3-270m-q4_k_m"


@pytest.mark.fast
def test_a_factor_that_scales_nothing_is_one_line():
    from runtime.quality import perplexity

    with pytest.raises(ConfigError, match="a factor of 2 or more"):
        perplexity.measure(EMBEDDED, rope_scaling="yarn", rope_factor=1)
    with pytest.raises(ConfigError, match="linear or yarn"):
        perplexity.measure(EMBEDDED, rope_scaling="ntk", rope_factor=2)


@pytest.fixture(scope="module")
def ppl():
    from pipelines.perplexity import load_perplexity

    return load_perplexity()


@pytest.mark.fast
def test_scaled_perplexity_from_the_committed_runs(ppl):
    from pipelines.perplexity import ladder_frame, rope_perplexity
    from pipelines.site.rope import perplexity_cell

    got = rope_perplexity(ppl, EMBEDDED)
    want = {("none", 1)} | {(s, f) for s in ("linear", "yarn") for f in (2, 4, 8)}
    assert want <= set(got)
    own = got[("none", 1)]
    for key in want - {("none", 1)}:
        d = got[key]
        assert d.context_allocated == 32768 * key[1] and d.n_ctx == 512
        assert (
            d.text.name == own.text.name and d.n_chunk == own.n_chunk
        )  # the same windows
    cell = perplexity_cell(got, "yarn", 8.0, [])
    assert "262,144-token context" in cell and "own RoPE, same windows" in cell
    assert f"perplexity-runs/run.md?id={got[('yarn', 8)].id}" in cell
    # the quantization ladder never reads a scaled run
    frame = ladder_frame(ppl, [], [])
    scaled = {d.id for k, d in got.items() if k[0] != "none"}
    assert not scaled & {str(v) for v in frame.to_numpy().ravel()}
