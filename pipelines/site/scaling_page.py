"""The Scaling page (issue 29): a model's prefill and decode on 1, 2, 4 … GPUs of one machine, the
speed-up over one GPU with its CI95 (pipelines.scaling), as a table and a chart per machine and model.
Every value comes from run artifacts; everything from an artifact goes through cell/code."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.metrics import METRICS
from pipelines import scaling
from pipelines.site import charts
from pipelines.site.markdown import (
    admonition,
    as_text,
    cell,
    code,
    link,
    run_link,
    table,
)

TEST_WORDS = {"pp512": "prefill", "tg128": "decode"}


def _ratio(p: scaling.Point) -> str:
    c = p.speedup
    if p.baseline is None:
        return (
            "baseline (one GPU)" if p.placement.gpus_used == 1 else "— (no one-GPU run)"
        )
    if c is None or c.ratio is None:
        return "—"
    if c.ci95_low is None:
        return f"×{c.ratio:.3f} (no CI95: {cell(c.note or c.verdict)})"
    return f"×{c.ratio:.3f} [{c.ci95_low:.3f}, {c.ci95_high:.3f}] {cell(c.verdict)}"


def scaling_chart(series: list[scaling.Point], title: str) -> str:
    """Speed-up over one GPU per placement, the CI95 as a rule; a panel per test."""
    rows = []
    for p in series:
        if p.speedup is None or p.speedup.ratio is None:
            continue
        c = p.speedup
        rows.append(
            {
                "placement": p.label,
                "test_name": f"{TEST_WORDS.get(p.test, p.test)} ({p.test})",
                "speedup": c.ratio,
                "lo": c.ci95_low if c.ci95_low is not None else c.ratio,
                "hi": c.ci95_high if c.ci95_high is not None else c.ratio,
                "id": p.runs[-1].id,
            }
        )
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    axis = ("speed-up over one GPU", "×")
    panels = []
    for t in df["test_name"].unique():
        sub = df[df["test_name"] == t]
        y = alt.Y("placement:N", title=None, axis=alt.Axis(labelLimit=200))
        rule = (
            alt.Chart(sub)
            .mark_rule(color=charts.INK)
            .encode(y=y, x=charts.qx("lo", *axis), x2="hi:Q")
        )
        dots = (
            alt.Chart(sub)
            .mark_point(filled=True, size=80, color=charts.ACCENT)
            .encode(
                y=y,
                x=charts.qx("speedup", *axis),
                tooltip=[
                    alt.Tooltip("placement:N"),
                    alt.Tooltip("test_name:N", title="test"),
                    alt.Tooltip("speedup:Q", format=".3f"),
                    alt.Tooltip("lo:Q", format=".3f", title="CI95 low"),
                    alt.Tooltip("hi:Q", format=".3f", title="CI95 high"),
                    alt.Tooltip("id:N", title="artifact"),
                ],
            )
        )
        panels.append(
            (rule + dots).properties(
                width="container",
                height=max(40, 34 * sub["placement"].nunique()),
                title=t,
            )
        )
    chart = alt.vconcat(*panels).properties(title=title)
    return charts.embed(
        chart,
        caption=f"{as_text(title)}: speed-up of each placement over one GPU of the same machine (the ratio of "
        "tokens per second; CI95 as a bar; 1 = no gain).",
    )


def scaling_page(docs: list[Any]) -> str:
    pts = scaling.points(docs)
    if not pts:
        return admonition(
            "info",
            "No scaling measured yet",
            "A model measured on one GPU and split over several GPUs of the same machine appears here "
            "(benchmarks/gpu_run.sh with data/matrices/gpu-split-*.yaml on a host of several GPUs).",
        )
    unit = METRICS["tokens_per_second"].unit
    out: list[str] = []
    by: dict[tuple[str, str], list[scaling.Point]] = {}
    for p in pts:
        by.setdefault((p.machine, p.model), []).append(p)
    for (machine, model), series in by.items():
        out += [f"## {cell(model)} on {cell(machine)}", ""]
        rows = []
        for p in series:
            r = p.runs[-1]
            rows.append(
                [
                    code(p.test),
                    cell(p.label),
                    code(p.host_id),
                    f"{p.value:,.1f}",
                    _ratio(p),
                    str(len(p.runs)),
                    link(r.id, run_link(r.id)),
                ]
            )
        out += [
            table(
                [
                    "test",
                    "placement",
                    "host",
                    f"tokens per second ({cell(unit)})",
                    "speed-up over one GPU [CI95]",
                    "runs",
                    "newest run",
                ],
                rows,
                ["l", "l", "l", "r", "l", "r", "l"],
            ),
            "",
            scaling_chart(series, f"{model} on {machine}"),
            "",
        ]
    return "\n".join(out)
