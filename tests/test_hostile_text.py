"""Text from artifacts is text: hostile strings planted in every string field (and a hostile key in
every free-form object) of every artifact type, wherever the schema lets them in, and the built site
checked in headless Chromium, page by page and in the artifact viewer: no live link, image, frame or
script from an artifact, no event handler, no emphasis or heading made from artifact text, no dialog,
no request leaving the site; and the payloads are there, as text.

The planted set is a copy of the committed measurements (every artifact type is there; the files git
tracks, tests/support/committed.py, never a user's own), each artifact with two planted copies that
share out its fields (tests/support/hostile_text.py)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.conftest import build_site
from tests.support.browser import open_page, serve_site
from tests.support.committed import committed_data
from tests.support.hostile_text import EVIL, MARKERS, plant_tree

pytestmark = pytest.mark.browser

# Everything on a page that artifact text must not have become (the payload's marker inside it).
PROBE = """(markers) => {
  const has = (s) => markers.some((m) => (s || "").includes(m));
  const found = [];
  for (const e of document.querySelectorAll("*")) {
    const tag = e.tagName.toLowerCase();
    for (const a of e.attributes) {
      const n = a.name.toLowerCase(), v = a.value || "";
      if (n.startsWith("on")) found.push(`${tag} ${n}=${v.slice(0, 80)}`);  // the theme has no inline handlers
      if (has(n)) found.push(`${tag}: an attribute named by artifact text: ${n}`);
      if (["href", "src", "action", "formaction", "xlink:href", "srcset", "poster", "data"].includes(n)
          && (/^\\s*(javascript|data|vbscript):/i.test(v) || v.includes("evil.invalid")))
        found.push(`${tag} ${n}=${v.slice(0, 80)}`);
    }
    if ((tag === "script" && e.type !== "application/json" && has(e.textContent)) || (tag === "style" && has(e.textContent)))
      found.push(`${tag} with artifact text: ${e.textContent.slice(0, 80)}`);
    if (["iframe", "object", "embed", "frame", "video", "audio", "base", "meta", "link"].includes(tag)
        && has(Array.from(e.attributes).map((a) => a.value).join(" ")))
      found.push(`${tag} from artifact text: ${e.outerHTML.slice(0, 100)}`);
    // markup made by a payload itself (artifact text inside a link or heading the page built is fine)
    const own = Array.from(e.childNodes).filter((c) => c.nodeType === 3).map((c) => c.textContent).join("").trim();
    if (tag === "a" && /^zq(3|4|5|9|13)z$/.test(own)) found.push(`a link made by a payload: ${e.outerHTML.slice(0, 120)}`);
    if (tag === "img" && has(e.getAttribute("alt"))) found.push(`an image made by a payload: ${e.outerHTML.slice(0, 120)}`);
    if (["em", "strong", "del", "s", "b", "i"].includes(tag) && /^zq(6|15)z$/.test(own)) found.push(`<${tag}> made by a payload`);
    if (/^h[1-6]$/.test(tag) && own.startsWith("heading zq12z")) found.push(`a heading made by a payload`);
    if (tag === "li" && own.startsWith("item zq12z")) found.push(`a list item made by a payload`);
  }
  // markers shown as text: every text node outside scripts and styles (folded sections included)
  const shown = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement && n.parentElement.closest("script, style");
    if (!p) for (const m of markers) if (n.textContent.includes(m)) shown.add(m);
  }
  return {found: Array.from(new Set(found)), shown: Array.from(shown)};
}"""


@pytest.fixture(scope="module")
def planted_site(tmp_path_factory):
    data = committed_data(
        tmp_path_factory.mktemp("planted") / "data"
    )  # the committed data, not the live folder
    counts = plant_tree(data)
    out = tmp_path_factory.mktemp("planted-site")
    proc = build_site(data, out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return data, out, counts


def test_every_artifact_type_carries_planted_text(planted_site):
    _, _, counts = planted_site
    from core.artifacts import ARTIFACT_TYPES

    assert set(counts) == set(ARTIFACT_TYPES), counts
    assert all(n > 0 for n in counts.values()), counts


def test_built_html_has_no_markup_from_artifact_text(planted_site):
    """A first pass without a browser: the raw HTML of every page."""
    _, site, _ = planted_site
    bad = []
    for page in site.rglob("*.html"):
        text = page.read_text(errors="replace")
        for pat in (
            r'href="\s*javascript:',
            rf"(src|href)=\"[^\"]*{re.escape(EVIL)}",
            r"<script>alert",
            r"<img [^>]*onerror",
            r"<svg [^>]*onload",
            r"<iframe",
            r"\son(error|load|click|mouseover|toggle)=\"alert",
        ):
            for m in re.finditer(pat, text):
                bad.append(
                    f"{page.relative_to(site)}: {text[max(0, m.start() - 60) : m.end() + 60]!r}"
                )
    assert bad == [], "\n".join(bad[:20])


def _check_pages(page, served, urls, errors, outside):
    seen: set[str] = set()
    bad: list[str] = []
    for url in urls:
        page.goto(url, wait_until="load")
        page.wait_for_timeout(50)
        res = page.evaluate(PROBE, MARKERS)
        bad += [f"{url}: {f}" for f in res["found"]]
        seen |= set(res["shown"])
    return bad, seen


def test_hostile_text_stays_text_in_chromium(planted_site):
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    data, site, _ = planted_site
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site) as served, sync_playwright() as p:
        browser, page = open_page(p, served, errors, outside)
        urls = [f"{served}/{rel[: -len('index.html')]}" for rel in pages]
        # the artifact viewer of planted copies of each browsable type (runs, quality and perplexity runs)
        for folder, kind in (
            ("runs", "run"),
            ("quality-runs", "quality"),
            ("perplexity-runs", "perplexity"),
        ):
            ids = [
                json.loads(f.read_text())["id"]
                for f in sorted(data.rglob("*.planted*.json"))
                if json.loads(f.read_text())["artifact"] == kind
            ][:4]
            urls += [f"{served}/{folder}/run/?id={i}" for i in ids]
        bad, shown = _check_pages(page, served, urls, errors, outside)
        browser.close()
    assert bad == [], "\n".join(bad[:30])
    assert errors == [], errors[:10]
    assert outside == [], outside[:10]
    # the payloads reached the pages, as text (the check above is not vacuous)
    assert sorted(set(MARKERS) - shown) == []
