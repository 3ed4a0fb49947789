"""Rendering from golden artifacts: tables, links to sources, escaping, and the strict build."""

from __future__ import annotations

import html
import re

import pytest

from pipelines import leaderboard
from pipelines.runs import load_runs
from pipelines.site import charts, markdown, pages
from runtime.metrics import METRICS
from tests.conftest import GOLDEN


@pytest.fixture(scope="module")
def docs():
    return load_runs(GOLDEN / "runs")


def test_boards_rank_best_first_and_show_varying_settings(docs):
    boards = {(b.host_id, b.test): b for b in leaderboard.boards(docs)}
    tg = boards[("golden-host-94ba7631", "tg16")]
    means = list(tg.rows["s_mean"])
    assert means == sorted(means, reverse=True) and len(means) == 2
    assert tg.varying == ["n_threads", "n_threads_batch"]  # effective settings: the batch threads follow n_threads
    chat = boards[("golden-host-94ba7631", "chat-tiny")]
    assert chat.metric.name == "ttft_ms"
    assert list(chat.rows["s_mean"]) == sorted(chat.rows["s_mean"])  # lower is better
    failed_ids = {d["id"] for d in docs if d["status"] == "failed"}
    assert failed_ids and not failed_ids & {r for b in boards.values() for r in b.rows["id"]}


def _current(docs):
    """Rate results a board shows: the newest of each comparability key (the hostile copy is a
    newer copy of one measurement of the same model file, so it supersedes that one)."""
    return {d["id"] for d in leaderboard.newest_per_comparability([d for d in docs if d["status"] == "ok"])}


def test_leaderboard_figures_link_to_their_artifacts(docs):
    md = pages.leaderboard_page(docs)
    current = _current(docs)
    assert len(current) < len([d for d in docs if d["status"] == "ok"])  # the superseded copy is not shown
    for d in docs:
        if d["status"] != "ok" or d["test"]["kind"] != "rate" or d["id"] not in current:
            assert d["status"] != "ok" or d["test"]["kind"] != "rate" or f"runs/{d['id']}.md" not in md
            continue
        mean = markdown.num(d["summary"]["tokens_per_second"]["mean"], METRICS["tokens_per_second"].decimals)
        assert f"[{markdown.cell(mean)}](runs/{d['id']}.md)" in md


def test_hostile_strings_are_escaped(docs):
    evil = next(d for d in docs if d["key"] == "e" * 64)
    for text in (pages.leaderboard_page(docs), pages.run_page(evil), pages.runs_index(docs), pages.home(docs)):
        assert "<script>" not in text and "<img" not in text
    page = pages.run_page(evil)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the log tail, shown escaped in <pre>
    assert "</pre><script>" not in page


def test_chart_embed_cannot_break_out():
    import pandas as pd

    df = pd.DataFrame({"label": ["</script><script>alert(1)</script>"], "mean": [1.0], "stddev": [0.1], "n": [3],
                       "ci95_low": [0.8], "ci95_high": [1.2], "id": ["x"]})
    out = charts.embed(charts.dots_with_ci(df, METRICS["tokens_per_second"]))
    assert out.count("</script>") == 1 and "alert(1)" in out and "<script>alert" not in out


def test_cell_neutralises_markdown_and_html():
    assert markdown.cell("a|b*c*_d_[e](f)<g>") == "a\\|b\\*c\\*\\_d\\_\\[e\\]\\(f\\)&lt;g&gt;"
    assert markdown.cell(None) == "—"


def test_methodology_lists_every_metric_and_setting():
    defs = pages.metric_definitions()
    for name in METRICS:
        assert f"<code>{name}</code>" in defs
    from runtime.backends.llama_cpp.config import LlamaCppSettings

    table = pages.settings_table("llama_cpp")
    for name, f in LlamaCppSettings.model_fields.items():
        assert f"<code>{name}</code>" in table and f.description


def test_built_site_shows_figures_with_sources(built_site, docs):
    lb = (built_site / "leaderboard" / "index.html").read_text()
    shown = 0
    current = _current(docs)
    for d in docs:
        if d["status"] != "ok" or d["test"]["kind"] != "rate" or d["id"] not in current:
            continue
        mean = markdown.num(d["summary"]["tokens_per_second"]["mean"], 2)
        assert re.search(rf'<a href="\.\./runs/{re.escape(d["id"])}/">{re.escape(mean)}</a>', lb), (d["id"], mean)
        assert (built_site / "runs" / d["id"] / "index.html").exists()
        shown += 1
    assert shown >= 3
    assert 'class="almanac-chart"' in lb
    assert "<script>alert" not in lb and "<img src=x" not in lb
    home = (built_site / "index.html").read_text()
    newest = max(d["created"] for d in docs)
    assert html.escape(newest) in home or newest in home


def test_site_is_self_contained(built_site):
    bundle = built_site / "assets" / "js" / "vega-bundle.js"
    assert bundle.stat().st_size > 500_000
    for page in built_site.rglob("*.html"):
        text = page.read_text()
        for src in re.findall(r'<script[^>]+src="([^"]+)"', text):
            assert not src.startswith(("http:", "https:", "//")), (page, src)
