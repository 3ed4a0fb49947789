"""The four planning pages render from fixture artifacts: every figure labelled, every
artifact string escaped, and a page says what is missing instead of failing."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from pipelines import projections, roofline
from pipelines.runs import load_runs
from pipelines.site import memory_page, projections_page, roofline_page, whatif_page
from tests.support.planning_fixtures import embedded_dataset, write_dataset

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("optimizations.yaml", "usage_mix.yaml", "whatif.yaml", "memory_planner.yaml")


@pytest.fixture
def fixture_data(data_env):
    for name in INPUTS:
        shutil.copy(ROOT / "data" / name, data_env / name)
    ds = embedded_dataset()
    evil = copy.deepcopy(ds["runs"][1].doc)
    evil["model"]["name"] = "<script>alert(1)</script>|*x*"
    evil["id"] = "e" * 12 + "-20260101T000500Z"
    evil["key"] = "e" * 64
    ds["runs"].append(evil)
    write_dataset(data_env, ds)
    projections.write_records(load_runs())
    return data_env


def test_projections_page(fixture_data):
    md = projections_page.projections_page(load_runs(), projections.load_records())
    assert (
        "**Last updated:** 2026-01-02T00:00:00\\+00:00" in md
    )  # the newest input artifact, escaped
    assert "VERIFIED" in md and "PROJECTED" in md and "measured" in md
    # the long-context role's q8_0 cache projection is verified by the fixture run and shows its error
    q8 = next(
        d
        for d in load_runs()
        if d["test"]["name"] == "tg128@d4096"
        and d["settings"]["requested"]["type_k"] == "q8_0"
    )
    assert f"runs/run.md?id={q8['id']}" in md and "error +" in md
    # never-applicable entries say why
    assert "needs at least 39 GB" in md and "GPU only" in md
    assert (
        "no effect: acts on a stage outside" in md
    )  # the prefix cache on a decode rate
    assert "### Projection accuracy over time" in md and "at projection" in md
    # every baseline is the fact layer's figure, marked with its group and metric for the consistency check
    from pipelines import facts

    fx = facts.of(load_runs())
    tg = next(
        d
        for d in load_runs()
        if d["test"]["name"] == "tg128" and d["model"]["name"] == "gemma3-270m-q4_k_m"
    )
    fig = fx.figure_of(tg["id"], "tokens_per_second")
    assert f'data-fact="{fig.key}" data-v="{fig.mean!r}"' in md
    assert "measured (all roles checked)" not in md and "all 3 roles (" in md


def test_memory_page(fixture_data):
    md = memory_page.memory_page(load_runs(), roofline.load_hosts())
    assert (
        "### What fits where" in md and "27.0 MiB" in md
    )  # gemma3 KV at 4096, f16, window cache
    assert "72.0 MiB" in md  # the same with swa_full
    assert (
        "3 of 3" in md and "within 10%" in md
    )  # two fixture runs and the hostile copy
    assert "<script>" not in md


def test_roofline_page(fixture_data):
    md = roofline_page.roofline_page(load_runs(), roofline.load_hosts())
    assert "Host memory bandwidth" in md and "19.20" in md and "25.00" in md
    assert (
        "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in md
    )  # the hostile model name, escaped
    assert "<script>alert" not in md
    assert "efficiency" in md and "PROJECTED" in md


def test_whatif_page(fixture_data):
    md = whatif_page.whatif_page(load_runs())
    assert "## Mix warm-chat-server" in md and "700.0 ms" in md
    assert "decode \\(generation\\) | 600.00 | 85.7%" in md
    # one cold start per request adds the measured load (0.5 s) to a 700 ms request
    assert "1,200.0 ms" in md
    # each entry names the configuration it reads and its load time, the fact layer's figure
    from pipelines import facts

    chat = next(d for d in load_runs() if d["test"]["name"] == "chat-short")
    assert "model load \\(s\\)" in md or "model load (s)" in md
    assert (
        f'data-fact="{facts.of(load_runs()).figure_of(chat["id"], "load_time_s").key}"'
        in md
    )


def test_pages_say_what_is_missing(data_env):
    for name in INPUTS:
        shutil.copy(ROOT / "data" / name, data_env / name)
    assert "No baselines measured yet" in projections_page.projections_page([], [])
    assert "No models measured yet" in memory_page.memory_page([], [])
    assert "No host probe yet" in roofline_page.roofline_page([], [])
    assert "No measurement for this mix" in whatif_page.whatif_page([])
    (data_env / "usage_mix.yaml").write_text("roles: []\n")
    assert "Inputs missing or invalid" in projections_page.projections_page([], [])
