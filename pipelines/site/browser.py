"""The runs browser and the artifact viewer: one page lists every artifact of a kind (runs,
quality runs, perplexity runs) in a table filtered and sorted in the browser; one page shows any artifact from
its published JSON. Neither goes through Markdown, Jinja or the search index per artifact:
the build writes one compact index (``<folder>/index-data.js``, also as ``index.json`` and
``index.csv``) and mirrors every artifact's JSON under ``data/`` in the site, so the cost of
an artifact is one row and one file copy. Three kinds: runs, quality runs, perplexity runs.

The JS lives in docs/assets/js/runs.js; these functions return the page bodies and the index.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Any

from core import csvcell
from core.metrics import METRICS
from core.records import record_class
from core.records.base import ArtifactRecord
from core.records.perplexity import PerplexityRecord
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines.site.markdown import data_url

ROOT = "@@ALMANAC_ROOT@@/"  # replaced per page by the build hook with the relative path to the site root


@dataclass(frozen=True)
class Kind:
    """One browsable artifact type: where its pages live and how a row reads."""

    name: str  # artifact type
    folder: str  # site folder of the browser page (viewer at <folder>/run/)
    title: str
    noun: str


KINDS = {
    "run": Kind("run", "runs", "runs", "runs"),
    "quality": Kind("quality", "quality-runs", "quality runs", "quality runs"),
    "perplexity": Kind(
        "perplexity", "perplexity-runs", "perplexity runs", "perplexity runs"
    ),
}


def _headline(r: RunRecord) -> tuple[float | None, str, str]:
    m, st = r.headline_metric, r.headline
    if m is None or st is None:
        return None, "", ""
    return round(float(st.mean), m.decimals), m.unit, m.label


def run_row(d: RunRecord) -> dict[str, Any]:
    r = d
    value, unit, label = _headline(r)
    return {
        "id": r.id,
        "created": r.created,
        "host": r.host_id,
        "model": r.model_name,
        "test": r.test_name,
        "backend": r.backend,
        "status": r.status,
        "metric": label,
        "value": value,
        "unit": unit,
        "title": f"{r.model_name} · {r.test_name} · {r.host_id}" + _served(r),
        "json": data_url(r.data_path),
    }


def _served(r: RunRecord) -> str:
    """Where an endpoint model was served (its run has no model file): `` · <name> at <URL> (<server>)``."""
    return f" · {r.model_origin}" if r.is_endpoint else ""


def quality_row(d: QualityRecord) -> dict[str, Any]:
    q = d
    s = q.summary.rate
    rate = s.pass_rate
    return {
        "id": q.id,
        "created": q.created,
        "host": q.host_id,
        "model": q.model_name,
        "suite": q.suite_name,
        "backend": q.backend,
        "status": q.status,
        "pass_rate": None if rate is None else round(100 * float(rate), 1),
        "passed": s.passed,
        "n": s.n,
        "title": f"{q.model_name} · {q.suite_name} · {q.host_id}",
        "json": data_url(q.data_path),
    }


def _round(v: Any, decimals: int, scale: float = 1.0) -> float | None:
    """A value for the list, rounded; None where scaling a finite stored value leaves the floats (no list
    shows infinity: the viewer and the JSON hold the value as stored)."""
    if v is None:
        return None
    x = scale * float(v)
    return round(x, decimals) if math.isfinite(x) else None


def perplexity_row(d: PerplexityRecord) -> dict[str, Any]:
    """A perplexity artifact: PPL and, against a reference model, mean KLD and top-token agreement, each
    with its standard error (rounded for the list; the viewer and the JSON hold the full values)."""
    p = d
    r: Any = p.results or {}  # a failed measurement has no figures
    ref = p.reference.name if p.reference else ""
    return {
        "id": p.id,
        "created": p.created,
        "host": p.host_id,
        "model": p.model_name,
        "reference": ref,
        "text": p.text.name,
        "status": p.status,
        "ppl": _round(r.get("ppl"), 5),
        "ppl_se": _round(r.get("ppl_se"), 5),
        "kld": _round(r.get("kld_mean"), 7),
        "kld_se": _round(r.get("kld_se"), 7),
        "same_top": _round(r.get("same_top"), 3, 100),
        "same_top_se": _round(r.get("same_top_se"), 3, 100),
        "n": r.get("n_scored_tokens") if p.results is not None else None,
        "title": f"{p.model_name} · {'KLD vs ' + ref if ref else 'perplexity'} · {p.text.name} · {p.host_id}",
        "json": data_url(p.data_path),
    }


ROWS = {"run": run_row, "quality": quality_row, "perplexity": perplexity_row}

# (name, label, type, filter, hidden, dictionary-encoded)
_COLUMNS = {
    "run": [
        ("id", "run", "str", False, False, False),
        ("created", "measured (UTC)", "str", False, False, False),
        ("host", "host", "str", True, False, True),
        ("model", "model", "str", True, False, True),
        ("test", "test", "str", True, False, True),
        ("backend", "backend", "str", True, False, True),
        ("status", "status", "str", True, False, True),
        ("metric", "headline metric", "str", False, False, True),
        ("value", "value", "num", False, False, False),
        ("unit", "unit", "str", False, True, True),
        ("json", "JSON", "str", False, False, False),
        ("title", "title", "str", False, True, False),
    ],
    "quality": [
        ("id", "quality run", "str", False, False, False),
        ("created", "measured (UTC)", "str", False, False, False),
        ("host", "host", "str", True, False, True),
        ("model", "model", "str", True, False, True),
        ("suite", "suite", "str", True, False, True),
        ("backend", "backend", "str", True, False, True),
        ("status", "status", "str", True, False, True),
        ("pass_rate", "pass rate (%)", "num", False, False, False),
        ("passed", "passed", "num", False, False, False),
        ("n", "scored", "num", False, False, False),
        ("json", "JSON", "str", False, False, False),
        ("title", "title", "str", False, True, False),
    ],
    "perplexity": [
        ("id", "perplexity run", "str", False, False, False),
        ("created", "measured (UTC)", "str", False, False, False),
        ("host", "host", "str", True, False, True),
        ("model", "model", "str", True, False, True),
        ("reference", "reference model", "str", True, False, True),
        ("text", "text", "str", True, False, True),
        ("status", "status", "str", True, False, True),
        ("ppl", "PPL", "num", False, False, False),
        ("ppl_se", "PPL SE", "num", False, True, False),
        ("kld", "mean KLD", "num", False, False, False),
        ("kld_se", "KLD SE", "num", False, True, False),
        ("same_top", "same top token (%)", "num", False, False, False),
        ("same_top_se", "same top SE", "num", False, True, False),
        ("n", "scored tokens", "num", False, False, False),
        ("json", "JSON", "str", False, False, False),
        ("title", "title", "str", False, True, False),
    ],
}
# a number shown with its standard error (column -> its SE column) and its decimals in the list
_SE = {
    "perplexity": {
        "ppl": ("ppl_se", 3),
        "kld": ("kld_se", 5),
        "same_top": ("same_top_se", 1),
    }
}


def index_rows(kind: str, docs: list[ArtifactRecord]) -> list[dict[str, Any]]:
    make = ROWS[kind]
    cls = record_class(kind)
    recs = [d if isinstance(d, cls) else cls(d) for d in docs]
    return [
        make(r) for r in sorted(recs, key=lambda r: (r.created, r.id), reverse=True)
    ]


def index_data(kind: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The compact index the browser reads: columns, a dictionary per repeated column, rows of values."""
    cols = _COLUMNS[kind]
    values: dict[str, list[Any]] = {}
    lookup: dict[str, dict[Any, int]] = {}
    for name, _, _, _, _, dict_ in cols:
        if dict_:
            values[name], lookup[name] = [], {}
    out_rows = []
    for r in rows:
        out = []
        for name, _, _, _, _, dict_ in cols:
            v = r.get(name)
            if dict_:
                idx = lookup[name].get(v)
                if idx is None:
                    idx = lookup[name][v] = len(values[name])
                    values[name].append(v)
                v = idx
            out.append(v)
        out_rows.append(out)
    columns = []
    for name, label, typ, filt, hidden, dict_ in cols:
        c: dict[str, Any] = {"name": name, "label": label, "type": typ}
        if filt:
            c["filter"] = True
        if hidden:
            c["hidden"] = True
        if dict_:
            c["dict"] = True
        if kind == "run" and name == "value":
            c["unit_col"] = "unit"
        if name in _SE.get(kind, {}):
            c["se_col"], c["decimals"] = _SE[kind][name]
        columns.append(c)
    k = KINDS[kind]
    data: dict[str, Any] = {
        "title": k.title,
        "noun": k.noun,
        "default_sort": "created",
        "columns": columns,
        "values": values,
        "rows": out_rows,
    }
    if kind == "run":
        data["metrics"] = {
            m.name: [m.label, m.unit, m.decimals, m.display_scale]
            for m in METRICS.values()
        }
    return data


def index_script(kind: str, data: dict[str, Any]) -> str:
    """``index-data.js``: the index as a script (a page opened from disk may load scripts, not fetch JSON)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"window.ALMANAC_INDEX=window.ALMANAC_INDEX||{{}};window.ALMANAC_INDEX[{json.dumps(kind)}]={text};\n"


def index_csv(kind: str, rows: list[dict[str, Any]]) -> str:
    names = [c[0] for c in _COLUMNS[kind]]
    buf = io.StringIO()
    w = csvcell.dict_writer(buf, names, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def index_json(rows: list[dict[str, Any]]) -> str:
    # one row a line (json's C encoder; an indented dump goes through the pure-Python one)
    return (
        "[\n"
        + ",\n".join(json.dumps(r, ensure_ascii=False, allow_nan=False) for r in rows)
        + "\n]\n"
    )


def browser_page(kind: str, count: int) -> str:
    """The body of the browser page: filters and table are built by runs.js from the index."""
    k = KINDS[kind]
    base = f"{ROOT}{k.folder}/"
    return (
        f'<div id="almanac-browser" class="almanac-browser" data-kind="{kind}" '
        f'data-root="{ROOT}" data-viewer="{base}run/">'
        f"<p>Loading the list of {count:,} {k.noun} (needs JavaScript)…</p></div>\n"
        f'<script src="{base}index-data.js"></script>\n\n'
        f'<p class="almanac-downloads">The whole list: <a href="{base}index.csv" download>CSV</a> · '
        f'<a href="{base}index.json" download>JSON</a>; every artifact is published as JSON under '
        f'<a href="{ROOT}data.md">data/</a> with the same path as in the repository.</p>\n'
    )


def viewer_page(kind: str) -> str:
    k = KINDS[kind]
    return (
        f'<div id="almanac-viewer" class="almanac-viewer" data-kind="{kind}" data-root="{ROOT}">'
        f'<p>Loading… (needs JavaScript). <a href="{ROOT}{k.folder}/">All {k.noun}</a></p></div>\n'
        f'<script src="{ROOT}{k.folder}/index-data.js"></script>\n'
    )
