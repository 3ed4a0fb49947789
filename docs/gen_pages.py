"""Build-time pages (mkdocs-gen-files): one page per run artifact, the runs index and its
navigation, and the chart library bundle served by the site itself."""

from __future__ import annotations

import mkdocs_gen_files

from pipelines.runs import load_runs
from pipelines.site import pages
from pipelines.site.assets import vega_bundle

docs = load_runs()
nav = ["* [All runs](index.md)"]
with mkdocs_gen_files.open("runs/index.md", "w") as fh:
    fh.write("# Runs\n\nEvery artifact under `data/runs/`, newest first; each page holds its full provenance.\n\n")
    fh.write(pages.runs_index(docs) if docs else "No runs yet.\n")
for doc in docs:
    with mkdocs_gen_files.open(f"runs/{doc['id']}.md", "w") as fh:
        fh.write(pages.run_page(doc))
    nav.append(f"* [{doc['id']}]({doc['id']}.md)")
with mkdocs_gen_files.open("runs/SUMMARY.md", "w") as fh:
    fh.write("\n".join(nav) + "\n")
with mkdocs_gen_files.open("assets/js/vega-bundle.js", "w") as fh:
    fh.write(vega_bundle())
