"""benchmarks/seed_claims.py: seed claims judged by the content of a built site's tables.

A planted site checks the rules (a table found by its heading, fold or caption; every mapped column
present and filled; every row from an artifact; a phrase alone never makes a claim living); the
committed claims file is checked for form, and against the committed report and the site built from
the committed data (the count the report states is the count the site gives)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from benchmarks import seed_claims as sc

RUN = "abcdef012345-20260101T000000.000Z"
RUN2 = "0123456789ab-20260101T000001.000Z"

PAGE = """<!doctype html><html><head><title>Alpha page</title><style>.x{{}}</style></head><body>
<nav><h2>Navigation heading</h2><table><thead><tr><th>nav</th></tr></thead><tbody><tr><td>x</td></tr></tbody></table></nav>
<article class="md-content__inner md-typeset">
<h1 id="alpha">Alpha<a class="headerlink" href="#alpha">¶</a></h1>
{body}
<script>var s = "<table><tr><td>script only</td></tr></table>";</script>
</article>
<footer>Footer only phrase</footer>
</body></html>"""

SPEEDS = f"""<h2 id="speeds">Speeds per model<a class="headerlink" href="#speeds">¶</a></h2>
<p>Each row is one run; the rate links its artifact.</p>
<table><thead><tr><th>model</th><th class="r">rate (t/s)</th><th>quality</th></tr></thead><tbody>
<tr><td>tiny-a</td><td class="r"><a href="../runs/run/?id={RUN}">12.5</a></td><td>90%</td></tr>
<tr><td>tiny-b</td><td class="r"><a href="../runs/run/?id={RUN2}">7.25</a></td><td>{{quality_b}}</td></tr>
</tbody></table>
<p class="almanac-downloads"><a href="../tables/aaaa.csv" download>CSV</a> · <a href="../tables/aaaa.json" download>JSON</a></p>
<h2 id="typed">Typed figures</h2>
<table><thead><tr><th>model</th><th>rate (t/s)</th><th>quality</th></tr></thead><tbody>
<tr><td>tiny-a</td><td>12.5</td><td>90%</td></tr>
</tbody></table>
<h2 id="levels">Levels</h2>
<details class="note"><summary>server · tiny-a</summary>
<p>Test <code>levels</code>, artifact <a href="../runs/run/?id={RUN}">{RUN}</a>.</p>
<table><thead><tr><th>clients</th><th>output (t/s)</th></tr></thead><tbody>
<tr><td>1</td><td>10.0</td></tr><tr><td>2</td><td>18.0</td></tr>
</tbody></table>
</details>
<h2 id="history">History</h2>
<figure class="almanac-figure"><div class="almanac-chart"></div><script type="application/json">{{"data": 1}}</script>
<figcaption>One dot per run. <span class="almanac-downloads">Data: <a href="../tables/bbbb.csv" download>CSV</a> · <a href="../tables/bbbb.json" download>JSON</a></span></figcaption></figure>
<h2 id="catalogue">Catalogue</h2>
<table><thead><tr><th>optimization</th><th>effect</th></tr></thead><tbody>
<tr><td><strong>Tiny trick</strong> tiny-trick · available</td><td>×1.5</td></tr>
</tbody></table>
<p>The speeds say it plainly: phrase only evidence.</p>"""


def _site(root: Path, quality_b: str = "80%") -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text(PAGE.format(body="<p>home</p>"), encoding="utf-8")
    (root / "sub" / "index.html").write_text(
        PAGE.format(body=SPEEDS.replace("{quality_b}", quality_b)), encoding="utf-8"
    )
    (root / "data" / "runs").mkdir(parents=True)
    for rid in (RUN, RUN2):
        (root / "data" / "runs" / f"{rid}.json").write_text(
            json.dumps({"artifact": "run", "id": rid}), encoding="utf-8"
        )
    (root / "tables").mkdir()
    (root / "tables" / "aaaa.json").write_text(
        json.dumps([{"model": "tiny-a"}, {"model": "tiny-b"}]), encoding="utf-8"
    )
    (root / "tables" / "bbbb.json").write_text(
        json.dumps(
            [
                {
                    "created": "2026-01-01",
                    "mean": "12.5",
                    "id": RUN,
                    "artifact_json": f"data/runs/{RUN}.json",
                },
                {
                    "created": "2026-01-02",
                    "mean": "12.9",
                    "id": RUN2,
                    "artifact_json": f"data/runs/{RUN2}.json",
                },
            ]
        ),
        encoding="utf-8",
    )
    return root


def _claim(**over) -> dict:
    c = {
        "seed": "001",
        "id": "speeds",
        "claim": "Model | Speed | Quality",
        "seed_table": "§ Speeds (table)",
        "page": "sub/index.html",
        "table": {"heading": "^Speeds per model$"},
        "columns": {"Model": "model", "Speed": "rate (t/s)", "Quality": "quality"},
        "expect": "living",
    }
    c.update(over)
    return c


def _judge(site: Path, **over) -> sc.Verdict:
    [claim] = sc.parse_claims({"claims": [_claim(**over)]})
    return sc.judge(claim, sc.Site(site))


def test_page_tables_read_headings_folds_captions_links_and_downloads(tmp_path):
    site = _site(tmp_path / "site")
    tables = sc.Site(site).tables("sub/index.html")
    assert [t.kind for t in tables] == [
        "table",
        "table",
        "table",
        "figure",
        "table",
    ]  # nav and script tables left out
    speeds, typed, levels, chart, cat = tables
    assert speeds.headings == ("Alpha", "Speeds per model") and speeds.headers == [
        "model",
        "rate (t/s)",
        "quality",
    ]
    assert (
        speeds.intro == "Each row is one run; the rate links its artifact."
        and speeds.download == "aaaa"
    )
    assert [c.text for c in speeds.rows[1]] == [
        "tiny-b",
        "7.25",
        "80%",
    ] and speeds.rows[0][1].hrefs == (f"../runs/run/?id={RUN}",)
    assert typed.download is None and typed.where() == "table under “Typed figures”"
    assert levels.folds == ("server · tiny-a",) and levels.intro_hrefs == (
        f"../runs/run/?id={RUN}",
    )
    assert (
        chart.download == "bbbb"
        and chart.headers == ["created", "mean", "id", "artifact_json"]
        and len(chart.rows) == 2
    )
    assert cat.rows[0][0].text == "Tiny trick tiny-trick · available"


def test_a_table_with_every_column_filled_and_linked_is_living(tmp_path):
    v = _judge(_site(tmp_path / "site"))
    assert v.status == "living", v.lacks
    assert (
        "Speed → “rate (t/s)”" in v.holds and "every row links its artifact" in v.holds
    )


def test_an_empty_mapped_column_makes_the_claim_partial(tmp_path):
    for empty in ("—", "no data: no quality run", "None", "not measured", ""):
        v = _judge(_site(tmp_path / f"site{len(empty)}", quality_b=empty))
        assert v.status == "partial", (empty, v.lacks)
        assert v.lacks == [f"“Quality” → “quality”: empty in 1 of 2 rows (“{empty}”)"]
    # unless the claim allows that value for that column (a cell the seed leaves "-" too) ...
    v = _judge(
        _site(tmp_path / "allowed", quality_b="no data"),
        columns={
            "Model": "model",
            "Speed": "rate (t/s)",
            "Quality": {"page": "quality", "allow": ["^no data$"]},
        },
    )
    assert v.status == "living", v.lacks
    # ... or looks only at the rows it is about
    v = _judge(_site(tmp_path / "rows", quality_b="—"), rows={"model": "tiny-a"})
    assert v.status == "living", v.lacks


def test_a_seed_column_the_page_lacks_makes_the_claim_partial_and_says_why(tmp_path):
    site = _site(tmp_path / "site")
    v = _judge(
        site,
        columns={
            "Model": "model",
            "Speed": "rate (t/s)",
            "Size": {"page": None, "why": "no model size"},
        },
    )
    assert v.status == "partial" and v.lacks == [
        "“Size”: not on the page (no model size)"
    ]
    v = _judge(
        site, columns={"Model": "model", "Speed": "rate (t/s)", "Memory": "peak RSS"}
    )
    assert v.status == "partial" and "“Memory”: no column “peak RSS”" in v.lacks[0]
    # a column of commentary is listed, never required
    v = _judge(
        site,
        columns={
            "Model": "model",
            "Speed": "rate (t/s)",
            "Notes": {"skip": "commentary"},
        },
    )
    assert v.status == "living" and "Notes: left out (commentary)" in v.holds


def test_rows_that_name_no_artifact_are_not_living(tmp_path):
    site = _site(tmp_path / "site")
    v = _judge(site, table={"heading": "Typed figures"})
    assert v.status == "partial"
    assert v.lacks == [
        "1 of 1 rows link or name no artifact (e.g. “tiny-a | 12.5 | 90%”)"
    ]
    # a link to something that is not a published artifact does not count
    html = (
        (site / "sub" / "index.html")
        .read_text(encoding="utf-8")
        .replace(f"?id={RUN2}", "?id=ffffffffffff-20990101T000000.000Z")
    )
    (site / "sub" / "index.html").write_text(html, encoding="utf-8")
    assert _judge(site).status == "partial"
    # rows of one artifact: the caption (or heading, or fold title) links it
    v = _judge(
        site,
        table={"heading": "Levels"},
        columns={"clients": "clients", "output": "output (t/s)", "host": "@fold"},
    )
    assert v.status == "living", v.lacks
    assert (
        "its caption or heading links the artifact its rows come from" in v.holds
        and "host → the fold title" in v.holds
    )


def test_a_chart_is_judged_by_its_published_data(tmp_path):
    v = _judge(
        _site(tmp_path / "site"),
        table={"heading": "History", "kind": "figure"},
        columns={
            "date": "created",
            "mean": "mean",
            "p99": {"page": None, "why": "no p99 over time"},
        },
    )
    assert v.status == "partial" and v.lacks == [
        "“p99”: not on the page (no p99 over time)"
    ]
    assert "every row links its artifact" in v.holds


def test_rows_derived_from_a_committed_input(tmp_path):
    site = _site(tmp_path / "site")
    v = _judge(
        site,
        table={"heading": "Catalogue"},
        columns={"optimization": "optimization", "effect": "effect"},
        provenance={"input": "data/optimizations.yaml", "key": "optimization"},
    )
    assert (
        v.status == "partial"
        and "name no entry of data/optimizations.yaml" in v.lacks[0]
    )  # tiny-trick is no entry
    html = (
        (site / "sub" / "index.html")
        .read_text(encoding="utf-8")
        .replace("tiny-trick", "kv-cache-q8-0")
    )
    (site / "sub" / "index.html").write_text(html, encoding="utf-8")
    v = _judge(
        site,
        table={"heading": "Catalogue"},
        columns={"optimization": "optimization", "effect": "effect"},
        provenance={"input": "data/optimizations.yaml", "key": "optimization"},
    )
    assert (
        v.status == "living"
        and "rows derived from the committed input data/optimizations.yaml, not from measurements"
        in v.holds
    )


def test_a_claim_found_only_by_phrase_is_not_living(tmp_path):
    site = _site(tmp_path / "site")
    # the phrases are on the page, but no table under the heading answers: missing, whatever the phrases say
    v = _judge(
        site,
        table={"heading": "Throughput per batch"},
        evidence=["phrase only evidence", "Speeds per model"],
    )
    assert v.status == "missing" and v.phrases_missing == []
    assert v.lacks == [
        "sub/index.html: no table under heading ~ /Throughput per batch/"
    ]
    # a table whose columns answer none of the seed's: missing too
    v = _judge(
        site,
        columns={"Batch": "batch size", "Tokens/sec": "aggregate t/s"},
        evidence=["phrase only evidence"],
    )
    assert v.status == "missing" and v.lacks[0].startswith(
        "the table under “Speeds per model” shows none of the seed's columns"
    )
    # no page at all
    v = _judge(
        site, page=None, table=None, columns=None, why="no model here", expect="missing"
    )
    assert v.status == "missing" and v.lacks == ["no model here"]


PER_HOST = """<h2 id="cold">Cold start</h2>
<table><thead><tr><th>host</th><th>cold (ms)</th></tr></thead><tbody>
<tr><td>{host}</td><td><a href="../../runs/run/?id={run}">{cold}</a></td></tr>
</tbody></table>
<h2 id="warm">Warm steady state</h2>
<table><thead><tr><th>host</th><th>warm (ms)</th></tr></thead><tbody>
<tr><td>{host}</td><td><a href="../../runs/run/?id={run}">{warm}</a></td></tr>
</tbody></table>"""


def _per_host_site(root: Path) -> Path:
    """A page split per host: an index (a table of hosts) and serving/<host>/index.html, one host without warm data."""
    site = _site(root)
    (site / "serving").mkdir()
    (site / "serving" / "index.html").write_text(
        PAGE.format(
            body=(
                "<h2>Hosts</h2><table><thead><tr><th>host</th></tr></thead><tbody><tr><td>h-a</td></tr></tbody></table>"
            )
        ),
        encoding="utf-8",
    )
    for host, run, warm in (("h-a", RUN, "—"), ("h-b", RUN2, "40.0")):
        (site / "serving" / host).mkdir()
        (site / "serving" / host / "index.html").write_text(
            PAGE.format(
                body=PER_HOST.format(host=host, run=run, cold="900.0", warm=warm)
            ),
            encoding="utf-8",
        )
    return site


def test_a_page_split_per_host_is_named_by_a_glob_and_the_host_with_the_data_answers(
    tmp_path,
):
    site = _per_host_site(tmp_path / "site")
    assert sc.Site(site).pages("serving/**/index.html") == [
        "serving/h-a/index.html",
        "serving/h-b/index.html",
        "serving/index.html",
    ]
    assert sc.Site(site).pages("serving/index.html") == [
        "serving/index.html"
    ]  # no glob: the page itself
    cols = {
        "Hardware": "host",
        "Cold": "cold (ms)",
        "Warm": {"page": "warm (ms)", "in": {"heading": "Warm steady state"}},
    }
    v = _judge(
        site,
        page="serving/**/index.html",
        table={"heading": "Cold start"},
        columns=cols,
        evidence=["h-b"],
    )
    assert v.status == "living", v.lacks
    assert (
        v.table.page == "serving/h-b/index.html" and v.phrases_missing == []
    )  # the host whose warm figure is there
    assert (
        v.where.startswith("serving/h-b/index.html: table under “Cold start”")
        and "on 2 pages (serving/**/index.html)" in v.where
    )
    # the `in:` column is read on the judged table's page, never another host's
    (site / "serving" / "h-b" / "index.html").unlink()
    v = _judge(
        site,
        page="serving/**/index.html",
        table={"heading": "Cold start"},
        columns=cols,
    )
    assert v.status == "partial" and v.table.page == "serving/h-a/index.html"
    assert v.lacks == ["“Warm” → “warm (ms)”: empty in 1 of 1 rows (“—”)"]
    v = _judge(
        site,
        page="nowhere/**/index.html",
        table={"heading": "Cold start"},
        columns=cols,
    )
    assert v.status == "missing" and v.lacks == [
        "nowhere/**/index.html: no page matches"
    ]


def test_tables_one_after_the_other_share_the_caption_above_the_first(tmp_path):
    body = (
        f'<h2>Mix</h2><p>Time per request from <a href="../runs/run/?id={RUN}">{RUN}</a>.</p>'
        "<table><thead><tr><th>model</th></tr></thead><tbody><tr><td>tiny-a</td></tr></tbody></table>"
        '<p class="almanac-downloads"><a href="../tables/cccc.json" download>JSON</a></p>'
        "<table><thead><tr><th>stage</th><th>ms</th></tr></thead><tbody><tr><td>decode</td><td>9.5</td></tr></tbody></table>"
        "<p>Prose between.</p>"
        "<table><thead><tr><th>stage</th><th>ms</th></tr></thead><tbody><tr><td>prefill</td><td>1.5</td></tr></tbody></table>"
    )
    root = tmp_path / "site"
    _site(root)
    (root / "sub" / "index.html").write_text(PAGE.format(body=body), encoding="utf-8")
    entries, stages, after_prose = sc.Site(root).tables("sub/index.html")
    assert stages.intro == entries.intro and stages.intro_hrefs == (
        f"../runs/run/?id={RUN}",
    )
    assert after_prose.intro == "Prose between." and after_prose.intro_hrefs == ()
    v = _judge(root, table={"heading": "^Mix$"}, columns={"stage": "stage", "ms": "ms"})
    assert v.status == "living" and v.table.index == stages.index, (
        v.lacks
    )  # the table after prose has no caption of its own
    assert "its caption or heading links the artifact its rows come from" in v.holds


def test_the_report_lists_the_claims_changed_since_the_first_count(tmp_path, capsys):
    site = _site(tmp_path / "site", quality_b="—")
    claims = tmp_path / "claims.yaml"
    claims.write_text(
        yaml.safe_dump(
            {
                "claims": [
                    _claim(
                        expect="partial",
                        before="living",
                        first="living",
                        changed="the second model lost its quality run",
                    ),
                    _claim(
                        id="same", expect="partial", before="partial", first="partial"
                    ),
                ]
            }
        ),
        encoding="utf-8",
    )
    assert sc.main(["--site", str(site), "--claims", str(claims)]) == 0
    out = capsys.readouterr().out
    assert (
        "| seed | before (phrases on a page) | first count by content | after (tables judged by content) |"
        in out
    )
    assert (
        "| S1 | 1/2 living, 1 partial, 0 missing | 1/2 living, 1 partial, 0 missing "
        "| 0/2 living, 2 partial, 0 missing |"
    ) in out
    assert "1 claim(s) judged otherwise than in the first count by content" in out
    assert (
        "| S1 speeds | living → partial | sub/index.html: table under “Speeds per model”, 2 rows | the second model "
        "lost its quality run. Now: “Quality” → “quality”: empty in 1 of 2 rows (“—”) |"
    ) in out
    assert "S1 same |" not in out


def test_main_exit_status_and_report(tmp_path, capsys):
    site = _site(tmp_path / "site", quality_b="—")
    good, bad, broken = (
        tmp_path / "good.yaml",
        tmp_path / "bad.yaml",
        tmp_path / "broken.yaml",
    )
    claims = [
        _claim(expect="partial", before="living"),
        _claim(
            id="gone",
            page=None,
            table=None,
            columns=None,
            why="nothing here can measure it",
            expect="missing",
            before="missing",
        ),
    ]
    good.write_text(
        yaml.safe_dump({"seeds": {"001": {"title": "Results"}}, "claims": claims}),
        encoding="utf-8",
    )
    bad.write_text(
        yaml.safe_dump({"claims": [_claim(expect="living")]}), encoding="utf-8"
    )
    broken.write_text(
        yaml.safe_dump({"claims": [_claim(columns={"Model": None})]}), encoding="utf-8"
    )

    report = tmp_path / "out" / "report.md"
    assert (
        sc.main(["--site", str(site), "--claims", str(good), "--report", str(report)])
        == 0
    )
    out, err = capsys.readouterr()
    assert err == "" and report.read_text(encoding="utf-8") == out
    assert "| S1 | 1/1 living, 0 partial, 0 missing |" not in out
    assert (
        "| S1 | 1/2 living, 0 partial, 1 missing | 0/2 living, 1 partial, 1 missing |"
        in out
    )
    assert "| speeds | § Speeds (table) |" in out and "| living → partial |" in out
    assert (
        "“Quality” → “quality”: empty in 1 of 2 rows" in out
        and "S1 0/2 living, 1 partial, 1 missing" in out
    )

    assert sc.main(["--site", str(site), "--claims", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert (
        "judgment differs: seed 001 claim 'speeds': expected living, found partial"
        in err
    )

    assert sc.main(["--site", str(site), "--claims", str(broken)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(
        f"error: {broken}: claims[0] (seed 001, id speeds): columns['Model']"
    )

    assert sc.main(["--site", str(tmp_path / "nowhere"), "--claims", str(good)]) == 2
    assert "no built site here" in capsys.readouterr().err
    assert sc.main(["--site", str(site), "--tables", "sub/index.html"]) == 0
    assert (
        "#0 table under “Speeds per model” · 2 rows · tables/aaaa.json"
        in capsys.readouterr().out
    )


def test_update_expect_writes_the_judgments_into_the_claims_file(tmp_path, capsys):
    site = _site(tmp_path / "site", quality_b="—")
    path = tmp_path / "claims.yaml"
    path.write_text(
        "# a comment that stays\nclaims:\n"
        + yaml.safe_dump([_claim(expect="living")], sort_keys=False),
        encoding="utf-8",
    )
    assert sc.main(["--site", str(site), "--claims", str(path)]) == 1
    assert sc.main(["--site", str(site), "--claims", str(path), "--update-expect"]) == 0
    err = capsys.readouterr().err
    assert f"{path}: 1 expect field(s) updated" in err
    text = path.read_text(encoding="utf-8")
    assert (
        text.startswith("# a comment that stays\n")
        and "expect: partial" in text
        and "expect: living" not in text
    )


def _report_counts(text: str) -> dict[str, str]:
    return dict(
        re.findall(
            r"^(S\d|All seeds) (\d+/\d+ living, \d+ partial, \d+ missing)$", text, re.M
        )
    )


def test_committed_claims_file_is_complete_and_matches_the_report():
    claims = sc.load_claims(sc.CLAIMS)
    seeds = sc.load_seeds(sc.CLAIMS)
    assert {c.seed for c in claims} == {"000", "001", "002", "003", "004"} == set(seeds)
    assert len(claims) == 94
    for c in claims:
        assert c.seed_table and c.before in sc.STATUSES and c.first in sc.STATUSES, c.id
        if (
            c.expect != c.first
        ):  # a judgment that moved since the first count by content says why
            assert c.changed, c.id
        if c.page is None:
            assert c.expect == "missing" and c.why, c.id
        else:
            assert c.page.endswith(".html") and c.columns, c.id
    # the report states, per seed and in all, the counts the claims file expects
    text = sc.REPORT.read_text(encoding="utf-8")
    counts = _report_counts(text)
    for seed in sorted(seeds):
        mine = [c.expect for c in claims if c.seed == seed]
        assert counts[f"S{int(seed)}"] == sc.tally("", mine).strip(), seed
    assert counts["All seeds"] == sc.tally("", [c.expect for c in claims]).strip()
    rows = {
        cells[1].strip(): cells[4].strip()
        for line in text.splitlines()
        if line.startswith("| ")
        for cells in [re.split(r"(?<!\\)\|", line)]
        if len(cells) == 7
    }
    for c in (
        claims
    ):  # and each claim's row says the same ("before → after" where it changed)
        assert rows[c.id].split(" → ")[-1] == c.expect, c.id
    moved = [
        c for c in claims if c.expect != c.first
    ]  # and the claims changed since the first count are listed
    assert (
        f"{len(moved)} claim(s) judged otherwise than in the first count by content"
        in text
    )
    for c in moved:
        assert f"| S{int(c.seed)} {c.id} | {c.first} → {c.expect} |" in text, c.id


def test_the_committed_count_is_what_the_site_gives(committed_site):
    verdicts = sc.judge_all(sc.load_claims(sc.CLAIMS), sc.Site(committed_site))
    assert sc.disagreements(verdicts) == []
    expected = _report_counts(sc.REPORT.read_text(encoding="utf-8"))
    assert _report_counts(sc.report(verdicts, sc.load_seeds(sc.CLAIMS))) == expected
