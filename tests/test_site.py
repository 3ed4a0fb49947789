"""Rendering from golden artifacts: tables, links to sources, escaping, and the strict build."""

from __future__ import annotations

import html
import re

import pytest

from core.metrics import METRICS
from core.records.run import RunRecord
from pipelines import host_boards, index
from pipelines.runs import load_runs
from pipelines.site import browser, charts, host_boards_page, markdown, methodology
from tests.conftest import GOLDEN


@pytest.fixture(scope="module")
def docs():
    return load_runs(GOLDEN / "runs")


def test_boards_rank_best_first_and_show_varying_settings(docs):
    boards = {(b.host_id, b.test): b for b in host_boards.of(docs)}
    tg = boards[("golden-host-55ecea05", "tg16")]
    means = list(tg.rows["s_mean"])
    assert means == sorted(means, reverse=True) and len(means) == 2
    assert tg.varying == [
        "n_threads",
        "n_threads_batch",
    ]  # effective settings: the batch threads follow n_threads
    chat = boards[("golden-host-55ecea05", "chat-tiny")]
    assert chat.metric.name == "ttft_ms"
    assert list(chat.rows["s_mean"]) == sorted(chat.rows["s_mean"])  # lower is better
    failed_ids = {d["id"] for d in docs if d["status"] == "failed"}
    assert failed_ids and not failed_ids & {
        r for b in boards.values() for r in b.rows["id"]
    }


def _current(docs):
    """Rate results a board shows: the newest of each comparability key (the hostile copy is a
    newer copy of one measurement of the same model file, so it supersedes that one)."""
    return {
        d["id"]
        for d in host_boards.newest_per_comparability(
            [d for d in docs if d["status"] == "ok"]
        )
    }


def test_leaderboard_figures_link_to_their_artifacts(docs):
    md = host_boards_page.host_boards_page(docs)
    current = _current(docs)
    assert len(current) < len(
        [d for d in docs if d["status"] == "ok"]
    )  # the superseded copy is not shown
    for d in docs:
        if d["status"] != "ok" or d["test"]["kind"] != "rate" or d["id"] not in current:
            assert (
                d["status"] != "ok"
                or d["test"]["kind"] != "rate"
                or f"runs/run.md?id={d['id']})" not in md
            )
            continue
        mean = markdown.num(
            d["summary"]["tokens_per_second"]["mean"],
            METRICS["tokens_per_second"].decimals,
        )
        assert f"[{markdown.cell(mean)}](runs/run.md?id={d['id']})" in md


def test_hostile_strings_are_escaped(docs):
    evil = next(d for d in docs if d["key"] == "e" * 64)
    rows = [
        dict(r, json="data/x.json")
        for r in browser.index_rows(
            "run", index.rows_of([dict(d, _data_path="x.json") for d in docs])
        )
    ]
    script = browser.index_script("run", browser.index_data("run", rows))
    from pipelines import facts
    from pipelines.site import home_page, leaderboard_page

    recs = [RunRecord(d) for d in docs]
    fx = facts.of(recs)
    for text in (
        host_boards_page.host_boards_page(recs),
        home_page.home(fx, None),
        leaderboard_page.leaderboard_page(fx),
        script,
    ):
        assert "<script>" not in text and "<img" not in text
    assert (
        evil["id"] in script and "\\u003cscript\\u003e" in script
    )  # the runs browser's index: inert JSON in a script


def test_chart_embed_cannot_break_out():
    import pandas as pd

    df = pd.DataFrame(
        {
            "label": ["</script><script>alert(1)</script>"],
            "mean": [1.0],
            "stddev": [0.1],
            "n": [3],
            "ci95_low": [0.8],
            "ci95_high": [1.2],
            "id": ["x"],
        }
    )
    out = charts.embed(charts.dots_with_ci(df, METRICS["tokens_per_second"]))
    assert (
        out.count("</script>") == 1 and "alert(1)" in out and "<script>alert" not in out
    )


def test_cell_neutralises_markdown_and_html():
    assert (
        markdown.cell("a|b*c*_d_[e](f)<g>")
        == "a\\|b\\*c\\*\\_d\\_\\[e\\]\\(f\\)&lt;g&gt;"
    )
    assert markdown.cell(None) == "—"


def test_methodology_lists_every_metric_and_setting():
    defs = methodology.metric_definitions()
    for name in METRICS:
        assert f"<code>{name}</code>" in defs
    from runtime import backends
    from runtime.backends.llama_cpp.config import LlamaCppSettings

    table = methodology.settings_table(
        backends.settings_class("llama_cpp").option_table()
    )
    for name, f in LlamaCppSettings.model_fields.items():
        assert f"<code>{name}</code>" in table and f.description


GOLDEN_HOST = "golden-host-55ecea05"


def _host_boards(site, host=GOLDEN_HOST) -> str:
    """One host's boards (the per-host detail the Leaderboard links each host to)."""
    return (site / "boards" / host / "index.html").read_text()


def test_built_site_shows_figures_with_sources(built_site, docs):
    lb = (built_site / "leaderboard" / "index.html").read_text()
    own = _host_boards(built_site)
    index = (built_site / "runs" / "index-data.js").read_text()
    shown = 0
    current = _current(docs)
    for d in docs:
        if d["status"] != "ok" or d["test"]["kind"] != "rate" or d["id"] not in current:
            continue
        mean = markdown.num(d["summary"]["tokens_per_second"]["mean"], 2)
        assert re.search(
            rf'<a href="\.\./\.\./runs/run/\?id={re.escape(d["id"])}">{re.escape(mean)}</a>',
            own,
        ), (d["id"], mean)
        # on the Leaderboard every figure is linked too (a workload's board, or the one-configuration list)
        assert re.search(
            rf'<a href="\.\./runs/run/\?id={re.escape(d["id"])}">{re.escape(mean)}</a>',
            lb,
        ), (d["id"], mean)
        assert f'"{d["id"]}"' in index  # the viewer finds it
        shown += 1
    assert shown >= 3
    assert 'class="almanac-chart"' in own
    assert (
        f'href="../boards/{GOLDEN_HOST}/"' in lb
    )  # each host's own boards one click away
    for page in (lb, own):
        assert "<script>alert" not in page and "<img src=x" not in page
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


def test_built_site_publishes_every_artifact_and_table(built_site):
    """Open data: every artifact's JSON at its data/ path, byte for byte; every table's rows as CSV
    and JSON next to it; the runs browser's list as a download."""
    import csv
    import json

    from tests.conftest import GOLDEN

    for src in GOLDEN.rglob("*.json"):
        published = built_site / "data" / src.relative_to(GOLDEN)
        assert published.read_bytes() == src.read_bytes(), published
    lb = _host_boards(built_site)
    links = re.findall(
        r'<p class="almanac-downloads">[^<]*<a href="\.\./\.\./tables/([0-9a-f]{16})\.csv" download>CSV</a>',
        lb,
    )
    assert links and len(links) == lb.count(
        "<table>"
    )  # one download per table on the page
    rows = list(csv.reader((built_site / "tables" / f"{links[0]}.csv").open()))
    as_json = json.loads((built_site / "tables" / f"{links[0]}.json").read_text())
    assert len(rows) - 1 == len(as_json) >= 1 and rows[0][1] == "model"
    # the values are the page's own (plain text, no Markdown)
    first_model = rows[1][1]
    assert first_model and "\\" not in first_model and first_model.split(" ")[0] in lb
    runs = json.loads((built_site / "runs" / "index.json").read_text())
    assert {r["id"] for r in runs} == {
        json.loads(p.read_text())["id"] for p in (GOLDEN / "runs").rglob("*.json")
    }
    for r in runs:
        assert (built_site / r["json"]).exists()


def test_search_finds_pages_not_runs(built_site, docs):
    """Per-run detail is not in the search index; a model's or a test's name finds the pages that rank it."""
    import json

    index = json.loads((built_site / "search" / "search_index.json").read_text())
    locations = [d["location"] for d in index["docs"]]
    assert not [
        loc
        for loc in locations
        if loc.startswith(("runs/run", "quality-runs/run", "perplexity-runs/run"))
    ]
    model = next(
        d["model"]["name"]
        for d in docs
        if d["status"] == "ok" and d["test"]["kind"] == "rate"
    )
    test = next(
        d["test"]["name"]
        for d in docs
        if d["status"] == "ok" and d["test"]["kind"] == "rate"
    )
    for term in (model, test):
        hits = {
            d["location"].split("#")[0]
            for d in index["docs"]
            if term in d["text"] or term in d["title"]
        }
        assert "leaderboard/" in hits, (term, sorted(hits))
        assert not [h for h in hits if h.startswith("runs/")], (term, hits)


def test_table_downloads_and_every_row():
    """Every row is on the page, never "first N of M": a long table folds, its summary counting its rows."""
    markdown.reset_tables()
    rows = [
        [markdown.link(f"m{i}", "x.md"), markdown.num(i * 1000, 0)] for i in range(5)
    ]
    md = markdown.table(["model", "value"], rows, max_rows=3)
    assert (
        md.count("](x.md)") == 5
        and "<summary>All 5 rows</summary>" in md
        and " of 5" not in md
    )
    ((digest, (headers, plain_rows)),) = markdown.table_files().items()
    assert headers == ["model", "value"] and plain_rows[4] == ["m4", "4,000"]
    assert f"tables/{digest}.csv" in md and f"tables/{digest}.json" in md
    assert markdown.table_csv(headers, plain_rows).splitlines()[1] == "m0,0"
    short = markdown.table(["model", "value"], rows[:3], max_rows=3)
    assert "<details" not in short and short.count("](x.md)") == 3


def test_every_figure_links_its_data_and_artifacts(built_site):
    """Every chart's caption offers its data, and each data row names its artifact's published JSON."""
    import json

    lb = _host_boards(built_site)
    figures = lb.count('<figure class="almanac-figure">')
    links = re.findall(
        r'<figcaption>.*?Data: <a href="\.\./\.\./tables/([0-9a-f]{16})\.csv" download>CSV</a>',
        lb,
    )
    assert figures >= 1 and len(links) == figures
    rows = json.loads((built_site / "tables" / f"{links[0]}.json").read_text())
    assert rows and all((built_site / r["artifact_json"]).is_file() for r in rows)


def test_search_text_keeps_names_drops_figures():
    """A data-heavy page is indexed by its prose and its tables' distinct names, still escaped."""
    from pipelines.site.hooks import search_text

    page = (
        '<h2 id="t">tg128 on <code>box</code></h2><p>Ranked by speed.</p><table><thead><tr><th>model</th>'
        "<th>tok/s</th><th>source</th></tr></thead><tbody>"
        '<tr><td><a href="x">m &lt;script&gt;</a></td><td>1,234.50</td><td>0a1b2c3d4e5f-20261126T010203.456Z</td></tr>'
        "<tr><td>m &lt;script&gt;</td><td>99.1 ± 2.0</td><td>q8</td></tr></tbody></table>"
        '<script type="application/json">{"values": [1, 2]}</script>'
    )
    text = search_text(page)
    assert text.startswith(
        '<h2 id="t">tg128 on <code>box</code></h2><p>Ranked by speed.</p>'
    )
    assert (
        text.count("m &lt;script&gt;") == 1 and "<script" not in text
    )  # once, and still escaped
    assert "q8" in text and "model" in text
    assert "1,234" not in text and "99.1" not in text and "20261126T" not in text


def test_tables_become_html_as_markdown_would_write_them():
    """The build hook writes what table() makes as HTML, links resolved as MkDocs resolves them;
    anything it is not sure of stays Markdown."""
    from pipelines.site.hooks import link_resolver

    md = markdown.table(
        ["model", "<code>n_gpu_layers</code>", "value"],
        [
            [
                markdown.cell("a|b <x> *y*"),
                "**3**",
                markdown.link("1.5", markdown.run_link("abc-1")),
            ]
        ],
        ["l", "l", "r"],
        downloads=False,
    )
    out = markdown.tables_to_html(
        "# T\n\n" + md + "\n", link_resolver("leaderboard.md", "leaderboard/")
    )
    assert "| " not in out and out.count("<table>") == 1
    assert "<td>a|b &lt;x&gt; *y*</td>" in out  # escaped text stays text
    assert "<td><strong>3</strong></td>" in out
    assert (
        '<td class="r"><a href="../runs/run/?id=abc-1">1.5</a></td>' in out
    )  # right: a class (almanac.css)
    assert "<th><code>n_gpu_layers</code></th>" in out
    stash: list[str] = []
    held = markdown.tables_to_html(
        md, link_resolver("leaderboard.md", "leaderboard/"), stash
    )
    assert (
        "<table>" not in held and len(stash) == 1
    )  # Markdown never reads it; put back after
    assert markdown.put_tables(f"<p>{held.strip()}</p>", stash) == stash[0]
    unsure = "| a |\n| :-- |\n| `code` |\n"  # backticks: left to Markdown
    assert markdown.tables_to_html(unsure, link_resolver("x.md", "x/")) == unsure


def test_a_page_over_its_budget_cuts_its_longest_tables_and_says_so():
    """No page over 1 MB: past the page budget the longest tables with downloads (held as HTML, or left to
    Markdown) keep their first rows and say how many are left out; a short table, a table without downloads
    and a page within its budget are left whole, and the downloads still hold every row."""
    from pipelines.site.hooks import link_resolver

    markdown.reset_tables()
    long_rows = [
        [markdown.cell(f"host-{i:04d}"), markdown.num(i, 0)] for i in range(2000)
    ]
    # a bracket in a cell leaves the table to Markdown (tables_to_html is not sure of it)
    md_rows = [[f"md-{i:04d}", f"{i} [{i}, {i + 1}]"] for i in range(2000)]
    page = "\n\n".join(
        [
            "# P",
            markdown.table(["host", "n"], long_rows, ["l", "r"]),
            markdown.table(["host", "n"], long_rows[:30], ["l", "r"]),
            markdown.table(["host", "n"], long_rows, ["l", "r"], downloads=False),
            markdown.table(["what", "n [CI95]"], md_rows, ["l", "r"]),
        ]
    )
    stash: list[str] = []
    text = markdown.tables_to_html(page, link_resolver("p.md", "p/"), stash)
    whole = list(stash)
    assert len(stash) == 3 and "md-1999" in text  # the bracketed table stayed Markdown
    size = len(text) + sum(map(len, stash))
    budget = size - len(stash[0]) // 2
    out = markdown.fit_page(text, stash, budget)
    assert len(out) + sum(map(len, stash)) <= budget
    kept = stash[0].count("<tr>") - 1
    assert markdown.MIN_SHOWN_ROWS <= kept < 2000
    assert stash[0].startswith(
        whole[0][: whole[0].index("host-0005")]
    )  # the first rows, in order
    assert f"The first {kept:,} of 2,000 rows are shown" in stash[0]
    assert (
        "host-1999" not in stash[0] and "host-1999" in stash[2]
    )  # no downloads: not cut
    assert stash[1:] == whole[1:]
    assert "md-0000" in out and "md-1999" not in out
    assert re.search(
        r"The first [\d,]+ of 2,000 rows are shown", out.split("md-0000")[1]
    )
    assert sum(len(rows) == 2000 for _, rows in markdown.table_files().values()) == 2
    again = list(whole)
    assert markdown.fit_page(text, again, 2 * size) == text and again == whole
    # charts and text alone over the budget: cutting tables would not make the page fit
    assert markdown.fit_page(text, list(whole), 1000) == text
    # so many tables that their first rows alone pass the budget: each keeps fewer rows, and the page fits
    many = "\n\n".join(
        markdown.table(["host", "n"], long_rows[:100], ["l", "r"]) for _ in range(60)
    )
    stash = []
    text = markdown.tables_to_html(many, link_resolver("p.md", "p/"), stash)
    budget = len(text) + 60 * 600  # room for a few rows each, not for ten
    out = markdown.fit_page(text, stash, budget)
    assert len(out) + sum(map(len, stash)) <= budget
    shown = [t.count("<tr>") - 1 for t in stash]
    assert all(1 <= k < markdown.MIN_SHOWN_ROWS for k in shown)


def test_a_table_placeholder_is_replaced_wherever_it_lands():
    """The build holds each table out of Markdown behind a placeholder; Markdown leaves it in a <p> of its
    own, or as it is inside raw HTML (a <details> without md_in_html) or a list item: each gets its table."""
    from tests.support.site_text import render_like_site

    t = markdown.table(["what", "n"], [["a", "1"]], downloads=False)
    page = f"# Page\n\n{t}\n\n<details><summary>raw fold</summary>\n\n{t}\n\n</details>\n\n- a list item\n{t}\n"
    out = render_like_site(page)
    assert "almanactable" not in out and out.count("<table>") == 3
    assert re.search(r"<details>\s*<summary>raw fold</summary>\s*<table>", out)
    assert re.search(r"<li>a list item</li>\s*</ul>\s*<table>", out)
    token = markdown.TABLE_TOKEN
    held = (
        f'<ul>\n<li>item\n{token}0</li>\n</ul>\n<div class="admonition '
        f'note">\n<p>{token}1</p>\n</div>\n<p>{token}12</p>'
    )
    stash = [f"<table>{i}</table>" for i in range(13)]
    assert markdown.put_tables(held, stash) == (
        '<ul>\n<li>item\n<table>0</table></li>\n</ul>\n<div class="admonition note">'
        "\n<table>1</table>\n</div>\n<table>12</table>"
    )


def test_a_fold_renders_its_markdown_and_escapes_its_title():
    """markdown.fold is the site's one fold: md_in_html renders what is inside (bold, code, lists, tables);
    the title is raw HTML, escaped as text (no backslash of cell() shows)."""
    from tests.support.site_text import render_like_site, unrendered

    body = "**Bold** and `code`.\n\n- an item\n\n" + markdown.table(
        ["a"], [["1"]], downloads=False
    )
    out = render_like_site(
        markdown.fold("q4_k_m <script>alert(1)</script> *x*", body, "note", open=True)
    )
    head = re.match(
        r'<details class="note" open="open">\n<summary>([^<]*)</summary>', out
    )
    assert (
        head and html.unescape(head.group(1)) == "q4_k_m <script>alert(1)</script> *x*"
    )  # the text as written
    assert (
        "<strong>Bold</strong>" in out
        and "<code>code</code>" in out
        and "<li>an item</li>" in out
    )
    assert "<table>" in out and "<script>" not in out and not unrendered(out)
    with pytest.raises(ValueError):
        markdown.fold("t", "b", 'note" onclick="x')


def test_prose_renders_our_code_spans_and_escapes_the_rest():
    assert markdown.prose("run `invoke host.probe` there *now* <b>") == (
        "run <code>invoke host.probe</code> there \\*now\\* &lt;b&gt;"
    )
    assert (
        markdown.prose("no span") == markdown.cell("no span")
        and markdown.prose(None) == "—"
    )
    assert markdown.prose("`<img src=x>`") == "<code>&#60;img src=x&#62;</code>"


def test_no_built_page_shows_unrendered_markdown_or_a_placeholder(built_site):
    """Every page of the golden site, read as a reader reads it: no table placeholder anywhere, and no
    Markdown left as text in the article outside code (a **pair**, a `pair`, ??? or !!!, a backslash
    escape). The home page's corpus fold holds its tables; the Agent loops page folds its notes."""
    from tests.support.site_text import unrendered

    shown = {}
    for page in sorted(built_site.rglob("*.html")):
        text = page.read_text()
        assert "almanactable" not in text, page
        left = unrendered(text)
        if left:
            shown[page.relative_to(built_site).as_posix()] = left[:3]
    assert not shown, shown
    assert (
        "almanactable" not in (built_site / "search" / "search_index.json").read_text()
    )
    home = (built_site / "index.html").read_text()
    assert re.search(
        r"<details>\s*<summary>By test kind and by host[^<]*</summary>\s*<table>", home
    )
    agents = (built_site / "agents" / "index.html").read_text()
    assert re.search(
        r'<details class="note">\s*<summary>How the loop runs</summary>\s*<p>', agents
    )


def test_the_committed_data_s_folds_render_their_tables_and_markdown(session_data):
    """The folds the golden data does not reach, on the committed measurements: the Optimization page's
    adapter table and the What-if page's projection method."""
    from pipelines.site import tracks, whatif_page
    from tests.support.site_text import render_like_site, unrendered

    # the committed data as checked out (the fixture's list of committed files predates the adapter runs);
    # the figures do not matter here, only how the folds render
    runs = load_runs(session_data / "runs")
    assert any(r.lora_requested for r in runs), (
        "the committed adapter runs (data/matrices/lora.yaml) are missing"
    )
    opt = render_like_site(
        "\n".join(tracks.adapters_section(runs)), "optimization.md", "optimization/"
    )
    assert re.search(
        r"<details>\s*<summary>Adapter table[^<]*</summary>\s*<table>", opt
    )
    whatif = render_like_site(whatif_page.whatif_page(runs), "whatif.md", "whatif/")
    assert re.search(
        r"<details>\s*<summary>How the gains are projected</summary>\s*<ul>\s*<li><strong>",
        whatif,
    )
    assert not unrendered(opt) and not unrendered(whatif)


def test_perplexity_row_is_the_artifact_s_values():
    """One row per perplexity artifact, every figure its artifact's (rounded for the list only)."""
    from pipelines import dataset

    committed = dataset.load().of(
        "perplexity"
    )  # the project's own measurements under data/perplexity
    golden = dataset.load(GOLDEN).of("perplexity")
    assert golden, "the golden data holds perplexity artifacts"
    for d in committed + golden:
        row, r = browser.index_rows("perplexity", index.rows_of([d]))[0], d["results"]
        assert (row["id"], row["host"], row["model"], row["text"], row["status"]) == (
            d["id"],
            d["host"]["id"],
            d["model"]["name"],
            d["text"]["name"],
            d["status"],
        )
        assert row["ppl"] == pytest.approx(r["ppl"], abs=5e-6) and row[
            "ppl_se"
        ] == pytest.approx(r["ppl_se"], abs=5e-6)
        assert row["n"] == r["n_scored_tokens"]
        assert row["json"] == "data/" + d["_data_path"] and d["_data_path"].startswith(
            "perplexity/"
        )
        if d["reference"] is None:
            assert (
                row["reference"] == ""
                and row["kld"] is None
                and row["same_top"] is None
            )
        else:
            assert row["reference"] == d["reference"]["name"]
            assert row["kld"] == pytest.approx(r["kld_mean"], abs=5e-8) and row[
                "kld_se"
            ] == pytest.approx(r["kld_se"], abs=5e-8)
            assert row["same_top"] == pytest.approx(100 * r["same_top"], abs=5e-4)
            assert row["same_top_se"] == pytest.approx(100 * r["same_top_se"], abs=5e-4)
    # the compact index decodes back to the rows, newest first
    rows = browser.index_rows("perplexity", index.rows_of(golden))
    data = browser.index_data("perplexity", rows)
    names = [c["name"] for c in data["columns"]]
    decoded = [
        {
            n: (data["values"][n][v] if c.get("dict") else v)
            for n, c, v in zip(names, data["columns"], row)
        }
        for row in data["rows"]
    ]
    assert decoded == [{n: r[n] for n in names} for r in rows]
    assert [r["created"] for r in rows] == sorted(
        (r["created"] for r in rows), reverse=True
    )
    assert {c["name"] for c in data["columns"] if c.get("filter")} == {
        "host",
        "model",
        "reference",
        "text",
        "status",
    }
    assert "<script" not in browser.index_script("perplexity", data)


def test_perplexity_runs_are_browsed_not_one_page_each(built_site):
    """The perplexity runs are one index and one viewer page, like runs and quality runs."""
    import json

    listed = json.loads((built_site / "perplexity-runs" / "index.json").read_text())
    want = {
        json.loads(p.read_text())["id"] for p in (GOLDEN / "perplexity").rglob("*.json")
    }
    assert {r["id"] for r in listed} == want
    for r in listed:
        assert (built_site / r["json"]).read_bytes() == (
            GOLDEN / r["json"].removeprefix("data/")
        ).read_bytes()
    pages = sorted(
        p.relative_to(built_site).as_posix()
        for p in (built_site / "perplexity-runs").rglob("*.html")
    )
    assert pages == ["perplexity-runs/index.html", "perplexity-runs/run/index.html"]
    # the quality page's ladder links each figure to the viewer
    quality = (built_site / "quality" / "index.html").read_text()
    assert any(f'href="../perplexity-runs/run/?id={i}"' in quality for i in want)


def test_a_fleet_beyond_the_split_limit_gets_one_page_per_host(tmp_path, session_data):
    """More hosts than one page should carry (per_host.SPLIT_ABOVE): the pages organised by host
    become an index linked to one page per host, each rendered from that host's artifacts only,
    and the strict build (every link resolves) still passes."""
    import re

    from benchmarks.site_scale import variant
    from core import artifacts
    from pipelines.site import (
        per_host,
        split_pages,  # noqa: F401 - registers the per-host pages
    )
    from tests.conftest import build_site, make_golden_data

    data = make_golden_data(tmp_path / "data")
    golden = []
    for path in artifacts.iter_files(data):
        doc = artifacts.load(path)
        if doc["artifact"] == "run":
            doc["_file"] = str(path.relative_to(data))
            golden.append(doc)
    extra = (
        per_host.SPLIT_ABOVE + 1
    )  # copies on other hosts: SPLIT_ABOVE + 2 hosts with the golden one
    for c in range(1, extra + 1):
        for d in golden:
            doc, rel = variant(d, c)
            doc.pop("_file", None)
            artifacts.write(data / rel, doc)
    # a host known only from its fingerprint (a bandwidth probe, no run): the Hosts page still shows it
    probe_src = next(artifacts.iter_files(session_data / "hosts"))  # a committed one
    probe = artifacts.load(probe_src)
    probe["_file"] = str(probe_src.relative_to(session_data))
    probe, rel = variant(probe, 6)
    probe.pop("_file")
    artifacts.write(data / rel, probe)
    site = tmp_path / "site"
    proc = build_site(data, site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe_page = (site / "hosts" / probe["host"]["id"] / "index.html").read_text()
    assert probe["host"]["cpu"]["model"] in probe_page
    assert re.search(
        rf'href="(\.\./)?hosts/{probe["host"]["id"]}/"',
        (site / "hosts" / "index.html").read_text(),
    )
    assert not (site / "boards" / probe["host"]["id"]).exists()  # no results: no boards
    host_of = {}
    for path in artifacts.iter_files(data / "runs"):
        doc = artifacts.load(path)
        host_of[doc["id"]] = doc["host"]["id"]
    hosts = sorted(set(host_of.values()))
    assert len(hosts) == extra + 1 > per_host.SPLIT_ABOVE
    for name in ("boards", "hosts", "roles"):
        index = (site / name / "index.html").read_text()
        for h in hosts:
            assert re.search(rf'href="(\.\./)?{name}/{h}/"', index), (
                name,
                h,
            )  # the index links every host's page
            page = (site / name / h / "index.html").read_text()
            # its heading and the line that says what it is, from the one body every host page has
            title = per_host.PAGES[name].title
            assert re.search(
                rf'<h1 [^>]*>{title}: <span class="almanac-host" data-host="{h}">[^<]+</span>'
                '<a class="headerlink"',
                page,
            )
            assert f"<p>Host <code>{h}</code>. One host's part of the " in page
            assert "split_host_page" not in page and "almanac_host" not in page
            ids = set(re.findall(r"\?id=([A-Za-z0-9._-]+)", page))
            assert {host_of[i] for i in ids if i in host_of} <= {h}, (
                name,
                h,
            )  # only that host's runs
        assert "?id=" not in index  # the index carries no host's results
    lb = (site / "boards" / hosts[0] / "index.html").read_text()
    assert (
        re.search(r"\?id=", lb) and "../../runs/run/?id=" in lb
    )  # run links resolve one folder deeper
    _split_pages_hold_in_chromium(site, "boards", hosts[0])


def _split_pages_hold_in_chromium(site, name, host):
    """A split page's index and one host's page, served over loopback to headless Chromium with
    every other address blocked: no console error, nothing fetched from outside, the host page's
    charts drawn, nothing wider than a 390 px phone screen."""
    import shutil

    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    from tests.support.browser import open_page, serve_site

    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site) as served, sync_playwright() as p:
        browser, page = open_page(
            p, served, errors, outside, viewport={"width": 390, "height": 844}
        )
        page.goto(f"{served}/{name}/", wait_until="load")
        assert page.locator(f"a[href$='{name}/{host}/']").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.locator(f"a[href$='{name}/{host}/']").click()
        page.wait_for_url(f"**/{name}/{host}/")
        page.evaluate(
            "document.querySelectorAll('details').forEach(d => { d.open = true; })"
        )  # charts fold
        page.wait_for_selector(".almanac-chart.almanac-chart-ready svg", timeout=30_000)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        browser.close()
    assert errors == [] and outside == []


def test_per_host_page_files_never_collide_or_escape():
    from pipelines.site.per_host import page_file

    assert page_file("serving", "vm-0372cd29") == "serving/vm-0372cd29.md"
    assert (
        page_file("serving", "index") == "serving/_index.md"
    )  # not the split page's own index
    long = (
        "x" * 300 + "-0123abcd"
    )  # a host name longer than a file name may be: its start and a digest
    stem = page_file("serving", long)[len("serving/") : -3]
    assert len(stem) <= 100 and stem.startswith("x" * 80) and "_" in stem
    assert page_file("serving", long[:-1] + "e") != page_file("serving", long)
    for bad in ("../x", "a/b", "A", "", "x_y"):
        with pytest.raises(ValueError):
            page_file("serving", bad)


def test_rebase_links_moves_relative_targets_only():
    md = f"[a](runs/run.md?id=x) [b](#y) [c](https://e.org/a.md) [d]({markdown.ROOT}data/x.json) [e](methodology.md#s)"
    assert markdown.rebase_links(md, 1) == (
        f"[a](../runs/run.md?id=x) [b](#y) [c](https://e.org/a.md) "
        f"[d]({markdown.ROOT}data/x.json) [e](../methodology.md#s)"
    )
    assert markdown.rebase_links(md, 0) == md


def test_a_page_with_a_section_per_host_shows_the_most_recent_hosts_and_says_so():
    """Projections and the go/no-go gates keep a section per host: past PAGE_HOSTS hosts the page shows the
    most recently measured ones, in the page's own order, and one line saying how many were left out."""
    from pipelines.site import per_host

    n = per_host.PAGE_HOSTS
    few = [f"h{i:03d}" for i in range(n)]
    assert per_host.page_hosts(few, []) == (few, "")
    hosts = [f"h{i:03d}" for i in range(n + 5)]
    # h000..h004 measured longest ago, the others later
    runs = [
        RunRecord(
            {"created": f"2026-11-{1 + min(i, 5):02d}T00:00:00Z", "host": {"id": h}}
        )
        for i, h in enumerate(hosts)
    ]
    shown, note = per_host.page_hosts(hosts, runs)
    assert shown == hosts[5:]
    assert note.startswith(
        f"The {n} most recently measured of {n + 5:,} hosts are shown"
    )
