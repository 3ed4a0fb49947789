"""The site-wide consistency check: one fact, one reading, on every page of a built site.

Every figure of the fact layer reaches a page marked (pipelines.site.figures): ``data-fact`` (its
group and metric) with ``data-v`` (its value at full precision), ranks with their board, test and
host, verdicts with the two figures they compare, "not measured" with the work and host it
concerns, lossless verdicts with their artifact. :func:`check` reads them back from every HTML page
and every published table and returns the contradictions, one line each:

* the same figure shows one value wherever it appears (the same ``data-v``, and text that is that
  value rounded, never another number);
* a host has one rank per board and test wherever it appears;
* no rank contradicts a verdict: a loss against a figure is ranked below it, a win above it, and
  one pair of figures gets one verdict;
* "not measured" appears only where the fact layer has no such group (``missing``: a callable
  that says whether a (work, host) pair is measured), and "no measured run" nowhere else;
* one artifact has one lossless verdict;
* a host has one name: every host mark (``almanac-host``, its id in ``data-host``, or ``data-h`` on a
  leaderboard row's marker) of the same host reads the same label on every page;
* no Python ``None`` and no "first N of M" truncation in any page's text or any published table, but a
  table cut to keep its page under 1 MB, whose note says so and whose JSON download right after it holds
  every row it says (checked against the download);
* no HTML page over ``MAX_PAGE_BYTES`` (1 MB, issue 30): what a reader's phone downloads and parses
  for one page, whatever the fleet's size (a chart's series are bounded, long tables folded or linked).
"""

from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from pipelines import cores
from pipelines.site.sigfig import sig

SKIP_DIRS = ("assets", "data", "search", "schema")
TRUNCATION = re.compile(r"\b(?:first|best|newest|top) [\d,]+ of [\d,]+\b", re.I)
NONE_WORD = re.compile(r"(?<![\w.-])None(?![\w-])")
NO_RUN = re.compile(r"no measured run", re.I)
# What a published table's bytes hold wherever one of its string values reads None or "first N of M":
# the words themselves, or a backslash-u escape (JSON may spell any letter so)
_TABLE_SUSPECT = re.compile(rb"none|first|best|newest|top|\\u", re.I)
MAX_PAGE_BYTES = (
    1_000_000  # the most one HTML page of the site may weigh (issue 30: 1 MB)
)


@dataclass
class Mark:
    page: str
    kind: str  # fact, rank, verdict, missing, lossless
    attrs: dict[str, str]
    text: str


@dataclass
class _Page:
    """What the check reads from one page: its marks, and its visible text as the runs of text between
    tags, comments and the like (scripts and styles left out), in page order."""

    page: str
    marks: list[Mark] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    # a table cut to keep the page under 1 MB says so in a note (pipelines.site.markdown: "The first N of M
    # rows are shown ...; the downloads below hold all M"): kind "cut", attrs {"data-table": the href of
    # the JSON download right after it, "" when none}, the note's text
    cuts: list[Mark] = field(default_factory=list)


_KINDS = ("fact", "rank", "verdict", "missing", "lossless", "host")


def parse(page: str, body: bytes) -> _Page:
    """Read the page named ``page`` (its UTF-8 ``body``): libxml2's HTML parser (lxml) builds the tree in
    C; marks are the elements whose class has ``almanac-<kind>`` (the first of ``_KINDS``), each with
    its attributes and the text inside it. The runs of text are the tree's text nodes: the same runs,
    in the same order, as a tokenizer's data between tags, except blanks before the root element,
    which a tree does not keep (they join the page's text only as leading blanks)."""
    parser = etree.HTMLParser(
        encoding="utf-8", no_network=True, huge_tree=True, collect_ids=False
    )
    try:
        root = etree.fromstring(body, parser)
    except etree.XMLSyntaxError:  # nothing to read (an empty page)
        root = None
    out = _Page(page=page)
    if root is None:
        return out
    marked, cuts = [], []
    for el in root.iter(etree.Element):
        cls = el.get("class")
        if cls is not None and "almanac-" in cls:
            words = cls.split()
            kind = next((k for k in _KINDS if f"almanac-{k}" in words), None)
            if kind is not None:
                marked.append((el, kind))
            elif "almanac-cut" in words:
                cuts.append(el)
        if el.tag in ("script", "style"):
            el.text = None  # not visible text (the text after it, its tail, is)
    out.text = list(root.itertext())
    out.marks = [
        Mark(page, kind, {k: v or "" for k, v in el.items()}, "".join(el.itertext()))
        for el, kind in marked
    ]
    out.cuts = [
        Mark(page, "cut", {"data-table": _json_download(el)}, "".join(el.itertext()))
        for el in cuts
    ]
    return out


def _json_download(note: Any) -> str:
    """The href of the JSON download in the downloads line right after a cut note ("" when there is none)."""
    nxt = note.getnext()
    if nxt is None or "almanac-downloads" not in (nxt.get("class") or "").split():
        return ""
    return next(
        (
            a.get("href")
            for a in nxt.iter("a")
            if (a.get("href") or "").endswith(".json")
        ),
        "",
    )


def overweight(n: int, limit: int = MAX_PAGE_BYTES) -> str | None:
    """What is wrong with a page of ``n`` bytes of HTML (None: within ``limit``)."""
    if n <= limit:
        return None
    return f"{n / 1e6:.2f} MB of HTML ({n:,} bytes), over the {limit / 1e6:g} MB a page may weigh"


def heavy_pages(site: Path, limit: int = MAX_PAGE_BYTES) -> list[str]:
    """Every HTML page of the built ``site`` over ``limit`` bytes, one line each naming it and its size."""
    site = Path(site)
    return [
        f"{p.relative_to(site).as_posix()}: {why}"
        for p in sorted(site.rglob("*.html"))
        if (why := overweight(p.stat().st_size, limit))
    ]


def read_page(path: Path, site: Path) -> _Page:
    return parse(path.relative_to(site).as_posix(), path.read_bytes())


def pages(site: Path) -> Iterable[Path]:
    for p in sorted(site.rglob("*.html")):
        rel = p.relative_to(site).parts
        if rel and rel[0] in SKIP_DIRS:
            continue
        yield p


_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def shows(text: str, value: float) -> bool:
    """Whether ``text`` (a figure as a page shows it) is ``value`` rounded: to its decimals, or to some
    number of significant figures (Home), never another number."""
    m = _NUMBER.search(text.replace("\u2212", "-"))
    if m is None:
        return False
    shown = m.group(0)
    decimals = len(shown.split(".", 1)[1]) if "." in shown else 0
    if f"{value:,.{decimals}f}" == shown:
        return True
    return any(sig(value, k) == shown for k in range(1, 8))


def _rank_number(label: str) -> int | None:
    label = label.strip().lstrip("#=")
    return int(label) if label.isascii() and label.isdigit() else None


class _Memo:
    """What the per-page and per-table checks found, by the sha256 of the page's name and bytes: a
    rebuild that changed a few pages parses only those (kept in the user cache; what this run did
    not see is dropped when saved)."""

    VERSION = 3  # 2: a page's cut notes kept with its marks; 3: host marks

    def __init__(self) -> None:
        from core.paths import cache_dir

        self.path = cache_dir() / "consistency" / f"pages-v{self.VERSION}.json"
        try:
            old = json.loads(self.path.read_text(encoding="utf-8"))
            self.old: dict[str, Any] = old if isinstance(old, dict) else {}
        except (OSError, ValueError):
            self.old = {}
        self.now: dict[str, Any] = {}

    @staticmethod
    def key(name: str, body: bytes) -> str:
        return hashlib.sha256(name.encode() + b"\0" + body).hexdigest()

    def get(self, key: str) -> Any:
        hit = self.now.get(key)
        if hit is None:
            hit = self.old.get(key)
            if hit is not None:
                self.now[key] = hit
        return hit

    def put(self, key: str, value: Any) -> None:
        self.now[key] = value

    def save(self) -> None:
        if self.now == self.old:
            return
        from core.artifacts import atomic_write_text

        try:
            atomic_write_text(self.path, json.dumps(self.now, separators=(",", ":")))
        except OSError:  # a read-only or full cache only costs time
            pass


def _page_findings(pg: _Page) -> list[str]:
    problems = []
    text = " ".join(pg.text)
    # each pattern over the text it judges (a truncation: the text but the cut notes, which _check_cuts checks)
    for pat, what, word, judged in (
        (NONE_WORD, "a Python None", "None", text),
        (TRUNCATION, "a truncated list", "", _uncut(text, pg)),
    ):
        # the word a match must contain, looked for first: a plain substring search is ~100x faster than the
        # pattern's (its lookbehind leaves the regex engine no literal to skip ahead by)
        m = pat.search(judged) if word in judged else None
        if m:
            start = max(0, m.start() - 40)
            problems.append(
                f"{pg.page}: {what} in the text: …{judged[start : m.end() + 40]!r}…"
            )
    outside = NO_RUN.findall(text)
    allowed = sum(
        len(NO_RUN.findall(mk.text)) for mk in pg.marks if mk.kind == "missing"
    )
    if len(outside) > allowed:
        problems.append(
            f'{pg.page}: says "no measured run" outside a not-measured mark (the fact layer decides)'
        )
    return problems


def _uncut(text: str, pg: _Page) -> str:
    """The page's text without its cut notes (a table's first rows shown, every row in its download: checked
    against the download by ``_check_cuts``, not a truncated list)."""
    for c in pg.cuts:
        text = text.replace(c.text, " ", 1)
    return text


_CUT_ROWS = re.compile(r"\bof ([\d,]+) rows\b")


def _check_cuts(site: Path, cuts: list[Mark]) -> list[str]:
    """Every cut note's claim checked: the JSON download right after it holds all the rows it says."""
    out = []
    for m in cuts:
        said = _CUT_ROWS.search(m.text)
        href = m.attrs.get("data-table", "")
        where = f"{m.page}: a table cut to its first rows"
        if said is None:
            out.append(f"{where} does not say how many rows it has: {m.text.strip()!r}")
            continue
        n = int(said.group(1).replace(",", ""))
        if not href:
            out.append(f"{where} (of {n:,}) links no JSON download holding them all")
            continue
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(m.page), href))
        try:
            rows = json.loads((site / rel).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            rows = None
        if rel.startswith("../") or not isinstance(rows, list):
            out.append(
                f"{where} (of {n:,}) links {href}, which is not a readable table of the site"
            )
        elif len(rows) != n:
            out.append(
                f"{where} says its download holds all {n:,} rows; {rel} holds {len(rows):,}"
            )
    return out


def check(
    site: Path, *, missing: Callable[[str, str], bool] | None = None
) -> list[str]:
    """Every contradiction of the built site at ``site``, one line each ([] when it agrees with itself).
    ``missing(work, host)``: True where the fact layer has no group of that work on that host."""
    site = Path(site)
    problems: list[str] = []
    marks: list[Mark] = []
    cuts: list[Mark] = []
    memo = _Memo()
    read = []
    for path in pages(site):
        rel = path.relative_to(site).as_posix()
        read.append((rel, path, memo.key(rel, path.read_bytes())))
    _fill(memo, [(key, path, rel) for rel, path, key in read], _page_entry)
    for rel, _path, key in read:
        hit = memo.get(key)
        marks += [Mark(rel, k, a, t) for k, a, t in hit["marks"]]
        cuts += [Mark(rel, "cut", a, t) for a, t in hit["cuts"]]
        problems += hit["problems"]
    problems += _check_tables(site, memo)
    memo.save()
    problems += heavy_pages(site)
    problems += _check_cuts(site, cuts)
    problems += _check_facts([m for m in marks if m.kind == "fact"])
    problems += _check_ranks(marks)
    problems += _check_missing([m for m in marks if m.kind == "missing"], missing)
    problems += _check_lossless([m for m in marks if m.kind == "lossless"])
    problems += _check_hosts([m for m in marks if m.kind == "host"])
    return problems


def _page_entry(path: Path, rel: str) -> dict[str, Any]:
    """What the check keeps of one page: its marks, its cut notes and its own problems."""
    pg = parse(rel, path.read_bytes())
    return {
        "marks": [[m.kind, m.attrs, m.text] for m in pg.marks],
        "cuts": [[m.attrs, m.text] for m in pg.cuts],
        "problems": _page_findings(pg),
    }


PARALLEL_FROM = 64  # pages or tables to parse before a second process is worth forking


def _fill(
    memo: _Memo, jobs: list[tuple[str, Path, str]], make: Callable[[Path, str], Any]
) -> None:
    """Each job's (key, path, name) entry in ``memo``: kept, else ``make(path, name)``, the misses shared with
    a forked process where there are two cores (its entries handed back through a file; any it did not
    hand back are made here)."""
    todo = [(k, p, n) for k, p, n in jobs if memo.get(k) is None]
    n = cores.workers(2) if len(todo) >= PARALLEL_FROM else 1
    if n < 2:
        for k, p, name in todo:
            memo.put(k, make(p, name))
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="almanac-check-") as tmp:
        handed = Path(tmp) / "entries.json"

        def share(w: int) -> None:
            got = {k: make(p, name) for k, p, name in todo[w::n]}
            if w == 0:
                for k, v in got.items():
                    memo.put(k, v)
            else:
                handed.with_name(f"entries-{w}.json").write_text(json.dumps(got))

        cores.in_forks(n, share)
        for w in range(1, n):
            try:
                got = json.loads(handed.with_name(f"entries-{w}.json").read_text())
            except (OSError, ValueError):
                got = {}
            for k, p, name in todo[w::n]:
                memo.put(k, got[k] if k in got else make(p, name))


def _check_tables(site: Path, memo: _Memo | None = None) -> list[str]:
    out: list[str] = []
    tables = site / "tables"
    if not tables.is_dir():
        return out
    memo = memo if memo is not None else _Memo()
    jobs = []
    for p in sorted(tables.glob("*.json")):
        jobs.append((_Memo.key(f"tables/{p.name}", p.read_bytes()), p, p.name))
    _fill(memo, jobs, lambda p, name: _table_findings(name, p.read_bytes()))
    for key, _p, _name in jobs:
        out += memo.get(key)
    return out


def _table_findings(name: str, body: bytes) -> list[str]:
    out = []
    try:
        rows = json.loads(body.decode("utf-8"))
    except ValueError:
        return [f"tables/{name}: not JSON"]
    if not _TABLE_SUSPECT.search(body):
        return []  # no value can read None or "first N of M" (~9 tables in 10 at fleet scale)
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        for k, v in row.items() if isinstance(row, dict) else []:
            if isinstance(v, str) and (
                NONE_WORD.fullmatch(v.strip()) or TRUNCATION.search(v)
            ):
                out.append(f"tables/{name}: row {i + 1}, column {k!r} reads {v!r}")
    return out


def _check_facts(facts: list[Mark]) -> list[str]:
    out = []
    by_key: dict[str, list[Mark]] = {}
    for m in facts:
        by_key.setdefault(m.attrs.get("data-fact", ""), []).append(m)
    for key, ms in by_key.items():
        values = {m.attrs.get("data-v") for m in ms}
        if len(values) > 1:
            where = ", ".join(
                sorted({f"{m.page} ({m.attrs.get('data-v')})" for m in ms})
            )
            out.append(f"figure {key} has {len(values)} values: {where}")
            continue
        try:
            v = float(next(iter(values)) or "nan")
        except ValueError:
            out.append(f"figure {key}: data-v {next(iter(values))!r} is not a number")
            continue
        for m in ms:
            if not shows(html.unescape(m.text), v):
                out.append(
                    f"{m.page}: figure {key} reads {m.text.strip()!r}, not its value {v!r} rounded"
                )
    return out


def _check_ranks(marks: list[Mark]) -> list[str]:
    out = []
    ranks: dict[tuple[str, str, str], set[str]] = {}
    by_fact: dict[
        str, set[tuple[str, str, str]]
    ] = {}  # fact -> every (board, test, rank label) shown for it
    for m in marks:
        if m.kind != "rank":
            continue
        a = m.attrs
        k = (a.get("data-board", ""), a.get("data-test", ""), a.get("data-host", ""))
        ranks.setdefault(k, set()).add(a.get("data-rank", ""))
        by_fact.setdefault(a.get("data-fact", ""), set()).add(
            (k[0], k[1], a.get("data-rank", ""))
        )
    for k, labels in ranks.items():
        if len(labels) > 1:
            out.append(
                f"host {k[2]} on board {k[0]} ({k[1]}) has {len(labels)} ranks: {', '.join(sorted(labels))}"
            )
    verdicts: dict[tuple[str, str], set[str]] = {}
    for m in marks:
        if m.kind != "verdict":
            continue
        a, b, v = (
            m.attrs.get("data-a", ""),
            m.attrs.get("data-b", ""),
            m.attrs.get("data-verdict", ""),
        )
        verdicts.setdefault((a, b), set()).add(v)
        for ra in sorted(by_fact.get(a, ())):
            for rb in sorted(by_fact.get(b, ())):
                if ra[:2] != rb[:2]:
                    continue
                na, nb = _rank_number(ra[2]), _rank_number(rb[2])
                if na is None or nb is None:
                    continue
                if v == "loss" and not nb > na:
                    out.append(
                        f"{m.page}: {b} loses to {a} yet is ranked {rb[2]} beside its {ra[2]}"
                    )
                if v == "win" and not nb < na:
                    out.append(
                        f"{m.page}: {b} wins over {a} yet is ranked {rb[2]} beside its {ra[2]}"
                    )
    for (a, b), vs in verdicts.items():
        if len(vs) > 1:
            out.append(
                f"{b} against {a} has {len(vs)} verdicts: {', '.join(sorted(vs))}"
            )
    return out


def _check_missing(
    marks: list[Mark], missing: Callable[[str, str], bool] | None
) -> list[str]:
    if missing is None:
        return []
    return [
        f"{m.page}: says not measured for work {m.attrs.get('data-work')} on host {m.attrs.get('data-host')}, "
        "which the fact layer has"
        for m in marks
        if m.attrs.get("data-work")
        and not missing(m.attrs.get("data-work", ""), m.attrs.get("data-host", ""))
    ]


def _check_lossless(marks: list[Mark]) -> list[str]:
    seen: dict[str, set[str]] = {}
    pages_of: dict[str, set[str]] = {}
    for m in marks:
        aid = m.attrs.get("data-artifact", "")
        seen.setdefault(aid, set()).add(m.attrs.get("data-verdict", ""))
        pages_of.setdefault(aid, set()).add(m.page)
    return [
        (
            f"artifact {aid} has {len(vs)} lossless verdicts ({', '.join(sorted(vs))}) "
            f"on {', '.join(sorted(pages_of[aid]))}"
        )
        for aid, vs in seen.items()
        if len(vs) > 1
    ]


def _check_hosts(marks: list[Mark]) -> list[str]:
    """One name per host: the names each host id is shown under, and on which pages, where there is more than one."""
    names: dict[str, dict[str, set[str]]] = {}
    for m in marks:
        hid = m.attrs.get("data-host") or m.attrs.get("data-h") or ""
        name = " ".join(m.text.split())
        names.setdefault(hid, {}).setdefault(name, set()).add(m.page)
    out = []
    for hid, by_name in names.items():
        if len(by_name) > 1:
            shown = "; ".join(
                f"{name!r} on {', '.join(sorted(pgs)[:3])}"
                + (f" and {len(pgs) - 3:,} more" if len(pgs) > 3 else "")
                for name, pgs in sorted(by_name.items())
            )
            out.append(f"host {hid} has {len(by_name)} names: {shown}")
    return out


def missing_in(facts: object) -> Callable[[str, str], bool]:
    """``missing(work, host)`` for :func:`check` from a fact layer (pipelines.facts.Facts)."""
    return missing_from(facts.work_hosts())


def missing_from(have: set[tuple[str, str]]) -> Callable[[str, str], bool]:
    """``missing(work, host)`` for :func:`check` from the (work, host) pairs a fact layer has a group of
    (pipelines.site.handoff: as the build left them)."""
    return lambda work, host: (work, host) not in have
