"""Engine families side by side (``pipelines.engines``), on the Serving page (every figure of both
engines per level, a chart of output throughput and inter-token latency against users) and on the
Comparisons page (the ratios and the capacity answers). Every value goes through
``cell()``/``num()`` or ``charts.embed()``."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.records.run import RunRecord
from pipelines import engines as engines_mod
from pipelines.site import charts
from pipelines.site.markdown import (
    admonition,
    cell,
    code,
    fold,
    link,
    num,
    run_link,
    table,
)


def engine_label(e: dict[str, Any]) -> str:
    """ "transformers serve 5.17.0 (stated)" / "llama-server b0-0c1e57098"."""
    v = e.get("server_version")
    if not v:
        return str(e["server"])
    v = str(v).removeprefix("transformers ")
    return f"{e['server']} {v}" + (" (stated)" if e.get("version_stated") else "")


def caveats(groups: list[dict[str, Any]]) -> str:
    synthetic = any(e["synthetic"] for g in groups for e in g["engines"])
    lines = [
        "Each engine is an endpoint model on loopback, identified by what its server reports (transformers "
        "serve: its routes and the `<repo>@<revision>` it lists; llama-server: its /v1/models meta). "
        "An engine that reports no version (transformers serve) shows the version its registry entry states, "
        "marked *stated*.",
    ]
    if synthetic:
        lines.append(
            "**Random weights**: both engines serve the same random numbers (a synthetic GGUF and the same "
            "tensors as safetensors), so these are speed figures only: the answers mean nothing, and a real "
            "model's figures differ where its answers stop early or its tokenizer splits text otherwise."
        )
    ratio = max((g["prompt_lengths_differ"] or 0.0) for g in groups)
    if ratio:
        lines.append(
            f"**Not the same prompt length**: the same prompt text counted up to {num(ratio, 2)}× more tokens "
            "on one engine than the other (each server's usage, shown per level): their tokenizers split it "
            "differently, so TTFT includes that much more prefill on one side. Inter-token latency and output "
            "throughput are per generated token and are compared as they are."
        )
    body = "\n\n".join(lines)
    return admonition("note", "What is compared", body)


def _ttft(p: dict[str, Any] | None) -> str:
    if not p:
        return "—"
    lo, hi = p.get("low"), p.get("high")
    ci = (
        f" <small>[{num(lo, 1)}, {num(hi, 1)}]</small>"
        if lo is not None and hi is not None
        else ""
    )
    return f"{num(p['value'], 1)}{ci}"


def levels_table(g: dict[str, Any]) -> str:
    headers = [
        f"level ({cell(g['unit'])})",
        "engine",
        "TTFT p50 (ms) [95% CI]",
        "ITL median / p95 (ms)",
        "output (t/s)",
        "SLO met",
        "prompt / output tokens",
        "GPU util (%)",
        "GPU power (W)",
    ]
    rows = []
    for lv in g["levels"]:
        for e, f in zip(g["engines"], lv["engines"], strict=True):
            rows.append(
                [
                    num(lv["level"], 0),
                    link(engine_label(e), run_link(e["id"])),
                    _ttft(f["ttft_p50"]),
                    f"{num(f['itl_median_ms'], 2)} / {num(f['itl_p95_ms'], 2)}",
                    num(f["output_tps"], 1),
                    "—"
                    if f["slo_attainment"] is None
                    else f"{num(100 * f['slo_attainment'], 0)}%",
                    f"{num(f['prompt_tokens_mean'], 0)} / {num(f['output_tokens_mean'], 0)}",
                    num(f["gpu_util_pct"], 0),
                    num(f["gpu_power_w"], 0),
                ]
            )
    return table(headers, rows, ["r", "l", "r", "r", "r", "r", "r", "r", "r"])


def frame(groups: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for g in groups:
        if g["kind"] != "load":
            continue
        for lv in g["levels"]:
            for e, f in zip(g["engines"], lv["engines"], strict=True):
                rows.append(
                    {
                        "level": lv["level"],
                        "engine": engine_label(e),
                        "output_tps": f["output_tps"],
                        "itl_median_ms": f["itl_median_ms"],
                        "id": e["id"],
                    }
                )
    return pd.DataFrame(rows)


def chart(df: pd.DataFrame) -> alt.VConcatChart:
    color = alt.Color(
        "engine:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=400)
    )
    x = charts.qx(
        "level",
        "users",
        "clients",
        log=True,
        scale=alt.Scale(base=2),
        axis=alt.Axis(values=sorted(df["level"].unique().tolist())),
    )
    tip = [
        alt.Tooltip("engine:N"),
        alt.Tooltip("level:Q", title="users"),
        alt.Tooltip("output_tps:Q", format=".1f", title="output (t/s)"),
        alt.Tooltip("itl_median_ms:Q", format=".2f", title="ITL median (ms)"),
        alt.Tooltip("id:N", title="artifact"),
    ]
    base = alt.Chart(df).encode(x=x, color=color, tooltip=tip)
    tps = (
        base.mark_line(point=True)
        .encode(y=charts.qy("output_tps", "aggregate output", "tokens/s", log=True))
        .properties(title="Output throughput", width="container", height=220)
    )
    itl = (
        base.mark_line(point=True)
        .encode(y=charts.qy("itl_median_ms", "median ITL", "ms", log=True))
        .properties(title="Inter-token latency", width="container", height=220)
    )
    return alt.vconcat(tps, itl)


def serving_section(docs: list[RunRecord]) -> list[str]:
    groups = engines_mod.engine_groups(docs)
    if not groups:
        return []
    out = [
        "## Engine families on one GPU",
        "",
        "The same matrix against servers of two engine families on the same host and GPU, one after the "
        "other (the other server stopped): per level each engine's TTFT (median with its order-statistic "
        "95% interval), inter-token latency (gaps between streamed chunks), aggregate output, the share of "
        "requests within the SLOs, the prompt and answer lengths each server counted, and the GPU's mean "
        "utilisation and board power over the level (NVML). The ratios are on the "
        "[Comparisons](comparisons.md) page.",
        "",
        caveats(groups),
        "",
    ]
    df = frame(groups)
    if not df.empty:
        out += [
            charts.embed(
                chart(df),
                caption="Closed-loop users; both axes log scale. Each point is one level of one run.",
            ),
            "",
        ]
    for g in groups:
        title = f"{g['test_name']} ({g['kind']}, {g['profile']}) · {g['host']}"
        body = [
            f"Matrix {code(g['matrix'])}; workload: {cell(g['workload'])}.",
            "",
        ]
        if g["kind"] == "capacity":
            body += [
                f"- {link(engine_label(e), run_link(e['id']))}: {cell(e['answer_text'])}"
                for e in g["engines"]
            ]
            body.append("")
        body += [levels_table(g), ""]
        out += [fold(title, "\n".join(body), "note"), ""]
    return out


def comparisons_section(docs: list[RunRecord]) -> list[str]:
    groups = engines_mod.engine_groups(docs)
    if not groups:
        return []
    out = [
        "## Engine families on one host",
        "",
        "Two servers of different engine families (here PyTorch's `transformers serve` and llama.cpp's "
        "`llama-server`) given the same requests by the same matrix on the same GPU. The ratio is the "
        "faster engine over the slower at each level: output throughput, and inter-token latency "
        "(slower's median ITL / faster's). Every figure behind it is on the "
        "[Serving](serving.md) page with its artifact.",
        "",
        caveats(groups),
        "",
    ]
    for g in groups:
        a, b = g["engines"][0], g["engines"][-1]
        out += [
            f"### {cell(g['test_name'])} · {cell(g['host'])}",
            "",
            f"{link(engine_label(b), run_link(b['id']))} against "
            f"{link(engine_label(a), run_link(a['id']))}; workload: {cell(g['workload'])}.",
            "",
        ]
        if g["kind"] == "capacity":
            out += [
                f"- Capacity, {cell(engine_label(e))}: {cell(e['answer_text'])}"
                for e in (b, a)
            ]
            out.append("")
        rows = [
            [
                num(lv["level"], 0),
                num(lv["engines"][-1]["output_tps"], 1),
                num(lv["engines"][0]["output_tps"], 1),
                "—" if lv["tps_ratio"] is None else f"{num(lv['tps_ratio'], 1)}×",
                num(lv["engines"][-1]["itl_median_ms"], 2),
                num(lv["engines"][0]["itl_median_ms"], 2),
                "—" if lv["itl_ratio"] is None else f"{num(lv['itl_ratio'], 1)}×",
            ]
            for lv in g["levels"]
        ]
        out += [
            table(
                [
                    f"level ({cell(g['unit'])})",
                    f"output t/s, {cell(b['server'])}",
                    f"output t/s, {cell(a['server'])}",
                    "throughput ratio",
                    f"ITL ms, {cell(b['server'])}",
                    f"ITL ms, {cell(a['server'])}",
                    "ITL ratio",
                ],
                rows,
                ["r", "r", "r", "r", "r", "r", "r"],
            ),
            "",
        ]
    return out
