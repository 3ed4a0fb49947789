"""Build-time files (mkdocs-gen-files): the chart library bundle served by the site itself, and
the perplexity runs' pages.

Per-run and per-quality-run pages are not generated: the runs browsers (docs/runs/,
docs/quality-runs/) list every artifact from one index and their viewer shows any of them from
the published JSON (pipelines/site/hooks.py writes both after the build), so the build stays
linear in the number of artifacts. Perplexity runs are few (one per model variant and text)
and keep one generated page each, out of the navigation."""

from __future__ import annotations

import mkdocs_gen_files

from pipelines.perplexity import load_perplexity
from pipelines.site import quality_pages
from pipelines.site.assets import vega_bundle

_perplexity = load_perplexity()
with mkdocs_gen_files.open("perplexity-runs/index.md", "w") as fh:
    fh.write("# Perplexity runs\n\nEvery artifact under `data/perplexity/`: perplexity on a public text and, against a "
             "reference model, KL-divergence and top-token agreement, with standard errors and per-chunk values.\n\n")
    fh.write(quality_pages.perplexity_index(_perplexity) if _perplexity else "No perplexity runs yet.\n")
for _doc in _perplexity:
    with mkdocs_gen_files.open(f"perplexity-runs/{_doc['id']}.md", "w") as fh:
        fh.write(quality_pages.perplexity_run_page(_doc))

with mkdocs_gen_files.open("assets/js/vega-bundle.js", "w") as fh:
    fh.write(vega_bundle())

# pages split per host once the fleet outgrows one page (pipelines/site/per_host.py)
from pipelines.site import split_pages  # noqa: E402,F401 - registers the split pages
from pipelines.site.per_host import generated_pages  # noqa: E402

for _path, _text in generated_pages():
    with mkdocs_gen_files.open(_path, "w") as fh:
        fh.write(_text)
