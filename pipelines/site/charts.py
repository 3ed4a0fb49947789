"""Altair charts and their offline embedding.

A chart is an Altair spec embedded in the page as JSON; docs/assets/js/charts.js renders
it with vega-embed from the bundle served by the site itself (vl-convert's
``javascript_bundle()``, written at build time), never from a CDN.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import altair as alt
import pandas as pd

from core.metrics import Metric


def embed(chart: alt.TopLevelMixin | dict[str, Any], chart_id: str | None = None, caption: str = "") -> str:
    """HTML for one chart: a container and its spec as inert JSON (no script runs from data)."""
    # Altair's own validation of the Vega-Lite spec costs ~0.1 s a chart; the builders are
    # unit-tested with it on (ALMANAC_VALIDATE_CHARTS=1), the site build skips it.
    spec = chart if isinstance(chart, dict) else chart.to_dict(validate=bool(os.environ.get("ALMANAC_VALIDATE_CHARTS")))
    text = json.dumps(spec, sort_keys=True, allow_nan=False)
    # JSON inside <script>: neutralise anything that could close the element or open HTML.
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    cid = chart_id or "chart-" + hashlib.sha256(text.encode()).hexdigest()[:10]
    data = figure_data(spec)
    if data:
        caption = (caption + " " if caption else "") + data
    cap = f'<figcaption>{caption}</figcaption>' if caption else ""
    return (f'<figure class="almanac-figure"><div class="almanac-chart" id="{cid}" data-spec="{cid}-spec"></div>'
            f'<script type="application/json" id="{cid}-spec">{safe}</script>{cap}</figure>')


def _values(spec: Any) -> list[dict[str, Any]]:
    """Every inline data row of a spec (top level, layers, concatenations, named datasets)."""
    out: list[dict[str, Any]] = []
    if isinstance(spec, dict):
        data = spec.get("data")
        if isinstance(data, dict) and isinstance(data.get("values"), list):
            out += [v for v in data["values"] if isinstance(v, dict)]
        for vals in (spec.get("datasets") or {}).values():
            out += [v for v in vals if isinstance(v, dict)]
        for k in ("layer", "hconcat", "vconcat", "concat"):
            for sub in spec.get(k) or []:
                out += _values(sub)
    return out


def figure_data(spec: dict[str, Any]) -> str:
    """The figure's data as downloads (CSV and JSON, every mark's values), with the published JSON
    of each artifact it shows (``artifact_json``): every figure links to its sources."""
    from pipelines import dataset
    from pipelines.site.markdown import ROOT, register_table

    rows = _values(spec)
    if not rows:
        return ""
    json_of = dataset.published_json()
    headers = list(dict.fromkeys(k for r in rows for k in r))
    ids = "id" in headers
    if ids:
        headers.append("artifact_json")
    body = [[_text(r.get(h)) for h in headers[:-1]] + [json_of.get(str(r.get("id")), "")] if ids else
            [_text(r.get(h)) for h in headers] for r in rows]
    digest = register_table(headers, body)
    return (f'<span class="almanac-downloads">Data: <a href="{ROOT}tables/{digest}.csv" download>CSV</a> · '
            f'<a href="{ROOT}tables/{digest}.json" download>JSON</a>'
            + (" (with each artifact's JSON)" if ids else "") + "</span>")


def _text(v: Any) -> str:
    return "" if v is None else (v if isinstance(v, str) else json.dumps(v))


def bar_with_ci(df: pd.DataFrame, metric: Metric, label_col: str = "label", title: str = "") -> alt.LayerChart:
    """Horizontal bars of the mean with CI95 error bars, best first."""
    order = list(df.sort_values("mean", ascending=not metric.higher_is_better)[label_col])
    base = alt.Chart(df).encode(y=alt.Y(f"{label_col}:N", sort=order, title=None))
    bars = base.mark_bar(color="#4051b5").encode(
        x=alt.X("mean:Q", title=f"{metric.label} ({metric.unit})"),
        tooltip=[alt.Tooltip(f"{label_col}:N", title="configuration"),
                 alt.Tooltip("mean:Q", format=".2f", title=f"mean ({metric.unit})"),
                 alt.Tooltip("stddev:Q", format=".2f"), alt.Tooltip("n:Q"),
                 alt.Tooltip("ci95_low:Q", format=".2f"), alt.Tooltip("ci95_high:Q", format=".2f"),
                 alt.Tooltip("id:N", title="artifact")],
    )
    if "json" in df.columns:  # a click on a bar opens the JSON of the artifact it shows
        bars = bars.encode(href=alt.Href("json:N"))
    err = base.mark_errorbar(color="#222").encode(x=alt.X("ci95_low:Q", title=f"{metric.label} ({metric.unit})"), x2=alt.X2("ci95_high:Q"))
    return (bars + err).properties(title=title, width="container", height=max(60, 28 * len(df)))


def _q(field: str, title: str | None = None, **kw: Any) -> dict[str, Any]:
    enc: dict[str, Any] = {"field": field, "type": "quantitative", **kw}
    if title is not None:
        enc["title"] = title
    return enc


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v  # NaN -> null (JSON has no NaN)


def dots_with_ci(df: pd.DataFrame, metric: Metric, label_col: str = "label", title: str = "") -> dict[str, Any]:
    """One mark per result: a dot at the mean and a CI95 rule, one row per artifact, in the
    frame's order. Rows are keyed by the artifact id (``id``), so two results never share a
    mark and nothing is summed or stacked (Vega-Lite stacks bars that share a category).
    A plain Vega-Lite spec (no Altair validation: linear and cheap at thousands of rows)."""
    rows = df.reset_index(drop=True).to_dict("records")
    values = [{**{k: _clean(v) for k, v in r.items()}, "row": f"{r[label_col]} · {str(r['id'])[:12]}"} for r in rows]
    axis_title = f"{metric.label} ({metric.unit})"
    tooltip = [{"field": label_col, "type": "nominal", "title": "configuration"},
               {"field": "mean", "type": "quantitative", "format": ".2f", "title": f"mean ({metric.unit})"},
               {"field": "stddev", "type": "quantitative", "format": ".2f"}, {"field": "n", "type": "quantitative"},
               {"field": "ci95_low", "type": "quantitative", "format": ".2f"},
               {"field": "ci95_high", "type": "quantitative", "format": ".2f"},
               {"field": "id", "type": "nominal", "title": "artifact"}]
    return {
        "$schema": alt.SCHEMA_URL, "title": title, "width": "container", "height": max(60, 26 * len(values)),
        "data": {"values": values},
        "encoding": {"y": {"field": "row", "type": "nominal", "sort": [v["row"] for v in values], "title": None,
                           "axis": {"labelLimit": 320}}},
        "layer": [
            {"mark": {"type": "rule", "color": "#222"},
             "encoding": {"x": _q("ci95_low", axis_title, stack=None), "x2": {"field": "ci95_high"}}},
            {"mark": {"type": "point", "filled": True, "size": 70, "color": "#4051b5"},
             "encoding": {"x": _q("mean", axis_title, stack=None), "tooltip": tooltip,
                          # a click on a dot opens its artifact's published JSON
                          **({"href": {"field": "json", "type": "nominal"}} if "json" in df.columns else {})}},
        ],
    }


def dots_over_time(values: list[dict[str, Any]], metric: Metric, title: str = "") -> dict[str, Any]:
    """One dot per result (mean) with its CI95 rule over time (``created``), coloured by ``build``."""
    axis_title = f"{metric.label} ({metric.unit})"
    tooltip = [{"field": "created", "type": "temporal", "format": "%Y-%m-%d %H:%M:%S"},
               {"field": "mean", "type": "quantitative", "format": ".2f"},
               {"field": "stddev", "type": "quantitative", "format": ".2f"}, {"field": "n", "type": "quantitative"},
               {"field": "ci95_low", "type": "quantitative", "format": ".2f"},
               {"field": "ci95_high", "type": "quantitative", "format": ".2f"},
               {"field": "build", "type": "nominal"}, {"field": "id", "type": "nominal", "title": "artifact"}]
    return {
        "$schema": alt.SCHEMA_URL, "title": title, "width": "container", "height": 220,
        "data": {"values": [{k: _clean(v) for k, v in r.items()} for r in values]},
        "encoding": {"x": {"field": "created", "type": "temporal", "title": "measured"},
                     "color": {"field": "build", "type": "nominal", "title": "build",
                               "legend": {"orient": "bottom", "labelLimit": 400}}},
        "layer": [
            {"mark": {"type": "rule"}, "encoding": {"y": _q("ci95_low", axis_title, stack=None), "y2": {"field": "ci95_high"}}},
            {"mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {"y": _q("mean", axis_title, stack=None, scale={"zero": False}), "tooltip": tooltip}},
        ],
    }


def line_sweep(df: pd.DataFrame, x: str, metric: Metric, series: str | None = None, title: str = "",
               x_title: str | None = None) -> alt.LayerChart:
    """A sweep: metric mean against a swept value, CI95 band, one line per series."""
    enc_color = alt.Color(f"{series}:N", title=series) if series else alt.ColorValue("#4051b5")
    base = alt.Chart(df).encode(x=alt.X(f"{x}:Q", title=x_title or x))
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title=f"{metric.label} ({metric.unit})"), color=enc_color,
        tooltip=[alt.Tooltip(f"{x}:Q"), alt.Tooltip("mean:Q", format=".2f"), alt.Tooltip("stddev:Q", format=".2f"),
                 alt.Tooltip("n:Q"), alt.Tooltip("id:N", title="artifact")] + ([alt.Tooltip(f"{series}:N")] if series else []))
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("ci95_low:Q"), y2=alt.Y2("ci95_high:Q"), color=enc_color)
    return (band + line).properties(title=title, width="container", height=260)
