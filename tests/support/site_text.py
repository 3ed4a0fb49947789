"""What a reader sees of a page: Markdown rendered the way the site build renders it, and the text of
a built page's article outside code, where Markdown left unrendered would show."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import markdown as python_markdown
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _extensions() -> tuple[list[str], dict]:
    """mkdocs.yml's markdown_extensions, with the ones MkDocs always adds (toc, tables, fenced_code)."""
    conf = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    names, configs = ["toc", "tables", "fenced_code"], {}
    for ext in conf.get("markdown_extensions") or []:
        name, cfg = next(iter(ext.items())) if isinstance(ext, dict) else (ext, None)
        if name not in names:
            names.append(name)
        if cfg:
            configs[name] = cfg
    return names, configs


def render_like_site(md: str, src_uri: str = "page.md", url: str = "page/") -> str:
    """A page's Markdown (after the macros) to HTML as the build does it: the build hook holds tables
    and figures out of Markdown, Python-Markdown with the site's extensions, the hook puts them back."""
    from pipelines.site import hooks, markdown

    stash: list[str] = []
    text = markdown.tables_to_html(md, hooks.link_resolver(src_uri, url), stash)
    text = markdown.hold_figures(text, stash)
    text = markdown.fit_page(text, stash)
    names, configs = _extensions()
    out = python_markdown.Markdown(extensions=names, extension_configs=configs).convert(
        text
    )
    return markdown.put_tables(out, stash)


_CODE = ("code", "pre", "script", "style", "textarea")


class _ArticleText(HTMLParser):
    """The text of a page's <article> (the whole document when it has none) outside code, pre, script,
    style and textarea; every tag boundary a line break."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.article: list[str] = []
        self.whole: list[str] = []
        self.seen_article = False
        self._in_article = 0
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "article":
            self.seen_article = True
            self._in_article += 1
        if tag in _CODE:
            self._skip += 1
        self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self._in_article = max(0, self._in_article - 1)
        if tag in _CODE:
            self._skip = max(0, self._skip - 1)
        self._break()

    def _break(self) -> None:
        self.whole.append("\n")
        if self._in_article:
            self.article.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.whole.append(data)
        if self._in_article:
            self.article.append(data)


def article_text(html: str) -> str:
    p = _ArticleText()
    p.feed(html)
    p.close()
    return "".join(p.article if p.seen_article else p.whole)


# What Markdown left as text shows: a **bold** pair, a `code` pair, a fold or an admonition marker
# (??? / !!!), a backslash escape (cell()'s, inside raw HTML that Markdown does not read), a table
# placeholder of the build hook.
UNRENDERED = re.compile(
    r"\*\*[^\s*][^*\n]*\*\*|`[^`\n]+`|\?\?\?\+? |!!! |\\[\\`*_\[\]()#+!~|]|almanactable"
)


def unrendered(html: str) -> list[str]:
    """Each piece of unrendered Markdown in a page's article text, with a little context."""
    text = article_text(html)
    return [
        " ".join(text[max(0, m.start() - 40) : m.end() + 40].split())
        for m in UNRENDERED.finditer(text)
    ]
