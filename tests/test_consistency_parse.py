"""The consistency check reads pages with libxml2's HTML parser (lxml), built in C: what it reads from a
page (its marks, with their attributes and text, and its visible text) is checked here value by value
on small hostile pages, and against the reader it replaced, Python's ``html.parser``, kept below as the
reference (a committed expected output would only record what one parser said once; the reference
says why each value is what it is, and shows any page where the two part).

The one difference by design: blanks before the root element are not a text run of the tree (the
page's text, joined, loses only its leading blanks)."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser

import pytest

from pipelines.site import consistency


class _Reference(HTMLParser):
    """The stdlib reader the check used up to 84ef209, verbatim but for its name."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.marks: list[consistency.Mark] = []
        self.text: list[str] = []
        self._open: list[tuple[consistency.Mark, int]] = []
        self._depth = 0
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._depth += 1
        if tag in ("script", "style"):
            self._skip += 1
        a = {k: v or "" for k, v in attrs}
        cls = a.get("class", "").split()
        kind = next(
            (
                k
                for k in ("fact", "rank", "verdict", "missing", "lossless", "host")
                if f"almanac-{k}" in cls
            ),
            None,
        )
        if kind is not None:
            m = consistency.Mark(self.page, kind, a, "")
            self.marks.append(m)
            self._open.append((m, self._depth))
        if tag in ("br", "img", "input", "meta", "link", "hr", "wbr", "source"):
            self._depth -= 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        while self._open and self._open[-1][1] >= self._depth:
            self._open.pop()
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.text.append(data)
        for m, _ in self._open:
            m.text += data


def reference(page: str, body: bytes) -> consistency._Page:
    p = _Reference(page)
    p.feed(body.decode("utf-8"))
    p.close()
    return consistency._Page(page, p.marks, p.text)


def _leading_blanks_dropped(text: list[str]) -> list[str]:
    i = 0
    while i < len(text) and not text[i].strip():
        i += 1
    return text[i:]


def same_reading(page: str, body: bytes) -> None:
    """The new reader and the reference read ``body`` alike: marks (kind, attributes, text), the text
    runs (but the leading blanks) and the page's findings."""
    new, ref = consistency.parse(page, body), reference(page, body)
    assert [(m.kind, m.attrs, m.text) for m in new.marks] == [
        (m.kind, m.attrs, m.text) for m in ref.marks
    ]
    assert _leading_blanks_dropped(new.text) == _leading_blanks_dropped(ref.text)
    assert consistency._page_findings(new) == consistency._page_findings(ref)


E = html.escape  # what the site does to artifact text
HOSTILE = [
    '<script>alert("x")</script>',
    "<b>unclosed <i>tags & <p>paragraph",
    "a < b && c > d; 'single' \"double\"",
    "&amp; &lt;b&gt; &#39; &copy; &nbsp;",
    "None",
    "first 3 of 10",
    "<!-- open comment",
    "]]> <![CDATA[ x ]]>",
    "no measured run",
]


def _fact(v: str, shown: str, key: str = "w|h|tokens_per_second") -> str:
    return (
        f'<span class="almanac-fact" data-fact="{E(key)}" data-v="{v}">{shown}</span>'
    )


def _page(body: str) -> bytes:
    return (
        '\n<!doctype html>\n<html lang="en">\n  <head>\n    <meta charset="utf-8">\n'
        "    <title>Almanac</title>\n    <style>p::before { content: 'None first 3 of 10'; }</style>\n"
        "  </head>\n  <body>\n"
        f"{body}\n"
        "    <script>var a = '<span class=\"almanac-fact\">None</span> first 3 of 10';</script>\n"
        "  </body>\n</html>"
    ).encode()


HOSTILE_PAGES = {
    f"artifact text {i} outside marks": _page(f"<p>model {E(t)} here</p>")
    for i, t in enumerate(HOSTILE)
} | {
    f"artifact text {i} inside a mark": _page(
        f"<p>{_fact('12.5', '12.5 <small>t/s</small>', key=t)} on {E(t)}</p>"
        f'<p><span class="almanac-missing" data-work="{E(t)}" data-host="h">{E(t)}: no measured run</span></p>'
    )
    for i, t in enumerate(HOSTILE)
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PAGES))
def test_hostile_pages_read_as_the_reference_reads_them(name):
    same_reading("p.html", HOSTILE_PAGES[name])


def test_marks_and_text_values():
    body = _page(
        '<table><tr><td class="x almanac-rank extra" data-board="b&amp;c" data-test="pp512" '
        'data-host="h&quot;1" data-rank="#2" data-fact="k">#2</td>\n'
        f"<td>{_fact('616.6', '616.60 <b>t/s</b>')}</td></tr></table>\n"
        f"<p>it reads {E('<b>None</b>')} &amp; shows first 3 of 10<!-- a comment -->after</p>"
        '<span class="almanac-verdict almanac-fact" data-a="x" data-b="y" data-verdict="loss">'
        "<script>None</script>slower</span>"
    )
    pg = consistency.parse("p.html", body)
    assert [(m.kind, m.attrs, m.text) for m in pg.marks] == [
        (
            "rank",
            {
                "class": "x almanac-rank extra",
                "data-board": "b&c",  # attributes unescaped
                "data-test": "pp512",
                "data-host": 'h"1',
                "data-rank": "#2",
                "data-fact": "k",
            },
            "#2",
        ),
        (
            "fact",
            {
                "class": "almanac-fact",
                "data-fact": "w|h|tokens_per_second",
                "data-v": "616.6",
            },
            "616.60 t/s",  # the text of the mark's children too
        ),
        # two kinds in one class: the first of fact, rank, verdict, missing, lossless, host;
        # a script's text is not its text
        (
            "fact",
            {
                "class": "almanac-verdict almanac-fact",
                "data-a": "x",
                "data-b": "y",
                "data-verdict": "loss",
            },
            "slower",
        ),
    ]
    text = pg.text
    assert (
        text[0] == "\n  " and "Almanac" in text
    )  # the title is text; blanks before <html> are not
    assert (
        "it reads <b>None</b> & shows first 3 of 10" in text
    )  # entities read, one run up to the comment
    assert "after" in text and not any("var a" in t or "content:" in t for t in text)
    # the findings quote the text around what they found, runs joined by a space
    assert consistency._page_findings(pg) == [
        "p.html: a Python None in the text: …'   \\n   \\n #2 \\n 616.60  t/s \\n it reads <b>None</b> & "
        "shows first 3 of 10 after slower '…",
        "p.html: a truncated list in the text: …'.60  t/s \\n it reads <b>None</b> & shows first 3 of 10 "
        "after slower \\n     \\n   \\n'…",
    ]


def test_no_measured_run_counts_inside_missing_marks_only():
    inside = '<span class="almanac-missing" data-work="w" data-host="h">no measured run</span>'
    assert consistency._page_findings(consistency.parse("p.html", _page(inside))) == []
    outside = consistency._page_findings(
        consistency.parse("p.html", _page(f"{inside}<p>No measured run</p>"))
    )
    assert outside == [
        'p.html: says "no measured run" outside a not-measured mark (the fact layer decides)'
    ]


def test_an_empty_page_has_nothing_to_read():
    pg = consistency.parse("e.html", b"")
    assert (pg.marks, pg.text) == ([], [])
    pg = consistency.parse("w.html", b"  \n")
    assert pg.marks == [] and not "".join(pg.text).strip()


def test_the_committed_site_reads_as_the_reference_reads_it(committed_site):
    """Every page of the site built from the committed data (and a check of the fleet's own site is
    the same code): the new reader and the reference agree page by page."""
    pages = list(consistency.pages(committed_site))
    assert len(pages) > 20
    for p in pages:
        same_reading(p.relative_to(committed_site).as_posix(), p.read_bytes())


def test_tables_are_read_in_full_only_where_a_value_may_read_none_or_a_truncation():
    """A table whose bytes hold neither the words nor a \\u escape is only parsed; the others are read
    value by value, escapes included (JSON may spell "None" as "\\u004eone")."""
    f = consistency._table_findings
    assert f("t.json", b'[{"host": "fine", "n": 1, "x": null}]') == []
    assert f("t.json", b"{not json") == ["tables/t.json: not JSON"]
    assert f(
        "t.json",
        b'[{"host": "\\u004eone"}, {"a": "Top 5 of 9"}, {"b": " None "}, {"c": "Nonesuch"}]',
    ) == [
        "tables/t.json: row 1, column 'host' reads 'None'",
        "tables/t.json: row 2, column 'a' reads 'Top 5 of 9'",
        "tables/t.json: row 3, column 'b' reads ' None '",
    ]
    assert f("t.json", b'[{"a": "\\u0066irst 3 of 10"}]') == [
        "tables/t.json: row 1, column 'a' reads 'first 3 of 10'"
    ]


def _cut_site(
    tmp_path, monkeypatch, *, rows: int, downloads: bool = True, note_rows: int = 3
):
    """A one-page site whose table shows its first 2 rows and says its JSON download holds ``note_rows``;
    the download holds ``rows``."""
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    site = tmp_path / "site"
    (site / "tables").mkdir(parents=True)
    (site / "tables" / "t.json").write_text(json.dumps([{"a": i} for i in range(rows)]))
    (site / "p").mkdir()
    links = (
        '<p class="almanac-downloads"><a href="../tables/t.csv" download>CSV</a> · '
        '<a href="../tables/t.json" download>JSON</a></p>'
        if downloads
        else ""
    )
    (site / "p" / "index.html").write_bytes(
        _page(
            "<table><tr><td>1</td></tr><tr><td>2</td></tr></table>\n"
            f'<p class="almanac-cut">The first 2 of {note_rows:,} rows are shown (a page stays under 1 MB); '
            f"the CSV and JSON downloads below hold all {note_rows:,}.</p>\n{links}"
        )
    )
    return site


def test_a_table_cut_over_a_download_holding_every_row_is_not_a_truncated_list(
    tmp_path, monkeypatch
):
    site = _cut_site(tmp_path, monkeypatch, rows=3)
    pg = consistency.parse("p/index.html", (site / "p" / "index.html").read_bytes())
    assert [(m.attrs, m.text) for m in pg.cuts] == [
        (
            {"data-table": "../tables/t.json"},
            "The first 2 of 3 rows are shown (a page stays under 1 MB); the CSV and JSON downloads "
            "below hold all 3.",
        )
    ]
    assert consistency.check(site) == []


def test_a_cut_notes_claim_is_checked_against_its_download(tmp_path, monkeypatch):
    short = _cut_site(tmp_path / "a", monkeypatch, rows=2)
    assert consistency.check(short) == [
        "p/index.html: a table cut to its first rows says its download holds all 3 rows; "
        "tables/t.json holds 2"
    ]
    bare = _cut_site(
        tmp_path / "b", monkeypatch, rows=1_234, note_rows=1_234, downloads=False
    )
    assert consistency.check(bare) == [
        "p/index.html: a table cut to its first rows (of 1,234) links no JSON download holding them all"
    ]


def test_the_same_words_outside_a_cut_note_are_still_a_truncated_list(
    tmp_path, monkeypatch
):
    site = _cut_site(tmp_path, monkeypatch, rows=3)
    page = site / "p" / "index.html"
    page.write_bytes(
        page.read_bytes().replace(
            b"</table>", b"</table><p>the first 5 of 9 hosts</p>", 1
        )
    )
    problems = consistency.check(site)
    assert (
        len(problems) == 1
        and "a truncated list" in problems[0]
        and "first 5 of 9" in problems[0]
    )


@pytest.mark.integration  # forks a process
def test_the_pages_are_parsed_over_two_processes_and_each_entry_comes_back(
    tmp_path, monkeypatch
):
    """The check's misses shared with a forked process: every entry is there, the same as made here, and made
    by both processes; an entry the other process did not hand back is made here."""
    import os

    from pipelines import cores

    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(consistency, "PARALLEL_FROM", 2)
    monkeypatch.setattr(cores, "available", lambda: 2)
    jobs = []
    for i in range(9):
        p = tmp_path / f"p{i}.html"
        p.write_text(f"<p>{i}</p>")
        jobs.append((f"k{i}", p, p.name))
    me = os.getpid()

    def make(path, name):
        return [name, path.read_text(), os.getpid() == me]

    memo = consistency._Memo()
    consistency._fill(memo, jobs, make)
    got = [memo.get(k) for k, _p, _n in jobs]
    assert [g[:2] for g in got] == [[p.name, p.read_text()] for _k, p, _n in jobs]
    assert {g[2] for g in got} == {
        True,
        False,
    }  # some made here, some in the other process

    def only_here(path, name):  # the other process hands nothing back
        if os.getpid() != me:
            os._exit(1)
        return [name]

    memo = consistency._Memo()
    consistency._fill(memo, jobs, only_here)
    assert [memo.get(k) for k, _p, _n in jobs] == [[n] for _k, _p, n in jobs]
