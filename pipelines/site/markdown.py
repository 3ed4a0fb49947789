"""Markdown building blocks. Every value that comes from an artifact passes through
``cell()`` (HTML-escaped, Markdown-neutralised) before it reaches a page."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

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


def code(value: Any) -> str:
    """Inline code that cannot break out (HTML <code> with escaped content)."""
    return f"<code>{_no_jinja(html.escape(str(value), quote=True))}</code>"


def pre(text: str) -> str:
    """A preformatted block for logs and raw output: escaped HTML, so no fence can be closed early."""
    # Backticks become entities too: MkDocs always enables fenced_code, which would otherwise turn a
    # ``` line inside the block (model output, a log) into a code block and swallow what follows.
    return f'<pre class="almanac-pre">{_no_jinja(html.escape(text, quote=True)).replace("`", "&#96;")}</pre>'


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


def link(text: str, target: str) -> str:
    """A Markdown link; ``text`` is escaped, ``target`` is a path we built (ids are validated)."""
    return f"[{cell(text)}]({target})"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None) -> str:
    """A Markdown table. Cells must already be rendered (cell(), num(), link())."""
    rows = list(rows)
    align = align or ["l"] * len(headers)
    sep = {"l": ":--", "r": "--:", "c": ":-:"}
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep[a] for a in align) + " |"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


def admonition(kind: str, title: str, body: str) -> str:
    indented = "\n".join("    " + ln if ln else "" for ln in body.splitlines())
    return f'!!! {kind} "{html.escape(title, quote=True)}"\n\n{indented}\n'


def run_link(run_id: str, from_dir: str = "") -> str:
    """Relative link from a page in ``from_dir`` (e.g. "" for docs/, "runs" for docs/runs/) to a run page."""
    prefix = "" if from_dir == "runs" else ("../" * from_dir.count("/") + ("../" if from_dir else "")) + "runs/"
    return f"{prefix}{run_id}.md"


SYNTHETIC_BADGE = '<span class="almanac-badge synthetic" title="random weights: the text is noise">synthetic weights, speed only</span>'
PROJECTED_BADGE = '<span class="almanac-badge projected">PROJECTED</span>'
VERIFIED_BADGE = '<span class="almanac-badge verified">VERIFIED</span>'
MISSED_BADGE = '<span class="almanac-badge missed" title="the measurement lies outside the projected range">MISSED</span>'
OUTLIER_BADGE = '<span class="almanac-badge outlier" title="more than 3.5 robust standard deviations from the median">outlier</span>'


def verdict_badge(verdict: str) -> str:
    """The badge of a projection checked by a measurement (VERIFIED or MISSED)."""
    return VERIFIED_BADGE if verdict == "VERIFIED" else MISSED_BADGE
