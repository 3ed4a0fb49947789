"""Build-time pages (mkdocs-gen-files): one page per artifact (runs and quality runs), each
section's index and navigation, and the chart library bundle served by the site itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mkdocs_gen_files

from pipelines.perplexity import load_perplexity
from pipelines.quality import load_quality
from pipelines.runs import load_runs
from pipelines.site import pages, quality_pages
from pipelines.site.assets import vega_bundle


def artifact_pages(folder: str, heading: str, intro: str, docs: list[dict[str, Any]], empty: str,
                   index: Callable[[list[dict[str, Any]]], str], page: Callable[[dict[str, Any]], str]) -> None:
    """``folder``/index.md, one ``folder``/<id>.md per artifact, and ``folder``/SUMMARY.md (literate-nav)."""
    nav = [f"* [All {heading.lower()}](index.md)"]
    with mkdocs_gen_files.open(f"{folder}/index.md", "w") as fh:
        fh.write(f"# {heading}\n\n{intro}\n\n")
        fh.write(index(docs) if docs else empty)
    for doc in docs:
        with mkdocs_gen_files.open(f"{folder}/{doc['id']}.md", "w") as fh:
            fh.write(page(doc))
        nav.append(f"* [{doc['id']}]({doc['id']}.md)")
    with mkdocs_gen_files.open(f"{folder}/SUMMARY.md", "w") as fh:
        fh.write("\n".join(nav) + "\n")


artifact_pages("runs", "Runs", "Every artifact under `data/runs/`, newest first; each page holds its full provenance.",
               load_runs(), "No runs yet.\n", pages.runs_index, pages.run_page)
artifact_pages("quality-runs", "Quality runs",
               "Every artifact under `data/quality/`, newest first: each page has every prompt, output, verdict and "
               "the scorer's evidence.", load_quality(), "No quality runs yet.\n",
               quality_pages.quality_index, quality_pages.quality_run_page)
artifact_pages("perplexity-runs", "Perplexity runs",
               "Every artifact under `data/perplexity/`: perplexity on a public text and, against a reference model, "
               "KL-divergence and top-token agreement, with standard errors and per-chunk values.",
               load_perplexity(), "No perplexity runs yet.\n", quality_pages.perplexity_index,
               quality_pages.perplexity_run_page)
with mkdocs_gen_files.open("assets/js/vega-bundle.js", "w") as fh:
    fh.write(vega_bundle())
