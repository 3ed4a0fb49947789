"""The Leaderboard (this workload, every machine) and the Home page's fleet summary (issue 19).

Both read pipelines.fleet's workload boards. The Leaderboard shows the reference workload first
(prefill and decode side by side), then every other workload that two or more configurations ran;
workloads measured by one configuration only are listed apart, never as a ranking. Hosts are named
by their label (pipelines.hostnames) with the id beside it, and link to their per-host boards (the
models and settings one host ran: ``boards/<host id>.md``).

Filters run in the browser (docs/assets/js/leaderboard.js, no network): the page carries its
boards' rows as inert JSON (host, backend, model, tests per row), each table row a marker span
that names its board and row by number; nothing from an artifact is read back from the HTML.
"""

from __future__ import annotations

import json
import math
from typing import Any

import altair as alt
import pandas as pd

from core.metrics import METRICS
from pipelines import fleet, ranking
from pipelines.runs import records
from pipelines.site import charts
from pipelines.site.history_pages import STALE_BADGE
from pipelines.site.markdown import (SYNTHETIC_BADGE, admonition, as_text, cell, code, endpoint_badge, fold, link, num,
                                     run_link, table)

PREFILL, DECODE = fleet.PAIRED
TEST_WORDS = {PREFILL: "prefill", DECODE: "decode"}
DATA_ID = "almanac-fleet-data"


def _rule() -> str:
    return getattr(ranking, "SHORT_RULE", "results whose CI95 overlap share a rank (marked =N); no interval, no rank (—)")


def host_page(host_id: str) -> str:
    """Where a host's own boards are (its models and settings)."""
    return f"boards/{host_id if host_id != 'index' else '_index'}.md"


def _host_cell(row: fleet.Row, b: int, r: int) -> str:
    marker = f'<span class="almanac-r" data-b="{b}" data-r="{r}"></span>'
    return marker + link(row.host_label, host_page(row.host_id)) + "<br>" + code(row.host_id)


def _setting(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def _ci_text(c: fleet.Cell, decimals: int) -> str:
    if c.ci95_low is None or c.ci95_high is None:
        return "no CI95" + (f" ({cell(c.note)})" if c.note else "")
    return f"{num(c.ci95_low, decimals)} – {num(c.ci95_high, decimals)}"


def _value_cell(c: fleet.Cell | None, decimals: int) -> str:
    if c is None:
        return "—"
    runs = f" · {c.runs} runs" if c.runs > 1 else ""
    return (link(num(c.mean, decimals), run_link(c.id)) + (" " + STALE_BADGE if c.stale else "")
            + f'<br><span class="almanac-ci">{_ci_text(c, decimals)} · n {c.n}{runs}</span>')


def _energy_cell(c: fleet.Cell | None, m: Any) -> str:
    """Energy per token of a row's newest run on a test, with its CI95; "not measured" where that run
    recorded none (the host has no energy meter it could read, or the run predates metering)."""
    if c is None:
        return "—"
    s = c.energy.get(m.name)
    if s is None or s.mean is None:
        return "not measured"
    ci = (f'<br><span class="almanac-ci">{num(s.ci95_low, m.decimals)} – {num(s.ci95_high, m.decimals)} · n {s.n}</span>'
          if s.ci95_low is not None and s.ci95_high is not None else f'<br><span class="almanac-ci">n {s.n}</span>')
    return link(num(s.mean, m.decimals), run_link(c.id)) + ci


def _work_text(work_test: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_setting(v)}" for k, v in sorted(work_test.items()) if k != "kind")


def _method_text(row: fleet.Row) -> str:
    parts = []
    for t, c in row.cells.items():
        m = c.method
        if m.get("precision"):
            p = m["precision"]
            parts.append(f"{t}: to ±{100 * float(p.get('target', 0)):g}%")
        elif m.get("repetitions"):
            parts.append(f"{t}: -r {m['repetitions']}")
    return "; ".join(dict.fromkeys(parts)) or "—"


def board_markdown(board: fleet.WorkloadBoard, bi: int, folded: bool = False) -> str:
    """One workload's board (a ranking: two or more rows); ``folded``: inside a closed <details>."""
    tests = board.tests
    paired = tests == [PREFILL, DECODE]
    title = f"{cell(board.model)} · {' + '.join(cell(t) for t in tests)}"
    size = f"{len(board.rows)} configurations on {len(board.hosts)} host(s)"
    out = [f'<span id="w-{board.key}"></span>', ""] if folded else [f"### {title} {{#w-{board.key}}}", ""]
    facts = (f"**Model:** {cell(board.model)}" + (" " + SYNTHETIC_BADGE if board.synthetic else "")
             + (" " + endpoint_badge(board.endpoint) if board.endpoint is not None else "")
             + (f" ({cell(board.quantization)})" if board.quantization else "")
             + f" · **Work:** {cell(board.kind)}, " + "; ".join(
                 f"{cell(t)}: {cell(_work_text(board.work_tests[t]))}" for t in tests)
             + f" · **Backend class:** {cell(board.backend_class)} · {size}."
             + (" Ranked by " + "; ".join(f"{cell(TEST_WORDS.get(t, t))}: {cell(board.metrics[t].label)} "
                                           f"({'higher' if board.metrics[t].higher_is_better else 'lower'} is better)"
                                           for t in tests)
                + f"; rows follow the {cell(TEST_WORDS.get(tests[-1], tests[-1]))} rank."))
    out += [facts, ""]
    headers = (["host", "backend"] + (["build"] if board.build_varies else []) + [code(k) for k in board.varying]
               + [code(k) + (" (asked)" if k in board.varying else "") for k in board.asked])
    energy = [(t, METRICS[m]) for t in tests for m in board.energy.get(t, [])]
    for t in tests:
        m = board.metrics[t]
        headers += [f"{cell(TEST_WORDS.get(t, t))} {code(t)} ({cell(m.unit)})", "#"]
    headers += [f"{cell(e.label)} {code(t)} ({cell(e.unit)})" for t, e in energy]
    headers.append("method")
    rows = []
    for ri, row in enumerate(board.rows):
        line = [_host_cell(row, bi, ri), code(row.backend)] + ([cell(row.build)] if board.build_varies else [])
        line += [cell(_setting(row.environment.get(k))) for k in board.varying]
        line += [cell(_setting(row.requested[k])) if k in row.requested else "default" for k in board.asked]
        for t in tests:
            c = row.cells.get(t)
            line += [_value_cell(c, board.metrics[t].decimals), cell(c.rank_label) if c else "—"]
        line += [_energy_cell(row.cells.get(t), e) for t, e in energy]
        line.append(cell(_method_text(row)))
        rows.append(line)
    align = (["l", "l"] + ["l"] * (int(board.build_varies) + len(board.varying) + len(board.asked))
             + ["r", "r"] * len(tests) + ["r"] * len(energy) + ["l"])
    out += ['<div class="almanac-table-wrap" markdown="1">', "", table(headers, rows, align, max_rows=None), "", "</div>", ""]
    if paired and len(board.rows) > 1 and not folded:
        out += [reference_chart(board), ""]
    if folded:
        out = [fold(f"{board.model} · {' + '.join(tests)} · {size}", "\n".join(out), "almanac-fold")]
    return "\n".join([f'<div class="almanac-board" data-b="{bi}" markdown="1">', "", *out, "</div>", ""])


def _singles_table(singles: list[tuple[int, fleet.WorkloadBoard]]) -> str:
    rows = []
    for bi, b in singles:
        row = b.rows[0]
        for t in b.tests:
            c = row.cells.get(t)
            if c is None:
                continue
            m = b.metrics[t]
            rows.append([_host_cell(row, bi, 0), cell(b.model) + (" " + SYNTHETIC_BADGE if b.synthetic else "")
                         + (" " + endpoint_badge(b.endpoint) if b.endpoint is not None else ""),
                         code(t), code(row.backend), cell(m.label), _value_cell(c, m.decimals) + " " + cell(m.unit)])
    return table(["host", "model", "test", "backend", "metric", "value"], rows, ["l", "l", "l", "l", "l", "r"],
                 max_rows=None)


def _filters(boards: list[fleet.WorkloadBoard]) -> str:
    hosts = sorted({(r.host_label, r.host_id) for b in boards for r in b.rows})
    models = sorted({b.model for b in boards})
    backends = sorted({r.backend for b in boards for r in b.rows})
    tests = sorted({t for b in boards for t in b.tests})

    def select(name: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = "".join(f'<option value="{as_text(v)}">{as_text(text)}</option>' for text, v in options)
        return (f'<label>{label} <select data-filter="{name}"><option value="">all</option>{opts}</select></label>')

    return ('<div class="almanac-filters" id="almanac-fleet-filters">'
            + select("host", "Host", [(f"{lab} ({hid})", hid) for lab, hid in hosts])
            + select("model", "Model", [(m, m) for m in models])
            + select("backend", "Backend", [(b, b) for b in backends])
            + select("test", "Test", [(t, t) for t in tests])
            + '<button type="button" class="md-button" data-filter-reset>Show all</button>'
            + '<span class="almanac-count" data-filter-count></span></div>'
            + '<p class="almanac-nomatch" hidden>No board matches this selection: '
            + "no result of the chosen host, model, backend and test.</p>")


def _data_blob(boards: list[fleet.WorkloadBoard]) -> str:
    data = [{"model": b.model, "tests": b.tests, "rows": [{"host": r.host_id, "backend": r.backend} for r in b.rows]}
            for b in boards]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{DATA_ID}">{safe}</script>'


def leaderboard_page(docs: list[Any]) -> str:
    """This workload, every machine: the reference workload first, then every shared workload."""
    all_boards = fleet.boards(records(docs))
    if not all_boards:
        return admonition("info", "No results yet", "Run `invoke all` to measure this host.")
    ranked = [(i, b) for i, b in enumerate(all_boards) if not b.single]
    singles = [(i, b) for i, b in enumerate(all_boards) if b.single]
    out = [_filters(all_boards), _data_blob(all_boards), "",
           f"**How to read a board.** Each test column is ranked on its own: {cell(_rule())}. A figure is the "
           "configuration's value with the run as the unit (its CI95 below it, then n, the samples behind it); "
           "each figure links to its newest artifact.", ""]
    ref = [(i, b) for i, b in ranked if b.reference]
    out += ["## Reference workload", "",
            "The workload every host runs (`data/matrices/reference.yaml`, `invoke all`): llama-bench's "
            f"{code(PREFILL)} (prefill) and {code(DECODE)} (decode) on the same model files (by sha256). A row is "
            "one host and backend as configured; what the host's environment made of it (threads, layers offloaded, "
            "flash attention as resolved, ...) is a column where rows differ, and so is every setting asked for that "
            "differs between rows (as asked; *default* where a row left it to the backend), so no two rows read "
            "alike. How precisely each row was measured is its method. Neither keeps hosts apart: the work is the "
            "same. Energy per token is a column where a row on the board recorded it (NVML on a GPU, RAPL on a CPU "
            "where exposed); *not measured* where the host had no meter to read.", ""]
    if ref:
        out += [board_markdown(b, i) for i, b in ref]
    else:
        out += ["No reference workload has been measured on two configurations yet.", ""]
    other = [(i, b) for i, b in ranked if not b.reference]
    if other:
        fold = bool(ref)  # the reference boards answer first; the others open on demand
        out += ["## Every shared workload", "",
                f"{len(other)} {'more ' if ref else ''}workloads ran on two or more configurations (hosts, backends or "
                "settings)" + ("; open one to see its board." if fold else "."), ""]
        out += [board_markdown(b, i, folded=fold) for i, b in other]
    if singles:
        out += ["## Measured on one configuration only", "",
                '<div class="almanac-board almanac-singles" markdown="1">', "",
                f"{len(singles)} workloads have a single result: nothing to rank them against yet. The host's own "
                "boards (click its name) set them beside its other models and settings.", "",
                _singles_table(singles), "", "</div>", ""]
    return "\n".join(out)


# -- the reference chart and sentences (Home) ----------------------------------------------
def _chart_label(board: fleet.WorkloadBoard, row: fleet.Row) -> str:
    """A host's label, with the backend where the board holds more than one."""
    return row.host_label + (f" · {row.backend}" if len(board.backends) > 1 else "")


def _panel(t: str) -> str:
    return f"{TEST_WORDS.get(t, t)} ({t})"


CHART_HOSTS = 40  # rows a reference chart draws at most (30 px each); the board below it lists every host


def chart_sample(board: fleet.WorkloadBoard) -> list[fleet.Row]:
    """The board's rows the chart draws: all of them up to CHART_HOSTS, else CHART_HOSTS spread evenly
    over the board's order (the first and the last included), so the chart shows the fleet's range at a
    readable height and the page stays small at hundreds of hosts."""
    rows = list(board.rows)
    if len(rows) <= CHART_HOSTS:
        return rows
    k = CHART_HOSTS
    picks = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)})
    return [rows[i] for i in picks]


def _chart_rows(board: fleet.WorkloadBoard, shown: list[fleet.Row]) -> list[dict[str, Any]]:
    from pipelines import dataset

    json_of = dataset.published_json()
    rows = []
    for row in shown:
        for t in board.tests:
            c = row.cells.get(t)
            if c is None:
                continue
            rows.append({"host": _chart_label(board, row), "panel": _panel(t), "mean": c.mean, "ci95_low": c.ci95_low,
                         "ci95_high": c.ci95_high, "n": c.n, "id": c.id, "json": json_of.get(c.id, "")})
    return rows


def reference_chart(board: fleet.WorkloadBoard) -> str:
    """Decode and prefill of one reference model on every host: dots at the mean with CI95 rules,
    log scale (a GPU and a 2-core VM differ a hundredfold), one panel per test."""
    shown = chart_sample(board)
    rows = _chart_rows(board, shown)
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    unit = board.metrics[board.tests[-1]].unit
    order = [_chart_label(board, r) for r in shown]
    panels = []
    for t in reversed(board.tests):  # decode first: the figure readers look for
        sub = df[df["panel"] == _panel(t)]
        if sub.empty:
            continue
        base = alt.Chart(sub).encode(y=alt.Y("host:N", sort=list(dict.fromkeys(order)), title=None,
                                             axis=alt.Axis(labelLimit=220)))
        axis = (f"{TEST_WORDS.get(t, t)} {t}", unit)
        dots = base.mark_point(filled=True, size=80, color=charts.ACCENT).encode(
            x=charts.qx("mean", *axis, log=True), href=alt.Href("json:N"),
            tooltip=[alt.Tooltip("host:N"), alt.Tooltip("panel:N", title="test"), alt.Tooltip("mean:Q", format=",.1f"),
                     alt.Tooltip("ci95_low:Q", format=",.1f"), alt.Tooltip("ci95_high:Q", format=",.1f"),
                     alt.Tooltip("n:Q"), alt.Tooltip("id:N", title="artifact")])
        rule = base.mark_rule(color=charts.INK).encode(x=charts.qx("ci95_low", *axis, log=True), x2="ci95_high:Q")
        panels.append((rule + dots).properties(width="container", height=max(60, 30 * sub["host"].nunique()),
                                               title=f"{TEST_WORDS.get(t, t)} ({t})"))
    every = len(shown) == len(board.rows)
    chart = alt.vconcat(*panels).properties(title=f"{board.model}: " + ("every host" if every else
                                                                         f"{len(shown)} of {len(board.rows)} hosts"))
    sample = "" if every else (f" {len(shown)} of the board's {len(board.rows)} rows, evenly spaced in its order (the "
                               "first and the last included); the board lists every host.")
    return charts.embed(chart, caption=f"{as_text(board.model)}: decode and prefill per host (mean, CI95 bar; log "
                                       "scale); click a dot for its artifact's JSON." + sample)


def _fmt_ratio(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "?"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 10 else f"{x:,.2f}"


def headline_sentences(board: fleet.WorkloadBoard) -> list[str]:
    """For each test of the board: the fastest host against the slowest, as a ratio with its CI95.
    Only llama.cpp rows on different hosts are set against each other (one backend: the machine is
    what differs)."""
    out = []
    backends = [r.backend for r in board.rows]
    main = min(set(backends), key=lambda b: (-backends.count(b), b))  # the backend most hosts ran
    for t in reversed(board.tests):
        have = [r for r in board.rows if t in r.cells and r.cells[t].mean and r.backend == main]
        if len({r.host_id for r in have}) < 2:
            continue
        m = board.metrics[t]
        best = max(have, key=lambda r: r.cells[t].mean if m.higher_is_better else -r.cells[t].mean)
        worst = min(have, key=lambda r: r.cells[t].mean if m.higher_is_better else -r.cells[t].mean)
        if best.host_id == worst.host_id:
            continue
        sp = fleet.speedup(board, t, best, worst)
        if sp is None:
            continue
        verb = "decodes" if t == DECODE else "prefills" if t == PREFILL else f"runs {t}"
        if sp.ci95_low is not None:
            ci = f"[{_fmt_ratio(sp.ci95_low)}, {_fmt_ratio(sp.ci95_high)}] CI95"
        else:
            lacking = next(r for r in (best, worst) if r.cells[t].ci95_low is None)
            ci = f"no CI95: the {cell(lacking.host_label)} figure has none ({cell(lacking.cells[t].note or 'no interval')})"
        out.append(f"The **{cell(best.host_label)}** {verb} {cell(board.model)} **{_fmt_ratio(sp.ratio)}×** "
                   f"{'faster' if m.higher_is_better else 'sooner'} than the {cell(worst.host_label)} ({ci}; "
                   f"{num(best.cells[t].mean, m.decimals)} vs {num(worst.cells[t].mean, m.decimals)} {cell(m.unit)}, "
                   f"[{cell(best.cells[t].id[:12])}]({run_link(best.cells[t].id)}) vs "
                   f"[{cell(worst.cells[t].id[:12])}]({run_link(worst.cells[t].id)})).")
    return out


def home_reference(docs: list[Any]) -> str:
    """The Home page's answer: the reference chart and its sentences (the largest reference board)."""
    refs = [b for b in fleet.reference_boards(records(docs)) if not b.single and b.tests == [PREFILL, DECODE]]
    if not refs:
        return ("No reference workload measured on two hosts yet: `invoke all` measures it here "
                "([Leaderboard](leaderboard.md) shows what there is).")
    board = max(refs, key=lambda b: (len(b.hosts), b.synthetic, b.model))
    sentences = headline_sentences(board)
    parts = ["\n\n".join(sentences), "", reference_chart(board), "",
             f"Every reference model and every other workload: [Leaderboard](leaderboard.md#w-{board.key})."]
    return "\n".join(p for p in parts if p is not None)


def hosts_last_measured(docs: list[Any]) -> str:
    """When each host last measured, newest first, with what is stale there."""
    from pipelines import history, hostnames

    recs = records(docs)
    labels = hostnames.labels(recs)
    newest: dict[str, Any] = {}
    count: dict[str, int] = {}
    for r in recs:
        count[r.host_id] = count.get(r.host_id, 0) + 1
        if r.host_id not in newest or (r.created, r.id) > (newest[r.host_id].created, newest[r.host_id].id):
            newest[r.host_id] = r
    from pipelines.runs import latest_per_key

    stale = history.stale_ids([r for r in recs if r.ok])
    stale_count: dict[str, int] = {}
    for r in latest_per_key(recs):  # the current results (older ones are history, not stale)
        if r.id in stale:
            stale_count[r.host_id] = stale_count.get(r.host_id, 0) + 1
    rows = []
    for hid, r in sorted(newest.items(), key=lambda kv: kv[1].created, reverse=True):
        rows.append([link(labels.get(hid, hid), host_page(hid)) + "<br>" + code(hid),
                     cell(r.created[:16].replace("T", " ")), num(count[hid], 0),
                     (num(stale_count[hid], 0) + " " + STALE_BADGE) if stale_count.get(hid) else "0"])
    return table(["host", "last measured (UTC)", "artifacts", "stale results"], rows, ["l", "l", "r", "r"],
                 downloads=False)


def home(docs: list[Any]) -> str:
    """What a reader wants in ten seconds: the reference workload across hosts (a chart and its
    sentences with CI95), the newest regressions, what is stale, when each host last measured."""
    from pipelines.runs import last_updated, latest_per_key
    from pipelines.site import pages
    from pipelines.site.corpus import corpus_section

    if not docs:
        return admonition("warning", "No data yet", "Run `invoke all` to measure the embedded model on this host.")
    recs = records(docs)
    latest = latest_per_key(recs)
    ok = sum(1 for d in latest if d.ok)
    return "\n".join([
        "## The reference workload, every host", "",
        home_reference(recs), "",
        "## Newest regressions", "",
        pages.newest_regressions(recs), "",
        corpus_section(recs),
        "## Hosts: when each last measured, what is stale", "",
        f"A current result is {STALE_BADGE} when its host has measured with a newer build since (on the same backend): "
        "it shows an older release than the host now runs.", "",
        hosts_last_measured(recs), "",
        f"**Last measured:** {cell(last_updated(recs))}. **Artifacts:** {len(recs):,} on disk, {len(latest):,} current "
        f"configurations ({ok:,} measured, {len(latest) - ok:,} failed): browse them in [Runs](runs/index.md), "
        "download them from [Open data](open-data.md).",
    ])
