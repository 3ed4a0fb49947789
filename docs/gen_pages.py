"""Build-time files (mkdocs-gen-files): the chart library bundle served by the site itself, and
the charts' light and dark themes (pipelines/site/charts.py's THEME and COLORS, for charts.js).

No page is generated per artifact: the runs browsers (docs/runs/, docs/quality-runs/,
docs/perplexity-runs/) list every artifact of their kind from one index and their viewer shows
any of them from the published JSON (pipelines/site/hooks.py writes both after the build), so
the build stays linear in the number of artifacts. Pages organised by host get one page per
host once more hosts have data than one page should carry."""

from __future__ import annotations

import mkdocs_gen_files

from pipelines.site import split_pages  # noqa: F401 - registers the pages that split per host
from pipelines.site.assets import vega_bundle
from pipelines.site.charts import theme_script
from pipelines.site.kinds import kind_pages
from pipelines.site.per_host import generated_pages

with mkdocs_gen_files.open("assets/js/vega-bundle.js", "w") as fh:
    fh.write(vega_bundle())
with mkdocs_gen_files.open("assets/js/chart-theme.js", "w") as fh:
    fh.write(theme_script())

# the pages that split per host once the fleet outgrows one page (pipelines/site/per_host.py)
for _path, _text in generated_pages():
    with mkdocs_gen_files.open(_path, "w") as fh:
        fh.write(_text)

# a test kind with a site section of its own (pipelines/site/kinds.py) gets a page once it has runs
for _path, _text in kind_pages():
    with mkdocs_gen_files.open(_path, "w") as fh:
        fh.write(_text)
