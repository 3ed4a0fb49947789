"""Read the built site the way a reader does: every page in headless Chromium, desktop and phone,
light and dark, and report what a reader would trip over (issue 27, "One truth per figure").

For each page (every .html of the site except 404 and the per-artifact viewers, which show one
artifact at a time and are tested by the browser lane on their own) the script loads it at
1366 px in the light scheme and toggles to dark, and at 390 px in the dark scheme and toggles to
light (so both first renders and both re-renders on the toggle are seen), and reports:

- page height at first sight (folds closed; px), and a defect above ``--max-height`` at 1366 px;
- horizontal page overflow (the page wider than the window; wide tables must scroll in their own box),
  with the elements that stick out;
- charts clipped: a chart whose drawing is wider than its container or the window, or whose text
  falls outside the drawing (cut off);
- charts without units: a quantitative axis (linear, log, pow, sqrt, symlog scale, as the rendered
  Vega view describes it in its ARIA label) without a title naming a unit in parentheses, or a
  log axis whose title does not say so;
- the smallest chart text as rendered (font size times the drawing's scale on screen), a defect
  below 11 px;
- chart text of low contrast against what is behind it (below 3:1), and, in the dark scheme, a
  chart drawn on a light panel;
- charts that failed to render, and console errors;
- a page over 1 MB of HTML (``consistency.MAX_PAGE_BYTES``, issue 30), named with its size, once a page.

Charts inside folded sections are checked too: after the first-sight measurements every <details>
is opened. ``--shots DIR`` saves a screenshot of each page, width and scheme at first sight (cut at
16,000 px), and of each chart as drawn.

    python benchmarks/site_check.py --site /tmp/site [--shots /tmp/shots] [--only memory/,roofline/]
    python benchmarks/site_check.py --build              # builds the site from data/ first

Exit status 1 when any defect is found (each printed on a line of its own), 0 otherwise.
The browser lane runs ``check_site`` on the golden site (tests/test_site_check.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.site import consistency  # noqa: E402
from tests.support.browser import open_page  # noqa: E402

VIEWS = (
    (1366, "light"),
    (390, "dark"),
)  # (width, scheme at first load); each view also toggles to the other
MIN_TEXT_PX = 11.0
MAX_HEIGHT_PX = 20000  # at 1366 px, folds closed (about 22 screens)
MIN_CONTRAST = 3.0
SCHEME_NAME = {"default": "light", "slate": "dark"}

# What the page shows the reader, measured in the page (one evaluate per state).
_MEASURE = r"""
() => {
  const vw = window.innerWidth;
  const doc = document.documentElement;
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const named = (c) => {  // an SVG fill attribute may be a name or hex
    const s = document.createElement("span");
    s.style.color = c; document.body.appendChild(s);
    const v = getComputedStyle(s).color; s.remove(); return parse(v);
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const contrast = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const over = (top, under) => ({r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
                                 b: top.b * top.a + under.b * (1 - top.a), a: 1});
  // the colour behind an element: its own and its ancestors' backgrounds, composed over the page's
  const behind = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) layers.push(c);
      if (c && c.a >= 1) break;
    }
    let base = {r: 255, g: 255, b: 255, a: 1};
    for (let i = layers.length - 1; i >= 0; i--) base = over(layers[i], base);
    return base;
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return false;
    const cs = getComputedStyle(el);
    return cs.visibility !== "hidden" && cs.display !== "none" && Number(cs.opacity) !== 0;
  };
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.classList.length ? "." + [...el.classList].slice(0, 3).join(".") : "");
  const scrolls = (el) => { const o = getComputedStyle(el).overflowX; return o === "auto" || o === "scroll" || o === "hidden"; };

  const out = {height: doc.scrollHeight, scrollWidth: doc.scrollWidth, vw,
               scheme: document.body.getAttribute("data-md-color-scheme"), charts: [], overflowing: []};
  if (doc.scrollWidth > vw + 1) {  // who sticks out (outermost offenders not inside a scrolling box)
    const seen = new Set();
    for (const el of document.body.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (r.right <= vw + 1 || r.width === 0) continue;
      let p = el.parentElement, inside = false;
      for (; p && p !== document.body; p = p.parentElement) { if (scrolls(p) || seen.has(p)) { inside = true; break; } }
      if (inside) continue;
      seen.add(el);
      if (out.overflowing.length < 6) out.overflowing.push(describe(el) + " right=" + Math.round(r.right));
    }
  }
  document.querySelectorAll(".almanac-chart").forEach((el, i) => {
    const c = {index: i, id: el.id, visible: visible(el), failed: el.textContent.startsWith("chart failed") ? el.textContent.slice(0, 200) : "",
               clipped: [], axes: [], minText: null, lowContrast: [], background: null};
    out.charts.push(c);
    if (!c.visible) return;
    const svg = el.querySelector("svg");
    if (!svg) { if (!c.failed) c.failed = "nothing drawn"; return; }
    const box = el.getBoundingClientRect(), sb = svg.getBoundingClientRect();
    if (sb.right > box.right + 1 || sb.left < box.left - 1) c.clipped.push(`drawing ${Math.round(sb.width)} px wide in a ${Math.round(box.width)} px container`);
    if (sb.right > vw + 1 || sb.left < -1) c.clipped.push(`drawing reaches x=${Math.round(sb.left)}..${Math.round(sb.right)} in a ${vw} px window`);
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (scrolls(p) && p.scrollWidth > p.clientWidth + 1 && !p.matches(".md-typeset__table, .almanac-table-wrap")) {
        c.clipped.push(`inside ${describe(p)}, which cuts ${p.scrollWidth - p.clientWidth} px`); break;
      }
    }
    const bg = behind(svg);
    const bgRect = svg.querySelector(":scope > rect.background, :scope > g > path.background");
    let drawnBg = bg;
    if (bgRect) { const f = named(bgRect.getAttribute("fill")); if (f && f.a > 0 && bgRect.getAttribute("fill") !== "none") drawnBg = over(f, bg); }
    c.background = `rgb(${Math.round(drawnBg.r)},${Math.round(drawnBg.g)},${Math.round(drawnBg.b)})`;
    c.backgroundLum = lum(drawnBg);
    let cut = 0, firstCut = "";
    svg.querySelectorAll("text").forEach((t) => {
      if (!t.textContent.trim() || !visible(t)) return;
      const ctm = t.getScreenCTM();
      const px = parseFloat(getComputedStyle(t).fontSize) * (ctm ? Math.hypot(ctm.a, ctm.b) : 1);
      if (c.minText === null || px < c.minText.px) c.minText = {px: Math.round(px * 10) / 10, text: t.textContent.slice(0, 40)};
      const r = t.getBoundingClientRect();
      if (r.left < sb.left - 1 || r.right > sb.right + 1 || r.top < sb.top - 1 || r.bottom > sb.bottom + 1 || r.left < -1 || r.right > vw + 1) {
        cut++; if (!firstCut) firstCut = t.textContent.slice(0, 40);
      }
      const fill = named(getComputedStyle(t).fill);
      if (fill) {
        const k = contrast(over(fill, drawnBg), drawnBg);
        if (k < 3.0 && c.lowContrast.length < 3) c.lowContrast.push(`'${t.textContent.slice(0, 30)}' ${k.toFixed(1)}:1`);
      }
    });
    if (cut) c.clipped.push(`${cut} text(s) cut off, e.g. '${firstCut}'`);
    svg.querySelectorAll("[aria-roledescription='axis']").forEach((a) => c.axes.push(a.getAttribute("aria-label") || ""));
  });
  return out;
}
"""

# "X-axis titled 'mean (t/s)' for a linear scale with values from 0 to 40" (Vega's own description)
_AXIS = re.compile(
    r"^(?P<dim>[XY])-axis(?: titled '(?P<title>.*)')? for a (?P<scale>[a-z]+) scale",
    re.S,
)
QUANTITATIVE = {"linear", "log", "pow", "sqrt", "symlog"}
_UNIT = re.compile(r"\([^()]*[^()\s][^()]*\)")


def axis_defect(label: str) -> str | None:
    """Why an axis (its ARIA label) lacks a unit, or None: quantitative axes need a title naming a unit
    in parentheses, and a log axis says "log"."""
    m = _AXIS.match(label)
    if not m or m["scale"] not in QUANTITATIVE:
        return None
    title = m["title"] or ""
    if not title:
        return f"{m['dim']} axis ({m['scale']}) has no title"
    if not _UNIT.search(title):
        return f"{m['dim']} axis '{title}' names no unit"
    if m["scale"] in ("log", "symlog") and "log" not in title:
        return f"{m['dim']} axis '{title}' is a log scale and does not say so"
    return None


@dataclass
class View:
    """One page at one width in one scheme."""

    page: str
    width: int
    scheme: str  # light / dark
    toggled: bool  # reached by the toggle (a re-render), not at load
    height: int = 0  # px at first sight (folds closed)
    height_open: int = 0  # px with every fold open
    charts: int = 0
    min_text_px: float | None = None
    defects: list[str] = field(default_factory=list)


@contextlib.contextmanager
def serve_quietly(site: Path) -> Any:
    """The folder served on a free loopback port (no request log); yields its base URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site))
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def pages(site: Path) -> list[str]:
    """Every page's URL path under the site, except 404 and the per-artifact viewers."""
    out = []
    for p in sorted(site.rglob("*.html")):
        rel = p.relative_to(site).as_posix()
        if rel == "404.html" or 'id="almanac-viewer"' in p.read_text(
            encoding="utf-8", errors="replace"
        ):
            continue
        out.append(rel[: -len("index.html")] if rel.endswith("index.html") else rel)
    return out


_READY = """() => [...document.querySelectorAll('.almanac-chart')].every(el => {
  const cs = getComputedStyle(el); if (el.getClientRects().length === 0 || cs.visibility === 'hidden') return true;
  if (el.textContent.startsWith('chart failed')) return true;
  const want = document.body.getAttribute('data-md-color-scheme') === 'slate' ? 'dark' : 'light';
  return el.classList.contains('almanac-chart-ready') && (!el.dataset.scheme || el.dataset.scheme === want);
})"""


def _settle(page: Any) -> str:
    """Wait until every visible chart is drawn in the page's scheme; what is still not, after a minute."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_timeout(
        100
    )  # a frame: resize observers and the scheme's observer run
    try:
        page.wait_for_function(_READY, timeout=60_000, polling=100)
    except PlaywrightTimeout:
        return "chart failed: not drawn (in this scheme) after 60 s: " + ", ".join(
            page.evaluate(
                "() => [...document.querySelectorAll('.almanac-chart:not(.almanac-chart-ready)')].map(e => e.id)"
            )
        )
    page.wait_for_timeout(150)  # a resize or re-render scheduled by the last one
    return ""


def measure(page: Any) -> dict[str, Any]:
    """What the page in ``page`` shows now: its height and width, and each chart's box, axes, text and colours."""
    return page.evaluate(_MEASURE)


def judge(view: View, m: dict[str, Any]) -> None:
    """The defects of a measurement (``measure``), added to ``view`` (whose scheme says whether it is dark)."""
    if m["scrollWidth"] > m["vw"] + 1:
        view.defects.append(
            f"page overflows: {m['scrollWidth']} px wide in a {m['vw']} px window"
            + (f" ({'; '.join(m['overflowing'])})" if m["overflowing"] else "")
        )
    for c in m["charts"]:
        name = f"chart {c['index'] + 1}"
        if c["failed"]:
            view.defects.append(f"chart failed: {name}: {c['failed']}")
            continue
        if not c["visible"]:
            continue
        view.charts += 1
        for why in c["clipped"]:
            view.defects.append(f"chart clipped: {name}: {why}")
        for a in c["axes"]:
            why = axis_defect(a)
            if why:
                view.defects.append(f"axis without unit: {name}: {why}")
        if c["minText"]:
            px = c["minText"]["px"]
            view.min_text_px = (
                px if view.min_text_px is None else min(view.min_text_px, px)
            )
            if px < MIN_TEXT_PX:
                view.defects.append(
                    f"chart text too small: {name}: {px} px ('{c['minText']['text']}')"
                )
        for lc in c["lowContrast"]:
            view.defects.append(f"chart text low contrast: {name}: {lc}")
        if view.scheme == "dark" and c["backgroundLum"] > 0.4:
            view.defects.append(
                f"light chart panel in dark mode: {name}: {c['background']}"
            )


def _slug(path: str) -> str:
    return path.strip("/").replace("/", "_").replace(".html", "") or "home"


def check_page(
    page: Any,
    base: str,
    path: str,
    width: int,
    first: str,
    shots: Path | None,
    max_height: int = MAX_HEIGHT_PX,
) -> list[View]:
    """The two views of one page at one width: as loaded (scheme ``first``), then toggled."""
    page.goto(f"{base}/{path}", wait_until="load")
    views = []
    for toggled in (False, True):
        if toggled:
            before = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
            page.evaluate(
                "() => { document.querySelectorAll('details[data-site-check]').forEach(d => "
                "{ d.open = false; d.removeAttribute('data-site-check'); }); "
                "window.scrollTo(0, 0); }"
            )
            page.locator(
                "label.md-header__button[for^='__palette']:visible"
            ).first.click()
            page.wait_for_function(
                "b => document.body.getAttribute('data-md-color-scheme') !== b",
                arg=before,
            )
        late = _settle(page)
        scheme = SCHEME_NAME.get(
            page.evaluate("document.body.getAttribute('data-md-color-scheme')"), "?"
        )
        view = View(page=path or "/", width=width, scheme=scheme, toggled=toggled)
        if late:
            view.defects.append(late)
        first_sight = measure(page)
        view.height = first_sight["height"]
        if width >= 1000 and view.height > max_height:
            view.defects.append(
                f"page too tall: {view.height} px at {width} px (limit {max_height})"
            )
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            h = min(view.height, 16000)
            page.screenshot(
                path=str(shots / f"{_slug(path)}-{width}-{scheme}.png"),
                full_page=True,
                clip={"x": 0, "y": 0, "width": width, "height": h},
            )
        # every fold open: the charts and tables inside are checked too
        page.evaluate(
            "() => document.querySelectorAll('details:not([open])').forEach(d => { "
            "d.setAttribute('data-site-check', ''); d.open = true; })"
        )
        late = _settle(page)
        if late:
            view.defects.append(late + " (folds open)")
        m = measure(page)
        view.height_open = m["height"]
        if shots is not None:  # each chart on its own, as drawn (folds open)
            for c in m["charts"]:
                if c["visible"] and not c["failed"]:
                    page.locator(".almanac-chart").nth(c["index"]).screenshot(
                        path=str(
                            shots
                            / f"{_slug(path)}-{width}-{scheme}-chart{c['index'] + 1}.png"
                        )
                    )
        judge(view, m)
        views.append(view)
    return views


def check_site(
    site: Path,
    shots: Path | None = None,
    only: list[str] | None = None,
    max_height: int = MAX_HEIGHT_PX,
    views: tuple[tuple[int, str], ...] = VIEWS,
    progress: Any = None,
) -> list[View]:
    """Every page of the built ``site`` in every view; the views with their defects."""
    from playwright.sync_api import sync_playwright

    paths = [p for p in pages(site) if not only or p in only]
    out: list[View] = []
    with serve_quietly(site) as base, sync_playwright() as p:
        for width, first in views:
            errors: list[str] = []
            outside: list[str] = []
            browser, page = open_page(
                p,
                base,
                errors,
                outside,
                viewport={"width": width, "height": 900 if width > 500 else 844},
                color_scheme=first,
            )
            page.add_init_script(
                "try { localStorage.clear(); } catch (e) {}"
            )  # each load starts from the emulated scheme
            try:
                for path in paths:
                    got = check_page(page, base, path, width, first, shots, max_height)
                    if (width, first) == views[
                        0
                    ]:  # once a page: its weight is no view's
                        got[0].defects += page_weight_defects(site, path)
                    got[-1].defects += [f"console error: {e[:200]}" for e in errors]
                    if outside:
                        got[-1].defects.append(f"requests left the site: {outside[:3]}")
                    errors.clear()
                    outside.clear()
                    out += got
                    if progress:
                        for v in got:
                            progress(v)
            finally:
                browser.close()
    return out


def page_weight_defects(
    site: Path, path: str, limit: int = consistency.MAX_PAGE_BYTES
) -> list[str]:
    """ "page weight: ..." where the page at URL path ``path`` is over ``limit`` bytes of HTML (issue 30)."""
    f = site / (path + "index.html" if path == "" or path.endswith("/") else path)
    why = consistency.overweight(f.stat().st_size if f.is_file() else 0, limit)
    return [f"page weight: {why}"] if why else []


def summary(views: list[View]) -> dict[str, Any]:
    """Defects counted by kind, and the tallest pages at first sight at each width."""
    kinds = Counter(d.split(":")[0] for v in views for d in v.defects)
    tallest: dict[int, list[tuple[str, int]]] = {}
    for w in sorted({v.width for v in views}):
        hs: dict[str, int] = {}
        for v in views:
            if v.width == w:
                hs[v.page] = max(hs.get(v.page, 0), v.height)
        tallest[w] = sorted(hs.items(), key=lambda kv: -kv[1])[:8]
    small = [v.min_text_px for v in views if v.min_text_px is not None]
    return {
        "views": len(views),
        "defects": sum(len(v.defects) for v in views),
        "by_kind": dict(kinds),
        "tallest": tallest,
        "smallest_chart_text_px": min(small) if small else None,
    }


def _build(out: Path) -> None:
    env = dict(os.environ, DISABLE_MKDOCS_2_WARNING="true", NO_MKDOCS_2_WARNING="1")
    subprocess.run(
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
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--site",
        type=Path,
        help="a built site folder (default: build one from ALMANAC_DATA or data/)",
    )
    ap.add_argument(
        "--build",
        action="store_true",
        help="build the site first (into --site, or a temporary folder)",
    )
    ap.add_argument(
        "--shots",
        type=Path,
        help="save a screenshot of every page, width and scheme here",
    )
    ap.add_argument(
        "--only",
        help="comma-separated page paths (as listed, e.g. 'memory/,roofline/')",
    )
    ap.add_argument(
        "--max-height",
        type=int,
        default=MAX_HEIGHT_PX,
        help="tallest page allowed at 1366 px, folds closed",
    )
    ap.add_argument(
        "--json", type=Path, help="write every view (heights, defects) here"
    )
    args = ap.parse_args(argv)
    with contextlib.ExitStack() as stack:
        site = args.site
        if site is None:
            site = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="site-check-"))
            )
            args.build = True
        if args.build:
            _build(site)
        only = [s.strip() for s in args.only.split(",")] if args.only else None

        def progress(v: View) -> None:
            flag = f"{len(v.defects)} defect(s)" if v.defects else "ok"
            print(
                f"{v.page:<28} {v.width:>5} {v.scheme:<5}{' (toggled)' if v.toggled else '          '} "
                f"height {v.height:>6} px  charts {v.charts:>2}  min text {v.min_text_px or '-':>5}  {flag}",
                flush=True,
            )
            for d in v.defects:
                print(f"    {d}", flush=True)

        views = check_site(
            site,
            shots=args.shots,
            only=only,
            max_height=args.max_height,
            progress=progress,
        )
    s = summary(views)
    print(json.dumps(s, indent=1))
    if args.json:
        args.json.write_text(
            json.dumps({"summary": s, "views": [asdict(v) for v in views]}, indent=1)
        )
    return 1 if s["defects"] else 0


if __name__ == "__main__":
    sys.exit(main())
