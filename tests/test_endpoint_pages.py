"""Endpoint models on the pages: shown and grouped without a file name, hash or GGUF facts.

The artifacts are real (tests/fixtures/make_endpoint_fixtures.py: llama-server on loopback
serving the embedded model, declared by URL and served name), beside the golden ones; one copy
carries hostile strings in every field of an endpoint model's record.
"""

from __future__ import annotations

import re
import shutil

import pytest

from core.records.run import RunRecord
from pipelines import host_boards, index, roofline, serving
from pipelines.runs import load_runs
from pipelines.site import browser, host_boards_page, memory_page, roofline_page
from pipelines.site import serving as serving_pages
from tests.conftest import FIXTURES, GOLDEN, build_site, make_golden_data

ENDPOINT = FIXTURES / "endpoint"


@pytest.fixture(scope="module")
def docs():
    return load_runs(GOLDEN / "runs") + load_runs(ENDPOINT / "runs")


def _endpoint_docs(docs):
    return [d for d in docs if RunRecord(d).is_endpoint]


def test_fixtures_are_endpoint_runs_of_every_serving_kind(docs):
    eps = _endpoint_docs(docs)
    assert {d["test"]["kind"] for d in eps} == {"chat", "serve", "concurrency"}
    for d in eps:
        r = RunRecord(d)
        assert (r.model_file_name, r.model_sha256, r.gguf, r.has_local_file) == (
            None,
            None,
            {},
            False,
        )
        assert (
            r.model_identity.startswith("endpoint:")
            and r.served_name
            and r.model_server
        )


def test_leaderboard_marks_endpoint_models_and_keeps_them_apart(docs):
    boards = host_boards.of(docs)
    ep_rows = [
        (b, r)
        for b in boards
        for r in host_boards.board_records(b)
        if r["endpoint"] and r["model"] == "served-gemma"
    ]
    assert ep_rows
    for b, r in ep_rows:
        assert (
            b.backend == "openai_http (llama-server)" and r["quantization"] == "Q4_K_M"
        )
        # never ranked against a file run: the model identity differs, so the comparability key does
        assert all(
            x["endpoint"]
            for x in host_boards.board_records(b)
            if x["model"] == r["model"]
        )
    md = host_boards_page.host_boards_page(docs)
    assert "endpoint · llama-server</span>" in md
    assert "<script>" not in md and "<img" not in md and "<b>vLLM" not in md
    assert (
        "endpoint · bvLLMbx</span>" in md
    )  # the hostile server name, reduced to plain characters


def test_serving_page_shows_endpoint_models(docs):
    rows = serving.cold_warm(docs)
    ep = [r for r in rows if r["model_server"]]
    assert ep and all(
        r["model_server"] == "llama-server" for r in ep if r["model"] == "served-gemma"
    )
    md = serving_pages.serving_page(docs)
    assert "served-gemma" in md and "endpoint · llama-server</span>" in md
    assert "<script>" not in md and "<img" not in md
    # an endpoint model has no in-process run of the same model identity: nothing to compare it with
    assert not [r for r in serving.comparisons(docs) if r["model"] == "served-gemma"]


def test_memory_planner_lists_endpoint_models_as_not_planned(docs):
    md = memory_page.memory_page(docs, [])
    assert "## Endpoint models" in md
    line = next(
        ln for ln in md.splitlines() if "served-gemma" in ln and "not planned" in ln
    )
    assert "almanac-served at http://127.0.0.1:" in line and "llama-server" in line
    assert "no local file: not planned" in line
    assert "<script>" not in md and "<img" not in md
    # the file models are planned as before
    assert "## gemma3-270m-q4\\_k\\_m" in md


def test_roofline_skips_endpoint_runs_with_the_reason(docs):
    rows = [r for r in roofline.roofline_rows(docs, []) if r["model"] == "served-gemma"]
    assert rows and all(
        r["bytes"] is None
        and "no local file, so no weight bytes per token: skipped" in r["note"]
        for r in rows
    )
    md = roofline_page.roofline_page(docs, [])
    assert (
        "no local file, so no weight bytes per token: skipped" in md
        and "<script>" not in md
    )


def test_runs_browser_says_where_an_endpoint_model_was_served(docs):
    rows = browser.index_rows(
        "run", index.rows_of([dict(d, _data_path="x.json") for d in docs])
    )
    ep = [r for r in rows if r["model"] == "served-gemma"]
    assert ep and all(
        re.search(
            r" · almanac-served at http://127\.0\.0\.1:\d+/v1 \(llama-server\)$",
            r["title"],
        )
        for r in ep
    )
    script = browser.index_script("run", browser.index_data("run", rows))
    assert "<script>" not in script and "<img" not in script and "\\u003cimg" in script


def test_site_builds_strict_with_endpoint_models(tmp_path):
    data = make_golden_data(tmp_path / "data")
    shutil.copytree(ENDPOINT / "runs", data / "runs", dirs_exist_ok=True)
    out = tmp_path / "site"
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for page in ("leaderboard", "serving", "memory", "roofline"):
        text = (out / page / "index.html").read_text()
        assert "served-gemma" in text, page
        assert "<script>alert" not in text and "<img src=x" not in text, page
    assert "endpoint · llama-server" in (out / "leaderboard" / "index.html").read_text()
    assert "no local file: not planned" in (out / "memory" / "index.html").read_text()
    for src in (ENDPOINT / "runs").rglob(
        "*.json"
    ):  # every endpoint artifact is published beside the pages
        assert (out / "data" / "runs" / src.relative_to(ENDPOINT / "runs")).is_file(), (
            src.name
        )
