"""Altair charts and their offline embedding.

A chart is an Altair spec embedded in the page as JSON; docs/assets/js/charts.js renders
it with vega-embed from the bundle served by the site itself (vl-convert's
``javascript_bundle()``, written at build time), never from a CDN.

One truth per figure (issue 27):

- every quantitative position axis is built by ``qx``/``qy`` (Altair) or ``q`` (a plain
  Vega-Lite spec) from a label and a unit, and says "log scale" where it is one; every layer
  of a chart that shares the axis carries the same title (Vega-Lite merges the layers' titles,
  and a layer's ``title=None`` would drop the axis title of all of them). ``embed`` refuses a
  chart with a quantitative axis whose title names no unit (``UnitlessAxis``);
- the page's colour scheme is the chart's: ``THEME`` (the Vega-Lite config for the light and
  the dark scheme) and ``COLORS`` (each mark colour by role, light and dark) are written to
  assets/js/chart-theme.js at build time; charts.js renders every chart in the reader's scheme,
  at its container's width, and again when either changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

import altair as alt
import pandas as pd

from core.metrics import Metric
from pipelines.site import chart_shapes

# -- colours --------------------------------------------------------------------------------------
# Mark colours by role: (light scheme, dark scheme). Builders write the light one; charts.js puts
# the dark one in its place when the reader's scheme is dark (Material's "slate"). A mid-tone that
# reads on both backgrounds is its own pair.
COLORS: dict[str, tuple[str, str]] = {
    "accent": ("#4051b5", "#8c9eff"),  # the one series of a chart (Material indigo)
    "ink": ("#222222", "#e0e0e0"),  # error bars, reference rules
    "muted": ("#555555", "#b8b8b8"),  # baselines, dashed "no change" lines
    "quiet": ("#9e9e9e", "#9e9e9e"),  # a line that only joins points; dominated points
    "good": ("#2e7d32", "#81c784"),  # a win, the Pareto front, identical output
    "bad": ("#c62828", "#ef9a9a"),  # a loss, an SLO limit, degenerate output
    "warn": ("#ef6c00", "#ffb74d"),  # diverged output
    "neutral": ("#757575", "#a0a0a0"),  # within noise
    "faint": ("#bdbdbd", "#6e6e6e"),  # insufficient data
    "measured": ("#1b9e77", "#4fd1a5"),  # the roofline's measured rate
    "bound": ("#d95f02", "#ff9e4f"),  # the roofline's bandwidth bound
}
ACCENT, INK, MUTED, QUIET, GOOD, BAD, WARN, NEUTRAL, FAINT, MEASURED, BOUND = (
    COLORS[k][0]
    for k in (
        "accent",
        "ink",
        "muted",
        "quiet",
        "good",
        "bad",
        "warn",
        "neutral",
        "faint",
        "measured",
        "bound",
    )
)

FONT = "-apple-system, BlinkMacSystemFont, Helvetica, Arial, sans-serif"  # Material's with `font: false`
TEXT_PX = 12  # axis, legend and mark text: at least 11 px as drawn, on a phone too (charts are never scaled down)


# Series colours (Vega's tableau10 on light; the same hues lightened to read on the dark page).
CATEGORY = {
    "light": [
        "#4c78a8",
        "#f58518",
        "#e45756",
        "#72b7b2",
        "#54a24b",
        "#eeca3b",
        "#b279a2",
        "#ff9da6",
        "#9d755d",
        "#bab0ac",
    ],
    "dark": [
        "#7ea8d8",
        "#f8a04a",
        "#ef8583",
        "#8fd0cb",
        "#7cc474",
        "#f2d663",
        "#cf9cc1",
        "#ffb8bf",
        "#c39a80",
        "#cfc7c3",
    ],
}


def _scheme_config(
    scheme: str, text: str, title: str, grid: str, domain: str
) -> dict[str, Any]:
    label = {
        "labelColor": text,
        "titleColor": title,
        "labelFontSize": TEXT_PX,
        "titleFontSize": TEXT_PX,
        "labelFont": FONT,
        "titleFont": FONT,
    }
    return {
        "background": "transparent",
        "font": FONT,
        "view": {"stroke": grid, "fill": None},
        # tick labels keep 6 px apart (crowded ones are left out, never drawn touching)
        "axis": {
            **label,
            "gridColor": grid,
            "domainColor": domain,
            "tickColor": domain,
            "titleFontWeight": "normal",
            "labelSeparation": 6,
        },
        # an x axis title longer than a narrow plot (a phone) runs left over the label column, never off the right edge
        "axisX": {"titleAnchor": "end", "titleAlign": "right"},
        "legend": {**label, "titleFontWeight": "normal", "symbolOpacity": 1},
        "header": {**label},
        "title": {
            "color": title,
            "subtitleColor": text,
            "fontSize": 14,
            "subtitleFontSize": TEXT_PX,
            "font": FONT,
            "anchor": "start",
            "fontWeight": "bold",
            "offset": 8,
        },
        "text": {"color": title, "fontSize": TEXT_PX, "font": FONT},
        "mark": {"color": CATEGORY[scheme][0]},
        "range": {"category": CATEGORY[scheme]},
    }


# The Vega-Lite config of each scheme (a spec's own config wins): transparent background, so a chart
# sits on the page's own colour; text, grid and axis lines readable on it.
THEME: dict[str, dict[str, Any]] = {
    "light": _scheme_config(
        "light", text="#444444", title="#1f1f1f", grid="#e3e3e3", domain="#8a8a8a"
    ),
    "dark": _scheme_config(
        "dark", text="#c9ccd6", title="#e8eaf0", grid="#3a3f4d", domain="#8b90a0"
    ),
}


def theme_script() -> str:
    """assets/js/chart-theme.js: the schemes' configs and dark colours for charts.js."""
    data = {
        "light": THEME["light"],
        "dark": THEME["dark"],
        "font": FONT,
        "textPx": TEXT_PX,
        "darkColors": {light: dark for light, dark in COLORS.values() if light != dark},
    }
    return (
        "// Written at build time from pipelines/site/charts.py (THEME, COLORS): do not edit.\n"
        f"window.almanacChartTheme = {json.dumps(data, sort_keys=True, allow_nan=False)};\n"
    )


# -- axes with units ------------------------------------------------------------------------------
LOG_WORDS = "log scale"


def axis_title(
    what: Metric | str, unit: str | None = None, *, log: bool = False
) -> str:
    """A quantitative axis's title: what, then its unit in parentheses, and "log scale" where it is
    one: ``decode rate (t/s, log scale)``. ``what`` may be a registered metric (its label and unit)."""
    if isinstance(what, Metric):
        label, unit = what.label, unit or what.unit
    else:
        label = what
    if not unit:
        raise ValueError(f"axis {label!r}: a quantitative axis names its unit")
    return f"{label} ({unit}{', ' + LOG_WORDS if log else ''})"


def _scale(scale: Any, log: bool) -> Any:
    """``scale`` (an alt.Scale, a dict or None) with a log type where ``log``."""
    if not log:
        return scale
    if isinstance(scale, alt.Scale):
        return alt.Scale(**{**scale.to_dict(validate=False), "type": "log"})
    return {**(scale or {}), "type": "log"}


def qx(
    field: str,
    what: Metric | str,
    unit: str | None = None,
    *,
    log: bool = False,
    **kw: Any,
) -> alt.X:
    """A quantitative x encoding titled with its unit (``axis_title``); give every layer sharing the
    axis the same arguments. ``log``: a log scale (merged into ``scale``), said in the title."""
    if log:
        kw["scale"] = _scale(kw.get("scale"), log)
    return alt.X(f"{field}:Q", title=axis_title(what, unit, log=log), **kw)


def qy(
    field: str,
    what: Metric | str,
    unit: str | None = None,
    *,
    log: bool = False,
    **kw: Any,
) -> alt.Y:
    """A quantitative y encoding titled with its unit; see ``qx``."""
    if log:
        kw["scale"] = _scale(kw.get("scale"), log)
    return alt.Y(f"{field}:Q", title=axis_title(what, unit, log=log), **kw)


def q(
    field: str,
    what: Metric | str,
    unit: str | None = None,
    *,
    log: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    """The same for a plain Vega-Lite spec: a quantitative channel definition titled with its unit."""
    enc: dict[str, Any] = {
        "field": field,
        "type": "quantitative",
        **kw,
        "title": axis_title(what, unit, log=log),
    }
    if log:
        enc["scale"] = {**kw.get("scale", {}), "type": "log"}
    return enc


class UnitlessAxis(ValueError):
    """A chart has a quantitative position axis whose title names no unit (or hides a log scale)."""


_UNIT = re.compile(r"\([^()]*[^()\s][^()]*\)")
_POSITION = ("x", "y")


def unit_defects(
    spec: Any, inherited: dict[str, Any] | None = None, where: str = "chart"
) -> list[str]:
    """Every quantitative x/y encoding of ``spec`` (layers and concatenations included) whose title
    does not name a unit in parentheses, or whose log scale the title does not say; an encoding
    without an axis (``axis: null``) shows no title and is skipped."""
    out: list[str] = []
    if not isinstance(spec, dict):
        return out
    enc = {**(inherited or {}), **(spec.get("encoding") or {})}
    if "mark" in spec:
        for ch in _POSITION:
            d = enc.get(ch)
            if (
                not isinstance(d, dict)
                or d.get("type") != "quantitative"
                or d.get("axis", {}) is None
            ):
                continue
            title = d.get("title", (d.get("axis") or {}).get("title"))
            text = " ".join(title) if isinstance(title, list) else title
            name = f"{where}: {ch} ({d.get('field')})"
            if not isinstance(text, str) or not _UNIT.search(text):
                out.append(f"{name} has no title with a unit: {title!r}")
            elif (d.get("scale") or {}).get("type") in (
                "log",
                "symlog",
            ) and LOG_WORDS not in text:
                out.append(
                    f"{name} is a log scale and its title does not say so: {text!r}"
                )
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for i, sub in enumerate(spec.get(key) or []):
            out += unit_defects(
                sub, enc if key == "layer" else None, f"{where}.{key}[{i}]"
            )
    if isinstance(spec.get("spec"), dict):  # facet / repeat
        out += unit_defects(spec["spec"], None, f"{where}.spec")
    return out


def embed(
    chart: alt.TopLevelMixin | dict[str, Any],
    chart_id: str | None = None,
    caption: str = "",
) -> str:
    """HTML for one chart: a container and its spec as inert JSON (no script runs from data)."""
    # Altair's own validation of the Vega-Lite spec costs ~0.1 s a chart; the builders are
    # unit-tested with it on (ALMANAC_VALIDATE_CHARTS=1), the site build skips it.
    spec = (
        chart
        if isinstance(chart, dict)
        else chart.to_dict(validate=bool(os.environ.get("ALMANAC_VALIDATE_CHARTS")))
    )
    unitless = unit_defects(spec, where=_title(spec) or "chart")
    if unitless:
        raise UnitlessAxis(
            "; ".join(unitless) + " (build quantitative axes with charts.qx/qy/q)"
        )
    text = json.dumps(spec, sort_keys=True, allow_nan=False)
    # JSON inside <script>: neutralise anything that could close the element or open HTML.
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    cid = chart_id or "chart-" + hashlib.sha256(text.encode()).hexdigest()[:10]
    data = figure_data(spec)
    if data:
        caption = (caption + " " if caption else "") + data
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return (
        f'<figure class="almanac-figure"><div class="almanac-chart" id="{cid}" data-spec="{cid}-spec"></div>'
        f'<script type="application/json" id="{cid}-spec">{safe}</script>{cap}</figure>'
    )


def _title(spec: dict[str, Any]) -> str:
    t = spec.get("title")
    t = t.get("text") if isinstance(t, dict) else t
    return " ".join(t) if isinstance(t, list) else (t or "")


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
    body = [
        [_text(r.get(h)) for h in headers[:-1]] + [json_of.get(str(r.get("id")), "")]
        if ids
        else [_text(r.get(h)) for h in headers]
        for r in rows
    ]
    digest = register_table(headers, body)
    return (
        f'<span class="almanac-downloads">Data: <a href="{ROOT}tables/{digest}.csv" download>CSV</a> · '
        f'<a href="{ROOT}tables/{digest}.json" download>JSON</a>'
        + (" (with each artifact's JSON)" if ids else "")
        + "</span>"
    )


def _text(v: Any) -> str:
    return "" if v is None else (v if isinstance(v, str) else json.dumps(v))


def bar_with_ci(
    df: pd.DataFrame, metric: Metric, label_col: str = "label", title: str = ""
) -> dict[str, Any]:
    """Horizontal bars of the mean with CI95 error bars, best first."""
    order = tuple(
        df.sort_values("mean", ascending=not metric.higher_is_better)[label_col]
    )
    return bar_with_ci_shape(
        (df,),
        metric,
        label_col,
        title,
        order=order,
        height=max(60, 28 * len(df)),
        links="json" in df.columns,
    )


@chart_shapes.shape
def bar_with_ci_shape(
    df: Any,
    metric: Metric,
    label_col: str,
    title: str,
    *,
    order: tuple[Any, ...],
    height: int,
    links: bool,
) -> alt.LayerChart:
    """bar_with_ci's shape: the bars in ``order``, ``links`` where the rows carry ``json``."""
    base = alt.Chart(df).encode(y=alt.Y(f"{label_col}:N", sort=list(order), title=None))
    bars = base.mark_bar(color=ACCENT).encode(
        x=qx("mean", metric),
        tooltip=[
            alt.Tooltip(f"{label_col}:N", title="configuration"),
            alt.Tooltip("mean:Q", format=".2f", title=f"mean ({metric.unit})"),
            alt.Tooltip("stddev:Q", format=".2f"),
            alt.Tooltip("n:Q"),
            alt.Tooltip("ci95_low:Q", format=".2f"),
            alt.Tooltip("ci95_high:Q", format=".2f"),
            alt.Tooltip("id:N", title="artifact"),
        ],
    )
    if links:  # a click on a bar opens the JSON of the artifact it shows
        bars = bars.encode(href=alt.Href("json:N"))
    err = base.mark_errorbar(color=INK).encode(
        x=qx("ci95_low", metric), x2=alt.X2("ci95_high:Q")
    )
    return (bars + err).properties(title=title, width="container", height=height)


def _clean(v: Any) -> Any:
    return (
        None if isinstance(v, float) and v != v else v
    )  # NaN -> null (JSON has no NaN)


def dots_with_ci(
    df: pd.DataFrame | list[dict[str, Any]],
    metric: Metric,
    label_col: str = "label",
    title: str = "",
) -> dict[str, Any]:
    """One mark per result: a dot at the mean and a CI95 rule, one row per artifact, in the
    frame's order. Rows are keyed by the artifact id (``id``), so two results never share a
    mark and nothing is summed or stacked (Vega-Lite stacks bars that share a category).
    A plain Vega-Lite spec (no Altair validation: linear and cheap at thousands of rows).
    ``df``: a frame, or its rows as dicts of Python values (a board's: no frame is made per board
    for its chart; a missing figure is None or NaN alike, both written null)."""
    rows = (
        df.reset_index(drop=True).to_dict("records")
        if isinstance(df, pd.DataFrame)
        else df
    )
    values = [
        {
            **{k: _clean(v) for k, v in r.items()},
            "row": f"{r[label_col]} · {str(r['id'])[:12]}",
        }
        for r in rows
    ]
    tooltip = [
        {"field": label_col, "type": "nominal", "title": "configuration"},
        {
            "field": "mean",
            "type": "quantitative",
            "format": ".2f",
            "title": f"mean ({metric.unit})",
        },
        {"field": "stddev", "type": "quantitative", "format": ".2f"},
        {"field": "n", "type": "quantitative"},
        {"field": "ci95_low", "type": "quantitative", "format": ".2f"},
        {"field": "ci95_high", "type": "quantitative", "format": ".2f"},
        {"field": "id", "type": "nominal", "title": "artifact"},
    ]
    return {
        "$schema": alt.SCHEMA_URL,
        "title": title,
        "width": "container",
        "height": max(60, 26 * len(values)),
        "data": {"values": values},
        "encoding": {
            "y": {
                "field": "row",
                "type": "nominal",
                "sort": [v["row"] for v in values],
                "title": None,
                "axis": {"labelLimit": 320},
            }
        },
        "layer": [
            {
                "mark": {"type": "rule", "color": INK},
                "encoding": {
                    "x": q("ci95_low", metric, stack=None),
                    "x2": {"field": "ci95_high"},
                },
            },
            {
                "mark": {"type": "point", "filled": True, "size": 70, "color": ACCENT},
                "encoding": {
                    "x": q("mean", metric, stack=None),
                    "tooltip": tooltip,
                    # a click on a dot opens its artifact's published JSON
                    **(
                        {"href": {"field": "json", "type": "nominal"}}
                        if (
                            "json" in df.columns
                            if isinstance(df, pd.DataFrame)
                            else bool(rows) and "json" in rows[0]
                        )
                        else {}
                    ),
                },
            },
        ],
    }


def dots_over_time(
    values: list[dict[str, Any]], metric: Metric, title: str = ""
) -> dict[str, Any]:
    """One dot per result (mean) with its CI95 rule over time (``created``), coloured by ``build``."""
    tooltip = [
        {"field": "created", "type": "temporal", "format": "%Y-%m-%d %H:%M:%S"},
        {"field": "mean", "type": "quantitative", "format": ".2f"},
        {"field": "stddev", "type": "quantitative", "format": ".2f"},
        {"field": "n", "type": "quantitative"},
        {"field": "ci95_low", "type": "quantitative", "format": ".2f"},
        {"field": "ci95_high", "type": "quantitative", "format": ".2f"},
        {"field": "build", "type": "nominal"},
        {"field": "id", "type": "nominal", "title": "artifact"},
    ]
    return {
        "$schema": alt.SCHEMA_URL,
        "title": title,
        "width": "container",
        "height": 220,
        "data": {"values": [{k: _clean(v) for k, v in r.items()} for r in values]},
        "encoding": {
            "x": {"field": "created", "type": "temporal", "title": "measured"},
            "color": {
                "field": "build",
                "type": "nominal",
                "title": "build",
                "legend": {"orient": "bottom", "labelLimit": 400},
            },
        },
        "layer": [
            {
                "mark": {"type": "rule"},
                "encoding": {
                    "y": q("ci95_low", metric, stack=None, scale={"zero": False}),
                    "y2": {"field": "ci95_high"},
                },
            },
            {
                "mark": {"type": "point", "filled": True, "size": 60},
                "encoding": {
                    "y": q("mean", metric, stack=None, scale={"zero": False}),
                    "tooltip": tooltip,
                },
            },
        ],
    }


def line_sweep(
    df: pd.DataFrame,
    x: str,
    metric: Metric,
    series: str | None = None,
    title: str = "",
    x_title: str | None = None,
    x_unit: str | None = None,
) -> dict[str, Any]:
    """A sweep: metric mean against a swept value (``x_title`` in ``x_unit``), CI95 band, one line per series."""
    return line_sweep_shape((df,), x, metric, series, title, x_title, x_unit)


@chart_shapes.shape
def line_sweep_shape(
    df: Any,
    x: str,
    metric: Metric,
    series: str | None,
    title: str,
    x_title: str | None,
    x_unit: str | None,
) -> alt.LayerChart:
    """line_sweep's shape."""
    enc_color = (
        alt.Color(f"{series}:N", title=series) if series else alt.ColorValue(ACCENT)
    )
    base = alt.Chart(df).encode(x=qx(x, x_title or x, x_unit))
    line = base.mark_line(point=True).encode(
        y=qy("mean", metric),
        color=enc_color,
        tooltip=[
            alt.Tooltip(f"{x}:Q"),
            alt.Tooltip("mean:Q", format=".2f"),
            alt.Tooltip("stddev:Q", format=".2f"),
            alt.Tooltip("n:Q"),
            alt.Tooltip("id:N", title="artifact"),
        ]
        + ([alt.Tooltip(f"{series}:N")] if series else []),
    )
    band = base.mark_area(opacity=0.2).encode(
        y=qy("ci95_low", metric), y2=alt.Y2("ci95_high:Q"), color=enc_color
    )
    return (band + line).properties(title=title, width="container", height=260)
