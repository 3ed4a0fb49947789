"""What MkDocs makes of a page, kept between builds: its HTML content and its themed page.

pipelines.site.page_cache keeps the Markdown a per-host page's macros render; every page, cached or
not, then went through Markdown → HTML (with the tables hook) and the theme's template again, on
every build. At fleet scale that is most of a build that changed little: 1,270 pages, of which one
more host's run changes a few. Both steps are functions of inputs that can be named:

* **the content** (``page.content`` as the hooks leave it, the table of contents, the title taken
  from the first heading, the anchors the page holds and its links to other pages' anchors) is made
  from the page's Markdown as the macros leave it, the page's place (source path and URL), the code
  (``page_cache.code_digest``: the hooks, mkdocs.yml's Markdown extensions and the rendering
  packages' versions) and, for each ``*.md`` the Markdown names, whether that page is in this build
  (a link to a missing page is a warning, which a strict build fails on);
* **the themed page** is made from the content's key, the navigation (every section, title and URL
  in it), and the page's own title, front matter, URL, neighbours and edit URL.

A hit restores what the step would have made (the anchors are then checked as always, after the
pages); a miss makes it as always and stores it, unless the step logged a warning: a hit would not
log it again, and a strict build failed by a link to a missing page would pass when built a second
time. Entries live in page_cache's folder and are pruned with its entries (a build keeps what it
used). ``ALMANAC_PAGE_CACHE=0`` turns both caches off, and
outside a site build nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from typing import Any

from pipelines import dataset
from pipelines.site import page_cache

VERSION = 1  # bump when an entry's format or a key's parts change
_DOT_MD = re.compile(r"\.md\b")
_TARGET_PUNCT = frozenset(
    "_./%-"
)  # with letters and digits: what a link's target is made of
_NAV: dict[int, str] = {}  # id(nav) -> its digest (once per build)


class _Warnings(logging.Handler):
    """Counts what MkDocs and its plugins log at WARNING and above (what a strict build fails on)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


_WARNINGS = _Warnings()


def counter() -> logging.Handler:
    """The handler that counts the warnings (pipelines.site.page_worker keeps it when it silences the rest)."""
    return _WARNINGS


def warnings_logged() -> int:
    """How many warnings this process has logged under ``mkdocs`` since the build's start (:func:`reset`):
    a step that logged one is not cached."""
    return _WARNINGS.count


def md_targets(text: str) -> set[str]:
    """Every ``*.md`` name in ``text`` (a link's target, or anything that reads like one): found from each
    ``.md`` back to the start of its name (a pattern trying every position of a page's long tokens, its
    charts' data, was a tenth of a rebuild)."""
    out = set()
    for m in _DOT_MD.finditer(text):
        start = m.start()
        while start > 0 and (
            text[start - 1].isalnum() or text[start - 1] in _TARGET_PUNCT
        ):
            start -= 1
        if start < m.start():
            out.add(text[start : m.end()])
    return out


def content_key(text: str, page: Any, files: Any) -> str | None:
    """The key of ``page``'s content made from ``text`` (its Markdown as the macros left it); None when
    caching is off."""
    if not page_cache.enabled():
        return None
    src = page.file.src_uri
    src_dir = posixpath.dirname(src)
    h = hashlib.blake2b(digest_size=20)
    h.update(
        f"content\0v{VERSION}\0{page_cache.code_digest()}\0{src}\0{page.url}\0".encode()
    )
    for target in sorted(md_targets(text)):
        doc = (
            target.lstrip("/")
            if target.startswith("/")
            else posixpath.normpath(posixpath.join(src_dir, target))
        )
        found = files.get_file_from_path(doc) is not None
        h.update(f"link\0{target}\0{int(found)}\0".encode())
    h.update(b"text\0" + text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def cached_content(key: str) -> dict[str, Any] | None:
    return page_cache.read_entry(f"c-{key}", dataset.load())


def _toc_tokens(toc: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": a.title,
            "id": a.id,
            "level": a.level,
            "children": _toc_tokens(a.children),
        }
        for a in toc
    ]


def store_content(key: str, page: Any, content: str) -> None:
    """Keep what ``page.render`` and the content hooks made of the page (``content``: what the hooks return)."""
    links = {
        f.src_uri: dict(anchors)
        for f, anchors in (getattr(page, "links_to_anchors", None) or {}).items()
    }
    page_cache.write_entry(
        f"c-{key}",
        dataset.load(),
        {
            "content": content,
            "toc": _toc_tokens(page.toc),
            "title": page._title_from_render,
            "anchors": sorted(page.present_anchor_ids or ()),
            "links": links,
        },
    )


def restore(page: Any, entry: dict[str, Any]) -> None:
    """Make ``page.render`` give back the stored content instead of converting the Markdown again."""
    from mkdocs.structure.toc import get_toc

    def render(config: Any, files: Any) -> None:
        page.content = entry["content"]
        page.toc = get_toc(entry["toc"])
        page._title_from_render = entry["title"]
        page.present_anchor_ids = set(entry["anchors"])
        # as Page.render: the links to anchors are kept unless the log shows debug messages
        if (
            logging.getLogger("mkdocs.structure.pages").getEffectiveLevel()
            > logging.DEBUG
        ):
            page.links_to_anchors = {
                f: anchors
                for uri, anchors in entry["links"].items()
                if (f := files.get_file_from_path(uri)) is not None
            }
        del (
            page.render
        )  # the class's own again (a page built twice, by mkdocs serve, converts again)

    page.render = render


def _nav_items(items: Any) -> list[Any]:
    out: list[Any] = []
    for it in items:
        children = getattr(it, "children", None)
        out.append(
            [
                type(it).__name__,
                it.title,
                getattr(it, "url", None),
                _nav_items(children) if children else None,
            ]
        )
    return out


def nav_digest(nav: Any) -> str:
    if id(nav) not in _NAV:
        _NAV.clear()
        _NAV[id(nav)] = hashlib.blake2b(
            json.dumps(_nav_items(nav.items)).encode(), digest_size=20
        ).hexdigest()
    return _NAV[id(nav)]


def _ref(p: Any) -> list[Any] | None:
    return None if p is None else [p.title, p.url]


def theme_key(page: Any, nav: Any) -> str | None:
    """The key of ``page``'s themed HTML (None: not cached, e.g. a page whose content was not keyed)."""
    content = getattr(page, "_almanac_content_key", None)
    if content is None or not page_cache.enabled():
        return None
    parents = []
    parent = page.parent
    while parent is not None:
        parents.append(parent.title)
        parent = parent.parent
    own = json.dumps(
        [
            page.title,
            page.url,
            page.meta,
            page.is_homepage,
            page.edit_url,
            page.canonical_url,
            _ref(page.previous_page),
            _ref(page.next_page),
            parents,
        ],
        sort_keys=True,
        default=str,
    )
    h = hashlib.blake2b(digest_size=20)
    h.update(f"theme\0v{VERSION}\0{content}\0{nav_digest(nav)}\0{own}".encode())
    return h.hexdigest()


def take_theme(page: Any, nav: Any) -> bool:
    """Read ``page``'s themed HTML from the cache now (before the page's context events), kept for its
    template (:class:`_Template`); False when it is not there (rendered as always)."""
    key = theme_key(page, nav)
    if key is None:
        return False
    entry = page_cache.read_entry(f"t-{key}", dataset.load())
    html = None if entry is None else entry.get("html")
    if not isinstance(html, str):
        return False
    page._almanac_html = (key, html)
    return True


_RENDERING = [
    False
]  # inside a page's template: the templates it extends and includes are the theme's own


class _Template:
    """A theme template whose output for a page is taken from the cache when its key is there."""

    def __init__(self, template: Any) -> None:
        self._template = template

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)

    def _render(self, *args: Any, **kwargs: Any) -> str:
        _RENDERING[0] = True
        try:
            return str(self._template.render(*args, **kwargs))
        finally:
            _RENDERING[0] = False

    def render(self, *args: Any, **kwargs: Any) -> str:
        ctx: Any = args[0] if len(args) == 1 and not kwargs else None
        page = ctx.get("page") if hasattr(ctx, "get") else None
        key = None if page is None else theme_key(page, ctx.get("nav"))
        if key is None:
            return self._render(*args, **kwargs)
        held = getattr(page, "_almanac_html", None)
        if held is not None and page is not None:  # read ahead (take_theme)
            page._almanac_html = None
            if held[0] == key:
                return str(held[1])
        ds = dataset.load()
        entry = page_cache.read_entry(f"t-{key}", ds)
        if entry is not None and isinstance(entry.get("html"), str):
            return str(entry["html"])
        before = warnings_logged()
        out = self._render(*args, **kwargs)
        if warnings_logged() == before:
            page_cache.write_entry(f"t-{key}", ds, {"html": out})
        return out


def wrap_env(env: Any) -> Any:
    """The theme's environment with its templates' page output cached (mkdocs.yml's hooks: on_env): the
    template MkDocs asks for a page is wrapped; those it extends and includes are the theme's own."""
    get = env.get_template
    if getattr(get, "_almanac_cached", False):
        return env

    def get_template(*args: Any, **kwargs: Any) -> Any:
        template = get(*args, **kwargs)
        return template if _RENDERING[0] else _Template(template)

    get_template._almanac_cached = True  # type: ignore[attr-defined]
    env.get_template = get_template
    return env


def reset() -> None:
    _NAV.clear()
    logger = logging.getLogger("mkdocs")
    if _WARNINGS not in logger.handlers:
        logger.addHandler(_WARNINGS)


__all__ = [
    "cached_content",
    "content_key",
    "counter",
    "nav_digest",
    "restore",
    "store_content",
    "theme_key",
    "warnings_logged",
    "wrap_env",
]
