"""Issue 33, seed 001's "Retrieval Stack" (Index | Model | Params | Dim | Quantization | Index Size |
Benchmark): the embed kind (a committed corpus embedded in llama.cpp embedding mode, an exact index
built from it), the rule for a setting a backend cannot honour, a real run of the embedded model,
and the table from the committed artifacts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from core.kinds.embed import QUALITY_NOTE, EmbedTest
from core.kinds.rate import RateTest
from core.texts import passages
from runtime.backends.llama_cpp.backend import LlamaCppBackend
from runtime.backends.llama_cpp.config import LlamaCppSettings
from tests.conftest import ROOT, write_matrix

HOST = "vm-d4bbc016"  # the 2-core host the committed rows were measured on (issue 33)


@pytest.mark.fast
def test_passages_and_identity():
    text = "One  two\nthree.\n\n\n  \n\nFour five.\n\nSix."
    assert passages(text, 10) == ["One two three.", "Four five.", "Six."]
    assert passages(text, 2) == ["One two three.", "Four five."]
    t = EmbedTest(id="e", max_passages=8)
    assert t.name == "e" and t.to_dict()["corpus"] == "gpl-3.0"
    assert "embedding" not in LlamaCppSettings().recorded()  # older runs keep their key


@pytest.mark.fast
def test_embedding_mode_and_generation_do_not_mix():
    model = SimpleNamespace(facts={})
    embed, tg = EmbedTest(), RateTest.parse("tg8")
    assert (
        LlamaCppBackend.cannot_honour(LlamaCppSettings(embedding=True), model, embed)
        is None
    )
    assert LlamaCppBackend.cannot_honour(LlamaCppSettings(), model, tg) is None
    refused = LlamaCppBackend.cannot_honour(LlamaCppSettings(), model, embed)
    assert refused is not None and refused[0] == "embedding=false"
    assert "embedding mode (embedding: true)" in refused[1]
    refused = LlamaCppBackend.cannot_honour(LlamaCppSettings(embedding=True), model, tg)
    assert refused is not None and refused[0] == "embedding=true"
    assert "no logits" in refused[1]


@pytest.mark.e2e
@pytest.mark.model
def test_real_embedding_run_of_the_embedded_model(data_env):
    """The real runner: the embedded model embeds 3 passages of the committed corpus, the index is
    built and every passage finds itself; a generating test in the same matrix is one line."""
    (data_env / "texts").mkdir()
    for f in ("texts.yaml", "gpl-3.0.txt"):
        (data_env / "texts" / f).write_bytes((ROOT / "data" / "texts" / f).read_bytes())
    write_matrix(
        data_env,
        "emb",
        "schema_version: 1\nname: emb\nbackend: llama_cpp\nmodels: [gemma3-270m-q4_k_m]\n"
        "repetitions: 1\nsettings: {extra_bufts: false, embedding: true, n_ctx: 1024, n_batch: 1024, "
        "n_ubatch: 1024}\ntests:\n  - {kind: embed, id: e3, max_passages: 3, batch: 3}\n  - tg4\n",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "emb"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "cannot be honoured" in ln]
    assert line.startswith(
        "matrix emb: setting embedding=true (tg4) cannot be honoured"
    )
    (art,) = list((data_env / "runs").rglob("e3--*.json"))
    d = json.loads(art.read_text())
    det = d["details"]
    assert det["passages"] == 3 and det["dim"] == 640 and det["self_retrieval"] == 1.0
    assert det["quality"] == QUALITY_NOTE
    assert d["samples"]["index_bytes"] == [3 * 640 * 4]
    assert d["summary"]["embeddings_per_second"]["mean"] > 0


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


@pytest.mark.fast
def test_retrieval_table_from_the_committed_runs(runs):
    from pipelines import retrieval
    from pipelines.site import retrieval as page

    rows = retrieval.rows(runs)[HOST]
    assert {r.run.model_name for r in rows} == {
        "gemma3-270m-q4_k_m",
        "gemma3-270m-q3_k_m",
    }
    for r in rows:
        assert r.details.dim == 640 and r.details.passages == 24
        assert r.index_bytes == 24 * 640 * 4
        assert r.rate is not None and r.build is not None
    md = page.retrieval_section(runs)
    assert f"### Retrieval stack on <code>{HOST}</code>" in md
    assert md.count("not measurable here") >= len(rows)
    assert all(f"runs/run.md?id={r.run.id}" in md for r in rows)
