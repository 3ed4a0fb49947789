"""Build-time pages (mkdocs-gen-files): one drill-down page per quality artifact, and the
index of quality runs with its navigation."""

from __future__ import annotations

import mkdocs_gen_files

from pipelines.quality import load_quality
from pipelines.site import quality_pages

docs = load_quality()
nav = ["* [All quality runs](index.md)"]
with mkdocs_gen_files.open("quality-runs/index.md", "w") as fh:
    fh.write("# Quality runs\n\nEvery artifact under `data/quality/`, newest first: each page has every prompt, "
             "output, verdict and the scorer's evidence.\n\n")
    fh.write(quality_pages.quality_index(docs) if docs else "No quality runs yet.\n")
for doc in docs:
    with mkdocs_gen_files.open(f"quality-runs/{doc['id']}.md", "w") as fh:
        fh.write(quality_pages.quality_run_page(doc))
    nav.append(f"* [{doc['id']}]({doc['id']}.md)")
with mkdocs_gen_files.open("quality-runs/SUMMARY.md", "w") as fh:
    fh.write("\n".join(nav) + "\n")
