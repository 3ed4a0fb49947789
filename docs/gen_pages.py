"""Build-time files (mkdocs-gen-files): the chart library bundle served by the site itself.

No page is generated per artifact: the runs browsers (docs/runs/, docs/quality-runs/,
docs/perplexity-runs/) list every artifact of their kind from one index and their viewer shows
any of them from the published JSON (pipelines/site/hooks.py writes both after the build), so
the build stays linear in the number of artifacts."""

from __future__ import annotations

import mkdocs_gen_files

from pipelines.site.assets import vega_bundle

with mkdocs_gen_files.open("assets/js/vega-bundle.js", "w") as fh:
    fh.write(vega_bundle())
