"""Charts carry their units and both colour schemes (issue 27, "One truth per figure"): every
quantitative axis is built with its unit by charts.qx/qy/q, on every layer that shares it; a chart
whose axis names no unit is refused when it is embedded; the light and dark themes charts.js applies
are declared once, in charts.py, and written into the site at build time."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import pytest

from core.metrics import METRICS
from pipelines.site import charts


def test_axis_titles_name_the_unit_and_say_log():
    m = METRICS["tokens_per_second"]
    assert charts.axis_title(m) == f"{m.label} ({m.unit})"
    assert (
        charts.axis_title("decode rate", "t/s", log=True)
        == "decode rate (t/s, log scale)"
    )
    with pytest.raises(ValueError):
        charts.axis_title("decode rate")  # no unit, no axis
    x = charts.qx(
        "mean", "decode rate", "t/s", log=True, scale=alt.Scale(base=2)
    ).to_dict()
    assert x["title"] == "decode rate (t/s, log scale)" and x["scale"] == {
        "base": 2,
        "type": "log",
    }
    assert charts.q("mean", m, stack=None) == {
        "field": "mean",
        "type": "quantitative",
        "stack": None,
        "title": f"{m.label} ({m.unit})",
    }


def _reference_like(rule_title):
    """Dots and a CI rule sharing one log x axis, as the fleet's reference chart draws them."""
    df = pd.DataFrame(
        {
            "host": ["a", "b"],
            "mean": [10.0, 900.0],
            "ci95_low": [9.0, 850.0],
            "ci95_high": [11.0, 950.0],
        }
    )
    base = alt.Chart(df).encode(y=alt.Y("host:N", title=None))
    dots = base.mark_point().encode(
        x=alt.X("mean:Q", scale=alt.Scale(type="log"), title="decode (t/s, log scale)")
    )
    rule = base.mark_rule().encode(
        x=alt.X("ci95_low:Q", scale=alt.Scale(type="log"), title=rule_title),
        x2="ci95_high:Q",
    )
    return (rule + dots).to_dict(validate=False)


def test_a_layer_without_the_title_is_a_unitless_axis():
    """Vega-Lite merges the layers' axis titles: a layer's title=None (the reference chart's rule layer did
    this) drops the title of all of them. Every layer must carry it."""
    assert any("title" in d for d in charts.unit_defects(_reference_like(None)))
    assert charts.unit_defects(_reference_like("decode (t/s, log scale)")) == []
    log_unsaid = _reference_like("decode (t/s)")
    log_unsaid["layer"][1]["encoding"]["x"]["title"] = "decode (t/s)"
    assert [d for d in charts.unit_defects(log_unsaid) if "log scale" in d]


def test_embed_refuses_an_axis_without_its_unit():
    df = pd.DataFrame({"level": [1, 2], "rps": [1.0, 2.0]})
    bad = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("level:Q", title="concurrent clients"),
            y=charts.qy("rps", "throughput", "requests/s"),
        )
    )
    with pytest.raises(charts.UnitlessAxis, match="concurrent clients"):
        charts.embed(bad)
    good = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=charts.qx("level", "concurrency", "clients"),
            y=charts.qy("rps", "throughput", "requests/s"),
        )
    )
    assert 'class="almanac-chart"' in charts.embed(good)
    # an axis that is not drawn shows no title, and a nominal or temporal axis has no unit to name
    hidden = (
        alt.Chart(df)
        .mark_line()
        .encode(x=alt.X("level:Q", axis=None), y=alt.Y("rps:N"))
    )
    assert charts.unit_defects(hidden.to_dict(validate=False)) == []


def test_the_builders_title_every_layer():
    m = METRICS["tokens_per_second"]
    df = pd.DataFrame(
        {
            "label": ["a", "b"],
            "mean": [1.0, 2.0],
            "stddev": [0.1, 0.1],
            "n": [3, 3],
            "ci95_low": [0.9, 1.8],
            "ci95_high": [1.1, 2.2],
            "id": ["x", "y"],
            "k": [1, 2],
            "series": ["s", "s"],
        }
    )
    specs = [
        charts.bar_with_ci(df, m),
        charts.dots_with_ci(df, m),
        charts.dots_over_time(
            [
                {
                    "created": "2026-01-01T00:00:00Z",
                    "mean": 1.0,
                    "ci95_low": 0.9,
                    "ci95_high": 1.1,
                    "build": "b",
                    "id": "x",
                }
            ],
            m,
        ),
        charts.line_sweep(
            df, "k", m, series="series", x_title="threads", x_unit="count"
        ),
    ]
    for spec in specs:
        assert charts.unit_defects(spec) == []
        for layer in spec["layer"]:
            enc = {**spec.get("encoding", {}), **layer.get("encoding", {})}
            titles = {
                enc[ch]["title"]
                for ch in ("x", "y")
                if enc.get(ch, {}).get("type") == "quantitative"
            }
            assert titles and all("(" in t for t in titles)


def test_the_theme_covers_both_schemes():
    script = charts.theme_script()
    data = json.loads(script.split("=", 1)[1].strip().rstrip(";"))
    for scheme in ("light", "dark"):
        cfg = data[scheme]
        assert (
            cfg["background"] == "transparent"
        )  # the page's own colour behind every chart
        assert (
            min(
                cfg["axis"]["labelFontSize"],
                cfg["axis"]["titleFontSize"],
                cfg["legend"]["labelFontSize"],
                cfg["text"]["fontSize"],
            )
            >= 11
        )
    # every mark colour a builder uses has its dark counterpart (or reads on both)
    assert data["darkColors"] == {
        light: dark for light, dark in charts.COLORS.values() if light != dark
    }
    assert (
        data["darkColors"][charts.INK] != charts.INK
        and data["dark"]["axis"]["labelColor"] != data["light"]["axis"]["labelColor"]
    )


def test_the_site_serves_the_theme_before_charts_js(built_site):
    theme = (built_site / "assets" / "js" / "chart-theme.js").read_text()
    assert theme == charts.theme_script()
    page = (built_site / "leaderboard" / "index.html").read_text()
    assert page.index("assets/js/chart-theme.js") < page.index("assets/js/charts.js")
