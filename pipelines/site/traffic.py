"""The "Real traffic" section of the Serving page: per run (``pipelines.traffic.traffic_runs``) what
its arrivals were, its steady-state window and over-saturation stop, the drift from a trace's
schedule, conversations' TTFT against context, cold or warm; per level every request's TTFT over
time with the window shaded, the server's queue, running requests, KV occupancy and cache hits
drawn under it, and the swim lanes of its requests (sampled, said so). Every value goes through
``cell()``/``num()`` or ``charts.embed()``."""

from __future__ import annotations

from typing import Any, cast

import altair as alt
import pandas as pd

from core import telemetry
from pipelines import traffic
from pipelines.site import chart_shapes, charts, downsample
from pipelines.site.markdown import (
    ROOT,
    cell,
    data_url,
    fold,
    link,
    num,
    run_link,
    table,
)

PHASE_COLORS = {
    "queued": "#9e9e9e",
    "prefill": "#e45756",
    "decode": "#4c78a8",
    "failed": "#000000",
}
SERIES = {"queued": "queued (waiting for a slot)", "running": "running"}


SHOWN_FIELDS = (
    "index",
    "start_s",
    "ttft_ms",
    "prompt_tokens",
)  # what the latency chart draws or tips


def latency_points(lv: dict[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    """(the requests the latency chart draws, how many, of how many with a TTFT): TTFT over the send
    time, at most ``downsample.POINTS_MAX`` (the slowest and fastest of each stretch kept)."""
    rows = downsample.rounded(
        (
            {k: r[k] for k in SHOWN_FIELDS}
            for r in lv["requests"]
            if r["ttft_ms"] is not None
        ),
        {"start_s": 4, "ttft_ms": 2},
    )
    return downsample.per_series(
        rows, lambda r: 0, lambda r: r["start_s"], lambda r: r["ttft_ms"]
    )


def latency_chart(lv: dict[str, Any]) -> dict[str, Any]:
    """TTFT of every request against when it was sent (bounded: ``latency_points``); the steady-state
    window shaded."""
    df = pd.DataFrame(latency_points(lv)[0], columns=list(SHOWN_FIELDS))
    w = (lv["stats"] or {}).get("steady")
    band = (
        pd.DataFrame([{"a": w["start_ms"] / 1000.0, "b": w["end_ms"] / 1000.0}])
        if w
        else None
    )
    return latency_shape((band, df))


@chart_shapes.shape
def latency_shape(band: Any, df: Any) -> alt.LayerChart:
    """latency_chart's shape: ``band`` the steady-state window (or None)."""
    x = charts.qx("start_s", "sent", "s from the level's start")
    y = charts.qy("ttft_ms", "TTFT", "ms")
    pts = (
        alt.Chart(df)
        .mark_circle(size=40, opacity=0.8)
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("index:Q", title="request"),
                alt.Tooltip("start_s:Q", format=".2f", title="sent (s)"),
                alt.Tooltip("ttft_ms:Q", format=".1f", title="TTFT (ms)"),
                alt.Tooltip("prompt_tokens:Q", title="prompt tokens"),
            ],
        )
    )
    layers = []
    w = band is not None
    if w:
        layers.append(
            alt.Chart(band)
            .mark_rect(opacity=0.15, color=charts.GOOD)
            .encode(x=charts.qx("a", "sent", "s from the level's start"), x2="b:Q")
        )
    chart = alt.layer(*layers, pts).properties(
        title="TTFT of each request (shaded: the steady-state window)"
        if w
        else "TTFT of each request",
        width="container",
        height=220,
    )
    return cast(alt.LayerChart, chart)  # properties() is typed for a facet too


def telemetry_points(lv: dict[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    """(the scrapes the telemetry chart draws, one row per series and scrape, how many, of how many):
    at most ``downsample.POINTS_MAX`` a series."""
    rows = []
    for s in telemetry.scrapes(lv.get("telemetry") or {}):
        for role in SERIES:
            v = (s.get("v") or {}).get(role)
            if isinstance(v, (int, float)):
                rows.append(
                    {
                        "t_s": round(s["t_ms"] / 1000.0, 4),
                        "value": int(v) if float(v).is_integer() else round(v, 4),
                        "series": role,
                    }
                )
    return downsample.per_series(
        rows, lambda r: r["series"], lambda r: r["t_s"], lambda r: r["value"]
    )


def telemetry_chart(lv: dict[str, Any]) -> dict[str, Any] | None:
    """The server's queue and running requests over the same time axis (and KV occupancy where reported)."""
    rows = telemetry_points(lv)[0]
    if not rows:
        return None
    interval = (lv.get("telemetry") or {}).get("interval_s", 0)
    return telemetry_shape((pd.DataFrame(rows),), interval)


@chart_shapes.shape
def telemetry_shape(df: Any, interval: Any) -> alt.Chart:
    """telemetry_chart's shape: ``interval`` the scrape interval (s)."""
    return (
        alt.Chart(df)
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=charts.qx("t_s", "scraped", "s from the level's start"),
            y=charts.qy("value", "requests at the server", "count"),
            # each row names its series by role, the legend by its words (fewer bytes a sample)
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=list(SERIES)),
                legend=alt.Legend(
                    orient="bottom",
                    labelExpr=" : ".join(
                        f"datum.value == '{k}' ? '{v}'" for k, v in SERIES.items()
                    )
                    + " : datum.label",
                ),
            ),
            tooltip=[
                alt.Tooltip("series:N"),
                alt.Tooltip("t_s:Q", format=".1f", title="s"),
                alt.Tooltip("value:Q"),
            ],
        )
        .properties(
            title=f"Server telemetry (/metrics every {interval:g} s)",
            width="container",
            height=160,
        )
    )


GPU_SHOWN = {"util_pct": "GPU utilisation", "power_w": "board power"}


def gpu_points(lv: dict[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    """(the NVML samples the GPU chart draws, one row per GPU, reading and sample, how many, of how
    many): at most ``downsample.POINTS_MAX`` a GPU and reading."""
    series = lv.get("gpu_telemetry") or {}
    gpus = series.get("gpus") or []
    rows = []
    for s in telemetry.gpu_samples(series):
        for i, g in enumerate(s["g"]):
            if not isinstance(g, dict):
                continue
            gpu = gpus[i] if i < len(gpus) and isinstance(gpus[i], dict) else {}
            label = f"GPU {gpu.get('index', i)} {gpu.get('name') or ''}".strip()
            for key in GPU_SHOWN:
                v = g.get(key)
                if isinstance(v, (int, float)):
                    rows.append(
                        {
                            "t_s": round(s["t_ms"] / 1000.0, 4),
                            "reading": key,
                            "value": round(v, 2) if isinstance(v, float) else v,
                            "gpu": label,
                        }
                    )
    return downsample.per_series(
        rows,
        lambda r: (r["gpu"], r["reading"]),
        lambda r: r["t_s"],
        lambda r: r["value"],
    )


def gpu_chart(lv: dict[str, Any]) -> dict[str, Any] | None:
    """NVML's utilisation and board power per GPU over the same time axis (runtime.load.gpu_telemetry)."""
    rows = gpu_points(lv)[0]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    subs = [df[df["reading"] == key] for key in GPU_SHOWN]
    subs = [None if sub.empty else sub for sub in subs]
    if all(sub is None for sub in subs):
        return None
    interval = (lv.get("gpu_telemetry") or {}).get("interval_s", 0)
    return gpu_shape(subs, interval)


@chart_shapes.shape
def gpu_shape(*subs_then_interval: Any) -> alt.VConcatChart:
    """gpu_chart's shape: one frame per reading of ``GPU_SHOWN`` (None where not sampled), then the
    sampling interval (s)."""
    *subs, interval = subs_then_interval
    parts = []
    for (key, title), sub in zip(GPU_SHOWN.items(), subs, strict=True):
        unit = telemetry.GPU_READINGS[key][0]
        if sub is None:
            continue
        parts.append(
            alt.Chart(sub)
            .mark_line(interpolate="step-after", point=True)
            .encode(
                x=charts.qx("t_s", "sampled", "s from the level's start"),
                y=charts.qy("value", title, unit),
                color=alt.Color(
                    "gpu:N", title=None, legend=alt.Legend(orient="bottom")
                ),
                tooltip=[
                    alt.Tooltip("gpu:N"),
                    alt.Tooltip("t_s:Q", format=".1f", title="s"),
                    alt.Tooltip("value:Q", format=".1f", title=f"{title} ({unit})"),
                ],
            )
            .properties(width="container", height=120)
        )
    return alt.vconcat(*parts).properties(
        title=f"GPU telemetry (NVML every {interval:g} s)"
    )


def _gpu_line(s: dict[str, Any]) -> str | None:
    g = s.get("gpu_telemetry")
    if not g:
        return None
    if not g.get("available"):
        return f"GPU telemetry: none ({g.get('reason') or 'no NVML'})."
    bits = []
    for row in g.get("gpus") or []:
        u, p, m = row.get("util_pct"), row.get("power_w"), row.get("mem_used_mib")
        bits.append(
            f"GPU {row.get('index')} {row.get('name') or ''}: utilisation mean {num(u and u['mean'], 0)}% "
            f"(max {num(u and u['max'], 0)}%), power mean {num(p and p['mean'], 0)} W "
            f"(max {num(p and p['max'], 0)} W), memory in use up to {num(m and m['max'], 0)} MiB"
        )
    return (
        f"GPU telemetry ({num(telemetry.scrape_count(g), 0)} samples): "
        + "; ".join(bits)
        + "."
    )


# each phase's bar runs from the boundary before it to its own: a lane is one row of boundaries
# (``t0`` the schedule, then each phase's end under its name), a third of the bytes of a row a phase
PHASE_FROM = {
    "queued": "t0",
    "prefill": "queued",
    "decode": "prefill",
    "failed": "queued",
}


def lane_rows(tl: dict[str, Any]) -> list[dict[str, Any]]:
    """The swim lanes of ``pipelines.traffic.timeline`` as one row per lane: its request, ``t0`` (when
    it was scheduled) and each phase's end (s from the level's start, to 0.1 ms)."""
    rows: dict[int, dict[str, Any]] = {}
    for span in tl["lanes"]:
        row = rows.setdefault(
            span["lane"], {"lane": span["lane"], "request": span["request"]}
        )
        before = PHASE_FROM[span["phase"]]
        row.setdefault(before, round(span["from_s"], 4))
        row[span["phase"]] = round(span["to_s"], 4)
    return list(rows.values())


def swimlane_chart(lv: dict[str, Any]) -> dict[str, Any] | None:
    tl = lv["timeline"]
    if not tl["lanes"]:
        return None
    x_title = charts.q("t0", "time", "s from the level's start")

    def layer(phase: str) -> dict[str, Any]:
        a, b = PHASE_FROM[phase], phase
        return {
            "transform": [
                {"filter": f"isValid(datum['{a}']) && isValid(datum['{b}'])"}
            ],
            "mark": {"type": "bar", "height": 4},
            "encoding": {
                "x": {**x_title, "field": a},
                "x2": {"field": b},
                # one colour scale shared by the layers, declared on the first
                "color": {"datum": phase, "type": "nominal"}
                | (
                    {
                        "title": None,
                        "scale": {
                            "domain": list(PHASE_COLORS),
                            "range": list(PHASE_COLORS.values()),
                        },
                        "legend": {"orient": "bottom"},
                    }
                    if phase == next(iter(PHASE_COLORS))
                    else {}
                ),
                "tooltip": [
                    {"field": "request", "type": "quantitative"},
                    {"datum": phase, "title": "phase"},
                    {
                        "field": a,
                        "type": "quantitative",
                        "format": ".3f",
                        "title": "from (s)",
                    },
                    {
                        "field": b,
                        "type": "quantitative",
                        "format": ".3f",
                        "title": "to (s)",
                    },
                ],
            },
        }

    return {
        "$schema": alt.SCHEMA_URL,
        "title": "Each request: queued, prefill, decode",
        "width": "container",
        "height": max(120, 5 * tl["shown"]),
        "data": {"values": lane_rows(tl)},
        "encoding": {
            "y": {
                "field": "lane",
                "type": "ordinal",
                "title": "request (in schedule order)",
                "axis": {"labels": False, "ticks": False},
            }
        },
        "layer": [layer(p) for p in PHASE_COLORS],
    }


def turns_table(turns: dict[str, Any]) -> str:
    agent = bool(turns.get("agent"))
    rows = [
        [
            num(t["turn"] + 1, 0),
            num(t["n"], 0),
            num(t["prompt_tokens_median"], 0),
            num(t["ttft_ms_median"], 1),
            f"{num(100 * t['cache_hit_rate'], 1)}%"
            if t.get("cache_hit_rate") is not None
            else "not reported",
        ]
        + (
            [
                f"{num(t.get('tool_calls_model', 0), 0)} / {num(t.get('tool_calls_scripted', 0), 0)}"
            ]
            if agent
            else []
        )
        for t in turns["per_turn"]
    ]
    head = [
        "model call" if agent else "turn",
        "requests",
        "context (prompt tokens, median)",
        "TTFT median (ms)",
        "prefix cache hit (server)",
    ] + (["tool call after it: model's / scripted"] if agent else [])
    return table(head, rows, ["r"] * len(head))


def _window_line(w: dict[str, Any] | None, fraction: float | None) -> str | None:
    if not fraction:
        return None
    if not w:
        return f"Steady-state window ({num(100 * fraction, 0)}% of peak in flight): none found."
    p50 = ((w.get("percentiles") or {}).get("ttft_ms") or {}).get("p50") or {}
    med = (
        p50.get("value") if isinstance(p50, dict) and not p50.get("infinite") else None
    )
    return (
        f"Steady-state window: {num(w['start_ms'] / 1000, 2)}–{num(w['end_ms'] / 1000, 2)} s "
        f"({num(w['span_s'], 2)} s, at least {num(w['threshold'], 0)} of a peak {num(w['peak_in_flight'], 0)} "
        f"requests in flight, {num(100 * fraction, 0)}%): {num(w['requests'], 0)} requests started in it; "
        f"over it, output {num(w.get('aggregate_tps'), 1)} t/s, completed {num(w.get('completed_rps'), 2)} req/s"
        + (
            f", median TTFT {num(med.get('value') if isinstance(med, dict) else med, 1)} ms"
            if med is not None
            else ""
        )
        + "."
    )


def _level_lines(run: dict[str, Any], lv: dict[str, Any]) -> list[str]:
    s = lv["stats"] or {}
    out = []
    stop = s.get("stop_reason")
    if stop and stop != "all_sent":
        out.append(f"Stopped: {stop}.")
    sched = s.get("schedule") or {}
    if run["profile"] == "trace" or sched.get("drift_ms") is not None:
        out.append(
            f"Schedule kept: dispatch lag (sent − scheduled) p50 {num(sched.get('dispatch_lag_ms_p50'), 1)} ms, "
            f"p95 {num(sched.get('dispatch_lag_ms_p95'), 1)} ms, max {num(sched.get('dispatch_lag_ms_max'), 1)} ms; "
            f"drift over the level {num(sched.get('drift_ms'), 1)} ms; offered {num(s.get('offered_rps'), 2)} req/s."
        )
    line = _window_line(s.get("steady"), run.get("steady_state"))
    if line:
        out.append(line)
    itl = s.get("itl_ms")
    if itl:
        out.append(
            f"ITL (gaps between streamed chunks): median {num(itl['median'], 1)} ms, p95 {num(itl['p95'], 1)} ms, "
            f"p99 {num(itl['p99'], 1)} ms over {num(itl['n'], 0)} gaps."
        )
    if s.get("prompt_tokens_counted_mean") is not None:
        out.append(
            f"Prompt length counted by the server tokenizer: mean {num(s['prompt_tokens_counted_mean'], 1)} tokens."
        )
    tel = s.get("telemetry")
    if tel:
        got = [k for k in ("queued", "running", "kv_usage") if tel.get(k)]
        bits = [f"{k} max {num(tel[k]['max'], 2)}" for k in got]
        if tel.get("cache_hit_rate_counters") is not None:
            bits.append(
                f"cache hit rate (counters) {num(100 * tel['cache_hit_rate_counters'], 1)}%"
            )
        lack = tel.get("missing") or []
        out.append(
            f"Server telemetry: {num(telemetry.scrape_count(tel), 0)} scrapes; "
            + (", ".join(bits) if bits else "nothing usable")
            + (f"; not reported by this server: {', '.join(lack)}" if lack else "")
            + (
                f"; counters that went down: {', '.join(tel['decreasing_counters'])}"
                if tel.get("decreasing_counters")
                else ""
            )
            + "."
        )
    gl = _gpu_line(s)
    if gl:
        out.append(gl)
    wr = s.get("warm_reuse")
    if wr and wr.get("flagged"):
        out.append(
            f"**Warm cache reused unintentionally**: {num(100 * wr['hit_rate'], 1)}% of prompt tokens came from the "
            "server's cache in a workload built to share none."
        )
    out += repeat_lines(s.get("repeats"))
    turns = s.get("turns")
    if turns and turns.get("fit"):
        f = turns["fit"]
        out.append(
            f"TTFT against context: {num(f['slope_ms_per_token'], 3)} ms per prompt token "
            f"(+{num(f['intercept_ms'], 1)} ms) over {num(f['n'], 0)} turns "
            f"of {num(turns['conversations'], 0)} "
            + ("agent sessions." if turns.get("agent") else "conversations.")
        )
    return out


def repeat_lines(reps: list[dict[str, Any]] | None) -> list[str]:
    """One line per repeat of a level: its seeds, its cache reset, the server's cache hit, cold or flagged."""
    out = []
    for r in reps or []:
        reset = r.get("cache_reset")
        if reset and not reset.get("ok"):
            how = f"cache reset ({reset.get('action')}) failed: {reset.get('error')}"
        elif reset and reset.get("action") == "restart":
            how = f"server restarted before it (healthy after {num(reset.get('startup_ms'), 0)} ms)"
        elif reset:
            how = (
                f"slots erased before it ({num(reset.get('slots'), 0)} slots, "
                f"{num(reset.get('erased_tokens'), 0)} cached tokens dropped)"
            )
        else:
            how = "no cache reset"
        seeds = (
            "the first repeat's requests again"
            if r.get("same_workload") and r["repeat"]
            else f"workload seed {num(r.get('workload_seed'), 0)}, arrival seed {num(r.get('arrival_seed'), 0)}"
        )
        hit = (
            "not reported"
            if r.get("hit_rate") is None
            else f"{num(100 * r['hit_rate'], 1)}%"
            + (" (cold)" if r.get("cold") else "")
        )
        line = (
            f"Repeat {num(r['repeat'] + 1, 0)}: {num(r['requests'], 0)} requests, {seeds}; {how}; "
            f"prompt tokens from the server's cache {hit}."
        )
        if r.get("flagged"):
            line = "**Unintended warm repeat**: " + cell(line)
        out.append(line)
    return out


def _cache_line(run: dict[str, Any]) -> str:
    cs: Any = run.get("cache_state")
    cs = (
        cs
        if isinstance(cs, dict)
        else (cs.model_dump() if hasattr(cs, "model_dump") else None)
    )
    if not cs:
        return "Cold or warm: not recorded (an artifact older than the record)."
    return f"Started on: {cs.get('start')}" + (" (cold)." if cs.get("cold") else ".")


def stored_line(lv: dict[str, Any]) -> str:
    """What a level's charts of single requests show: every request, or the reservoir sample the artifact
    stores (core.request_records); the level's figures are over all of them either way (plain text)."""
    s = lv.get("sampled")
    if not s:
        return ""
    return (
        f"{s['kept']:,} of {s['of']:,} requests shown (a reservoir sample, seed {s['seed']}); "
        f"the level's figures are over all {s['of']:,}."
    )


LEVEL_CHARTS_MAX = 3  # levels of one run drawn as charts (a page's bytes, #30); every level's lines stay


def _answer_index(run: dict[str, Any]) -> int | None:
    a = (run.get("answer") or {}).get("answer")
    if not isinstance(a, (int, float)) or a <= 0:
        return None
    return next(
        (i for i, lv in enumerate(run["levels"]) if lv["level"] == float(a)), None
    )


def charted_levels(run: dict[str, Any], cap: int = LEVEL_CHARTS_MAX) -> set[int]:
    """The indices (in level order) of the levels whose charts a run's fold draws: every level up to
    ``cap``; else the lowest, the highest, the capacity answer where the run has one, and levels
    evenly between, ``cap`` in all."""
    n = len(run["levels"])
    if n <= cap:
        return set(range(n))
    keep = {0, n - 1}
    a = _answer_index(run)
    if a is not None:
        keep.add(a)
    for k in range(1, cap - 1):
        if len(keep) >= cap:
            break
        i = round(k * (n - 1) / (cap - 1))
        while i in keep and i < n - 1:
            i += 1
        keep.add(i)
    return keep


def _drawn(n: int, of: int, what: str) -> str:
    note = downsample.drawn_note(n, of, what)
    return " " + note if note else ""


def traffic_section(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    out = [
        "## Real traffic",
        "",
        (
            "Runs whose requests arrive as recorded traces, bursts or ramps, or come as conversations or agent "
            "sessions (tool calls between turns), or whose levels are repeated (each repeat's seeds, cache reset "
            "and server-reported cache hit stated); each level's "
            "headline figures over its steady-state window where one was asked for (SGLang's definition: the longest "
            "interval with at least that share of the peak number of requests in flight), the over-saturation stop "
            "(GuideLLM's: TTFT and requests in flight both rising, each slope tested), "
            "and the server's own telemetry "
            "scraped from its /metrics during the run, with the GPU's utilisation and power (NVML) where the "
            "server runs on a GPU of this host (NVML's utilisation is the share of each sample period in which "
            "a kernel ran, not how much of the GPU it used). "
            f"Swim lanes show at most {traffic.TIMELINE_MAX} requests a level. Each run is folded: open it "
            "for its levels, charts and tables."
        ),
        "",
    ]
    for run in runs:
        title = (
            f"{run['endpoint']} · {run['model']} · {run['host']} · {run['test_name']} "
            f"({', '.join(run['features'])})"
        )
        body = [
            f"Arrivals: {cell(run['arrivals'])}. Workload: {cell(run['workload'])}"
            + (
                f" — {cell(run['workload_info'].get('trace_text'))}"
                if run["workload_info"].get("trace_text")
                else ""
            )
            + f". {cell(_cache_line(run))} Artifact {link(run['id'], run_link(run['id']))}"
            + (
                f"; every request record: {link('JSON lines, gzip', ROOT + data_url(run['records_file']))}."
                if run.get("records_file")
                else "."
            ),
            "",
        ]
        drawn = charted_levels(run)
        if len(drawn) < len(run["levels"]):
            body += [
                cell(
                    f"Charts for {len(drawn)} of {len(run['levels'])} levels "
                    f"({', '.join(num(run['levels'][i]['level'], 2) for i in sorted(drawn))} "
                    f"{run['unit']}: the lowest, the highest, the capacity answer where the run "
                    f"has one, and evenly between; at most {LEVEL_CHARTS_MAX} a run); the figures of "
                    "every level are below, and every request and scrape is in the artifact."
                ),
                "",
            ]
        for i, lv in enumerate(run["levels"]):
            body += [f"**Level {num(lv['level'], 2)} {cell(run['unit'])}**", ""]
            body += [
                f"- {cell(line)}" if not line.startswith("**") else f"- {line}"
                for line in _level_lines(run, lv)
            ]
            body.append("")
            if i not in drawn:
                turns = (lv["stats"] or {}).get("turns")
                if turns:
                    body += [turns_table(turns), ""]
                continue
            if lv["requests"]:
                _, n, of = latency_points(lv)
                note = downsample.drawn_note(n, of, "requests")
                body += [
                    charts.embed(
                        latency_chart(lv),
                        caption=" ".join(x for x in (stored_line(lv), note) if x),
                    ),
                    "",
                ]
            tc = telemetry_chart(lv)
            if tc is not None:
                _, n, of = telemetry_points(lv)
                body += [
                    charts.embed(
                        tc,
                        caption="Under the latency chart, on the same time axis."
                        + _drawn(n, of, "scrape readings"),
                    ),
                    "",
                ]
            gc = gpu_chart(lv)
            if gc is not None:
                _, n, of = gpu_points(lv)
                body += [
                    charts.embed(
                        gc,
                        caption="NVML, under the latency chart on the same time axis: "
                        "the GPUs a server on loopback shares with the client."
                        + _drawn(n, of, "NVML readings"),
                    ),
                    "",
                ]
            sc = swimlane_chart(lv)
            if sc is not None:
                tl = lv["timeline"]
                stored = lv.get("sampled")
                lanes_of = (
                    f"{tl['requests']} stored of {stored['of']:,} requests (reservoir, seed {stored['seed']})"
                    if stored
                    else f"{tl['requests']} requests"
                )
                note = (
                    f"All {lanes_of}."
                    if tl["every"] == 1
                    else f"Sampled: every {tl['every']}th of {lanes_of} ({tl['shown']} shown)."
                )
                body += [charts.embed(sc, caption=note), ""]
            turns = (lv["stats"] or {}).get("turns")
            if turns:
                body += [turns_table(turns), ""]
        out += [fold(title, "\n".join(body), "note"), ""]
    return out
