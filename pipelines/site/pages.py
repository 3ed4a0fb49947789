"""Page bodies for the foundation pages: Home, Leaderboard, Runs, Methodology.

Each function takes loaded artifacts and returns Markdown; the macros module only calls them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd

from runtime import backends, stats
from runtime.metrics import HEADLINE_BY_KIND, METRICS
from runtime.workloads import TEST_KINDS

from .. import leaderboard
from ..runs import latest_per_key, last_updated
from . import charts
from .history_pages import STALE_BADGE
from .markdown import (OUTLIER_BADGE, SYNTHETIC_BADGE, admonition, cell, code, link, nbytes, num, pre, run_link, table)


def _ci(lo: Any, hi: Any, decimals: int) -> str:
    if lo is None or hi is None or (isinstance(lo, float) and pd.isna(lo)):
        return "—"
    return f"{num(lo, decimals)} – {num(hi, decimals)}"


def _val(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else v


def hosts_table(docs: list[dict[str, Any]]) -> str:
    hosts: dict[str, dict[str, Any]] = {}
    counts: Counter[str] = Counter()
    for d in docs:
        hosts[d["host"]["id"]] = d["host"]
        counts[d["host"]["id"]] += 1
    rows = []
    for hid, h in sorted(hosts.items()):
        gpus = ", ".join(g["name"] for g in h.get("gpus", [])) or "none"
        rows.append([code(hid), cell(h["cpu"]["model"]),
                     cell(f'{h["cpu"]["physical_cores"]} / {h["cpu"]["logical_cores"]}'),
                     nbytes(h["memory_bytes"]), cell(gpus), cell(" ".join(h["cpu"].get("flags", []))), num(counts[hid], 0)])
    return table(["host", "CPU", "cores (phys / logical)", "RAM", "GPUs", "CPU flags", "runs"], rows,
                 ["l", "l", "r", "r", "l", "l", "r"])


def home(docs: list[dict[str, Any]]) -> str:
    if not docs:
        return admonition("warning", "No data yet", "Run `invoke all` to measure the embedded model on this host.")
    latest = latest_per_key(docs)
    ok = sum(1 for d in latest if d["status"] == "ok")
    failed = len(latest) - ok
    models = sorted({d["model"]["name"] for d in latest})
    tests = sorted({d["test"]["name"] for d in latest})
    parts = [
        f"**Last updated:** {cell(last_updated(docs))} (newest artifact)  ",
        f"**Artifacts:** {len(docs)} on disk, {len(latest)} current configurations "
        f"({ok} measured, {failed} failed)  ",
        f"**Models:** {', '.join(cell(m) for m in models)}  ",
        f"**Tests:** {', '.join(code(t) for t in tests)}",
        "",
        "## Hosts",
        "",
        hosts_table(latest),
    ]
    return "\n".join(parts)


def _setting(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def _definition(defn: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_setting(v)}" for k, v in sorted(defn.items()) if k not in ("name", "kind"))


def leaderboard_page(docs: list[Any]) -> str:
    boards = leaderboard.boards(docs)
    if not boards:
        return admonition("warning", "No measurements yet", "Run `invoke bench` to add some.")
    # boards that share a heading (same test name, host, backend) differ in their test definition: say how
    same_title: dict[tuple[str, str, str], int] = Counter((b.test, b.host_id, b.backend) for b in boards)
    out: list[str] = []
    for b in boards:
        m = b.metric
        title = f"## {cell(b.test)} on {code(b.host_id)} · {code(b.backend)}"
        if same_title[(b.test, b.host_id, b.backend)] > 1:
            title += f" · {code(b.key[:8])}"
        out.append(title + "\n")
        out.append(f"Ranked by **{cell(m.label)}** ({cell(m.unit)}, {'higher' if m.higher_is_better else 'lower'} is better; "
                   f"{cell(m.aggregation)}) with CI95: results whose intervals overlap share a rank, marked "
                   f"**=**; a result with fewer than two samples has no interval and no rank (—). "
                   f"Each figure links to the artifact it comes from.\n")
        facts = [f"**Test:** {code(b.test_kind)} {cell(_definition(b.definition))}"]
        if not b.build_varies:
            facts.append(f"**Backend build:** {cell(b.builds[0])}")
        if b.constant:
            facts.append("**Settings on every row:** " + cell(", ".join(f"{k}={_setting(v)}" for k, v in sorted(b.constant.items()))))
        out.append("  \n".join(facts) + "\n")
        recs = leaderboard.board_records(b)
        build_cols = ["backend build"] if b.build_varies else []
        headers = (["#", "model", "quant"] + build_cols + [code(k) for k in b.varying]
                   + [f"{cell(m.label)} ({cell(m.unit)})", "± stddev", "n", "CI95", "source"])
        rows = []
        chart_rows = []
        for r in recs:
            label = r["model"] + ("" if not b.varying else " · " + ", ".join(f"{k}={_setting(r['settings'][k])}" for k in b.varying))
            if b.build_varies:
                label += f" · {r['backend_build']}"
            rows.append([cell(r["rank_label"]), cell(r["model"]) + (" " + SYNTHETIC_BADGE if r["synthetic"] else ""),
                         cell(r["quantization"])] + ([cell(r["backend_build"])] if b.build_varies else [])
                        + [cell(_setting(r["settings"][k])) for k in b.varying] + [
                         link(num(r["mean"], m.decimals), run_link(r["id"])) + (" " + STALE_BADGE if r["stale"] else ""),
                         num(_val(r["stddev"]), m.decimals),
                         num(r["n"], 0), _ci(_val(r["ci95_low"]), _val(r["ci95_high"]), m.decimals),
                         link(r["id"], run_link(r["id"]))])
            chart_rows.append({"label": f"{r['rank_label']} {label}" + (" [synthetic]" if r["synthetic"] else ""),
                               "mean": r["mean"], "stddev": _val(r["stddev"]), "n": r["n"],
                               "ci95_low": _val(r["ci95_low"]), "ci95_high": _val(r["ci95_high"]), "id": r["id"]})
        out.append(table(headers, rows, ["r", "l", "l"] + ["l"] * (len(build_cols) + len(b.varying)) + ["r", "r", "r", "r", "l"]))
        out.append("")
        if len(chart_rows) > 1:
            chart = charts.dots_with_ci(pd.DataFrame(chart_rows), m, title=f"{b.test} on {b.host_id} ({b.backend})")
            out.append(charts.embed(chart, caption=f"{cell(m.label)}: one dot per artifact (mean) with its CI95."))
            out.append("")
    return "\n".join(out)


def runs_index(docs: list[dict[str, Any]]) -> str:
    rows = []
    for d in sorted(docs, key=lambda d: (d["created"], d["id"]), reverse=True):
        headline = HEADLINE_BY_KIND.get(d["test"]["kind"])
        s = d["summary"].get(headline) if headline else None
        value = "—"
        if s and s.get("mean") is not None:
            value = f"{num(s['mean'], METRICS[headline].decimals)} {cell(METRICS[headline].unit)}"
        status = "ok" if d["status"] == "ok" else f"failed: {cell((d.get('error') or {}).get('kind'))}"
        rows.append([link(d["id"], f"{d['id']}.md"), cell(d["created"]), code(d["host"]["id"]), cell(d["model"]["name"]),
                     code(d["test"]["name"]), cell(status), value])
    return table(["artifact", "created", "host", "model", "test", "status", "headline"], rows)


def _kv_table(d: dict[str, Any]) -> str:
    rows = [[code(k), cell(json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)] for k, v in sorted(d.items())]
    return table(["field", "value"], rows) if rows else "—"


def _robust(name: str, s: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The summary with its robust fields; an artifact written before they existed gets them from
    its raw rate samples where it has them (tokens per second of a rate test)."""
    if "outliers" in s or name != "tokens_per_second":
        return s
    ts = (doc.get("samples") or {}).get("ts")
    return {**s, **{k: v for k, v in stats.summarize(ts).items() if k not in s}} if ts else s


def _flags(s: dict[str, Any]) -> str:
    """Outliers (flagged, kept) and a drift that says the warm-up was not enough."""
    parts = []
    if s.get("outliers"):
        parts.append(f"{OUTLIER_BADGE} sample{'s' if len(s['outliers']) > 1 else ''} "
                     + ", ".join(f"#{i + 1}" for i in s["outliers"]) + " (kept)")
    t = s.get("trend") or {}
    if t.get("monotonic"):
        parts.append(f"drift across repetitions (Kendall τ {num(t['tau'], 2)}, p {num(t['p_value'], 3)}): warm-up not enough?")
    elif t.get("first_sample_outlier"):
        parts.append("first sample apart: warm-up not enough?")
    return "; ".join(parts)


def precision_line(prec: dict[str, Any]) -> str:
    """How repetition stopped: the target, the half-width reached, met or not, why."""
    if prec.get("target_rel") is None:
        return f"Repetitions: a fixed count ({num(prec.get('n'), 0)})."
    hw = prec.get("half_width_rel")
    met = "met" if prec.get("met") else "**not met**"
    why = {"target_met": "the target was met", "max_repetitions": "the count ceiling was hit",
           "max_time_s": "the time ceiling was hit"}.get(prec.get("stop_reason"), cell(prec.get("stop_reason")))
    return (f"Precision: target CI95 half-width ±{num(prec['target_rel'] * 100, 1)}% of the mean of "
            f"{code(prec.get('metric'))}; reached ±{num(hw * 100 if hw is not None else None, 2)}% with "
            f"{num(prec.get('n'), 0)} samples ({met}); stopped because {why}.")


def run_page(doc: dict[str, Any]) -> str:
    """Everything one artifact holds: provenance, settings, samples, summary, log."""
    title = f"{doc['model']['name']} · {doc['test']['name']} · {doc['host']['id']}"
    out = [f"# {cell(title)}", ""]
    if doc["model"]["synthetic"]:
        out += [SYNTHETIC_BADGE, ""]
    status = doc["status"]
    out.append(f"**Artifact** {code(doc['id'])} · **status** {cell(status)} · **created** {cell(doc['created'])} · "
               f"**matrix** {cell(doc['matrix']['name'])} ({code(doc['matrix']['file'])}) · **file** {code(doc.get('_path', ''))}")
    out.append("")
    if doc.get("error"):
        e = doc["error"]
        out.append(admonition("failure", f"Failed: {e.get('kind')}", cell(e.get("message"))))
    if doc["summary"]:
        out += ["## Summary", ""]
        rows = []
        for name, s in sorted(doc["summary"].items()):
            m = METRICS.get(name)
            dec = m.decimals if m else 2
            unit = m.unit if m else ""
            if m and m.unit == "bytes":
                rows.append([cell(m.label), nbytes(s["mean"]), "—", num(s["n"], 0), "—", "—", "—", "—", "—", ""])
                continue
            s = _robust(name, s, doc)
            rows.append([cell(m.label if m else name) + f" ({cell(unit)})", num(s["mean"], dec), num(s["stddev"], dec),
                         num(s["n"], 0), _ci(s["ci95_low"], s["ci95_high"], dec), num(s["median"], dec),
                         _ci(s.get("median_ci95_low"), s.get("median_ci95_high"), dec),
                         num(s["p95"], dec), num(s["p99"], dec), _flags(s)])
        out.append(table(["metric", "mean", "stddev", "n", "CI95", "median", "median CI95", "p95", "p99", "flags"], rows,
                         ["l", "r", "r", "r", "r", "r", "r", "r", "r", "l"]))
        out.append("")
        prec = (doc.get("details") or {}).get("precision")
        if prec:
            out.append(precision_line(prec))
            out.append("")
    out += ["## Test", "", _kv_table(doc["test"]), ""]
    out += ["## Settings", "", "What was asked (defaults included) and what really ran (read back from the "
            "backend and its log).", "", "### Requested", "", _kv_table(doc["settings"]["requested"]), "",
            "### Effective", "", _kv_table(doc["settings"]["effective"]), ""]
    model = {k: v for k, v in doc["model"].items() if k not in ("gguf", "metadata")}
    out += ["## Model", "", _kv_table(model), "", "### GGUF facts", "", _kv_table(doc["model"]["gguf"]), ""]
    h = dict(doc["host"])
    out += ["## Host", "", _kv_table(h), "", "## Build", "", _kv_table(doc["build"]), ""]
    out += ["## Resources", "", _kv_table(doc["resources"]), ""]
    out += ["## Raw samples", "", pre(json.dumps(doc["samples"], indent=1, sort_keys=True)[:200000]), ""]
    if doc.get("details"):
        out += ["## Details", "", pre(json.dumps(doc["details"], indent=1, sort_keys=True)[:100000]), ""]
    out += ["## Log (tail)", "", pre(doc.get("log_tail") or ""), ""]
    return "\n".join(out)


def metric_definitions() -> str:
    rows = [[code(m.name), cell(m.label), cell(m.unit), "higher" if m.higher_is_better else "lower", cell(m.aggregation),
             cell(", ".join(m.test_kinds)), cell(m.description)] for m in METRICS.values()]
    return table(["metric", "label", "unit", "better", "aggregation", "tests", "definition"], rows)


def test_kinds() -> str:
    rows = []
    for kind, cls in TEST_KINDS.items():
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        fields = ", ".join(code(f) for f in cls.model_fields if f != "kind")
        rows.append([code(kind), cell(doc), fields])
    return table(["kind", "what it measures", "fields"], rows)


def settings_table(backend: str) -> str:
    cls = backends.settings_class(backend)
    rows = [[code(r["name"]), cell(r["type"]), code(json.dumps(r["default"])) if r["default"] is not None else "null",
             cell(r["help"])] for r in cls.option_table()]
    return table(["setting", "type", "default", "meaning"], rows)
