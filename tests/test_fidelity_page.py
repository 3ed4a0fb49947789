"""The Methodology page's Fidelity section is rendered from the committed fidelity results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import stats
from pipelines.site import fidelity as F
from pipelines.site.markdown import num

ROOT = Path(__file__).resolve().parents[1]


def test_every_committed_comparison_is_a_row_with_its_files_values():
    rows = F.fidelity_rows()
    cpu = sorted((ROOT / "benchmarks/results/cpu").glob("fidelity*.json"))
    gpu = sorted((ROOT / "benchmarks/results").glob("gpu-*/fidelity.json"))
    expected = sum(len(json.loads(p.read_text())["tests"]) for p in cpu) + sum(
        len(json.loads(p.read_text())["rows"]) for p in gpu
    )
    assert len(rows) == expected and expected > 0
    doc = json.loads(cpu[0].read_text())
    test, t = sorted(doc["tests"].items())[0]
    row = next(
        r for r in rows if r["file"].endswith(cpu[0].name) and r["test_name"] == test
    )
    assert (
        row["ratio"] == t["vs_llama_bench"]["ours"]["ratio"]
        and row["verdict"] == t["vs_llama_bench"]["ours"]["verdict"]
    )
    if gpu:
        g = json.loads(gpu[0].read_text())["rows"][0]
        grow = next(
            r
            for r in rows
            if r["file"].endswith(str(gpu[0].relative_to(ROOT)))
            and r["test_name"] == g["test"]
            and r["model"] == g["model"]
        )
        s = stats.summarize(g["ratio_per_round"])
        assert (grow["ci95_low"], grow["ci95_high"]) == pytest.approx(
            (s["ci95_low"], s["ci95_high"])
        )
        assert grow["verdict"] == (
            "win"
            if s["ci95_low"] > 1
            else "loss"
            if s["ci95_high"] < 1
            else "within noise"
        )


def test_section_shows_ratios_and_sources(tmp_path):
    md = F.fidelity_section()
    for r in F.fidelity_rows():
        assert num(r["ratio"], 3) in md and r["file"] in md
    assert "No committed fidelity results" in F.fidelity_section(tmp_path)
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "fidelity-x.json").write_text(
        json.dumps(
            {
                "host": {"id": "h<b>"},
                "model": {"name": "m"},
                "settings": {"fa": "on"},
                "tests": {},
            }
        )
    )
    assert "No committed" in F.fidelity_section(tmp_path)
