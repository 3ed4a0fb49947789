"""Markdown building blocks. Every value that comes from an artifact passes through
``cell()`` (HTML-escaped, Markdown-neutralised) before it reaches a page.

Every table offers its rows as CSV and JSON: ``table()`` registers its rows (as plain text)
under a digest of their content, and the build hook writes ``tables/<digest>.csv`` and
``.json`` into the site. A table longer than ``MAX_INLINE_ROWS`` shows its first rows and
says so; the downloads hold all of them.
"""

from __future__ import annotations

import functools
import hashlib
import html
import io
import json
import math
import operator
import re
import secrets
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from core import csvcell

_MD_SPECIAL = re.compile(r"([\\`*_\[\]()#+!~|])")
# Braces become HTML entities: the pages go through mkdocs-macros (Jinja), and text such as
# a chat template ("{% for m in messages %}") in an artifact must stay text, never a tag.
_BRACES = str.maketrans({"{": "&#123;", "}": "&#125;"})


def _no_jinja(text: str) -> str:
    return text.translate(_BRACES)


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell or paragraph: no HTML, no Markdown syntax."""
    if value is None:
        return "—"
    text = str(value).replace("\r", " ").replace("\n", " ")
    text = html.escape(text, quote=True)
    return _no_jinja(_MD_SPECIAL.sub(r"\\\1", text))


# Inside raw HTML that Markdown passes on (<code>, <pre>), Markdown still reads the text between the
# tags: a link, an image or emphasis there would become live. Every character that HTML, inline
# Markdown (and its extensions here: attr_list, tables, md_in_html) or mkdocs-macros' Jinja gives a
# meaning to becomes a numeric character reference: the browser shows the character, Markdown
# leaves it alone. Text kept on several lines (pre) also loses what starts a block at a line start
# (headings, lists, quotes, fences, setext underlines).
# An underscore between two word characters can neither open nor close emphasis (Python-Markdown's
# rule), so names such as tokens_per_second stay as they are; any other underscore becomes a reference.
_INLINE_REFS = {c: f"&#{ord(c)};" for c in "&<>\"'\\`*[](){}|!"}
_TEXT_REFS = str.maketrans(_INLINE_REFS)
_BLOCK_REFS = str.maketrans({**_INLINE_REFS, **{c: f"&#{ord(c)};" for c in "#+-.=~:"}})
_EDGE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")


def as_text(value: Any, *, block: bool = False) -> str:
    """Text as HTML character data that neither HTML nor Markdown nor Jinja reads as markup: the one
    escaping path for text inside raw HTML (code(), pre()). One pass, so nothing is escaped twice;
    ``block``: line breaks kept, line-start syntax neutralised too."""
    if block:
        text = str(value).translate(_BLOCK_REFS)
    else:
        text = str(value).replace("\r", " ").replace("\n", " ").translate(_TEXT_REFS)
    return _EDGE_UNDERSCORE.sub("&#95;", text) if "_" in text else text


def code(value: Any) -> str:
    """Inline code that cannot break out or carry markup (HTML <code>, its text escaped by as_text)."""
    return f"<code>{as_text(value)}</code>"


def pre(text: str) -> str:
    """A preformatted block for logs and raw output (as_text: no tag, no fence, no link can form)."""
    # Backticks are entities too: MkDocs always enables fenced_code, which would otherwise turn a
    # ``` line inside the block (model output, a log) into a code block and swallow what follows.
    return f'<pre class="almanac-pre">{as_text(text, block=True)}</pre>'


def num(value: Any, decimals: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{float(value):,.{decimals}f}"


def nbytes(value: Any) -> str:
    if value is None:
        return "—"
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return str(value)


def pct(x: float | None, decimals: int = 1, sign: bool = True) -> str:
    """A fraction as a percentage, signed unless ``sign`` is false ("—" for none)."""
    if x is None:
        return "—"
    return f"{x * 100:+.{decimals}f}%" if sign else f"{x * 100:.{decimals}f}%"


def times(x: float | None, decimals: int = 2) -> str:
    """A factor as "×1.23" ("—" for none)."""
    return "—" if x is None else f"×{x:.{decimals}f}"


def ci_cell(lo: Any, hi: Any, decimals: int = 2, why: str | None = None) -> str:
    """An interval "low – high", or "—" with the reason there is none (small, after it)."""
    if lo is None or hi is None or (isinstance(lo, float) and not math.isfinite(lo)):
        return "—" + (f" <small>({cell(why)})</small>" if why else "")
    return f"{num(lo, decimals)} – {num(hi, decimals)}"


def link(text: str, target: str) -> str:
    """A Markdown link; ``text`` is escaped, ``target`` is a path we built (ids are validated)."""
    return f"[{cell(text)}]({target})"


MAX_INLINE_ROWS = (
    100  # a longer table folds (every row stays on the page and in the downloads)
)
# replaced per page by the build hook (pipelines/site/hooks.py) with the way to the site root
ROOT = "@@ALMANAC_ROOT@@/"
_TABLES: dict[
    str, tuple[list[str], list[list[str]]]
] = {}  # digest -> (headers, rows) as plain text

_TAG = re.compile(r"<[^>]+>")
_NEEDS_PLAIN = re.compile(r"[<\[\\*&]")
_MD_LINK = re.compile(r"\[((?:\\.|[^\]\\])*)\]\([^)]*\)")
_MD_UNESCAPE = re.compile(r"\\([\\`*_\[\]()#+!~|])")
_GROUP_1 = operator.methodcaller(
    "group", 1
)  # a match's first group (re.sub's r"\1", without its template)


def plain(rendered: str) -> str:
    """The text of a rendered cell (links, HTML tags, escapes and bold removed), for CSV and JSON."""
    if not _NEEDS_PLAIN.search(rendered):
        return rendered.strip()
    text = _MD_LINK.sub(_GROUP_1, rendered.replace("<br>", "; "))
    text = _TAG.sub("", text)
    text = _MD_UNESCAPE.sub(_GROUP_1, text.replace("**", ""))
    return html.unescape(text).strip()


def register_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Keep a table's plain rows for the downloads; returns its digest (its file name)."""
    ph = [plain(h) for h in headers]
    # most cells (figures, names) need none of plain()'s steps: its first test, inline, saves a call per cell
    needs = _NEEDS_PLAIN.search
    pr = [[plain(c) if needs(c) else c.strip() for c in r] for r in rows]
    digest = hashlib.sha256(
        json.dumps([ph, pr], ensure_ascii=False).encode()
    ).hexdigest()[:16]
    _TABLES[digest] = (ph, pr)
    return digest


def table_files() -> dict[str, tuple[list[str], list[list[str]]]]:
    return _TABLES


def reset_tables() -> None:
    _TABLES.clear()


def table_csv(headers: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csvcell.writer(buf, lineterminator="\n")
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()


def table_json(headers: list[str], rows: list[list[str]]) -> str:
    keys = []
    for i, h in enumerate(headers):  # unique keys even when two headers read the same
        k = h or f"column {i + 1}"
        keys.append(k if k not in keys else f"{k} ({i + 1})")
    # one row a line (json's C encoder; an indented dump goes through the pure-Python one)
    return (
        "[\n"
        + ",\n".join(json.dumps(dict(zip(keys, r)), ensure_ascii=False) for r in rows)
        + "\n]\n"
    )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    align: Sequence[str] | None = None,
    *,
    max_rows: int | None = None,
    downloads: bool = True,
) -> str:
    """A Markdown table. Cells must already be rendered (cell(), num(), link()).

    Followed by CSV and JSON downloads of every row (``downloads=False`` for a table that is
    itself a few facts). A table longer than ``max_rows`` (default ``MAX_INLINE_ROWS``) folds, its
    summary saying how many rows it holds; every row is on the page unless the page would pass its
    budget (``fit_page``: then its longest tables show their first rows and say so, the downloads hold all)."""
    rows = list(rows)
    align = align or ["l"] * len(headers)
    sep = {"l": ":--", "r": "--:", "c": ":-:"}
    out = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(sep[a] for a in align) + " |",
    ]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    if downloads and rows:
        digest = register_table(headers, rows)
        out += [
            "",
            f'<p class="almanac-downloads"><a href="{ROOT}tables/{digest}.csv" download>CSV</a> · '
            f'<a href="{ROOT}tables/{digest}.json" download>JSON</a></p>',
        ]
    text = "\n".join(out)
    limit = MAX_INLINE_ROWS if max_rows is None else max_rows
    if len(rows) > limit:
        text = fold(f"All {len(rows):,} rows", text, "almanac-fold")
    return text


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def prose(value: Any) -> str:
    """Text we wrote with Markdown code spans (a task's help, a schema's description, a method note)
    for a cell or a paragraph: each `span` becomes code(), the rest is escaped by cell(). Safe for any
    text, but only our own text should use it: an artifact's backticks stay characters (cell())."""
    if value is None:
        return "—"
    text, out, pos = str(value), [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [cell(text[pos : m.start()]), code(m.group(1))]
        pos = m.end()
    out.append(cell(text[pos:]))
    return "".join(out)


_CLASS = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?: [A-Za-z][A-Za-z0-9_-]*)*")


def fold(
    title: Any,
    body: str,
    kind: str = "",
    *,
    open: bool = False,
    title_html: str | None = None,
) -> str:
    """A folded section, the site's one way to fold: a <details> that md_in_html reads (``markdown="1"``),
    so the Markdown of ``body`` renders (tables, lists, bold, code spans, links); a bare <details> is raw
    HTML, shown as it is written. ``title`` is text: a <summary> is raw HTML that Markdown does not read,
    so it goes through as_text (cell()'s backslashes would show). ``title_html`` instead: a summary built
    of escaped parts (as_text(), code(), num(), badges). ``kind``: the class (an admonition type such as
    note, abstract, warning, or the site's own)."""
    if kind and not _CLASS.fullmatch(kind):
        raise ValueError(f"not a class name: {kind!r}")
    attrs = (f' class="{kind}"' if kind else "") + (" open" if open else "")
    summary = title_html if title_html is not None else as_text(title)
    inside = body.strip("\n")
    return f'<details{attrs} markdown="1">\n<summary>{summary}</summary>\n\n{inside}\n\n</details>\n'


def admonition(kind: str, title: str, body: str) -> str:
    """A Material admonition. ``title`` is text (escaped by cell()); ``body`` is Markdown the caller built."""
    indented = "\n".join("    " + ln if ln else "" for ln in body.splitlines())
    return f'!!! {kind} "{cell(title)}"\n\n{indented}\n'


def no_data(title: str, body: str) -> str:
    """The warning a page shows in place of what it cannot render: what is missing, and how to measure it."""
    return admonition("warning", title, body)


def run_link(run_id: str, from_dir: str = "") -> str:
    """Relative link from a page in ``from_dir`` (e.g. "" for docs/, "runs" for docs/runs/) to a run's
    detail view (the runs viewer page, which shows the run and links its JSON)."""
    prefix = (
        ""
        if from_dir == "runs"
        else ("../" * from_dir.count("/") + ("../" if from_dir else "")) + "runs/"
    )
    # an id is validated where artifacts load, but a link is escaped for its context all the same (a URL's query)
    return f"{prefix}run.md?id={quote(str(run_id), safe='')}"


_MD_TARGET = re.compile(
    r"\]\((?!#|[a-z][a-z0-9+.-]*:|/|" + re.escape(ROOT) + r")([^)\s]+)\)"
)


def rebase_links(md: str, up: int) -> str:
    """Markdown written for a page in docs/ (relative link targets: ``runs/run.md?id=...``,
    ``methodology.md#x``), moved ``up`` folders deeper: every relative target gets ``../`` x up.
    Anchors, absolute URLs and targets under the site-root placeholder are left alone; text from an
    artifact cannot form a link (``cell()`` escapes brackets and parentheses)."""
    prefix = "../" * up
    return _MD_TARGET.sub(lambda m: f"]({prefix}{m.group(1)})", md) if up else md


def run_json(rec: Any) -> str:
    """The site-root-relative URL of a run's (any artifact's) published JSON, for raw HTML and charts
    (a record loaded from the data folder knows its ``data_path``)."""
    data_path = getattr(rec, "data_path", "") or ""
    return f"{ROOT}{data_url(data_path)}" if data_path else ""


def data_url(data_path: str) -> str:
    """The site-relative URL of an artifact's published JSON (``data/<path>``), its path percent-encoded
    (an id's own characters, letters, digits and ``._+@-``, stay as they are)."""
    return "data/" + quote(str(data_path), safe="/+@")


STALE_BADGE = (
    '<span class="almanac-badge stale" title="measured with an older build than '
    'the newest on this host">stale</span>'
)
SYNTHETIC_BADGE = (
    '<span class="almanac-badge synthetic" title="random weights: the text is '
    'noise">synthetic weights, speed only</span>'
)


def endpoint_badge(server: str | None) -> str:
    """The mark of an endpoint model (no local file: no file name, hash or GGUF facts), naming the
    server software that served it ("" for a local file, ``server`` None)."""
    if server is None:
        return ""
    name = re.sub(r"[^A-Za-z0-9._ -]", "", str(server))[:40] or "unknown"
    return (
        '<span class="almanac-badge endpoint" title="an endpoint model: measured through the server that serves it, '
        f'no local file">endpoint · {name}</span>'
    )


MEASURED_BADGE = '<span class="almanac-badge measured" title="read from a run artifact">measured</span>'
PROJECTED_BADGE = '<span class="almanac-badge projected">PROJECTED</span>'
VERIFIED_BADGE = '<span class="almanac-badge verified">VERIFIED</span>'
MISSED_BADGE = (
    '<span class="almanac-badge missed" title="the measurement lies outside the projected range, or the projection is '
    'further off it than the stated tolerance">MISSED</span>'
)
OUTLIER_BADGE = (
    '<span class="almanac-badge outlier" title="more than 3.5 robust standard '
    'deviations from the median">outlier</span>'
)


def verdict_badge(verdict: str) -> str:
    """The badge of a projection checked by a measurement (VERIFIED or MISSED)."""
    return VERIFIED_BADGE if verdict == "VERIFIED" else MISSED_BADGE


# -- tables as HTML: what table() writes, converted without the Markdown parser ------------
# The build hook (pipelines/site/hooks.py) turns every pipe table of a rendered page into an
# HTML table before Markdown runs: tables are most of the text of the data pages, and parsing
# their cells inline by inline is most of the Markdown time. Only what table() and the cell
# helpers write is converted (escaped text, links, **bold**, inline HTML we built); a table
# with anything else in a cell is left to Markdown, so the page reads the same either way.
_PIPE_TABLE = re.compile(
    r"(?m)^\| .*\|\n\| (?::--|--:|:-:)(?: \| (?::--|--:|:-:))* \|\n(?:\| .*\|(?:\n|\Z))*"
)
_LINK = re.compile(r"\[((?:\\.|[^\]\\])*)\]\(([^()\s]*)\)")
_BOLD = re.compile(r"(?<!\\)\*\*((?:\\.|[^*\\])+?)(?<!\\)\*\*")
_UNSURE = re.compile(
    r"(?<!\\)[`*\[\]]|(?<![\w\\])_|(?<!\\)_(?!\w)|<(?![a-zA-Z/!])|^\s*[#>+-] "
)  # intraword _ is text
_ALIGN_CLASS = {
    "--:": "r",
    ":-:": "c",
}  # a table() separator -> the cell's class in almanac.css (left is the default)


class _Unsure(Exception):
    pass


def _escaped_text_only(s: str) -> str:
    """Escaped text (and HTML we built) to HTML: backslash escapes removed; raises _Unsure on other Markdown."""
    if _UNSURE.search(_TAG.sub("", s) if "<" in s else s):
        raise _Unsure(s)
    return _MD_UNESCAPE.sub(_GROUP_1, s) if "\\" in s else s


_PLAIN_CELL = re.compile(
    r"[\\`*\[\]_<]|^\s*[#>+-] "
)  # what any of the steps below would act on


def _cell_html(s: str, href: Any) -> str:
    # most cells (figures, names) hold none of it: one search instead of the link, bold and escape passes
    if not _PLAIN_CELL.search(s):
        return s
    if "](" not in s:  # no link (every one _LINK finds has it)
        return _bold_html(s)
    parts: list[str] = []
    pos = 0
    for m in _LINK.finditer(s):
        parts.append(_bold_html(s[pos : m.start()]))
        target = href(m.group(2))
        if target is None:
            raise _Unsure(s)
        parts.append(
            f'<a href="{html.escape(target, quote=True)}">{_bold_html(m.group(1))}</a>'
        )
        pos = m.end()
    parts.append(_bold_html(s[pos:]))
    return "".join(parts)


@functools.lru_cache(maxsize=8192)
def _bold_html(s: str) -> str:
    """A cell's text (or a link's, or the text between links) as HTML: a pure function of the text, kept for
    the texts met again (a model's name, quantization, build and settings on every row of every board)."""
    if "**" not in s:  # no bold (every one _BOLD finds has it)
        return _escaped_text_only(s)
    out, pos = [], 0
    for m in _BOLD.finditer(s):
        out.append(_escaped_text_only(s[pos : m.start()]))
        out.append(f"<strong>{_escaped_text_only(m.group(1))}</strong>")
        pos = m.end()
    out.append(_escaped_text_only(s[pos:]))
    return "".join(out)


def _split_row(line: str) -> list[str]:
    return line[2:-2].split(" | ") if line.endswith(" |") else line[2:-1].split(" | ")


def _table_html(block: str, href: Any) -> str | None:
    lines = block.rstrip("\n").split("\n")
    head, sep, body = (
        _split_row(lines[0]),
        _split_row(lines[1]),
        [_split_row(ln) for ln in lines[2:]],
    )
    if len(head) != len(sep) or any(len(r) != len(head) for r in body):
        return None
    # alignment as a short class (almanac.css), left as the default: a fleet's boards have thousands of
    # cells, and an inline style on each was a third of the Leaderboard's bytes
    style = [
        f' class="{_ALIGN_CLASS[a.strip()]}"' if a.strip() in _ALIGN_CLASS else ""
        for a in sep
    ]
    align = [_ALIGN_CLASS.get(a.strip(), "") for a in sep]
    # a column's opening tag, written once: a cell of short text (most) takes it as it is (see _long)
    opens = [f"<td{st}>" for st in style]
    cols = list(zip(style, align, opens))
    plain_cell = _PLAIN_CELL.search
    try:
        out = ["<table>", "<thead>", "<tr>"]
        out += [
            f"<th{st}>{_cell_html(c.strip(), href)}</th>" for c, st in zip(head, style)
        ]
        out += ["</tr>", "</thead>", "<tbody>"]
        for r in body:
            tds = []
            for c, (st, al, td) in zip(r, cols):
                text = c.strip()
                tds.append(
                    (td if len(c) <= LONG_CELL else f"<td{_long(c, st, al)}>")
                    + (_cell_html(text, href) if plain_cell(text) else text)
                    + "</td>"
                )
            out.append("<tr>\n" + "\n".join(tds) + "\n</tr>")
        out += ["</tbody>", "</table>"]
    except _Unsure:
        return None
    return "\n".join(out)


LONG_CELL = 60  # characters of text: a cell this long gets room of its own (class "long", almanac.css)
LONGER_CELL = 160  # and this long, more room (class "longer")
_TAG = re.compile(r"<[^>]*>")
_FOLDED = re.compile(r"<details\b.*?</details>", re.S)


def _long(c: str, style: str, align: str) -> str:
    """A cell's class attribute: its alignment, and "long" (or "longer") for a cell of long text, which
    almanac.css gives a minimum width (squeezed into a narrow column, a sentence made its row a screen
    tall; the table scrolls in its own box instead)."""
    if len(c) <= LONG_CELL:
        return style
    # text folded inside the cell (a row's setup: <details>) is not what the column must show open
    n = len(_TAG.sub("", _FOLDED.sub("", c)))
    if n <= LONG_CELL:
        return style
    kind = "longer" if n > LONGER_CELL else "long"
    return f' class="{align} {kind}"' if align else f' class="{kind}"'


TABLE_TOKEN = "almanactable" + secrets.token_hex(
    8
)  # per build: no artifact text can name it
# A placeholder is replaced wherever Markdown left it: its own paragraph (the usual case), or as it is
# inside raw HTML (a <details> without md_in_html), a list item or any other block.
_TOKEN_P = re.compile(rf"<p>{TABLE_TOKEN}(\d+)</p>|{TABLE_TOKEN}(\d+)")


def tables_to_html(text: str, href: Any, stash: list[str] | None = None) -> str:
    """Every pipe table of ``text`` (a page's Markdown) as an HTML block; ``href(target)`` gives a link
    target's URL as the page will use it (None: leave that table to Markdown). With ``stash``, each
    table goes there and the text holds a placeholder paragraph instead (Markdown then does not even
    read the table's HTML); ``put_tables`` puts them back into the page's HTML."""

    def one(m: re.Match[str]) -> str:
        done = _table_html(m.group(0), href)
        if done is None:
            return m.group(0)
        if stash is None:
            return f"\n{done}\n\n"
        stash.append(done)
        return f"\n{TABLE_TOKEN}{len(stash) - 1}\n\n"

    return _PIPE_TABLE.sub(one, text)


_FIGURE = re.compile(
    r'(?m)^<figure class="almanac-figure">.*</figure>$'
)  # one line: what charts.embed() writes


def hold_figures(text: str, stash: list[str]) -> str:
    """Each chart figure (raw HTML that Markdown would pass through as it is) waits in ``stash`` too:
    Markdown need not scan its inline spec."""

    def one(m: re.Match[str]) -> str:
        stash.append(m.group(0))
        return f"\n{TABLE_TOKEN}{len(stash) - 1}\n"

    return _FIGURE.sub(one, text)


def put_tables(html_text: str, stash: list[str]) -> str:
    """The page's HTML with every placeholder replaced by its table or figure."""
    return (
        _TOKEN_P.sub(lambda m: stash[int(m.group(1) or m.group(2))], html_text)
        if stash
        else html_text
    )


# -- a page's weight: no page over 1 MB, however large the fleet -----------------------------
# A page shows the answer first: every table is written in its order of importance (rank, newest,
# largest), so when a page's content would pass PAGE_BUDGET bytes its longest tables keep their first
# rows and say how many are left out; the CSV and JSON downloads under each still hold every row.
# Only tables that have downloads are cut, and only as far as needed; charts and prose are not.
PAGE_BUDGET = 850_000  # bytes of a page's content: with the theme around it, a page stays under 1 MB
MIN_SHOWN_ROWS = 10  # a cut table keeps at least this many rows
MD_TO_HTML = 1.5  # a pipe table left to Markdown grows about this much as HTML (tags around each cell)
_WITH_DOWNLOADS = re.compile(rf'{TABLE_TOKEN}(\d+)\n\s*<p class="almanac-downloads">')
_MD_WITH_DOWNLOADS = re.compile(
    _PIPE_TABLE.pattern + r'(?=\n*<p class="almanac-downloads">)', re.M
)
_ROW_END = "\n</tr>"


def _cut_note(keep: int, n: int) -> str:
    return (
        f'<p class="almanac-cut">The first {keep:,} of {n:,} rows are shown (a page stays under 1 MB); '
        f"the CSV and JSON downloads below hold all {n:,}.</p>"
    )


def _keep(ends: list[int], room: float, least: int) -> int:
    """How many of the first rows (ending at ``ends``) fit in ``room`` bytes: at least MIN_SHOWN_ROWS."""
    keep = least
    while keep < len(ends) and ends[keep] <= room:
        keep += 1
    return keep


def _cut_rows(table_html: str, max_bytes: float, least: int = MIN_SHOWN_ROWS) -> str:
    """``table_html`` (what ``_table_html`` writes) with only as many of its first body rows as fit in
    ``max_bytes`` (at least MIN_SHOWN_ROWS), followed by a line saying what was left out."""
    start = table_html.find("<tbody>\n")
    end = table_html.rfind("\n</tbody>")
    if start < 0 or end < 0:
        return table_html
    body_at = start + len("<tbody>\n")
    ends = [m.end() for m in re.finditer(re.escape(_ROW_END), table_html[body_at:end])]
    note = len(_cut_note(len(ends), len(ends))) + 1  # the line saying so counts too
    keep = _keep(ends, max_bytes - (len(table_html) - (end - body_at)) - note, least)
    if keep >= len(ends):
        return table_html
    return (
        table_html[: body_at + ends[keep - 1]]
        + table_html[end:]
        + "\n"
        + _cut_note(keep, len(ends))
    )


def _cut_md_rows(block: str, max_bytes: float, least: int = MIN_SHOWN_ROWS) -> str:
    """A pipe table (left to Markdown) cut the same way: its first rows, then the line saying so."""
    lines = block.rstrip("\n").split("\n")
    head, rows = lines[:2], lines[2:]
    ends, at = [], 0
    for ln in rows:
        at += int((len(ln) + 1) * MD_TO_HTML)
        ends.append(at)
    note = len(_cut_note(len(rows), len(rows))) + 2
    keep = _keep(
        ends, max_bytes - MD_TO_HTML * sum(len(h) + 1 for h in head) - note, least
    )
    if keep >= len(rows):
        return block
    return "\n".join(head + rows[:keep]) + "\n\n" + _cut_note(keep, len(rows)) + "\n"


def fit_page(
    text: str, stash: list[str], budget: int = PAGE_BUDGET, least: int = MIN_SHOWN_ROWS
) -> str:
    """The page ``text`` (with ``tables_to_html``'s tables held in ``stash``) cut to fit in ``budget``
    bytes: its longest tables keep their first rows (held tables are cut in ``stash``, tables left to
    Markdown in the text returned). The cut is even: every table over one common size is cut to it (the
    largest size that fits), so a short table is never cut for a long one; each keeps at least ``least``
    rows, or a single row where so many tables' first rows alone would pass the budget. A page that fits is
    returned as it is, and so is a page whose charts and text alone pass the budget (cutting would not help)."""
    md_tables = list(_MD_WITH_DOWNLOADS.finditer(text))
    total = (
        len(text)
        + sum(map(len, stash))
        + (MD_TO_HTML - 1) * sum(len(m.group(0)) for m in md_tables)
    )
    if total <= budget:
        return text
    held = sorted(
        {int(m.group(1)) for m in _WITH_DOWNLOADS.finditer(text)}
        & {i for i, s in enumerate(stash) if s.startswith("<table>")}
    )
    sizes = sorted(
        [float(len(stash[i])) for i in held]
        + [MD_TO_HTML * len(m.group(0)) for m in md_tables]
    )
    room = budget - (total - sum(sizes))
    if room <= 0 or not sizes:
        return text
    # the common size: tables under it stay whole, each one over it is cut to it
    cap, left = 0.0, room
    for k, size in enumerate(sizes):
        share = left / (len(sizes) - k)
        if size > share:
            cap = share
            break
        left -= size
    else:
        return text
    cut, out = list(stash), text
    for i in held:
        if len(stash[i]) > cap:
            cut[i] = _cut_rows(stash[i], cap, least)
    for m in reversed(md_tables):
        if MD_TO_HTML * len(m.group(0)) > cap:
            out = (
                out[: m.start()] + _cut_md_rows(m.group(0), cap, least) + out[m.end() :]
            )
    over = len(out) + sum(map(len, cut)) > budget
    if (
        over and least > 1
    ):  # many tables: their first rows alone pass the budget, so each keeps fewer
        return fit_page(text, stash, budget, 1)
    stash[:] = cut
    return out
