"""Issue 33, seed 003's request batching per workload type: the tokenize kind (one text a request
against a list a request), the rule for a server without a batch /tokenize, and the table from the
committed artifacts (the generation row the plan from the measured per-request overhead)."""

from __future__ import annotations

import pytest

from core.kinds.tokenize import TokenizeSamples, TokenizeTest
from core.kinds.tokenize import _values as tokenize_values
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.backends.openai_http.config import OpenAIHttpSettings

HOST = "vm-d4bbc016"  # the 2-core host the committed rows were measured on (issue 33)


@pytest.mark.fast
def test_rounds_give_the_speedup_and_another_server_is_one_line():
    s = TokenizeSamples.model_validate(
        {
            "rounds": [
                {"one_by_one_s": 2.0, "batched_s": 0.5},
                {"one_by_one_s": 3.0, "batched_s": 1.0},
            ]
        }
    )
    assert tokenize_values(s, "batching_speedup") == [4.0, 3.0]
    assert tokenize_values(s, "tokenize_batched_s") == [0.5, 1.0]
    t = TokenizeTest(id="t", requests=100, batch=10)
    assert (
        OpenAIHttpBackend.cannot_honour(
            OpenAIHttpSettings(server="llama-server"), None, t
        )
        is None
    )
    refused = OpenAIHttpBackend.cannot_honour(
        OpenAIHttpSettings(server="llama_cpp.server"), None, t
    )
    assert refused is not None and refused[0] == "server=llama_cpp.server"
    assert "a list of texts in one body" in refused[1]


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


@pytest.mark.fast
def test_batching_table_from_the_committed_runs(runs):
    from pipelines import batching
    from pipelines.site.batching import batching_section

    rows = batching.rows(runs, HOST)
    names = [r.workload for r in rows]
    assert names[0] == "50-question generation" and names[-1].startswith("mixed")
    assert "1,000 tokenize requests" in names
    assert "1,000 tokenize requests, 8 clients at once" in names
    tok = next(r for r in rows if r.workload == "1,000 tokenize requests")
    assert tok.measured and tok.speedup is not None and tok.batched_s < tok.current_s
    gen = rows[0]
    assert (
        not gen.measured and 1.0 <= gen.ratio < 1.5
    )  # generation dominates: little to gain
    md = "\n".join(batching_section(runs))
    assert f"### Request batching on <code>{HOST}</code>" in md
    assert all(f"runs/run.md?id={x.id}" in md for r in rows for x in r.runs)
