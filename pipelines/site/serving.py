"""Page bodies of the Serving and Comparisons pages (Markdown + embedded Altair charts).

Every value from an artifact goes through ``cell()``/``num()`` or ``charts.embed()``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import altair as alt
import pandas as pd

from core import stats
from core.metrics import METRICS
from core.records.run import RunRecord
from core.summary import Summary
from pipelines import backends as backend_cmp
from pipelines import serving, traffic
from pipelines.site import chart_shapes, charts, engines, figures
from pipelines.site.markdown import (
    ROOT,
    SYNTHETIC_BADGE,
    admonition,
    cell,
    code,
    data_url,
    endpoint_badge,
    fold,
    link,
    nbytes,
    num,
    run_link,
    table,
)
from pipelines.site.traffic import traffic_section

VERDICT_CLASS = {"win": "almanac-verdict-win", "loss": "almanac-verdict-loss"}


def _mean(s: Summary | None, decimals: int = 1) -> str:
    return num(s.mean, decimals) if s else "—"


def _mean_sd(s: Summary | None, decimals: int = 1) -> str:
    if not s:
        return "—"
    sd = f" ± {num(s.stddev, decimals)}" if s.stddev is not None else ""
    return f"{num(s.mean, decimals)}{sd} (n={num(s.n, 0)})"


def _model(row: dict[str, Any]) -> str:
    return (
        cell(row["model"])
        + (" " + SYNTHETIC_BADGE if row.get("synthetic") else "")
        + (" " + endpoint_badge(row["model_server"]) if row.get("model_server") else "")
    )


# -- Serving page -------------------------------------------------------------------------
def _who(r: dict[str, Any]) -> list[str]:
    return [cell(r["endpoint"]), _model(r), code(r["host"])]


def _figure(r: dict[str, Any], name: str, fallback: str = "—") -> str:
    """A serve run's headline figure as the fact layer has it (its group's, marked for the consistency check)."""
    fig = (r.get("figures") or {}).get(name)
    return figures.cell_html(fig) if fig is not None else fallback


def cold_table(rows: list[dict[str, Any]]) -> str:
    """Seed 004's cold columns: startup → healthy, cold TTFT, cold full (this run's cold starts: mean ± sd),
    and cold total first response, the serve test's headline: the configuration's figure (fact layer)."""
    headers = [
        "endpoint",
        "model",
        "host",
        "startup → healthy (ms)",
        "cold TTFT (ms)",
        "cold full (ms)",
        "cold total first response (ms)",
        "source",
    ]
    out = [
        _who(r)
        + [
            _mean_sd(r["startup_ms"]) if r["fresh_server"] else "— (running endpoint)",
            _mean_sd(r["cold_ttft_ms"]),
            _mean_sd(r["cold_e2e_ms"]),
            _figure(r, "cold_total_ms", _mean_sd(r["cold_total_ms"])),
            link(r["id"], run_link(r["id"])),
        ]
        for r in rows
    ]
    return table(headers, out, ["l", "l", "l", "r", "r", "r", "r", "l"])


def warm_table(rows: list[dict[str, Any]]) -> str:
    """Warm requests: TTFT, TPOT and E2E as the configuration's figures (fact layer, the run as the unit),
    then this run's E2E percentiles with their bounds, its request count and failures."""
    headers = [
        "endpoint",
        "model",
        "host",
        "TTFT (ms)",
        "TPOT (ms)",
        "E2E (ms)",
        "E2E p50",
        "E2E p95",
        "E2E p99",
        "n",
        "failed",
        "source",
    ]
    out = []
    for r in rows:
        e2e = r["e2e_ms"]
        bounds = r.get("e2e_bounds") or {}
        out.append(
            _who(r)
            + [
                _figure(r, "ttft_ms", _mean(r["ttft_ms"])),
                _figure(r, "tpot_ms", _mean(r["tpot_ms"], 2)),
                _figure(r, "e2e_ms", _mean(e2e)),
                num(e2e.median, 1) if e2e else "—",
                _quantile(e2e.p95, bounds.get(0.95)) if e2e else "—",
                _quantile(e2e.p99, bounds.get(0.99)) if e2e else "—",
                num(e2e.n, 0) if e2e else "0",
                num(int(r["failed_requests"].mean), 0) if r["failed_requests"] else "0",
                link(r["id"], run_link(r["id"])),
            ]
        )
    return table(headers, out, ["l", "l", "l"] + ["r"] * 8 + ["l"])


def _quantile(value: float | None, b: Any, decimals: int = 1) -> str:
    """A percentile with its distribution-free one-sided 95% upper bound, or how many samples that bound needs."""
    if value is None:
        return "—"
    if b is None:
        return num(value, decimals)
    if b.upper is not None:
        return (
            f"{num(value, decimals)}<br><small>≤ {num(b.upper, decimals)} (95%)</small>"
        )
    need = stats.quantile_samples_needed(b.q, 0.95, two_sided=False)
    return f"{num(value, decimals)}<br><small>no bound: needs {need} requests</small>"


def _pct(d: dict[str, Any], key: str, decimals: int = 1) -> str:
    return num(d.get(key), decimals) if d and d.get("n") else "—"


def level_table(sw: dict[str, Any]) -> str:
    headers = [
        "clients",
        "requests",
        "ok",
        "errors",
        "aggregate output (t/s)",
        "× level 1",
        "effective parallelism",
        "TTFT p50 / p95 (ms)",
        "TPOT p50 / p95 (ms)",
        "E2E p50 / p95 / p99 (ms)",
        "p95 multiplier",
        "goodput (req/s)",
        "SLO attainment",
        "meets SLOs",
        "E2E CI95 ± (precision)",
    ]
    rows = []
    prec = sw.get("precision") or {}
    for r in sw["sweep"]["levels"]:
        errs = num(r["errors"], 0)
        if r["error_reasons"]:
            errs += (
                " ("
                + cell(", ".join(f"{k}: {v}" for k, v in r["error_reasons"].items()))
                + ")"
            )
        rows.append(
            [
                num(r["level"], 0),
                num(r["requests"], 0),
                num(r["ok"], 0),
                errs,
                num(r["aggregate_tps"], 2),
                num(r["speedup"], 2),
                num(r["effective_parallelism"], 2),
                f"{_pct(r['ttft_ms'], 'median')} / {_pct(r['ttft_ms'], 'p95')}",
                f"{_pct(r['tpot_ms'], 'median', 2)} / {_pct(r['tpot_ms'], 'p95', 2)}",
                f"{_pct(r['e2e_ms'], 'median')} / {_pct(r['e2e_ms'], 'p95')} / {_pct(r['e2e_ms'], 'p99')}",
                num(r["p95_multiplier"], 2),
                num(r["goodput_rps"], 3),
                f"{num(100 * r['slo_attainment'], 0)}%"
                if r["slo_attainment"] is not None
                else "—",
                "yes" if r["meets_slo"] else "no",
                _level_precision(prec.get(int(r["level"]))),
            ]
        )
    return table(headers, rows, ["r"] * 13 + ["l", "l"])


def records_line(sw: dict[str, Any]) -> str:
    """What a sweep's artifact stores of its request records where its levels keep a reservoir sample
    (core.request_records): k of n, every figure over all n, and the link to every record when kept."""
    rr = sw.get("request_records") or {}
    if not rr.get("sampled"):
        return ""
    of = f"{int(rr['of']):,}"
    full = sw.get("records_file")
    return (
        f"Request records: {int(rr['kept']):,} of {of} stored in the artifact (a seeded reservoir sample "
        f"per level); every figure here is over all {of}"
        + (
            f"; every record: {link('JSON lines, gzip', ROOT + data_url(full))}."
            if full
            else "."
        )
    )


def _level_precision(p: dict[str, Any] | None) -> str:
    """The level's E2E CI95 half-width and whether it met its target (or that the count was fixed)."""
    if not p:
        return "—"
    hw = p.get("half_width_rel")
    got = f"±{num(hw * 100, 1)}%" if hw is not None else "—"
    if p.get("target_rel") is None:
        return (
            f"{got} <small>(fixed count: measured before repeat-to-precision)</small>"
        )
    if p.get("met"):
        return f"{got} (target ±{num(p['target_rel'] * 100, 0)}% met)"
    why = {"max_repetitions": "count ceiling", "max_time_s": "time ceiling"}.get(
        p.get("stop_reason"), cell(p.get("stop_reason"))
    )
    return f"{got} (**target ±{num(p['target_rel'] * 100, 0)}% not met**: {why})"


def concurrency_frame(sws: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for sw in sws:
        label = f"{sw['endpoint']} · {sw['model']} · {sw['host']}"
        base = sw["sweep"]["levels"][0] if sw["sweep"]["levels"] else None
        for r in sw["sweep"]["levels"]:
            rows.append(
                {
                    "series": label,
                    "level": r["level"],
                    "aggregate_tps": r["aggregate_tps"],
                    "ideal_tps": (base["aggregate_tps"] * r["level"] / base["level"])
                    if base and base["aggregate_tps"]
                    else None,
                    "e2e_p95_ms": r["e2e_ms"].get("p95"),
                    "ttft_p95_ms": r["ttft_ms"].get("p95"),
                    "effective_parallelism": r["effective_parallelism"],
                    "id": sw["id"],
                }
            )
    return pd.DataFrame(rows)


def throughput_chart(df: pd.DataFrame) -> dict[str, Any]:
    """Aggregate output t/s against concurrency, with the ideal (linear) scaling dashed."""
    return throughput_shape((df,), _levels(df))


@chart_shapes.shape
def throughput_shape(df: Any, levels: tuple[Any, ...]) -> alt.LayerChart:
    """throughput_chart's shape: ``levels`` the concurrency axis's ticks."""
    m = METRICS["peak_aggregate_tps"]
    color = alt.Color(
        "series:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=400)
    )
    base = alt.Chart(df).encode(x=_clients_axis(levels), color=color)
    y = ("aggregate output", m.unit)
    line = base.mark_line(point=True).encode(
        y=charts.qy("aggregate_tps", *y),
        tooltip=[
            alt.Tooltip("series:N"),
            alt.Tooltip("level:Q"),
            alt.Tooltip("aggregate_tps:Q", format=".2f"),
            alt.Tooltip("ideal_tps:Q", format=".2f", title="ideal (linear)"),
            alt.Tooltip("effective_parallelism:Q", format=".2f"),
            alt.Tooltip("id:N", title="artifact"),
        ],
    )
    ideal = base.mark_line(strokeDash=[4, 4], opacity=0.6).encode(
        y=charts.qy("ideal_tps", *y)
    )
    return (ideal + line).properties(
        title="Aggregate output (dashed: linear scaling)", width="container", height=260
    )


def _levels(df: pd.DataFrame) -> tuple[Any, ...]:
    """The concurrency levels of a frame, ascending: the ticks of its clients axis."""
    return tuple(sorted(df["level"].unique().tolist()))


def _clients_axis(levels: tuple[Any, ...]) -> alt.X:
    return charts.qx(
        "level",
        "concurrency",
        "clients",
        log=True,
        scale=alt.Scale(base=2),
        axis=alt.Axis(values=list(levels)),
    )


def latency_chart(df: pd.DataFrame) -> dict[str, Any]:
    return latency_shape((df,), _levels(df))


@chart_shapes.shape
def latency_shape(df: Any, levels: tuple[Any, ...]) -> alt.Chart:
    """latency_chart's shape."""
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=_clients_axis(levels),
            y=charts.qy("e2e_p95_ms", "p95 E2E latency", "ms"),
            color=alt.Color(
                "series:N",
                title=None,
                legend=alt.Legend(orient="bottom", labelLimit=400),
            ),
            tooltip=[
                alt.Tooltip("series:N"),
                alt.Tooltip("level:Q"),
                alt.Tooltip("e2e_p95_ms:Q", format=".1f"),
                alt.Tooltip("ttft_p95_ms:Q", format=".1f", title="p95 TTFT (ms)"),
                alt.Tooltip("id:N", title="artifact"),
            ],
        )
        .properties(
            title="p95 end-to-end latency per request", width="container", height=260
        )
    )


def failed_table(rows: list[dict[str, Any]]) -> str:
    return table(
        ["created", "endpoint", "model", "host", "test", "error", "source"],
        [
            [
                cell(r["created"]),
                cell(r["endpoint"]),
                _model(r),
                code(r["host"]),
                code(r["test_name"]),
                cell(f"{r['kind']}: {r['message']}"),
                link(r["id"], run_link(r["id"])),
            ]
            for r in rows
        ],
    )


# -- capacity, load profiles, probes ----------------------------------------------------------
VERDICT_MARK = {"meets": "meets", "misses": "**misses**", "unresolved": "unresolved"}


def _bound(v: dict[str, Any]) -> str:
    """p95 value [lower, upper] vs limit, as measured (— where a bound does not exist yet)."""
    if not v:
        return "—"
    inf = set(v.get("infinite") or [])

    def show(key: str) -> str:
        if key in inf:
            return "∞"
        return num(v[key], 1) if v.get(key) is not None else "—"

    val = "∞ (failed requests)" if "value" in inf else show("value")
    lo, hi = show("lower"), show("upper")
    out = f"{val} [{lo}, {hi}] vs {num(v.get('limit'), 0)}"
    if v.get("verdict") == "unresolved":
        more = v.get("needs")
        out += f" (needs ~{num(more, 0)} more)" if more else " (sits on the limit)"
    return out


def capacity_table(results: list[dict[str, Any]]) -> str:
    """The answer first: one row per capacity search or swept load test."""
    headers = [
        "endpoint",
        "model",
        "host",
        "test",
        "profile",
        "answer [interval] at SLO",
        "requests sent",
        "exhaustive sweep",
        "failed",
        "source",
    ]
    rows = []
    for r in results:
        search = r.get("search") or {}
        rows.append(
            [
                cell(r["endpoint"]),
                _model(r),
                code(r["host"]),
                code(r["test_name"]),
                cell(f"{r['kind']} · {r['profile']}"),
                f"**{cell(r['answer_text'])}**",
                num(r["requests"], 0),
                num(search.get("exhaustive_requests"), 0)
                if search
                else "(this is one)",
                num(r["errors"], 0),
                link(r["id"], run_link(r["id"])),
            ]
        )
    return table(headers, rows, ["l", "l", "l", "l", "l", "l", "r", "r", "r", "l"])


def load_level_table(res: dict[str, Any]) -> str:
    """Every level measured: verdict per limit with the order-statistic interval, throughput, the
    client's schedule and overhead, saturation, the prefix cache."""
    p = f"p{res['slo'].percentile:g}"
    limits = [
        m
        for m in ("ttft_ms", "tpot_ms", "e2e_ms")
        if getattr(res["slo"], m) is not None
    ]
    headers = (
        [res["unit"], "requests", "failed", "verdict"]
        + [f"{p} {serving.LIMIT_LABELS[m]} (ms) [CI] vs limit" for m in limits]
        + [
            "completed req/s",
            "output t/s",
            "dispatch lag p95 (ms)",
            "client CPU",
            "host load",
            "saturated",
            "prefix cache hit",
        ]
    )
    rows = []
    for lv in res["stats"]["levels"]:
        errs = num(lv["errors"], 0)
        if lv["error_reasons"]:
            errs += (
                " ("
                + cell(", ".join(f"{k}: {v}" for k, v in lv["error_reasons"].items()))
                + ")"
            )
        sched = lv.get("schedule") or {}
        lag = (
            num(sched.get("dispatch_lag_ms_p95"), 1)
            if sched.get("dispatch_lag_ms_p95") is not None
            else "—"
        )
        if sched.get("client_bound"):
            lag += " **client-bound**"
        client = lv.get("client") or {}
        cache = lv.get("prefix_cache") or {}
        hit = cache.get("hit_rate")
        rows.append(
            [
                num(lv["level"], 2),
                num(lv["requests"], 0),
                errs,
                VERDICT_MARK.get(lv["slo"]["verdict"], "—"),
            ]
            + [_bound(lv["slo"]["limits"].get(m) or {}) for m in limits]
            + [
                num(lv.get("completed_rps"), 2),
                num(lv.get("aggregate_tps"), 1),
                lag,
                f"{num(100 * client['cpu_share'], 0)}%"
                if client.get("cpu_share") is not None
                else "—",
                _load(client),
                "yes" if lv.get("saturated") else "no",
                f"{num(100 * hit, 1)}%" if hit is not None else "not reported",
            ]
        )
    return table(
        headers,
        rows,
        ["r", "r", "l", "l"]
        + ["l"] * len(limits)
        + ["r", "r", "r", "r", "r", "l", "r"],
    )


def _load(client: dict[str, Any]) -> str:
    """The host's 1-minute load average at the level's start → end (another process on the cores shows here)."""
    a, b = client.get("loadavg_1m_start"), client.get("loadavg_1m_end")
    if a is None and b is None:
        return "—"
    return f"{num(a, 2)} → {num(b, 2)}"


def _search_table(search: dict[str, Any]) -> str:
    rows = [
        [
            num(i + 1, 0),
            num(v["level"], 2),
            cell(v["why"]),
            cell(v["verdict"]),
            cell(v.get("boundary") or "—"),
            num(v["requests"], 0),
            cell(v.get("stop_reason") or "—"),
            num(v.get("seconds"), 1),
        ]
        for i, v in enumerate(search.get("visits") or [])
    ]
    return table(
        [
            "#",
            "level",
            "why",
            "verdict",
            "ends the climb",
            "requests",
            "stopped by",
            "seconds",
        ],
        rows,
        ["r", "r", "l", "l", "l", "r", "l", "r"],
    )


def throughput_latency_chart(rows: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """Achieved throughput (x) against a latency percentile (y, with its order-statistic interval)
    per level, the SLO limit as a dashed line, the answer circled."""
    data = [
        r
        for r in rows
        if r["metric"] == metric
        and r["value"] is not None
        and r["throughput_rps"] is not None
    ]
    p = data[0]["percentile"] if data else "p95"
    limits = pd.DataFrame({"limit": sorted({r["limit"] for r in data})})
    limits["label"] = [f"SLO {p} {metric} ≤ {v:g} ms" for v in limits["limit"]]
    return throughput_latency_shape((pd.DataFrame(data), limits), metric, p)


@chart_shapes.shape
def throughput_latency_shape(
    df: Any, limits: Any, metric: str, p: str
) -> alt.LayerChart:
    """throughput_latency_chart's shape: ``limits`` the SLO lines, ``p`` the percentile."""
    x = charts.qx("throughput_rps", "throughput, completed", "requests/s")
    y = (f"{p} {metric}", "ms")
    color = alt.Color(
        "series:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=400)
    )
    tip = [
        alt.Tooltip("series:N"),
        alt.Tooltip("level:Q", title="level"),
        alt.Tooltip("unit:N"),
        alt.Tooltip("value:Q", format=".1f", title=f"{p} (ms)"),
        alt.Tooltip("lower:Q", format=".1f"),
        alt.Tooltip("upper:Q", format=".1f"),
        alt.Tooltip("verdict:N"),
        alt.Tooltip("errors:Q"),
        alt.Tooltip("id:N", title="artifact"),
    ]
    base = alt.Chart(df).encode(x=x, color=color)
    line = base.mark_line(point=True).encode(
        y=charts.qy("value", *y, log=True), tooltip=tip
    )
    bars = base.mark_rule(opacity=0.5).encode(
        y=charts.qy("lower", *y, log=True), y2=alt.Y2("upper:Q")
    )
    rule = (
        alt.Chart(limits)
        .mark_rule(strokeDash=[6, 4], color=charts.BAD)
        .encode(y=charts.qy("limit", *y, log=True))
    )
    label = (
        alt.Chart(limits)
        .mark_text(align="left", dx=4, dy=-6, color=charts.BAD)
        # at the plot's left edge (a text mark without x sits in the middle, and runs off a phone's screen)
        .encode(x=alt.value(0), y=charts.qy("limit", *y, log=True), text="label:N")
    )
    answer = (
        base.transform_filter(alt.datum.answer)
        .mark_point(size=260, shape="circle", filled=False, strokeWidth=2.5)
        .encode(y=charts.qy("value", *y, log=True), tooltip=tip)
    )
    return (rule + label + bars + line + answer).properties(
        title=f"{p} {metric} against throughput (dashed: the SLO; circled: the answer)",
        width="container",
        height=280,
    )


def probe_table(probes: list[dict[str, Any]]) -> str:
    """One table: a row per case, a column per endpoint (model · host): successes/tries, median
    latency, and the failure reason."""
    from core.kinds.probe import CASE_HELP, CASES

    cols = [f"{p['endpoint']} · {p['model']} · {p['host']}" for p in probes]
    rows = []
    for case in CASES:
        if not any(case in p["cases"] for p in probes):
            continue
        row = [cell(CASE_HELP[case])]
        for p in probes:
            c = p["cases"].get(case)
            if not c:
                row.append("—")
                continue
            ok = c["succeeded"] == c["n"]
            mark = "✓" if ok else ("partly" if c["succeeded"] else "✗")
            text = f"{mark} {num(c['succeeded'], 0)}/{num(c['n'], 0)}, {num(c.get('latency_ms_median'), 0)} ms"
            if c.get("reasons"):
                text += ": " + cell("; ".join(c["reasons"])[:240])
            row.append(text)
        rows.append(row)
    sources = ["sources"] + [link(p["id"], run_link(p["id"])) for p in probes]
    return table(
        ["case"] + [cell(c) for c in cols], rows + [sources], ["l"] + ["l"] * len(cols)
    )


def capacity_section(results: list[dict[str, Any]]) -> list[str]:
    out = [
        "## Capacity at SLO",
        "",
        "How many users (closed loop) or requests per second (open loop) each server takes while its latency "
        "percentiles stay within the SLOs. Each level's verdict comes from distribution-free order-statistic "
        "bounds of the percentile (a failed request counts as never answering); the interval is [highest level "
        "decisively meeting them, level just below the lowest decisive miss], where a verdict borderline from "
        "one run, or contradicted by a level above or below it, decides nothing (Methodology).",
        "",
        capacity_table(results),
        "",
    ]
    rows = serving.throughput_latency_rows(results)
    for metric in ("TTFT", "TPOT", "E2E"):
        if any(r["metric"] == metric and r["value"] is not None for r in rows):
            out += [
                charts.embed(
                    throughput_latency_chart(rows, metric),
                    caption="Each point a level; bars: the CI of the percentile; levels whose "
                    "percentile is a failed request are in the tables only.",
                ),
                "",
            ]
    for res in results:
        title = f"{serving.served_by(res)} · {res['model']} · {res['host']} · {res['test_name']}"
        body = [
            f"Workload: {cell(res['workload'])}. Artifact {link(res['id'], run_link(res['id']))}"
            + (f" — **failed**: {cell(res['error'])}" if res["status"] != "ok" else "")
            + ".",
            "",
        ]
        body += [f"- {cell(line)}" for line in serving.load_finding(res)] + [
            "",
            load_level_table(res),
            "",
        ]
        if res.get("search"):
            body += ["Search path:", "", _search_table(res["search"]), ""]
        out += [fold(title, "\n".join(body), "note"), ""]
    return out


def serving_page(docs: list[RunRecord]) -> str:
    cw = serving.cold_warm(docs)
    sws = serving.sweeps(docs)
    failed = serving.failed_serving(docs)
    loads = serving.load_results(docs)
    probes = serving.probe_results(docs)
    if not cw and not sws and not failed and not loads and not probes:
        return admonition(
            "warning",
            "No serving measurements yet",
            "Run `invoke serve.bench` to start llama_cpp.server on loopback and measure it, and "
            "`invoke serve.capacity` for the capacity at SLO.",
        )
    out: list[str] = []
    if loads:
        out += capacity_section(loads)
        out += engines.serving_section(docs)
        out += traffic_section(traffic.traffic_runs(docs))
    if probes:
        out += [
            "## Endpoint probe",
            "",
            "What each endpoint does with each kind of request (a plain chat, usage in "
            "the stream, a tool call and its follow-up, JSON mode, structured output): successes over tries, "
            "median latency, and the failure reason in the server's own words.",
            "",
            probe_table(probes),
            "",
        ]
    out += ["## Cold vs warm", ""]
    if cw:
        out += [
            "A cold start is the server process started from nothing: startup → healthy, then the first request "
            "it answers (TTFT and full). Warm figures are over the timed requests after warm-up, on the last "
            "started server. Means ± sample stddev over cold starts; E2E percentiles over warm requests, each with its "
            "distribution-free 95% upper bound (an order statistic: the true percentile lies below it with at "
            "least 95% confidence whatever the distribution), or how many requests such a bound needs.",
            "",
            "### Cold start",
            "",
            cold_table(cw),
            "",
            "### Warm steady state",
            "",
            warm_table(cw),
            "",
        ]
    else:
        out += ["No successful `serve` run yet.", ""]
    out += ["## Concurrency", ""]
    if sws:
        out += [
            "Each level runs that many clients at once, each sending its requests back to back (a closed loop). "
            "*Effective parallelism* is the summed generation time of all requests over the time during which at "
            "least one was generating: 1.0 means one stream at a time.",
            "",
        ]
        for sw in sws:
            title = f"{sw['endpoint']} · {sw['model']} · {sw['host']}"
            out += [
                f"### {cell(title)}",
                "",
                f"Test {code(sw['test_name'])}, artifact {link(sw['id'], run_link(sw['id']))}"
                + (
                    f" — **failed**: {cell(sw['error'])}"
                    if sw["status"] != "ok"
                    else ""
                )
                + ".",
                "",
            ]
            if sw.get("peak") is not None:
                pk = sw["peak"]
                detail = (
                    f"CI95 {figures.interval(pk)} · {cell(figures.basis(pk))}"
                    if pk.has_interval
                    else figures.interval(pk)
                )
                out += [
                    f"Peak aggregate output (the configuration's figure): {figures.value(pk)} "
                    f"{cell(pk.metric.unit)} <small>({detail})</small>.",
                    "",
                ]
            stored = records_line(sw)
            if stored:
                out += [stored, ""]
            for line in serving.finding(sw):
                out += [f"- {cell(line)}"]
            out += ["", level_table(sw), ""]
        df = concurrency_frame(sws)
        if not df.empty:
            out += [
                charts.embed(
                    throughput_chart(df),
                    caption="Aggregate output tokens/s per concurrency level.",
                ),
                "",
                charts.embed(
                    latency_chart(df),
                    caption="p95 end-to-end latency per concurrency level.",
                ),
                "",
            ]
    else:
        out += ["No `concurrency` run yet.", ""]
    if failed:
        out += [
            "## Failed serving runs",
            "",
            "Runs that lost their server, could not start it, or had no successful "
            "request. Each artifact keeps every request's record and the server's log.",
            "",
            failed_table(failed),
            "",
        ]
    return "\n".join(out)


# -- Comparisons page ---------------------------------------------------------------------
def _groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(
            (
                r["host"],
                r["model"],
                r["workload"],
                r["endpoint"],
                r["kind"],
                r["candidate_id"],
            ),
            [],
        ).append(r)
    return list(groups.values())


def comparison_table(rows: list[dict[str, Any]]) -> str:
    """One server run against its in-process baseline: a row per metric, each side the configuration's figure
    (fact layer), the ratio and verdict of the two figures (Facts.compare), marked for the consistency check."""
    headers = [
        "metric",
        "in process",
        "server",
        "ratio server / in-process",
        "CI95",
        "verdict (server)",
    ]
    out = []
    for r in rows:
        m = METRICS[r["metric"]]
        ci = (
            f"{num(r['ci95_low'], 3)} – {num(r['ci95_high'], 3)}"
            if r["ci95_low"] is not None
            else (
                "—" + (f" <small>({cell(r['note'])})</small>" if r.get("note") else "")
            )
        )
        verdict = f'<span class="{VERDICT_CLASS.get(r["verdict"], "")}">{cell(r["verdict"])}</span>'
        fa, fb = r.get("baseline_figure"), r.get("candidate_figure")
        if fa is not None and fb is not None:
            verdict = figures.verdict(verdict, fa, fb, r["verdict"])
        requests = (
            (
                f"<br><small>{num(r['baseline_requests'], 0)} / "
                f"{num(r['candidate_requests'], 0)} requests in these runs</small>"
            )
            if r.get("baseline_requests") is not None
            else ""
        )
        out.append(
            [
                f"{cell(m.label)} ({cell(m.unit)})" + requests,
                figures.cell_html(fa)
                if fa is not None
                else num(r["baseline_mean"], m.decimals),
                figures.cell_html(fb)
                if fb is not None
                else num(r["candidate_mean"], m.decimals),
                num(r["ratio"], 3) + "×" if r["ratio"] is not None else "—",
                ci,
                verdict,
            ]
        )
    return table(headers, out, ["l", "r", "r", "r", "r", "l"])


def ratio_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    df = pd.DataFrame(
        [
            {
                "label": f"{r['endpoint']} · {r['kind']} · {METRICS[r['metric']].label}",
                "ratio": r["ratio"],
                "lo": r["ci95_low"],
                "hi": r["ci95_high"],
                "verdict": r["verdict"],
                "id": r["candidate_id"],
            }
            for r in rows
            if r["ratio"] is not None
        ]
    )
    return ratio_shape((df, pd.DataFrame({"x": [1.0]})), max(80, 24 * len(df)))


@chart_shapes.shape
def ratio_shape(df: Any, parity: Any, height: int) -> alt.LayerChart:
    """ratio_chart's shape: ``parity`` the one row of the dashed line at 1."""
    base = alt.Chart(df).encode(y=alt.Y("label:N", title=None, sort=None))
    x = ("server ÷ in-process, 1 = same, lower is faster for latency", "×")
    points = base.mark_point(filled=True, size=70).encode(
        x=charts.qx("ratio", *x, scale=alt.Scale(zero=False)),
        color=alt.Color(
            "verdict:N",
            scale=alt.Scale(
                domain=["win", "loss", "within noise", "insufficient data"],
                range=[charts.GOOD, charts.BAD, charts.NEUTRAL, charts.FAINT],
            ),
        ),
        tooltip=[
            alt.Tooltip("label:N"),
            alt.Tooltip("ratio:Q", format=".3f"),
            alt.Tooltip("lo:Q", format=".3f"),
            alt.Tooltip("hi:Q", format=".3f"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("id:N", title="artifact"),
        ],
    )
    bars = base.mark_rule().encode(x=charts.qx("lo", *x), x2=alt.X2("hi:Q"))
    one = (
        alt.Chart(parity)
        .mark_rule(strokeDash=[3, 3], color=charts.INK)
        .encode(x=charts.qx("x", *x))
    )
    return (bars + points + one).properties(
        width="container",
        height=height,
        title="Ratio of means with CI95",
    )


def _value(v: float | None, r: dict[str, Any]) -> str:
    return nbytes(v) if r["unit"] == "bytes" else num(v, r["decimals"])


def backend_table(group: dict[str, Any]) -> str:
    """One in-process backend against llama.cpp on one file and host: a row per figure."""
    headers = [
        "figure",
        "unit",
        f"{cell(group['baseline'])} mean",
        f"{cell(group['candidate'])} mean",
        "ratio (candidate / llama.cpp)",
        "CI95",
        "verdict (candidate)",
        "n",
        "sources",
    ]
    rows = []
    for r in group["rows"]:
        ci = (
            f"{num(r['ci95_low'], 3)} – {num(r['ci95_high'], 3)}"
            if r["ci95_low"] is not None
            else "—"
        )
        verdict = f'<span class="{VERDICT_CLASS.get(r["verdict"], "")}">{cell(r["verdict"])}</span>'
        better = "higher" if r["higher_is_better"] else "lower"
        sources = ", ".join(
            [
                link("A", run_link(r["baseline_ids"][0])),
                link("B", run_link(r["candidate_ids"][0])),
            ]
        )
        rows.append(
            [
                cell(r["what"]),
                f"{cell(r['unit'])} ({better} is better)",
                _value(r["baseline_mean"], r),
                _value(r["candidate_mean"], r),
                num(r["ratio"], 3) + "×" if r["ratio"] is not None else "—",
                ci,
                verdict,
                f"{num(r['n_baseline'], 0)} / {num(r['n_candidate'], 0)}",
                sources,
            ]
        )
    return table(headers, rows, ["l", "l", "r", "r", "r", "r", "l", "r", "l"])


def backends_section(docs: list[RunRecord]) -> str:
    """In-process backends beside llama.cpp on the same model file and host ("" when there are none)."""
    groups = backend_cmp.backend_comparisons(docs)
    if not groups:
        return ""
    out = [
        "## In-process backends on the same file",
        "",
        "Each backend that runs the model in the measuring process is set beside llama.cpp (`llama_cpp`) on the "
        "**same GGUF file** and **host**: the ratio is its mean / llama.cpp's with a 95% confidence interval (log "
        "scale, Welch–Satterthwaite) and its verdict (**win**, **loss**, **within noise**). Load time and memory: one "
        "value per fresh process (every configuration of the tests both ran); cold TTFT: `serve` in process (the "
        "load in a fresh process, then its first request), pooled over the runs that send the same request; warm "
        "TTFT and TPOT: the warm requests of `chat` and `serve`; rates and energy: each `rate` test both ran. "
        "A backend that dequantizes the GGUF (transformers) runs other weights in memory than llama.cpp: the "
        "comparison is of the stacks on one file, not of one kernel.",
        "",
    ]
    for g in groups:
        settings = ", ".join(
            f"{k}={v}"
            for k, v in sorted((g.get("candidate_settings") or {}).items())
            if k in ("device", "device_name", "dtype", "attn_implementation", "weights")
        )
        out += [
            f"### {code(g['candidate'])} vs {code(g['baseline'])} · {_model(g)} · {code(g['host'])}",
            "",
            f"Builds: {cell(g['baseline_build'])} against {cell(g['candidate_build'])}"
            + (f"; {cell(settings)}" if settings else "")
            + ". Sources: A = llama.cpp run, B = candidate run.",
            "",
            backend_table(g),
            "",
        ]
    return "\n".join(out)


def _when(created: str, seconds: bool = False) -> str:
    """When a run was made, to the minute (or the second), in UTC."""
    t = datetime.fromisoformat(created)
    fmt = "%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC"
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC).strftime(fmt)


def _shown(v: Any) -> str:
    if v is None:
        return "not recorded"
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return code(text if len(text) <= 80 else text[:79] + "…")


def _set_apart_line(diffs: list, others: int) -> str:
    """What sets one run apart from the ``others`` shown under the same heading (serving.set_apart)."""
    them = "the other run" if others == 1 else f"the {others} other runs"
    if not diffs:
        return f"The same test, settings, build and matrix as {them} under this heading: only when it ran differs."
    there = "the other" if others == 1 else "the others"
    parts = []
    for (what, name), value, values in diffs:
        label = cell(what) + (f" {code(name)}" if name else "")
        parts.append(
            f"{label} = {_shown(value)} ({there}: {'; '.join(_shown(v) for v in values)})"
        )
    return f"Set apart from {them} under this heading by: " + ", ".join(parts) + "."


def comparisons_page(docs: list[RunRecord]) -> str:
    rows = serving.comparisons(docs)
    in_process = backends_section(docs)
    families = "\n".join(engines.comparisons_section(docs))
    if not rows:
        if in_process or families:
            return "\n\n".join(x for x in (families, in_process) if x)
        return admonition(
            "warning",
            "No comparisons yet",
            "A comparison needs an in-process `chat` run and a server run (`chat` or `serve`) that send "
            "the same request on the same host and model: `invoke serve.bench` runs both; or two "
            "in-process backends on the same file (`data/matrices/backends.yaml` and its transformers twin).",
        )
    out = [
        "Each server run is compared with the newest in-process `chat` run that sends the **same request** (messages, "
        "max_tokens, sampling) to the **same model file** on the **same host**. Each side is its configuration's "
        "figure (every run of it, the run as the unit: the same number every page shows for it); the ratio is "
        "server / in-process with a 95% confidence interval (log scale, Welch–Satterthwaite, a single run widened "
        "by the host's run-to-run noise); the verdict is the server's: **win** or **loss** when the whole interval "
        "lies on one side of 1.0, **within noise** when it contains 1.0. For a `serve` run the warm requests are "
        "compared.",
        "",
    ]
    groups = _groups(rows)
    headings = [
        f"{cell(g[0]['endpoint'])} ({code(g[0]['kind'])}) vs in-process · {_model(g[0])} · {code(g[0]['host'])}"
        for g in groups
    ]
    # runs that would read the same under one heading: the heading says when each ran, a first line what
    # else differs (from their artifacts)
    alike: dict[str, list[str]] = {}
    for h, g in zip(headings, groups):
        alike.setdefault(h, []).append(g[0]["candidate_id"])
    by_id = (
        {d.id: d for d in docs} if any(len(ids) > 1 for ids in alike.values()) else {}
    )
    apart: dict[str, list] = {}
    for ids in alike.values():
        if len(ids) > 1:
            apart.update(serving.set_apart([by_id[i] for i in ids]))
    # alike runs made within one minute (a sweep's points) are told apart to the second, and by id beyond that
    created = {g[0]["candidate_id"]: g[0]["candidate_created"] for g in groups}
    stamp: dict[str, str] = {}
    for ids in alike.values():
        minutes = [_when(created[i]) for i in ids]
        precise = len(set(minutes)) < len(minutes)
        texts = [_when(created[i], seconds=precise) for i in ids]
        for i, t in zip(ids, texts):
            stamp[i] = t if texts.count(t) == 1 else f"{t} · {i}"
    for heading, group in zip(headings, groups):
        r = group[0]
        others = len(alike[heading]) - 1
        out += [
            f"## {heading}"
            + (f" · {cell(stamp[r['candidate_id']])}" if others else ""),
            "",
        ]
        if others:
            out += [_set_apart_line(apart[r["candidate_id"]], others), ""]
        out += [
            f"Request {code(r['workload'])}; output tokens per request {num(r['baseline_tokens'], 1)} in process, "
            f"{num(r['candidate_tokens'], 1)} through the server. Sources: "
            f"{link('in-process run', run_link(r['baseline_id']))}, {link('server run', run_link(r['candidate_id']))}.",
            "",
        ]
        reuse = r.get("prefix_reuse")
        if reuse:
            # the server's name as its artifact records it (the hits are counted from that server's own log)
            out += [
                admonition(
                    "note",
                    "Not the same work per request",
                    f"{cell(r['server'] or r['endpoint'])} reused a prompt prefix already in its KV cache in "
                    f"{num(reuse['prefix_match_hits'], 0)} of its {num(reuse['generate_calls'], 0)} generations "
                    "in this run (counted from its log), so those requests skipped most of their prefill; in "
                    "process, every request starts from an empty KV cache. TTFT ratios include that "
                    "difference.",
                ),
                "",
            ]
        out += [comparison_table(group), ""]
    out += [
        charts.embed(
            ratio_chart(rows),
            caption="Server / in-process, per metric; the dashed line is parity.",
        ),
        "",
    ]
    if families:
        out += [families, ""]
    if in_process:
        out += [in_process, ""]
    return "\n".join(out)
