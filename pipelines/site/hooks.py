"""MkDocs hooks (mkdocs.yml ``hooks:``): what the build does besides rendering pages.

* before the build: load every artifact once (pipelines.dataset) and keep that set for the build;
  the per-host pages not in the page cache rendered ahead, over ALMANAC_PAGE_WORKERS processes
  (pipelines.site.page_cache; two by default, where there are two cores);
* as the pages are made: a second process makes them from the end of the list, into the caches
  (pipelines.site.page_worker);
* per page: turn the site-root placeholder of raw HTML links into the page's relative path; index a
  data-heavy page for search by its prose and the distinct names in its tables (not every figure);
  what Markdown and the theme made of a page whose inputs did not change is taken from the cache
  (pipelines.site.html_cache);
* after the build: publish every artifact's JSON under ``data/`` (the repository's paths), the
  runs browser's indexes (made from the columnar index, pipelines.index, brought up to date before
  the pages), that index's tables, and every table's CSV and JSON.

All of it is linear in the number of artifacts: one copy and one index row each.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import posixpath
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import Abort
from mkdocs.plugins import CombinedEvent, event_priority

from core import request_records
from core.errors import ArtifactError, ArtifactErrors
from core.paths import schema_dir
from pipelines import dataset, index
from pipelines.site import (
    answer_store,
    browser,
    handoff,
    html_cache,
    markdown,
    page_cache,
    page_worker,
    per_host,
    set_macros,
    table_store,
)


def on_pre_build(config: Any, **_: Any) -> None:
    markdown.reset_tables()
    page_cache.reset()
    html_cache.reset()
    table_store.reset()
    _WRITTEN.clear()
    try:
        dataset.freeze()
    except ArtifactErrors as exc:  # bad artifacts: one line each (the count last when several), no page built
        lines = (
            exc.problems
            if len(exc.problems) == 1
            else [*exc.problems, f"{exc}: nothing was built"]
        )
        raise Abort("\n".join(f"error: {ln}" for ln in lines)) from None
    except ArtifactError as exc:
        raise Abort(f"error: {exc}") from None
    # The loaded set (millions of small objects) lives for the whole build: keep it out of the cyclic
    # garbage collector's scans, which would otherwise walk all of it at every full collection. (No
    # collection first: the load runs with the collector off and leaves no cycles to free, and a
    # full pass over the set costs more than half a second at 10,000 artifacts.)
    gc.freeze()
    # every run's small answers, one run at a time: its heavy parts read from its file once, and only when
    # the run's file is new or changed since the last build (pipelines.site.answer_store)
    answer_store.prime(dataset.load())
    # the columnar index (pipelines.index) brought up to date from this set, once, before any page reads it
    # (the artifact browsers list its rows; publish writes the same tables)
    _, done = index.of_set(dataset.load(), fresh=True)
    for line in done.messages:
        print(f"INFO    -  {line}", file=sys.stderr)
    # Pages allocate many short-lived objects (DataFrames, chart specs, Markdown trees) with few
    # cycles: collect the youngest generation every 50,000 allocations instead of 700.
    global _THRESHOLD
    _THRESHOLD = gc.get_threshold()
    gc.set_threshold(50_000, *_THRESHOLD[1:])
    # the per-host pages (most of a fleet's pages) rendered into the page cache ahead, over the processes asked for
    from pipelines.site import split_pages  # noqa: F401 - registers the pages that split per host

    per_host.prefill()


_THRESHOLD: tuple[int, ...] | None = None


def relative_root(url: str) -> str:
    """From a page URL ("", "leaderboard/", "runs/run/") to the site root ("", "../", "../../")."""
    return "../" * url.count("/")


def link_resolver(src_uri: str, page_url: str) -> Any:
    """How MkDocs would write a link of the page ``src_uri`` (served at ``page_url``): a relative
    ``.md`` target becomes the relative URL of that page (directory URLs); anchors, absolute URLs and
    site-root placeholders stay. Anything else: None (the table is left to Markdown, which knows)."""
    src_dir = posixpath.dirname(src_uri)
    up = relative_root(page_url)

    def href(target: str) -> str | None:
        if target.startswith(("#", "http://", "https://", markdown.ROOT)):
            return target
        cut = re.search(r"[?#]", target)
        path, tail = (
            (target[: cut.start()], target[cut.start() :]) if cut else (target, "")
        )
        if not path.endswith(".md") or path.startswith("/"):
            return None
        doc = posixpath.normpath(posixpath.join(src_dir, path))
        if doc.startswith(".."):
            return None
        stem = doc[:-3]
        url = (
            ""
            if stem == "index"
            else (
                stem[: -len("/index")] + "/" if stem.endswith("/index") else stem + "/"
            )
        )
        return up + url + tail

    return href


@event_priority(
    -50
)  # after mkdocs-macros has rendered the page, before Markdown converts it
def on_page_markdown(text: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    # what MkDocs would make of this Markdown, from the cache when it made it before (pipelines.site.html_cache)
    key = page._almanac_content_key = html_cache.content_key(text, page, files)
    page._almanac_warnings = html_cache.warnings_logged()
    entry = None if key is None else html_cache.cached_content(key)
    if entry is not None:
        page._almanac_tables = None  # the content comes back whole: nothing to put back
        write_tables(Path(config["site_dir"]))
        html_cache.restore(page, entry)
        return ""  # not converted: MkDocs keeps a page's Markdown for the whole build, a fleet's ~1,200 of them
    page._almanac_tables = []  # the page's tables as HTML, put back in on_page_content
    text = markdown.tables_to_html(
        text, link_resolver(page.file.src_uri, page.url), page._almanac_tables
    )
    text = markdown.hold_figures(text, page._almanac_tables)
    # the page's table downloads written now (the site folder is cleaned before the first page): a fleet's
    # tables held until the end of the build were a large part of its peak memory
    write_tables(Path(config["site_dir"]))
    # no page over 1 MB: past its budget a page's longest tables keep their first rows
    return markdown.fit_page(text, page._almanac_tables)


def on_page_content(html: str, page: Any, **_: Any) -> str:
    stash = getattr(page, "_almanac_tables", None)
    key = getattr(page, "_almanac_content_key", None)
    if (
        stash is None and key is not None
    ):  # restored from the cache as the lines below left it
        return html
    html = markdown.put_tables(html, stash or [])
    html = html.replace(markdown.ROOT, relative_root(page.url))
    if (
        key is not None
        and html_cache.warnings_logged() == getattr(page, "_almanac_warnings", None)
    ):  # a page whose conversion warned (a link to a missing page) is converted, and warns, every build
        html_cache.store_content(key, page, html)
    # what the page was made from is in its HTML now: MkDocs keeps every page until the build ends, and a
    # fleet's pages' Markdown and held tables and charts (a second copy of their content) were a good part
    # of its peak memory
    page._almanac_tables = None
    page.markdown = ""
    return html


def on_post_page(output: str, page: Any, **_: Any) -> str:
    """The page is written from ``output``: its content is not read again (the search index took its part
    in on_page_context), and MkDocs would keep every page's until the build ends."""
    page.content = None
    return output


@event_priority(
    -100
)  # after every plugin's (mkdocs-macros keeps the navigation for its pages)
def on_nav(nav: Any, config: Any, files: Any, **_: Any) -> Any:
    """A second process makes pages from the end of the list while the page loop works from the start
    (pipelines.site.page_worker)."""
    page_worker.start(config, files)
    return nav


@event_priority(100)  # before any plugin reads the page
def on_pre_page(page: Any, **_: Any) -> Any:
    page_worker.claim(page)
    return page


def on_env(env: Any, **_: Any) -> Any:
    """The theme's page template with its output cached by what the page is made from (pipelines.site.html_cache)."""
    made = page_worker.finish()  # every page is made: the worker has ended
    if made is not None:
        print(
            f"INFO    -  {made[0]:,} of {made[1]:,} pages made by a second process",
            file=sys.stderr,
        )
    return html_cache.wrap_env(env)


# -- search: a data-heavy page is indexed by its prose, headings and the distinct words of its tables --
SEARCH_COMPACT_BYTES = (
    64 * 1024
)  # pages larger than this are indexed in the compact form
_TABLE = re.compile(r"<table\b.*?</table>", re.S)
_SCRIPT = re.compile(r"<script\b.*?</script>", re.S)
_CELL = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.S)
_TAG = re.compile(r"<[^>]+>")
_NO_WORDS = re.compile(
    r"^[\d\s.,±–—=%×()/:+\-]*$|^[0-9a-f]{12}-\d{8}T[\d.]+Z$"
)  # figures and run ids


def search_text(html: str) -> str:
    """The page as the search index sees it: each table becomes one paragraph of the cell texts not
    seen before on the page (names of models, tests, hosts, settings; not figures or run ids), and
    chart data is left out. The text stays as escaped as it was in the page."""
    seen: set[str] = set()

    def words(m: re.Match[str]) -> str:
        out = []
        for c in _CELL.findall(m.group(0)):
            t = " ".join(_TAG.sub(" ", c).split())
            if t and t not in seen and not _NO_WORDS.match(t):
                seen.add(t)
                out.append(t)
        return f"<p>{' · '.join(out)}</p>" if out else ""

    return _TABLE.sub(words, _SCRIPT.sub("", html))


@event_priority(100)  # before the search plugin indexes the page
def _compact_for_search(context: Any, page: Any, nav: Any = None, **_: Any) -> Any:
    excluded = (page.meta.get("search") or {}).get("exclude")
    if excluded and html_cache.take_theme(page, nav):
        # left out of the index, and its themed page comes from the cache (pipelines.site.html_cache): its
        # content is read by nothing (the search plugin's pass over it was a twentieth of a rebuild)
        page._almanac_content = page.content
        page.content = ""
    elif len(page.content or "") > SEARCH_COMPACT_BYTES and not excluded:
        page._almanac_content = page.content
        page.content = search_text(page.content)
    return context


@event_priority(
    -100
)  # after the search plugin, before the page is written: the reader gets every row
def _restore_after_search(context: Any, page: Any, **_: Any) -> Any:
    full = getattr(page, "_almanac_content", None)
    if full is not None:
        page.content = full
        del page._almanac_content
    return context


on_page_context = CombinedEvent(_compact_for_search, _restore_after_search)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        if (
            exc.filename is None
        ):  # a failed write or close (a full disk) names no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def _mirror(src: Path, dest: Path) -> None:
    """The published copy of an artifact: a hard link where the site and data/ share a file system
    (artifacts are written atomically by rename, never in place, so the link keeps the content it
    was built with; a tenth of a copy's cost at 10,000 files), else a copy."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def publish(site: Path, ds: dataset.Dataset) -> dict[str, int]:
    """Write the open data into a built site: the JSON mirror, the browsers' indexes, the tables."""
    made: set[Path] = set()
    for rel, src in ds.files:
        dest = site / "data" / rel
        if dest.parent not in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.add(dest.parent)
        _mirror(src, dest)
    # every request record a run kept beside itself (core.request_records; checked when the set loaded)
    for r in ds.runs:
        side = request_records.sidecar_of(r.data_path, r.records_full)
        if side is not None:
            _mirror(ds.root / side, site / "data" / side)
    # what is made from the whole set (the browsers' indexes, the columnar index's tables) is linked from
    # the table store when the set's content is the one it was made from (pipelines.site.table_store)
    key = _set_key() if page_cache.enabled() else ""
    tables, _ = index.of_set(ds)  # brought up to date before the pages (on_pre_build)
    for kind, k in browser.KINDS.items():
        table_store.publish_group(
            site / k.folder,
            ("index-data.js", "index.json", "index.csv"),
            f"{kind}-{key}",
            functools.partial(
                _write_browser_index, kind, site / k.folder, tables["artifacts"]
            ),
        )
    table_store.publish_group(  # the columnar index, per table
        site / "index",
        tuple(f"{t}.{ext}" for t in index.TABLES for ext in ("parquet", "csv")),
        f"index-{key}",
        lambda: index.publish(tables, site / "index"),
    )
    for schema in sorted(schema_dir().glob("*.json")):
        (site / "schema").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(schema, site / "schema" / schema.name)
    write_tables(site)
    return {"artifacts": len(ds.files), "tables": len(_WRITTEN)}


def _set_key() -> str:
    """The content of the loaded set (pipelines.site.set_macros.set_digest) and the version of what
    writes Parquet (pyarrow, not among the rendering packages of the code's digest)."""
    from importlib.metadata import version

    text = f"{set_macros.set_digest()}\0pyarrow {version('pyarrow')}"
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _write_browser_index(kind: str, folder: Path, artifacts: Any) -> None:
    """The browser of ``kind``'s index of the set (the columnar index's artifacts table), as a script,
    JSON and CSV."""
    rows = browser.index_rows(kind, artifacts)
    _write(
        folder / "index-data.js",
        browser.index_script(kind, browser.index_data(kind, rows)),
    )
    _write(folder / "index.json", browser.index_json(rows))
    _write(folder / "index.csv", browser.index_csv(kind, rows))


_WRITTEN: set[str] = (
    set()
)  # digests of the tables whose downloads this build has written


def _download(render: Any, headers: list[str], cells: list[list[str]]) -> Any:
    """A table's download text, made when asked (``render``: markdown.table_csv or table_json); links
    inside a download are relative to the site root (data/runs/...)."""
    return lambda: render(headers, cells).replace(markdown.ROOT, "")


def write_tables(site: Path) -> None:
    """Write the CSV and JSON download of every table registered since the last call, and let them go
    (a download an earlier build made of the same rows with the same code is linked from the store:
    pipelines.site.table_store)."""
    if (
        page_worker.in_worker()
    ):  # the page worker fills the caches only; the page loop writes the site
        markdown.reset_tables()
        return
    for digest, (headers, cells) in markdown.table_files().items():
        if digest in _WRITTEN:  # the same rows on another page: the same files
            continue
        for ext, render in (("csv", markdown.table_csv), ("json", markdown.table_json)):
            table_store.publish(
                site / "tables" / f"{digest}.{ext}",
                _download(render, headers, cells),
                _write,
            )
        _WRITTEN.add(digest)
    markdown.reset_tables()


def on_post_build(config: Any, **_: Any) -> None:
    try:
        publish(Path(config["site_dir"]), dataset.load())
        # the site check after the build reads the fact layer's groups from here, not from a second load
        from pipelines import facts

        if os.environ.get(handoff.GROUPS_ENV):
            # kept by the set's content (pipelines.site.set_macros): with nothing new, no fact layer for it
            pairs = set_macros.kept(
                "facts:work_hosts", lambda: sorted(facts.loaded_work_hosts())
            )
            handoff.write_groups({(str(w), str(h)) for w, h in pairs})
        page_cache.prune()  # the cache keeps this build's pages only
        table_store.prune()  # and this build's table downloads
    finally:
        page_worker.finish()
        page_cache.finish()
        table_store.reset()
        dataset.thaw()
        gc.unfreeze()
        if _THRESHOLD is not None:
            gc.set_threshold(*_THRESHOLD)


def on_build_error(error: Exception, **_: Any) -> None:
    """A storage fault while writing the site (no space left, read-only, permission denied) is one
    line naming the path and what to do, and so is an artifact file changed or removed after the build
    loaded it; `invoke site.build` shows that line alone."""
    from core.artifacts import STORAGE_ERRNOS, storage_error

    page_worker.finish(kill=True)
    page_cache.finish()
    table_store.reset()

    if (
        isinstance(error, OSError)
        and error.errno in STORAGE_ERRNOS
        and (error.filename2 or error.filename)
    ):
        err = storage_error(
            error,
            error.filename2 or error.filename,
            "cannot write the site",
            "or build it elsewhere with --output DIR",
        )
        print(f"error: {err}", file=sys.stderr, flush=True)
        return
    # an artifact file changed or removed while the build read it (core.records.heavy): one line
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ArtifactError):
            print(f"error: {seen}", file=sys.stderr, flush=True)
            return
        seen = seen.__cause__ or (
            None if seen.__suppress_context__ else seen.__context__
        )
