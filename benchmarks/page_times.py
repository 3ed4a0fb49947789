"""Where a site build's time goes, page by page: `mkdocs build` in process, each page's Markdown
(macros, the page cache) and HTML timed, the slowest listed, with the build's total and what no page
took (the build's hooks: loading the set, prefill, writing tables, the search index).

    ALMANAC_DATA=DIR ALMANAC_CACHE=CACHE python benchmarks/page_times.py --site-dir OUT [--top 25]

A profile of where, not a figure to quote: time builds with `invoke site.build` (its own steps around
mkdocs) under the measurement lock.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site-dir", required=True, type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    from mkdocs.commands import build as mk_build
    from mkdocs.config import load_config

    took: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    populate, build_page = mk_build._populate_page, mk_build._build_page

    def timed_populate(page, config, files, dirty=False):
        t0 = time.perf_counter()
        try:
            return populate(page, config, files, dirty)
        finally:
            took[page.file.src_uri][0] += time.perf_counter() - t0

    def timed_build(page, config, *a, **kw):
        t0 = time.perf_counter()
        try:
            return build_page(page, config, *a, **kw)
        finally:
            took[page.file.src_uri][1] += time.perf_counter() - t0

    mk_build._populate_page = timed_populate
    mk_build._build_page = timed_build
    config = load_config(strict=True, site_dir=str(args.site_dir))
    t0 = time.perf_counter()
    mk_build.build(config)
    total = time.perf_counter() - t0
    pages = sum(md + html for md, html in took.values())
    print(
        f"build {total:.1f} s: pages {pages:.1f} s over {len(took)} pages "
        f"(Markdown {sum(v[0] for v in took.values()):.1f} s, HTML {sum(v[1] for v in took.values()):.1f} s), "
        f"outside pages {total - pages:.1f} s"
    )
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for src, (md, html) in took.items():
        g = src.split("/", 1)[0] + "/*" if "/" in src else src
        groups[g][0] += md
        groups[g][1] += html
        groups[g][2] += 1
    print(f"\n{'page':60s} {'Markdown s':>10s} {'HTML s':>8s}")
    for src, (md, html) in sorted(took.items(), key=lambda kv: -sum(kv[1]))[: args.top]:
        print(f"{src:60s} {md:10.2f} {html:8.2f}")
    print(f"\n{'folder':40s} {'pages':>6s} {'Markdown s':>10s} {'HTML s':>8s}")
    for g, (md, html, n) in sorted(groups.items(), key=lambda kv: -kv[1][0] - kv[1][1])[
        : args.top
    ]:
        print(f"{g:40s} {int(n):6d} {md:10.2f} {html:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
