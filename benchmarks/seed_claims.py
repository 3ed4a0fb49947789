"""The seeds, read claim by claim against the built site, judged by the content of its tables.

``benchmarks/seed_claims.yaml`` lists every claim type of the five seed documents
(``../shared/seeds/000..004``): one kind of figure or table a seed shows. For each claim it names
the seed's table (where in the seed, and its columns as the seed shows them), the page and the
page's table that answers it (found by the heading or fold title above it, or its caption), and a
mapping from each seed column to the page column(s) that carry it. This script reads that table in
a built site and judges the claim. A page split per host (``serving/<host id>/``) is named by a glob
(``serving/**/index.html``: the index and every per-host page): the best table of any of them is judged,
so the claim follows whichever host has the data:

* living:  the page's table is there with at least one row; every seed column maps to page columns
  that are all present and filled in every row the claim looks at (not empty, not "—", "None",
  "null", "no data", "not measured", ... unless the claim allows that value for that column); and
  every such row comes from an artifact: it links one (a run, quality or perplexity view, or an
  artifact's published JSON) or names one by id (an id of an artifact published in the site), or the
  table's caption links the one artifact all its rows come from (a figure: each data row carries its
  artifact's id or JSON). A claim whose rows are derived from a committed input (a catalogue, a model
  file) says so (``provenance: {input: FILE}``): each row's key must then name an entry of that file.
* partial: the table is there (a row, and at least one seed column present and filled), but some seed
  columns are not on it or are empty, or its rows name no artifact; the report says which.
* missing: no such table on the page (or no page at all: the claim's ``why`` says why).

Phrases (``evidence``) may be listed as extra evidence; they are looked up and reported, but never
make a claim living on their own.

    python3 benchmarks/seed_claims.py --build                          # build the site from data/, judge, print
    python3 benchmarks/seed_claims.py --build --report benchmarks/results/seed_claims.md   # the recount
    python3 benchmarks/seed_claims.py --site /tmp/site                 # an already built site
    python3 benchmarks/seed_claims.py --site /tmp/site --tables optimization/index.html    # what a page's tables are
    python3 benchmarks/seed_claims.py --build --report benchmarks/results/seed_claims.md --update-expect
                                          # after pages changed on purpose: the judgments become the expectations

The claims file's header documents its fields (the seed's table, the page's table, the column mapping,
provenance, the expected judgment).

The report (Markdown) goes to standard output (and to ``--report``). Exit status: 0 when every
claim's judgment is the one the claims file expects (``expect``); 1 when some differ (each named on
standard error: seed, claim, expected, found, why); 2 when the claims file is unreadable or an entry
is malformed (one line naming the file, the entry and the field), or there is no built site.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLAIMS = HERE / "seed_claims.yaml"
REPORT = HERE / "results" / "seed_claims.md"
STATUSES = ("living", "partial", "missing")
_SEED = re.compile(r"^\d{3}$")
_SPACE = re.compile(r"\s+")
# tags that do not break a line of text: "<em>too</em> slow" reads "too slow", "<td>a</td><td>b</td>" reads "a b"
_INLINE = frozenset(
    "a abbr b bdi bdo cite code data dfn em i kbd mark q s samp small span strong sub sup time u var wbr".split()
)
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())

# A cell that holds no figure: empty, a dash, a null leaking from code, or the page saying so.
EMPTY = re.compile(
    r"^(?:|[—–-]|[—–]\s.*|none|null|nan|n/?a|unknown|not measured\b.*|none measured\b.*|no data\b.*"
    r"|not reported\b.*|not run\b.*|not runnable\b.*)$",
    re.I,
)
# Links to an artifact's view or its published JSON.
_ARTIFACT_HREF = re.compile(
    r"(?:^|/)(?:runs|quality-runs|perplexity-runs)/run/(?:index\.html)?\?id=([^&#\s]+)|(?:^|/)data/(.+\.json)$"
)
# A browser of artifacts opened on a filter (runs/#host=...&test=...): the set of artifacts a summed row comes from.
_ARTIFACT_SET_HREF = re.compile(
    r"(?:^|/)(?:runs|quality-runs|perplexity-runs)/(?:index\.html)?#\w+=[^&\s]+"
)
# Artifact ids written out: a run/quality/perplexity id, a record id (name-YYYYMMDDTHHMMSSZ), or a 12-hex short id.
_FULL_ID = re.compile(
    r"\b[pq]?[0-9a-f]{12}-\d{8}T\d{6}(?:\.\d+)?Z\b|\b[\w.-]+-\d{8}T\d{6}Z\b"
)
_DOWNLOAD = re.compile(
    r"(?:^|/)tables/([0-9a-f]+)\.json$"
)  # a table's or chart's published rows
_SHORT_ID = re.compile(r"(?<![\w-])[pq]?[0-9a-f]{12}(?![\w-])")
_GLOB = re.compile(
    r"[*?\[]"
)  # a claim's page given as a glob: every page it matches (one per host)


class ClaimsError(Exception):
    """The claims file cannot be read, or one of its entries is malformed."""


class SiteError(Exception):
    """There is no built site where one was given, or the site could not be built."""


def _norm(s: str) -> str:
    return _SPACE.sub(" ", s).strip()


def _fold(s: str) -> str:
    return _norm(s).casefold()


# ------------------------------------------------------------------------------------------------
# The tables of a built page
# ------------------------------------------------------------------------------------------------


@dataclass
class Cell:
    text: str
    hrefs: tuple[str, ...] = ()


@dataclass
class SiteTable:
    """One table (or chart) of a page: where it sits, what it shows."""

    page: str
    index: int
    headings: tuple[str, ...]  # the headings above it, outermost first (h1 .. h6)
    folds: tuple[str, ...]  # the titles of the folds (<details> summaries) it sits in
    intro: str  # the text between the last heading/fold title/table and it: its caption (tables one after the
    # other with nothing between share the caption above the first)
    intro_hrefs: tuple[str, ...]
    headers: list[str]
    rows: list[list[Cell]]
    download: str | None = (
        None  # the digest of its published CSV/JSON (tables/<digest>.json)
    )
    kind: str = (
        "table"  # or "figure" (a chart: its rows are the published data of its marks)
    )
    total_rows: int | None = (
        None  # all rows (the downloads) where the page shows only the first ones
    )

    def where(self) -> str:
        path = list(self.headings[1:]) + [f"fold “{f}”" for f in self.folds]
        what = "chart" if self.kind == "figure" else "table"
        return f"{what} under “{' › '.join(path) or (self.headings[0] if self.headings else '(top)')}”"


class _Tables(HTMLParser):
    """The tables and charts of a page's main content (its first <article>), with the headings,
    fold titles and caption text above each, every cell's text and links, and its downloads."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.tables: list[SiteTable] = []
        self._article = 0  # nesting inside the first <article>; -1 once it has closed
        self._heads: list[tuple[int, str]] = []
        self._folds: list[str] = []
        self._intro: list[str] = []
        self._intro_hrefs: list[str] = []
        self._skip = 0  # inside <script>, <style> or a heading's permalink
        self._skip_tags: list[str] = []
        self._heading: list[str] | None = None
        self._level = 0
        self._summary: list[str] | None = None
        self._depth = 0  # table nesting
        self._cur: SiteTable | None = None
        self._row: list[Cell] | None = None
        self._cell: list[str] | None = None
        self._cell_hrefs: list[str] = []
        self._in_head = False
        self._after: SiteTable | None = None  # the table whose downloads may follow it
        self._carry: tuple[str, tuple[str, ...]] | None = (
            None  # the caption of the table right above, nothing between
        )
        self._figure: SiteTable | None = None
        self._downloads = 0

    # -- helpers --
    def _live(self) -> bool:
        return self._article > 0

    def _new(self, kind: str) -> SiteTable:
        intro, hrefs = _norm("".join(self._intro)), tuple(self._intro_hrefs)
        if kind == "table" and not intro and self._carry is not None:
            intro, hrefs = (
                self._carry
            )  # tables one after the other, nothing between: the caption above them is each one's
        return SiteTable(
            self.page,
            len(self.tables),
            tuple(t for _, t in self._heads),
            tuple(self._folds),
            intro,
            hrefs,
            [],
            [],
            kind=kind,
        )

    def _reset_intro(self) -> None:
        self._intro, self._intro_hrefs = [], []

    # -- parser events --
    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "article" and self._article >= 0:
            self._article += 1
            return
        if not self._live():
            return
        cls = a.get("class", "")
        if tag in ("script", "style") or (tag == "a" and "headerlink" in cls):
            self._skip += 1
            self._skip_tags.append(tag)
            return
        if self._skip:
            return
        if self._depth == 0 and self._figure is None:
            if tag in _HEADINGS:
                self._heading, self._level = [], int(tag[1])
                return
            if tag == "details":
                self._folds.append("")
                self._reset_intro()
                self._after = self._carry = None
                return
            if tag == "summary":
                self._summary = []
                return
        if tag == "figure" and "almanac-figure" in cls and self._depth == 0:
            self._figure = self._new("figure")
            self._carry = None
            return
        if tag == "table":
            self._depth += 1
            if self._depth == 1:
                self._cur = self._new("table")
            return
        if self._depth == 1 and self._cur is not None:
            if tag == "thead":
                self._in_head = True
            elif tag == "tbody":
                self._in_head = False
            elif tag == "tr":
                self._row = []
            elif tag in ("td", "th"):
                self._cell, self._cell_hrefs = [], []
            elif tag == "a" and self._cell is not None and a.get("href"):
                self._cell_hrefs.append(a["href"])
            if tag not in _INLINE and self._cell is not None:
                self._cell.append(" ")
            return
        if "almanac-downloads" in cls:
            self._downloads += 1
        if tag == "a" and a.get("href"):
            href = a["href"]
            if self._downloads and _DOWNLOAD.search(href):
                target = self._figure if self._figure is not None else self._after
                if target is not None and target.download is None:
                    target.download = _DOWNLOAD.search(href).group(1)
            elif (
                not self._downloads
                and self._heading is None
                and self._summary is None
                and self._figure is None
            ):
                self._intro_hrefs.append(href)
        if tag not in _INLINE:
            if self._heading is not None:
                self._heading.append(" ")
            elif self._summary is not None:
                self._summary.append(" ")
            else:
                self._intro.append(" ")

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.handle_starttag(tag, attrs)
        if (
            tag in ("script", "style")
            and self._skip_tags
            and self._skip_tags[-1] == tag
        ):  # <script/> never opens
            self._skip_tags.pop()
            self._skip -= 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "article" and self._article > 0:
            self._article -= 1
            if self._article == 0:
                self._article = -1
            return
        if not self._live():
            return
        if self._skip:
            if self._skip_tags and self._skip_tags[-1] == tag:
                self._skip_tags.pop()
                self._skip -= 1
            return
        if tag in _HEADINGS and self._heading is not None:
            text = _norm("".join(self._heading))
            self._heads = [h for h in self._heads if h[0] < self._level] + [
                (self._level, text)
            ]
            self._heading = None
            self._reset_intro()
            self._after = self._carry = None
            return
        if tag == "summary" and self._summary is not None:
            if self._folds:
                self._folds[-1] = _norm("".join(self._summary))
            self._summary = None
            self._reset_intro()
            return
        if tag == "details" and self._depth == 0 and self._figure is None:
            if self._folds:
                self._folds.pop()
            self._reset_intro()
            self._after = self._carry = None
            return
        if tag == "figure" and self._figure is not None and self._depth == 0:
            fig, self._figure = self._figure, None
            fig.index = len(self.tables)
            self.tables.append(fig)
            self._downloads = 0
            return
        if tag == "table" and self._depth:
            self._depth -= 1
            if self._depth == 0 and self._cur is not None:
                self._cur.index = len(self.tables)
                self.tables.append(self._cur)
                self._carry = (self._cur.intro, self._cur.intro_hrefs)
                self._after, self._cur = self._cur, None
                self._reset_intro()
            return
        if self._depth == 1 and self._cur is not None:
            if tag in ("td", "th") and self._cell is not None and self._row is not None:
                self._row.append(
                    Cell(_norm("".join(self._cell)), tuple(self._cell_hrefs))
                )
                self._cell = None
            elif tag == "tr" and self._row is not None:
                if self._in_head:
                    self._cur.headers = [c.text for c in self._row]
                else:
                    self._cur.rows.append(self._row)
                self._row = None
            elif tag == "thead":
                self._in_head = False
            elif tag not in _INLINE and self._cell is not None:
                self._cell.append(" ")
            return
        if tag in ("p", "span") and self._downloads:
            self._downloads -= 1
            return
        if tag not in _INLINE and self._heading is None and self._summary is None:
            self._intro.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._live() or self._skip:
            return
        if self._heading is not None:
            self._heading.append(data)
        elif self._summary is not None:
            self._summary.append(data)
        elif self._cell is not None:
            self._cell.append(data)
        elif self._depth == 0 and self._figure is None and not self._downloads:
            self._intro.append(data)
            if data.strip():
                self._after = self._carry = (
                    None  # prose after a table: its downloads are behind us
                )


def page_tables(html: str, page: str = "") -> list[SiteTable]:
    """Every table and chart of a page's main content, in page order."""
    p = _Tables(page)
    p.feed(html)
    p.close()
    return p.tables


# ------------------------------------------------------------------------------------------------
# A built site: its pages' tables, its published tables and artifacts
# ------------------------------------------------------------------------------------------------


class Site:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not (self.root / "index.html").is_file():
            raise SiteError(
                f"{self.root}: no built site here (no index.html); build one with "
                f"`python3 -m mkdocs build -d DIR` or pass --build"
            )
        self._pages: dict[str, list[SiteTable] | None] = {}
        self._texts: dict[str, str | None] = {}
        self._ids: set[str] | None = None
        self._short: set[str] | None = None

    def html(self, page: str) -> str | None:
        f = self.root / page
        return f.read_text(encoding="utf-8") if f.is_file() else None

    def pages(self, pattern: str) -> list[str]:
        """The built pages a claim's ``page`` names: itself, or where it is a glob (``serving/**/index.html``:
        the index and every per-host page under it) every page it matches, in name order."""
        if not _GLOB.search(pattern):
            return [pattern]
        return sorted(
            f.relative_to(self.root).as_posix()
            for f in self.root.glob(pattern)
            if f.is_file()
        )

    def tables(self, page: str) -> list[SiteTable] | None:
        if page not in self._pages:
            html = self.html(page)
            tables = None if html is None else page_tables(html, page)
            for t in tables or []:
                self._complete(t)
            self._pages[page] = tables
        return self._pages[page]

    def published(self, digest: str) -> list[dict[str, str]] | None:
        f = self.root / "tables" / f"{digest}.json"
        try:
            rows = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return rows if isinstance(rows, list) else None

    def _complete(self, t: SiteTable) -> None:
        """A chart's rows are its published data; a table cut short on the page: its full length."""
        if not t.download:
            return
        rows = self.published(t.download)
        if rows is None:
            return
        if t.kind == "figure":
            t.headers = list(dict.fromkeys(k for r in rows for k in r))
            t.rows = [
                [
                    Cell(
                        str(r.get(h, "")),
                        (str(r["artifact_json"]),)
                        if h == "artifact_json" and r.get(h)
                        else (),
                    )
                    for h in t.headers
                ]
                for r in rows
            ]
        elif len(rows) > len(t.rows):
            t.total_rows = len(rows)

    def text(self, page: str) -> str | None:
        if page not in self._texts:
            html = self.html(page)
            self._texts[page] = None if html is None else page_text(html)
        return self._texts[page]

    def artifact_ids(self) -> set[str]:
        """The id of every artifact published in the site (data/**.json), and each JSON's path."""
        if self._ids is None:
            ids: set[str] = set()
            for f in (self.root / "data").rglob("*.json"):
                rel = f.relative_to(self.root).as_posix()
                ids.add(rel)
                ids.add(f.stem)
                try:
                    doc = json.loads(f.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("id"), str):
                    ids.add(doc["id"])
            self._ids = ids
            self._short = {
                i.split("-", 1)[0] for i in ids if re.match(r"^[pq]?[0-9a-f]{12}-", i)
            }
        return self._ids

    def names_artifact(self, text: str, hrefs: tuple[str, ...]) -> bool:
        """Does a cell (or a caption) link or name an artifact published in this site?"""
        ids = self.artifact_ids()
        for h in hrefs:
            m = _ARTIFACT_HREF.search(h.split("#", 1)[0])
            if m and (
                m.group(1) in ids
                or (m.group(2) and ("data/" + m.group(2).split("data/")[-1]) in ids)
            ):
                return True
            if _ARTIFACT_SET_HREF.search(h):
                return True
        for m in _FULL_ID.finditer(text):
            if m.group(0) in ids:
                return True
        return any(m.group(0) in (self._short or ()) for m in _SHORT_ID.finditer(text))


class _MainText(HTMLParser):
    """Text of the page's first <article> (the whole document when it has none), minus scripts and styles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.article: list[str] = []
        self.whole: list[str] = []
        self._depth = 0  # nesting inside the first <article>; -1 once it has closed
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "article" and self._depth >= 0:
            self._depth += 1
        self._space(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag == "article" and self._depth > 0:
            self._depth -= 1
            if self._depth == 0:
                self._depth = -1
        self._space(tag)

    def _space(self, tag: str) -> None:
        if tag in _INLINE:
            return
        self.whole.append(" ")
        if self._depth > 0:
            self.article.append(" ")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.whole.append(data)
        if self._depth > 0:
            self.article.append(data)


def page_text(html: str) -> str:
    """A page's main text, normalised for phrase matching (tags stripped, entities unescaped, lower case)."""
    p = _MainText()
    p.feed(html)
    p.close()
    return _fold("".join(p.article if p._depth != 0 else p.whole))


# ------------------------------------------------------------------------------------------------
# The claims file
# ------------------------------------------------------------------------------------------------

_SELECT_KEYS = {"heading", "fold", "caption", "kind"}


@dataclass(frozen=True)
class Column:
    """One seed column and the page column(s) that carry it.

    ``page`` names page columns: a header as it reads (case aside), ``re:REGEX`` (the first header it
    finds), ``all:REGEX`` (every header it finds: a column per endpoint or per optimization),
    ``@heading`` (the heading right above the table: a table per model, per test) or ``@fold``
    (the title of the fold it sits in). Empty: the page has no such column (``why``). ``skip``: a
    column of commentary (notes, a use case in words), listed but not required."""

    seed: str
    page: tuple[str, ...]
    rows: tuple[
        tuple[str, str], ...
    ] = ()  # check this column on the rows whose column matches the regex
    allow: tuple[
        str, ...
    ] = ()  # regexes of values accepted although they read as empty (one cell must still hold a figure)
    select: tuple[
        tuple[str, str], ...
    ] = ()  # the column sits in another table of the page (heading, fold, caption)
    why: str | None = None  # why the page has no such column (page == ())
    skip: str | None = None  # commentary, not a figure: why it is left out


@dataclass(frozen=True)
class Claim:
    seed: str
    id: str
    claim: str
    expect: str
    seed_table: str | None = None  # where in the seed: "§ section: table caption"
    page: str | None = None
    select: tuple[tuple[str, str], ...] = ()  # (heading|fold|caption|kind, regex)
    columns: tuple[Column, ...] = ()
    rows: tuple[tuple[str, str], ...] = ()
    provenance: str = "artifacts"  # or "input:<path>"
    key: str | None = (
        None  # for input provenance: the page column (or @heading) naming the input entry
    )
    evidence: tuple[str, ...] = ()
    why: str | None = None  # for a claim without a page table: why not
    before: str | None = None  # the phrase-based judgment this replaced
    first: str | None = None  # the first judgment by content (issue 27's recount)
    changed: str | None = None  # why the judgment is no longer the first one
    note: str | None = None


def _text(entry: dict, key: str, where: str, *, required: bool = True) -> str | None:
    v = entry.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v.strip():
        raise ClaimsError(
            f"{where}: field {key!r} must be a non-empty string (got {v!r})"
        )
    return v.strip()


def _regex(v: str, where: str) -> str:
    try:
        re.compile(v)
    except re.error as e:
        raise ClaimsError(
            f"{where}: not a valid regular expression {v!r}: {e}"
        ) from None
    return v


def _filter(v: object, where: str) -> tuple[tuple[str, str], ...]:
    if v is None:
        return ()
    if not isinstance(v, dict) or not all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    ):
        raise ClaimsError(
            f"{where}: expected a mapping of column name to regular expression (got {v!r})"
        )
    return tuple((k, _regex(x, where)) for k, x in v.items())


def _selector(v: object, where: str) -> tuple[tuple[str, str], ...]:
    if (
        not isinstance(v, dict)
        or not v
        or not set(v) <= _SELECT_KEYS
        or not all(isinstance(x, str) for x in v.values())
    ):
        raise ClaimsError(
            f"{where}: expected a mapping with heading, fold, caption and/or kind (got {v!r})"
        )
    if v.get("kind", "table") not in ("table", "figure"):
        raise ClaimsError(
            f"{where}: 'kind' must be table or figure (got {v.get('kind')!r})"
        )
    return tuple((k, x if k == "kind" else _regex(x, where)) for k, x in v.items())


def _header_names(v: object, where: str) -> tuple[str, ...]:
    names = [v] if isinstance(v, str) else v
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) and n.strip() for n in names)
    ):
        raise ClaimsError(
            f"{where}: expected a page column name or a list of them (got {v!r})"
        )
    for n in names:
        if n.startswith(("re:", "all:")):
            _regex(n.split(":", 1)[1], where)
        elif n.startswith("@") and n not in ("@heading", "@fold"):
            raise ClaimsError(
                f"{where}: {n!r}: the only pseudo-columns are @heading and @fold"
            )
    return tuple(n.strip() for n in names)


_COLUMN_KEYS = {"page", "rows", "allow", "in", "why", "skip"}


def _column(seed_col: str, v: object, where: str) -> Column:
    w = f"{where}: columns[{seed_col!r}]"
    if v is None:
        raise ClaimsError(
            f"{w}: a seed column the page lacks needs {{page: null, why: ...}}"
        )
    if isinstance(v, (str, list)):
        return Column(seed_col, _header_names(v, w))
    if not isinstance(v, dict) or not set(v) <= _COLUMN_KEYS:
        raise ClaimsError(
            f"{w}: expected a column name, a list, or a mapping with {', '.join(sorted(_COLUMN_KEYS))} (got {v!r})"
        )
    if v.get("skip") is not None:
        return Column(seed_col, (), skip=_text(v, "skip", w))
    if v.get("page") is None:
        return Column(seed_col, (), why=_text(v, "why", w))
    allow = v.get("allow") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise ClaimsError(
            f"{w}: field 'allow' must be a list of regular expressions (got {allow!r})"
        )
    return Column(
        seed_col,
        _header_names(v["page"], w),
        _filter(v.get("rows"), f"{w}.rows"),
        tuple(_regex(a, w) for a in allow),
        _selector(v["in"], f"{w}.in") if v.get("in") is not None else (),
        _text(v, "why", w, required=False),
    )


_FIELDS = {
    "seed",
    "id",
    "claim",
    "expect",
    "seed_table",
    "page",
    "table",
    "columns",
    "rows",
    "provenance",
    "evidence",
    "why",
    "before",
    "first",
    "changed",
    "note",
}


def parse_claims(data: object, source: str = "claims") -> list[Claim]:
    """The claims of a loaded YAML document (``{claims: [...]}``), each entry checked."""
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsError(f"{source}: expected a mapping with a 'claims' list")
    out: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(data["claims"]):
        where = f"{source}: claims[{i}]"
        if not isinstance(entry, dict):
            raise ClaimsError(
                f"{where}: expected a mapping, got {type(entry).__name__}"
            )
        seed = entry.get("seed")
        if not isinstance(seed, str) or not _SEED.match(seed):
            raise ClaimsError(
                f"{where}: field 'seed' must be a quoted three-digit string such as \"001\" (got {seed!r})"
            )
        cid = _text(entry, "id", where)
        where = f"{source}: claims[{i}] (seed {seed}, id {cid})"
        if (seed, cid) in seen:
            raise ClaimsError(f"{where}: id used twice for this seed")
        seen.add((seed, cid))
        unknown = set(entry) - _FIELDS
        if unknown:
            raise ClaimsError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        claim = _text(entry, "claim", where)
        expect = entry.get("expect")
        if expect not in STATUSES:
            raise ClaimsError(
                f"{where}: field 'expect' must be one of {', '.join(STATUSES)} (got {expect!r})"
            )
        before = entry.get("before")
        if before is not None and before not in STATUSES:
            raise ClaimsError(
                f"{where}: field 'before' must be one of {', '.join(STATUSES)} (got {before!r})"
            )
        first = entry.get("first")
        if first is not None and first not in STATUSES:
            raise ClaimsError(
                f"{where}: field 'first' must be one of {', '.join(STATUSES)} (got {first!r})"
            )
        page = _text(entry, "page", where, required=False)
        if page is not None and (page.startswith("/") or ".." in page.split("/")):
            raise ClaimsError(
                f"{where}: field 'page' must be a path under the site (got {page!r})"
            )
        ev = entry.get("evidence") or []
        if not isinstance(ev, list) or not all(
            isinstance(p, str) and p.strip() for p in ev
        ):
            raise ClaimsError(
                f"{where}: field 'evidence' must be a list of phrases (got {ev!r})"
            )
        common = dict(
            seed=seed,
            id=cid,
            claim=claim,
            expect=expect,
            before=before,
            first=first,
            changed=_text(entry, "changed", where, required=False),
            seed_table=_text(entry, "seed_table", where, required=False),
            note=_text(entry, "note", where, required=False),
            evidence=tuple(p.strip() for p in ev),
        )
        if page is None:
            if any(
                entry.get(k) is not None
                for k in ("table", "columns", "rows", "provenance")
            ):
                raise ClaimsError(
                    f"{where}: field 'page' is required with table/columns/rows/provenance"
                )
            out.append(Claim(**common, why=_text(entry, "why", where)))
            continue
        select = _selector(entry.get("table"), f"{where}: field 'table'")
        cols = entry.get("columns")
        if not isinstance(cols, dict) or not cols:
            raise ClaimsError(
                f"{where}: field 'columns' must map each seed column to page column(s) (got {cols!r})"
            )
        columns = tuple(_column(str(k), v, where) for k, v in cols.items())
        if all(col.skip for col in columns):
            raise ClaimsError(
                f"{where}: field 'columns': at least one seed column must be checked (not all skip)"
            )
        prov = entry.get("provenance", "artifacts")
        key = None
        if (
            isinstance(prov, dict)
            and set(prov) == {"input", "key"}
            and all(isinstance(v, str) for v in prov.values())
        ):
            if not (ROOT / prov["input"]).exists():
                raise ClaimsError(
                    f"{where}: provenance input {prov['input']!r} is not a file or folder of the repository"
                )
            prov, key = f"input:{prov['input']}", prov["key"]
        elif prov != "artifacts":
            raise ClaimsError(
                f"{where}: field 'provenance' must be 'artifacts' or {{input: PATH, key: "
                f"COLUMN|@heading}} (got {prov!r})"
            )
        out.append(
            Claim(
                **common,
                page=page,
                select=select,
                columns=columns,
                rows=_filter(entry.get("rows"), f"{where}.rows"),
                provenance=prov,
                key=key,
                why=_text(entry, "why", where, required=False),
            )
        )
    return out


def load_claims(path: Path) -> list[Claim]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ClaimsError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ClaimsError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return parse_claims(data, str(path))


def load_seeds(path: Path) -> dict[str, dict]:
    try:
        seeds = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("seeds")
    except (OSError, yaml.YAMLError):
        return {}
    return seeds if isinstance(seeds, dict) else {}


# ------------------------------------------------------------------------------------------------
# Judging a claim
# ------------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    claim: Claim
    status: str
    table: SiteTable | None = None
    where: str = ""  # the page's table judged: where it sits, its rows
    holds: list[str] = field(default_factory=list)  # what the table shows
    lacks: list[str] = field(default_factory=list)  # why it is not living
    phrases_missing: list[str] = field(default_factory=list)

    def why(self) -> str:
        return "; ".join(self.lacks)


def _header_index(headers: list[str], name: str) -> int | None:
    if name in ("@heading", "@fold"):
        return -1 if name == "@heading" else -2
    if name.startswith("re:"):
        rx = re.compile(name[3:], re.I)
        return next((i for i, h in enumerate(headers) if rx.search(h)), None)
    want = _fold(name)
    return next((i for i, h in enumerate(headers) if _fold(h) == want), None)


def _value(t: SiteTable, row: list[Cell], i: int) -> Cell:
    if i == -1:
        return Cell(t.headings[-1] if t.headings else "")
    if i == -2:
        return Cell(t.folds[-1] if t.folds else "")
    return row[i] if i < len(row) else Cell("")


def _label(t: SiteTable, i: int) -> str:
    return {-1: "the heading above", -2: "the fold title"}.get(i) or f"“{t.headers[i]}”"


def _matches(t: SiteTable, select: tuple[tuple[str, str], ...]) -> bool:
    if t.kind != dict(select).get("kind", "table"):
        return False
    for what, rx in select:
        r = re.compile(rx, re.I)
        if what == "heading" and not any(r.search(h) for h in (*t.headings, *t.folds)):
            return False
        if what == "fold" and not any(r.search(f) for f in t.folds):
            return False
        if what == "caption" and not r.search(t.intro):
            return False
    return True


def _describe(filt: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k} ~ /{v}/" for k, v in filt)


def _row_filter(
    t: SiteTable, rows: list[list[Cell]], filt: tuple[tuple[str, str], ...]
) -> tuple[list[list[Cell]], str | None]:
    for col, rx in filt:
        i = _header_index(t.headers, col)
        if i is None:
            return [], f"no column “{col}” to pick its rows by"
        r = re.compile(rx, re.I)
        rows = [row for row in rows if r.search(_value(t, row, i).text)]
    return rows, None


def _shown_name(name: str) -> str:
    return (
        f"/{name[3:]}/"
        if name.startswith("re:")
        else (f"all /{name[4:]}/" if name.startswith("all:") else name)
    )


def _short(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _input_text(path: str) -> str:
    p = ROOT / path
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return "\n".join(
        f"{f.name}\n{f.read_text(encoding='utf-8', errors='replace')}" for f in files
    ).casefold()


def _key_words(k: str) -> list[str]:
    """The words of a key cell that name an input entry: its ids (kv-cache-q8-0, basic_facts), or the
    whole cell when it has none (a plain name such as "agentic")."""
    return [
        w
        for w in re.findall(r"[a-z0-9][a-z0-9_.-]*[-_][a-z0-9_.-]+", k.casefold())
        if re.search(r"[a-z]", w)
    ] or [_fold(k)]


@dataclass
class _ColumnCheck:
    ok: bool
    held: str = ""  # what the column shows, when ok
    lack: str = ""  # why not, when not ok
    table: SiteTable | None = None
    rows: list[list[Cell]] = field(default_factory=list)


def _indices(
    headers: list[str], names: tuple[str, ...]
) -> list[tuple[int | None, str]]:
    """Each named page column's index (None: not there); ``all:REGEX`` stands for every header it matches."""
    out: list[tuple[int | None, str]] = []
    for n in names:
        if n.startswith("all:"):
            rx = re.compile(n[4:], re.I)
            out += [(i, n) for i, h in enumerate(headers) if rx.search(h)] or [
                (None, n)
            ]
        else:
            out.append((_header_index(headers, n), n))
    return out


def _check_column(col: Column, t: SiteTable, rows: list[list[Cell]]) -> _ColumnCheck:
    idx = _indices(t.headers, col.page)
    absent = [n for i, n in idx if i is None]
    if absent:
        return _ColumnCheck(
            False,
            lack=f"“{col.seed}”: no column {', '.join(f'“{_shown_name(n)}”' for n in absent)} in the {t.where()}",
        )
    crow, err = _row_filter(t, rows, col.rows)
    if err or not crow:
        return _ColumnCheck(
            False,
            lack=f"“{col.seed}”: {err or 'no row for it'}"
            + (f" ({_describe(col.rows)})" if col.rows and not err else ""),
        )
    allow = [re.compile(a, re.I) for a in col.allow]
    names = " + ".join(_label(t, i) for i, _ in idx)
    bad_rows, example, filled = 0, "", 0
    for r in crow:
        bad = False
        for i, _ in idx:
            text = _value(t, r, i).text
            if EMPTY.match(text):
                if not any(a.search(text) for a in allow):
                    bad = True
                    example = example or text
            else:
                filled += 1
        bad_rows += bad
    if bad_rows:
        return _ColumnCheck(
            False,
            lack=f"“{col.seed}” → {names}: empty in {bad_rows} of {len(crow)} rows (“{_short(example, 40)}”)",
        )
    if not filled:
        return _ColumnCheck(
            False, lack=f"“{col.seed}” → {names}: no row holds a figure"
        )
    where = "" if not col.select else f" ({t.where()})"
    return _ColumnCheck(True, held=f"{col.seed} → {names}{where}", table=t, rows=crow)


_SOURCES_ROW = re.compile(r"^sources?$", re.I)


def _table_sourced(t: SiteTable, site: Site) -> bool:
    """The table's caption, heading or fold title links or names the one artifact its rows come from, or
    (a table of cases by endpoint) a row of sources links the artifact of each column."""
    if site.names_artifact(t.intro, t.intro_hrefs) or any(
        site.names_artifact(h, ()) for h in (*t.headings[1:], *t.folds)
    ):
        return True
    return any(
        r
        and _SOURCES_ROW.match(r[0].text)
        and all(site.names_artifact(x.text, x.hrefs) for x in r[1:])
        for r in t.rows
    )


def _provenance(
    c: Claim, t: SiteTable, rows: list[list[Cell]], site: Site
) -> tuple[bool, str]:
    if c.provenance == "artifacts":
        unsourced = [
            r for r in rows if not any(site.names_artifact(x.text, x.hrefs) for x in r)
        ]
        if not unsourced:
            return True, "every row links its artifact"
        if _table_sourced(t, site):
            return True, "its caption or heading links the artifact its rows come from"
        return False, (
            f"{len(unsourced)} of {len(rows)} rows link or name no artifact "
            f"(e.g. “{_short(' | '.join(x.text for x in unsourced[0][:3]), 60)}”)"
        )
    path = c.provenance.split(":", 1)[1]
    text = _input_text(path)
    if (
        c.key == "@heading"
    ):  # a table per model (or per entry): the headings above it name the entry
        keys = [" ".join((*t.headings[1:], *t.folds))] * len(rows)
    else:
        i = _header_index(t.headers, c.key or "")
        keys = [_value(t, r, i).text if i is not None else "" for r in rows]
    bad = [k for k in keys if not k or not any(w in text for w in _key_words(k))]
    if bad:
        return (
            False,
            f"{len(bad)} of {len(rows)} rows name no entry of {path} (e.g. “{_short(bad[0], 40)}”)",
        )
    return True, f"rows derived from the committed input {path}, not from measurements"


def _judge_table(
    c: Claim, t: SiteTable, site: Site
) -> tuple[str, list[str], list[str], tuple]:
    """One candidate table against the claim: (status, holds, lacks, score)."""
    holds: list[str] = []
    lacks: list[str] = []
    rows, err = _row_filter(t, t.rows, c.rows)
    if err:
        return "missing", holds, [f"{t.where()}: {err}"], (0, 0, 0, 0)
    if not rows:
        what = f" matching {_describe(c.rows)}" if c.rows else ""
        return "missing", holds, [f"the {t.where()} has no row{what}"], (0, 0, 0, 0)
    good, checked, sourced = 0, 0, True
    for col in c.columns:
        if col.skip:
            holds.append(f"{col.seed}: left out ({col.skip})")
            continue
        checked += 1
        if not col.page:
            lacks.append(f"“{col.seed}”: not on the page ({col.why})")
            continue
        if (
            col.select
        ):  # the column sits in another table of the page: the best one that has it
            results = []
            for o in (
                o for o in site.tables(t.page) or [] if _matches(o, col.select)
            ):  # on the judged table's page
                r = _check_column(col, o, _row_filter(o, o.rows, c.rows)[0])
                if r.ok:
                    ok, why = _provenance(c, o, r.rows, site)
                    r = (
                        r
                        if ok
                        else _ColumnCheck(
                            False, lack=f"“{col.seed}” ({o.where()}): {why}", table=o
                        )
                    )
                results.append(r)
            # the first table where the column holds and its rows name their artifacts; else the first that has it
            res = next(
                (r for r in results if r.ok),
                next(
                    (r for r in results if r.table),
                    results[0]
                    if results
                    else _ColumnCheck(
                        False,
                        lack=f"“{col.seed}”: no table under {_describe(col.select)}",
                    ),
                ),
            )
        else:
            res = _check_column(col, t, rows)
        if res.ok:
            good += 1
            holds.append(res.held)
        else:
            lacks.append(res.lack)
    ok, why = _provenance(c, t, rows, site)
    if ok:
        holds.append(why)
    else:
        lacks.append(why)
        sourced = False
    if good == checked and sourced:
        status = "living"
    elif good:
        status = "partial"
    else:
        status = "missing"
        lacks.insert(0, f"the {t.where()} shows none of the seed's columns")
    return (
        status,
        holds,
        lacks,
        ("missing partial living".split().index(status), good, int(sourced), len(rows)),
    )


def judge(c: Claim, site: Site) -> Verdict:
    v = Verdict(c, "missing")
    if c.page is None:
        v.lacks.append(c.why or "no page shows it")
    else:
        pages = [p for p in site.pages(c.page) if site.tables(p) is not None]
        if not pages:
            v.lacks.append(
                f"{c.page}: page not found"
                if not _GLOB.search(c.page)
                else f"{c.page}: no page matches"
            )
        else:
            cands = [
                t for p in pages for t in site.tables(p) or [] if _matches(t, c.select)
            ]
            if not cands:
                kind = dict(c.select).get("kind", "table")
                v.lacks.append(
                    f"{c.page}: no {kind} under {_describe(tuple(x for x in c.select if x[0] != 'kind'))}"
                )
            else:  # the best table of every page the claim names (the first of equals: page name, then page order)
                best = max(
                    (_judge_table(c, t, site) + (t,) for t in cands), key=lambda r: r[3]
                )
                v.status, v.holds, v.lacks, score, v.table = best
                t = v.table
                n = score[3]
                rows = (
                    f"{n} row{'s' if n != 1 else ''}"
                    if n
                    else f"no matching row of {len(t.rows)}"
                )
                on = len({x.page for x in cands})
                v.where = (
                    f"{t.page}: {t.where()}, {rows}"
                    + (
                        f" (the page shows {len(t.rows)} of {t.total_rows})"
                        if t.total_rows
                        else ""
                    )
                    + (f"; the best of {len(cands)} matching" if len(cands) > 1 else "")
                    + (f" on {on} pages ({c.page})" if on > 1 else "")
                )
    if c.evidence and c.page:
        text = (
            site.text(
                v.table.page
                if v.table is not None
                else (site.pages(c.page) or [c.page])[0]
            )
            or ""
        )
        v.phrases_missing = [p for p in c.evidence if _fold(p) not in text]
    return v


def judge_all(claims: list[Claim], site: Site) -> list[Verdict]:
    return [judge(c, site) for c in claims]


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------


def counts(statuses: list[str]) -> dict[str, int]:
    return {s: sum(x == s for x in statuses) for s in STATUSES}


def tally(label: str, statuses: list[str]) -> str:
    n = counts(statuses)
    return f"{label} {n['living']}/{len(statuses)} living, {n['partial']} partial, {n['missing']} missing"


def _cell(s: str) -> str:
    return _SPACE.sub(" ", s).replace("|", "\\|")


# Why a claim is not living, grouped: (pattern in a reason, the group's name), first match wins.
IMPOSSIBLE = "no page: nothing here can measure it (impossible here)"
NOT_MEASURED = "no page: not measured (no test kind or page for it yet)"
REASON_GROUPS = (
    (
        re.compile(
            (
                r": page not found$|: no page matches$|no (table|chart) under|has no row "
                r"matching|shows none of the seed's columns"
            )
        ),
        "no page table answers it",
    ),
    (re.compile(r": not on the page \("), "a seed column has no page column"),
    (
        re.compile(r"empty in \d+ of|no row holds a figure"),
        "a page column is there but empty (no data, not measured, —)",
    ),
    (
        re.compile(r"no row for it|no column “"),
        "no page row or column for a seed column",
    ),
    (
        re.compile(r"link or name no artifact|name no entry of"),
        "rows link no artifact (typed or summed figures)",
    ),
)


def reason_groups(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    """Each group's claims (a claim is in every group one of its reasons falls in)."""
    out: dict[str, list[Verdict]] = {
        IMPOSSIBLE: [],
        NOT_MEASURED: [],
        **{name: [] for _, name in REASON_GROUPS},
        "other": [],
    }
    for v in verdicts:
        if v.status == "living":
            continue
        if v.claim.page is None:
            out[
                IMPOSSIBLE if "impossible here" in (v.claim.why or "") else NOT_MEASURED
            ].append(v)
            continue
        names = {
            next((name for rx, name in REASON_GROUPS if rx.search(r)), "other")
            for r in v.lacks
        }
        for name in names:
            out[name].append(v)
    return {k: vs for k, vs in out.items() if vs}


def report(
    verdicts: list[Verdict], seeds: dict | None = None, header: list[str] | None = None
) -> str:
    """The Markdown report: the counts per seed before (phrases) and after (content), the reasons
    grouped, then per seed a row per claim (the seed's table, the page's, the judgment and why)."""
    seeds = seeds or {}
    order = sorted({v.claim.seed for v in verdicts})
    lines: list[str] = list(header or [])
    has_before = all(v.claim.before for v in verdicts)
    has_first = bool(verdicts) and all(v.claim.first for v in verdicts)
    lines += [
        "## Counts",
        "",
        "| seed | before (phrases on a page) |"
        + (" first count by content |" if has_first else "")
        + " after (tables judged by content) |",
        "|---|---|---|" + ("---|" if has_first else ""),
    ]
    for s in order + ["all"]:
        mine = [v for v in verdicts if s == "all" or v.claim.seed == s]
        label = "All seeds" if s == "all" else f"S{int(s)}"
        before = (
            tally("", [v.claim.before or "" for v in mine]).strip()
            if has_before
            else "—"
        )
        first = (
            f" {tally('', [v.claim.first or '' for v in mine]).strip()} |"
            if has_first
            else ""
        )
        lines.append(
            f"| {label} | {before} |{first} {tally('', [v.status for v in mine]).strip()} |"
        )
    if has_first:
        moved = [v for v in verdicts if v.status != v.claim.first]
        lines += [
            "",
            "## Changed since the first count by content",
            "",
            f"{len(moved)} claim(s) judged otherwise than in the first count by content "
            "(each claim's `first`), and why "
            "(each claim's `changed`, then what its table lacks now).",
            "",
        ]
        if moved:
            lines += [
                "| claim | first → now | the page's table now | why |",
                "|---|---|---|---|",
            ]
        for v in moved:
            c = v.claim
            why = (c.changed or "(no reason given: the claims file's `changed`)") + (
                f". Now: {v.why()}" if v.lacks else ""
            )
            lines.append(
                f"| S{int(c.seed)} {c.id} | {c.first} → {v.status} | {_cell(v.where or c.page or '—')} | {_cell(why)} |"
            )
    lines += [
        "",
        "## Why claims are not living, grouped",
        "",
        "A claim counts in each group one of its reasons falls in (the reasons themselves are in the tables below).",
        "",
        "| reason | claims | which |",
        "|---|---|---|",
    ]
    for name, vs in reason_groups(verdicts).items():
        which = ", ".join(f"S{int(v.claim.seed)} {v.claim.id} ({v.status})" for v in vs)
        lines.append(f"| {name} | {len(vs)} | {_cell(which)} |")
    lines.append("")
    for s in order:
        mine = [v for v in verdicts if v.claim.seed == s]
        meta = seeds.get(s) or {}
        title = " · ".join(str(meta[k]) for k in ("file", "title") if meta.get(k))
        lines += [
            f"## S{int(s)} ({s}){': ' + title if title else ''}",
            "",
            "| claim type | the seed's table | the page's table | status | seed column → page column; why not living |",
            "|---|---|---|---|---|",
        ]
        for v in sorted(
            mine, key=lambda v: STATUSES.index(v.status)
        ):  # stable: the seed's order within a status
            c = v.claim
            seed_part = c.seed_table or c.claim
            where = v.where or (c.page or "—")
            change = (
                f"{c.before} → {v.status}"
                if c.before and c.before != v.status
                else v.status
            )
            shown = "; ".join(v.holds)
            why = (
                shown
                if v.status == "living"
                else (f"**{v.why()}**" + (f". Shown: {shown}" if shown else ""))
            )
            if c.note:
                why += f". Note: {c.note}"
            if c.evidence:
                why += (
                    f". Phrases not found: {', '.join(repr(p) for p in v.phrases_missing)}"
                    if v.phrases_missing
                    else ". Phrases found (extra evidence only)"
                )
            lines.append(
                f"| {c.id} | {_cell(seed_part)} | {_cell(where)} | {change} | {_cell(why)} |"
            )
        lines += ["", tally(f"S{int(s)}", [v.status for v in mine]), ""]
    lines += ["## Total", ""]
    lines += [
        tally(f"S{int(s)}", [v.status for v in verdicts if v.claim.seed == s])
        for s in order
    ]
    lines.append(tally("All seeds", [v.status for v in verdicts]))
    return "\n".join(lines) + "\n"


def update_expectations(path: Path, verdicts: list[Verdict]) -> int:
    """Write each claim's judgment into its ``expect:`` line of the claims file (the text is edited in
    place, comments and layout kept); returns how many changed."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    found = {
        (v.claim.seed, v.claim.id): v.status
        for v in verdicts
        if v.status != v.claim.expect
    }
    seed = cid = None
    changed = 0
    for i, line in enumerate(lines):
        m = re.match(r"^\s*-?\s*(seed|id|expect):\s*(.+?)\s*$", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip("'\"")
        if key == "seed":
            seed, cid = value, None
        elif key == "id":
            cid = value
        elif (seed, cid) in found:
            lines[i] = (
                line[: line.index("expect:")] + f"expect: {found.pop((seed, cid))}\n"
            )
            changed += 1
    path.write_text("".join(lines), encoding="utf-8")
    return changed


def disagreements(verdicts: list[Verdict]) -> list[str]:
    return [
        f"seed {v.claim.seed} claim {v.claim.id!r}: expected {v.claim.expect}, found {v.status}"
        + (f" ({v.why()})" if v.status != "living" else "")
        for v in verdicts
        if v.status != v.claim.expect
    ]


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------


def build_site(out: Path) -> None:
    """The site of this checkout's data, built (strict) into ``out``."""
    env = dict(os.environ, DISABLE_MKDOCS_2_WARNING="true", NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SiteError(
            f"mkdocs build failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:] or ''}"
        )


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "data", "docs", "pipelines", "core"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def list_tables(site: Site, page: str) -> str:
    tables = site.tables(page)
    if tables is None:
        raise SiteError(f"{site.root / page}: no such page")
    out = []
    for t in tables:
        rows = f"{len(t.rows)} rows" + (f" (of {t.total_rows})" if t.total_rows else "")
        out.append(
            f"#{t.index} {t.where()} · {rows}"
            + (f" · tables/{t.download}.json" if t.download else "")
        )
        if t.intro:
            out.append(f"    caption: {_short(t.intro, 160)}")
        out.append(f"    columns: {' | '.join(t.headers)}")
    return "\n".join(out) + "\n"


def _header(how: str, claims_path: Path, diffs: list[str]) -> list[str]:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%MZ")
    try:
        claims_name = claims_path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        claims_name = str(claims_path)
    return [
        "# The seeds, claim by claim, judged by the content of the built site's tables",
        "",
        f"- Date: {now}; site built from commit {_commit()} (committed data as is)",
        f"- Produced by: `{how}` (claims, seed tables and column mappings in `{claims_name}`; "
        + (
            "every judgment is the one the claims file expects, exit 0)"
            if not diffs
            else f"{len(diffs)} judgment(s) differ from the claims file, exit 1)"
        ),
        "- living: the page's table answering the seed's table is there, every seed "
        "column maps to page columns that are present "
        "and filled in every row the claim looks at, and every row links (or names) "
        "the artifact it comes from. partial: the table "
        "is there but some seed columns are missing or empty, or its rows name no "
        "artifact (which, below). missing: no such table. "
        "Phrases on a page are extra evidence only.",
        "- before: the phrase-based count this replaces (a claim was living when its phrases were on its page). "
        "first count by content: the first judgment by these rules (issue 27, "
        "commit 76f7015), the claims file's `first`; "
        "the claims judged otherwise now are listed with why.",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--site",
        type=Path,
        default=None,
        help="a built site directory (default: site/, or a fresh build with --build)",
    )
    ap.add_argument(
        "--build",
        action="store_true",
        help="build the site of this checkout first (into --site, or a temporary folder)",
    )
    ap.add_argument(
        "--claims",
        type=Path,
        default=CLAIMS,
        help=f"the claims file (default: {CLAIMS.name} beside this script)",
    )
    ap.add_argument(
        "--report",
        type=Path,
        default=None,
        help=f"also write the report there (the committed one: {REPORT.relative_to(ROOT)})",
    )
    ap.add_argument(
        "--tables",
        metavar="PAGE",
        default=None,
        help="list the tables of one built page (e.g. optimization/index.html) and exit",
    )
    ap.add_argument(
        "--update-expect",
        action="store_true",
        help="write the judgments found into the claims file's expect fields (after pages changed on purpose)",
    )
    args = ap.parse_args(argv)
    try:
        claims = [] if args.tables else load_claims(args.claims)
        seeds = load_seeds(args.claims)
    except ClaimsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="seed-claims-site-") as tmp:
        site_dir = args.site or (Path(tmp) if args.build else Path("site"))
        try:
            if args.build:
                build_site(site_dir)
            site = Site(site_dir)
            if args.tables:
                sys.stdout.write(list_tables(site, args.tables))
                return 0
            verdicts = judge_all(claims, site)
        except SiteError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    diffs = disagreements(verdicts)
    if diffs and args.update_expect:
        n = update_expectations(args.claims, verdicts)
        print(f"{args.claims}: {n} expect field(s) updated", file=sys.stderr)
        claims = load_claims(args.claims)
        verdicts = [
            Verdict(**{**v.__dict__, "claim": c}) for v, c in zip(verdicts, claims)
        ]
        diffs = disagreements(verdicts)
    how = (
        "python3 benchmarks/seed_claims.py --build"
        + (f" --report {args.report}" if args.report else "")
        if args.build
        else f"python3 benchmarks/seed_claims.py --site {site_dir}"
    )
    text = report(verdicts, seeds, _header(how, args.claims, diffs))
    sys.stdout.write(text)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text, encoding="utf-8")
    for d in diffs:
        print(f"judgment differs: {d}", file=sys.stderr)
    if diffs:
        print(
            f"{len(diffs)} judgment(s) differ from {args.claims.name}", file=sys.stderr
        )
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
