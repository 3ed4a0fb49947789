"""A chart's shape is made by Altair once, its rows bound per chart (pipelines/site/chart_shapes.py):
for every builder on the site's hot path, the kept shape with the rows bound is the very dict
Altair's own to_dict gives for the chart built on the rows, with the same JSON on the page, for
rows with NaN, None, timestamps, numpy integers, no rows at all, and titles and labels that need
escaping."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.metrics import METRICS
from pipelines.site import chart_shapes, charts, optimization, serving, traffic

TRICKY = "</script><b>&amp; 'q' \"dq\" ≤ \u2028 {x}"
RATE = METRICS["tokens_per_second"]


def _points(n: int, *, series: str = "s", nan: bool = False) -> pd.DataFrame:
    rows = []
    for i in range(n):
        rows.append(
            {
                "label": f"{TRICKY} {i}" if i % 2 else f"cfg {i}",
                "K": np.int64(i + 1),
                "mean": float("nan") if nan and i == 0 else 10.0 + i / 3,
                "stddev": None if i == 1 else 0.25,
                "n": np.int64(5),
                "ci95_low": 9.5 + i,
                "ci95_high": 10.5 + i,
                "acceptance": None if i == 2 else 60.0 + i,
                "series": series if i % 3 else TRICKY,
                "lossless": "identical" if i % 2 else "—",
                "status": ("identical", "diverged", "degenerate", "baseline")[i % 4],
                "experts": i + 1,
                "divergence": "—",
                "id": f"run-{i:04d}",
                "json": f"../runs/run-{i:04d}.json",
                "created": pd.Timestamp("2026-01-01T00:00:00Z") + pd.Timedelta(hours=i),
            }
        )
    return pd.DataFrame(rows)


def _frames(n: int, **kw: Any) -> list[pd.DataFrame]:
    """A few representative frames: several rows, one row, NaN/None, no rows at all."""
    full = _points(n, **kw)
    return [full, full.head(1), _points(3, nan=True), full.head(0)]


def _same(shape: chart_shapes.Shape, frames: tuple[Any, ...], *args: Any, **kw: Any):
    kept = shape(frames, *args, **kw)
    plain = shape.chart(frames, *args, **kw).to_dict(validate=True)
    assert kept == plain
    # what the page embeds (charts.embed: sorted keys), byte for byte, and the same key order
    assert json.dumps(kept, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert json.dumps(kept) == json.dumps(plain)
    return kept


CASES: list[tuple[str, Callable[[pd.DataFrame], tuple[Any, ...]]]] = [
    (
        "speculative with a baseline",
        lambda df: (
            optimization.speculative_shape,
            (df, pd.DataFrame([{"baseline": 9.75}])),
            RATE,
        ),
    ),
    (
        "speculative without a baseline",
        lambda df: (optimization.speculative_shape, (df, None), RATE),
    ),
    ("experts", lambda df: (optimization.experts_shape, (df,), RATE)),
    (
        "line sweep by series",
        lambda df: (
            charts.line_sweep_shape,
            (df,),
            "K",
            RATE,
            "series",
            TRICKY,
            "threads",
            "count",
        ),
    ),
    (
        "line sweep, one series",
        lambda df: (charts.line_sweep_shape, (df,), "K", RATE, None, "", None, "n"),
    ),
    (
        "bars with CI",
        lambda df: (
            charts.bar_with_ci_shape,
            (df,),
            RATE,
            "label",
            TRICKY,
        ),
    ),
]


@pytest.mark.parametrize("name,case", CASES, ids=[c[0] for c in CASES])
def test_a_kept_shape_with_its_rows_is_altairs_own_spec(name, case):
    for df in _frames(6):
        shape, frames, *args = case(df)
        kw = (
            {
                "order": tuple(df["label"]),
                "height": max(60, 28 * len(df)),
                "links": True,
            }
            if shape is charts.bar_with_ci_shape
            else {}
        )
        _same(shape, frames, *args, **kw)


def test_the_builders_give_altairs_spec_and_reuse_the_shape():
    df = _points(5)
    before = charts.line_sweep_shape.cache_info().hits
    a = charts.line_sweep(df, "K", RATE, series="series", x_title="K", x_unit="n")
    b = charts.line_sweep(
        df.head(2), "K", RATE, series="series", x_title="K", x_unit="n"
    )
    assert charts.line_sweep_shape.cache_info().hits >= before + 1
    for spec, rows in ((a, df), (b, df.head(2))):
        plain = charts.line_sweep_shape.chart(
            (rows,), "K", RATE, "series", "", "K", "n"
        ).to_dict(validate=True)
        assert spec == plain
    # the rows are bound per chart: two charts of one shape share no data, nor the kept dict
    assert a["datasets"] != b["datasets"] and a["data"] != b["data"]
    a["layer"][0]["mark"]["type"] = "changed"
    assert charts.line_sweep(df, "K", RATE, series="series", x_title="K", x_unit="n")[
        "layer"
    ][0]["mark"]["type"] != ("changed")
    bars = charts.bar_with_ci(_points(4), RATE, title=TRICKY)
    assert bars["layer"][0]["encoding"]["href"] == {"field": "json", "type": "nominal"}


def test_nan_becomes_null_and_the_page_json_is_escaped_as_before():
    spec = charts.line_sweep(_points(3, nan=True), "K", RATE, title=TRICKY, x_unit="n")
    rows = next(iter(spec["datasets"].values()))
    assert rows[0]["mean"] is None and rows[1]["stddev"] is None
    assert rows[0]["created"] == "2026-01-01T00:00:00+00:00"
    assert not any(
        isinstance(v, float) and math.isnan(v) for r in rows for v in r.values()
    )
    html = charts.embed(spec)
    assert "</script><b>" not in html and "\\u003c/script\\u003e" in html


def test_a_shape_without_a_field_type_is_refused_when_made():
    @chart_shapes.shape
    def untyped(df: Any) -> alt.Chart:
        return alt.Chart(df).mark_point().encode(x="mean")

    with pytest.raises(ValueError):
        untyped((_points(2),))


def _levels_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "series": TRICKY if i % 2 else "llama-server · m",
                "level": 2**i,
                "aggregate_tps": 10.0 * (i + 1),
                "ideal_tps": 10.0 * 2**i,
                "effective_parallelism": None if i == 1 else float(i + 1),
                "e2e_p95_ms": float("nan") if i == 2 else 100.0 + i,
                "ttft_p95_ms": 20.0 + i,
                "id": f"sw-{i}",
            }
            for i in range(n)
        ]
    )


def _slo_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "metric": "ttft",
            "percentile": "p95",
            "value": 50.0 + i,
            "throughput_rps": 0.5 * (i + 1),
            "limit": 500.0 if i % 2 else 250.5,
            "series": TRICKY,
            "level": i + 1,
            "unit": "req/s",
            "lower": None if i == 0 else 45.0 + i,
            "upper": 60.0 + i,
            "verdict": "meets",
            "errors": 0,
            "answer": i == 1,
            "id": f"t-{i}",
        }
        for i in range(n)
    ]


def test_the_serving_builders_give_altairs_spec():
    for n in (5, 1, 0):
        df = _levels_frame(n)
        if n:  # a frame without levels has no axis (the page draws no chart then)
            for shape in (serving.throughput_shape, serving.latency_shape):
                _same(shape, (df,), serving._levels(df))
                assert serving.throughput_chart(df) == (
                    serving.throughput_shape.chart((df,), serving._levels(df)).to_dict()
                )
        ratio = pd.DataFrame(
            [
                {
                    "label": f"{TRICKY} · {i}",
                    "ratio": None if i == 2 else 1.0 + i / 10,
                    "lo": 0.9,
                    "hi": 1.3,
                    "verdict": "win",
                    "id": f"r-{i}",
                }
                for i in range(n)
            ]
        )
        _same(serving.ratio_shape, (ratio, pd.DataFrame({"x": [1.0]})), 80)
        rows = _slo_rows(n)
        limits = pd.DataFrame({"limit": sorted({r["limit"] for r in rows})})
        limits["label"] = [f"SLO ≤ {v:g} ms <b>" for v in limits["limit"]]
        _same(
            serving.throughput_latency_shape,
            (pd.DataFrame(rows), limits),
            "ttft",
            "p95",
        )
        spec = serving.throughput_latency_chart(rows, "ttft")
        assert (
            spec
            == serving.throughput_latency_shape.chart(
                (
                    pd.DataFrame(rows),
                    limits.assign(
                        label=[f"SLO p95 ttft ≤ {v:g} ms" for v in limits["limit"]]
                    ),
                ),
                "ttft",
                "p95",
            ).to_dict()
        )


def test_one_frame_given_twice_is_one_slot_as_altair_lifts_it():
    df = _points(3)
    _same(optimization.speculative_shape, (df, df), RATE)


def test_the_traffic_builders_give_altairs_spec():
    reqs = pd.DataFrame(
        [
            {
                "index": i,
                "start_s": i / 4,
                "ttft_ms": None if i == 1 else 30.0 + i,
                "prompt_tokens": np.int64(100 + i),
            }
            for i in range(6)
        ],
        columns=list(traffic.SHOWN_FIELDS),
    )
    band = pd.DataFrame([{"a": 0.5, "b": 1.25}])
    for df in (reqs, reqs.head(1), reqs.head(0)):
        _same(traffic.latency_shape, (band, df))
        _same(traffic.latency_shape, (None, df))
    scrapes = pd.DataFrame(
        [
            {"t_s": i / 2, "value": i % 3, "series": ("queued", "running")[i % 2]}
            for i in range(8)
        ]
    )
    for df in (scrapes, scrapes.head(1)):
        _same(traffic.telemetry_shape, (df,), 0.5)
    gpu = pd.DataFrame(
        [
            {"t_s": i / 2, "value": 50.0 + i, "gpu": f"{TRICKY} {i % 2}"}
            for i in range(6)
        ]
    )
    _same(traffic.gpu_shape, (gpu, gpu.head(2)), 1.0)
    _same(traffic.gpu_shape, (None, gpu), 0.25)
