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
from typing import Any, NamedTuple

from core import csvcell
from core.metrics import METRICS
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


class Listed(NamedTuple):
    """One artifact as the browsers read it: the index's columns the rows are made of (its identity, then
    pipelines.index's LISTING_COLUMNS, in their order)."""

    path: str
    artifact: str
    id: str
    created: str
    status: str
    host_id: str
    model: str
    test: str | None
    backend: str | None
    origin: str | None
    headline_metric: str | None
    headline_mean: float | None
    pass_rate: float | None
    n_passed: int | None
    n_items: int | None
    reference: str | None
    text: str | None
    ppl: float | None
    ppl_se: float | None
    kld_mean: float | None
    kld_se: float | None
    same_top: float | None
    same_top_se: float | None
    n_scored_tokens: int | None


def run_row(a: Listed) -> dict[str, Any]:
    m = METRICS.get(a.headline_metric or "")
    v = a.headline_mean
    value, unit, label = (
        (None, "", "")
        if m is None or v is None
        else (round(v, m.decimals), m.unit, m.label)
    )
    served = (
        "" if a.origin is None else f" · {a.origin}"
    )  # an endpoint: where it was served
    return {
        "id": a.id,
        "created": a.created,
        "host": a.host_id,
        "model": a.model,
        "test": a.test,
        "backend": a.backend,
        "status": a.status,
        "metric": label,
        "value": value,
        "unit": unit,
        "title": f"{a.model} · {a.test} · {a.host_id}" + served,
        "json": data_url(a.path),
    }


def quality_row(a: Listed) -> dict[str, Any]:
    rate = a.pass_rate
    return {
        "id": a.id,
        "created": a.created,
        "host": a.host_id,
        "model": a.model,
        "suite": a.test,  # a quality run's suite is the index's test
        "backend": a.backend,
        "status": a.status,
        "pass_rate": None if rate is None else round(100 * rate, 1),
        "passed": a.n_passed,
        "n": a.n_items,
        "title": f"{a.model} · {a.test} · {a.host_id}",
        "json": data_url(a.path),
    }


def _round(v: float | None, decimals: int, scale: float = 1.0) -> float | None:
    """A value for the list, rounded; None where scaling a finite stored value leaves the floats (no list
    shows infinity: the viewer and the JSON hold the value as stored)."""
    if v is None:
        return None
    x = scale * v
    return round(x, decimals) if math.isfinite(x) else None


def perplexity_row(a: Listed) -> dict[str, Any]:
    """A perplexity artifact: PPL and, against a reference model, mean KLD and top-token agreement, each
    with its standard error (rounded for the list; the viewer and the JSON hold the full values)."""
    ref = a.reference or ""
    return {
        "id": a.id,
        "created": a.created,
        "host": a.host_id,
        "model": a.model,
        "reference": ref,
        "text": a.text,
        "status": a.status,
        "ppl": _round(a.ppl, 5),
        "ppl_se": _round(a.ppl_se, 5),
        "kld": _round(a.kld_mean, 7),
        "kld_se": _round(a.kld_se, 7),
        "same_top": _round(a.same_top, 3, 100),
        "same_top_se": _round(a.same_top_se, 3, 100),
        "n": a.n_scored_tokens,
        "title": f"{a.model} · {'KLD vs ' + ref if ref else 'perplexity'} · {a.text} · {a.host_id}",
        "json": data_url(a.path),
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


def index_rows(kind: str, artifacts: Any) -> list[dict[str, Any]]:
    """The browser's rows of one kind, newest first, from the index's artifacts (a pyarrow table, as
    pipelines.index keeps it, or its rows as dicts: index.rows_of)."""
    if isinstance(artifacts, list):
        listed = [
            Listed(**{c: a[c] for c in Listed._fields})
            for a in artifacts
            if a["artifact"] == kind
        ]
    else:
        import pyarrow.compute as pc

        t = artifacts.filter(pc.equal(artifacts["artifact"], kind))
        listed = list(
            map(Listed._make, zip(*(t[c].to_pylist() for c in Listed._fields)))
        )
    make = ROWS[kind]
    listed.sort(key=lambda a: (a.created, a.id), reverse=True)
    return [make(a) for a in listed]


def count(kind: str, artifacts: Any) -> int:
    """How many artifacts of ``kind`` the index lists."""
    import pyarrow.compute as pc

    return int(pc.sum(pc.equal(artifacts["artifact"], kind)).as_py() or 0)


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
