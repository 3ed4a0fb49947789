"""Issue 33, seed 002's "Context Length vs Throughput" (Context | KV Cache | Batch Size | Throughput):
rate tests of parallel sequences (``tg16@d1008x8``), the room rule (one line, the sweep goes on), a
real parallel decode on the synthetic tiny Llama, and the table from the committed artifacts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from core.kinds.rate import RateTest
from runtime.backends.llama_cpp.backend import LlamaCppBackend
from runtime.backends.llama_cpp.config import LlamaCppSettings
from tests.conftest import ROOT, write_matrix

HOST = "vm-d4bbc016"  # the 2-core host the committed rows were measured on (issue 33)


@pytest.mark.fast
def test_parallel_rate_test_names_and_identity():
    t = RateTest.parse("tg16@d1008x8")
    assert (t.n_gen, t.n_depth, t.n_seq) == (16, 1008, 8)
    assert t.name == "tg16@d1008x8" and RateTest.parse("tg16x4").name == "tg16x4"
    # one sequence: stored as before (the runs measured before parallel sequences keep their key)
    assert "n_seq" not in RateTest.parse("tg16@d512").to_dict()
    assert t.to_dict()["n_seq"] == 8
    with pytest.raises(ValueError, match="generation"):
        RateTest.parse("pp64x2")
    assert "n_seq_max" not in LlamaCppSettings().recorded()


@pytest.mark.fast
def test_a_batch_beyond_the_context_cannot_be_honoured():
    model = SimpleNamespace(facts={"context_length": 32768})
    s = lambda **kw: LlamaCppSettings(n_ctx=8192, **kw)  # noqa: E731
    ok = LlamaCppBackend.cannot_honour(
        s(n_seq_max=8), model, RateTest.parse("tg16@d1008x8")
    )
    assert ok is None
    refused = LlamaCppBackend.cannot_honour(
        s(n_seq_max=16), model, RateTest.parse("tg16@d1008x16")
    )
    assert refused is not None
    setting, why = refused
    assert setting == "n_seq_max=16"
    assert "512 tokens each, fewer than the 1,024" in why
    refused = LlamaCppBackend.cannot_honour(
        s(n_seq_max=2), model, RateTest.parse("tg16@d1008x8")
    )
    assert refused is not None
    setting, why = refused
    assert setting == "n_seq_max=2" and "decodes 8 sequences at once" in why


@pytest.mark.integration
def test_real_parallel_decode_and_the_room_line(data_env):
    """The real runner on the synthetic tiny Llama: 4 sequences decoded together, each with its own
    depth (prefilled once, restored), and a batch that has no room: one line, nothing measured."""
    write_matrix(
        data_env,
        "par",
        "schema_version: 1\nname: par\nbackend: llama_cpp\nmodels: [synthetic-tiny-llama-ctx512-q8_0]\n"
        "repetitions: 2\nsettings: {extra_bufts: false, n_threads: 1, n_ctx: 1024}\n"
        "sweeps:\n  - name: par\n    sweep: {n_seq_max: [4, 8]}\n    tests: [tg8@d200x4]\n",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "par"],
        cwd=ROOT,
        env=dict(os.environ, ALMANAC_DATA=str(data_env)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "cannot be honoured" in ln]
    assert line.startswith(
        "matrix par: setting n_seq_max=8 (tg8@d200x4) cannot be honoured"
    )
    (art,) = list((data_env / "runs").rglob("tg8_at_d200x4--*.json"))
    d = json.loads(art.read_text())
    assert d["test"]["n_seq"] == 4 and d["settings"]["effective"]["n_seq_max"] == 4
    assert d["details"]["depth_prefills"] == 1 and d["details"]["depth_restores"] >= 1
    assert "4 sequences decoded together" in d["details"]["method"]
    assert all(v > 0 for v in d["samples"]["ts"])


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


@pytest.mark.fast
def test_context_table_from_the_committed_runs(runs):
    from pipelines import context_batch as cb
    from pipelines.site import context_batch as page

    rows = cb.tables(runs)[(HOST, "gemma3-270m-q4_k_m")]
    assert [(r.context, r.batch) for r in rows] == [
        (512, 16),
        (1024, 8),
        (2048, 4),
        (4096, 2),
        (8192, 1),
    ]
    assert all(r.batch == r.largest_batch for r in rows)
    assert all(r.kv_bytes and r.figure is not None for r in rows)
    md = "\n".join(page.context_section(runs))
    assert "## Context length against throughput" in md
    assert md.count("the largest that fits") == 5
    assert all(f"runs/run.md?id={r.run.id}" in md for r in rows)
