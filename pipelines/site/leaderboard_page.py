"""The Leaderboard page: this workload, every machine — the boards first.

Every figure, rank and score is the fact layer's (pipelines.facts): the same value, interval and
rank as on Home, Host vs host, History and the planning pages. A board is one workload (prefill
pp512 and decode tg128 side by side for a model) with a row per host: its representative
configuration's figures and ranks first, in the first columns, then the score; what the host ran
(backend, build, settings as resolved, method) folds into the row's *setup*. A host's other
configurations follow its row, unranked. The reference workload comes first; every other shared
workload folds; workloads measured by one configuration only are listed apart, never as a ranking.

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

from core.metrics import ENERGY_METRICS, METRICS
from pipelines import facts as facts_mod
from pipelines import placement as placement_mod
from pipelines import ranking
from pipelines.facts import PAIRED, Board, Facts, Row
from pipelines.host_boards import build_labels, environment_of
from pipelines.site import charts, figures
from pipelines.site.markdown import (
    SYNTHETIC_BADGE,
    admonition,
    as_text,
    cell,
    code,
    endpoint_badge,
    fold,
    link,
    num,
    run_link,
    table,
)

PREFILL, DECODE = PAIRED
TEST_WORDS = {PREFILL: "prefill", DECODE: "decode"}
DATA_ID = "almanac-fleet-data"
THIS_HOST_BADGE = '<span class="almanac-badge verified" title="the host that built this site">this host</span>'


def host_page(host_id: str) -> str:
    """Where a host's own boards are (its models and settings)."""
    from pipelines.site.per_host import page_file

    return page_file("boards", host_id)


def _setting(v: Any) -> str:
    """A setting's value as written in a row's setup: a string as it is, anything else as JSON (the
    common scalars written as json.dumps writes them, without its encoder: 330,000 values at 10k)."""
    if isinstance(v, str):
        return v
    if v is None or v is True or v is False:
        return "null" if v is None else "true" if v else "false"
    if type(v) is int or (type(v) is float and math.isfinite(v)):
        return repr(v)
    return json.dumps(v, sort_keys=True)


def _method_text(row: Row) -> str:
    parts = []
    for t, g in row.groups.items():
        m = g.newest.method
        target = (m.get("precision") or {}).get("target")
        if target:
            parts.append(f"{t}: to ±{100 * float(target):g}%")
        elif m.get("repetitions"):
            parts.append(f"{t}: -r {m['repetitions']}")
    return "; ".join(dict.fromkeys(parts)) or "—"


def setup_text(row: Row, build: str | None = None) -> str:
    """What a row ran, in words: backend, build (``build``: the board's words for it, naming what tells it
    apart from a build that reads alike), settings as resolved (those not sized by the test), the settings
    asked for, the method. Folded into the row (a <details> in its last cell)."""
    g = row.any
    env = ", ".join(
        f"{k}={_setting(v)}" for k, v in sorted(g.environment.items()) if v is not None
    )
    asked = ", ".join(f"{k}={_setting(v)}" for k, v in sorted(g.requested.items()))
    parts = [
        f"host id {g.host_id}",
        f"backend {g.backend}",
        f"build {build or g.build}",
    ]
    if g.variant:
        parts.append(f"variant build {g.variant}")
    parts += [
        f"settings as resolved: {env or 'defaults'}",
        f"asked: {asked or 'defaults'}",
        f"method: {_method_text(row)}",
    ]
    return "; ".join(parts)


def _setup_cell(row: Row, build: str | None = None) -> str:
    return f'<details class="almanac-setup"><summary>▸ setup</summary>{as_text(setup_text(row, build))}</details>'


def _host_cell(
    label: str,
    host_id: str,
    bi: int,
    ri: int,
    *,
    backend: str,
    this_host: str | None,
    other: bool = False,
) -> str:
    # the row's host and backend ride on its marker (the filters read them there): the page carries only the
    # rows it shows, never a second list of every row (#30: that list grew with hosts x boards, 452 KB at 10k)
    attrs = (
        f'data-b="{bi}" data-r="{ri}" data-h="{as_text(host_id)}" '
        f'data-k="{as_text(backend)}"'
    )
    if other:
        return f'<span class="almanac-r" {attrs}></span>↳ ' + cell(
            "another configuration"
        )
    mine = " " + THIS_HOST_BADGE if host_id == this_host else ""
    # the host's name inside its row's marker, which is then also its host mark (pipelines.site.figures.host;
    # the check reads data-h), rather than a second span beside it: a fleet's boards have thousands of rows
    return (
        f'<span class="almanac-r almanac-host" {attrs}>'
        + link(label, host_page(host_id))
        + "</span>"
        + mine
    )


def _rank_mark(board: Board, test: str, row: Row, host_id: str) -> str:
    """The host's rank on this test where this row stands for the host ("#1 "), else nothing."""
    st = board.standing(test, host_id)
    if st is None or st.row is not row:
        return ""
    return (
        '<span class="almanac-rankmark">'
        + figures.rank(st, board.key, test, "#")
        + "</span> "
    )


def _score_cell(sc: facts_mod.Score | None) -> str:
    if sc is None:
        return "—"
    ci = (
        f"{figures.sig(sc.ci95_low, 3)} – {figures.sig(sc.ci95_high, 3)}"
        if sc.ci95_low is not None
        else "no CI95"
    )
    return (
        f'<span class="almanac-fact" data-fact="{as_text(sc.key)}" '
        f'data-v="{sc.value!r}">{figures.sig(sc.value, 3)}</span>'
        f' <small>({cell(sc.rank_label)})</small><br><span class="almanac-ci">{ci}</span>'
    )


def narrow(label: str) -> str:
    """A cell's column name, shown only where a board is narrower than its table (a phone: each row a card);
    drawn by CSS from the attribute, so the cell's text (and its CSV) stays the figure."""
    return f'<span class="almanac-narrow" data-label="{as_text(label)}"></span>'


def board_markdown(
    board: Board,
    bi: int,
    *,
    this_host: str | None = None,
    folded: bool = False,
    chart: bool = True,
) -> str:
    """One workload's board: a row per host (its representative configuration), its other configurations
    under it; prefill and decode first, then ranks and the score; the setup folded."""
    tests = board.tests
    scores = {s.host_id: s for s in facts_mod.scores(board)}
    title = f"{cell(board.model)} · {' + '.join(cell(t) for t in tests)}"
    size = f"{len(board.hosts)} host(s), {len(board.rows)} configuration(s)"
    badges = (" " + SYNTHETIC_BADGE if board.synthetic else "") + (
        " " + endpoint_badge(board.endpoint) if board.endpoint is not None else ""
    )
    out = (
        [f'<span id="w-{board.key}"></span>', ""]
        if folded
        else [f"### {title} {{#w-{board.key}}}", ""]
    )
    out += [
        f"{cell(board.model)}{badges}"
        + (f" ({cell(board.quantization)})" if board.quantization else "")
        + f" · {size} · ranked on "
        + "; ".join(
            f"{cell(TEST_WORDS.get(t, t))}: {cell(board.metrics[t].label)} "
            f"({'higher' if board.metrics[t].higher_is_better else 'lower'} is better)"
            for t in tests
        )
        + ". Rows follow the "
        + cell(TEST_WORDS.get(tests[-1], tests[-1]))
        + " rank.",
        "",
    ]
    # how each row placed its model (GPUs used, split, link, NUMA): shown where a row records it
    places = {r.key: placement_mod.text(r.any.newest) for r in board.rows}
    show_place = any(places.values())
    headers = ["host"] + (["placement"] if show_place else [])
    for t in tests:
        m = board.metrics[t]
        headers += [f"{cell(TEST_WORDS.get(t, t))} {code(t)} ({cell(m.unit)}) · rank"]
    if scores:
        headers.append("score")
    energy = energy_columns(board)
    headers += [f"{cell(e.label)} {code(t)} ({cell(e.unit)})" for t, e in energy]
    builds = dict(
        zip(
            [r.key for r in board.rows],
            build_labels(
                [(r.any.build, environment_of(r.any.newest)) for r in board.rows]
            ),
        )
    )
    rows = []
    ri = 0
    for hr in board.hosts_rows:
        for j, row in enumerate(hr.rows):
            line = [
                _host_cell(
                    hr.host_label,
                    hr.host_id,
                    bi,
                    ri,
                    backend=row.any.backend,
                    this_host=this_host,
                    other=j > 0,
                )
                + "<br>"
                + _setup_cell(row, builds[row.key])
            ]
            if show_place:
                line.append(narrow("placement: ") + cell(places[row.key] or "—"))
            for t in tests:
                f = row.figure(t)
                label = narrow(
                    f"{TEST_WORDS.get(t, t)} {t} ({board.metrics[t].unit}): "
                )
                line.append(
                    label
                    + (
                        _rank_mark(board, t, row, hr.host_id) + figures.cell_html(f)
                        if f is not None
                        else "—"
                    )
                )
            if scores:
                line.append(
                    narrow("score: ")
                    + (_score_cell(scores.get(hr.host_id)) if j == 0 else "·")
                )
            line += [_energy_cell(row, t, e) for t, e in energy]
            rows.append(line)
            ri += 1
    align = (
        ["l"]
        + (["l"] if show_place else [])
        + ["r"] * len(tests)
        + (["r"] if scores else [])
        + ["r"] * len(energy)
    )
    out += [
        '<div class="almanac-table-wrap" markdown="1">',
        "",
        table(headers, rows, align, max_rows=None),
        "",
        "</div>",
        "",
    ]
    if chart and board.tests == list(PAIRED) and len(board.hosts) > 1 and not folded:
        out += [reference_chart(board), ""]
    if folded:
        out = [
            fold(
                f"{board.model} · {' + '.join(tests)} · {size}",
                "\n".join(out),
                "almanac-fold",
            )
        ]
    return "\n".join(
        [
            f'<div class="almanac-board almanac-cards" data-b="{bi}" markdown="1">',
            "",
            *out,
            "</div>",
            "",
        ]
    )


def energy_columns(board: Board) -> list[tuple[str, Any]]:
    """(test, metric) of every energy per token some row of the board recorded (NVML on a GPU, RAPL on a CPU
    where exposed): a column each, "not measured" where a row's host had no meter to read."""
    out = []
    for t in board.tests:
        for name in ENERGY_METRICS:
            if any(_energy_stat(r, t, name) is not None for r in board.rows):
                out.append((t, METRICS[name]))
    return out


def _energy_stat(row: Row, test: str, metric: str) -> Any:
    g = row.groups.get(test)
    s = g.newest.stat(metric) if g is not None else None
    return s if s is not None and s.mean is not None else None


def _energy_cell(row: Row, test: str, m: Any) -> str:
    """Energy per token of the row's newest run on a test, with its CI95 and n."""
    if test not in row.groups:
        return "—"
    s = _energy_stat(row, test, m.name)
    if s is None:
        return "not measured"
    ci = (
        f'<br><span class="almanac-ci">{num(s.ci95_low, m.decimals)} – {num(s.ci95_high, m.decimals)} · n {s.n}</span>'
        if s.ci95_low is not None and s.ci95_high is not None
        else f'<br><span class="almanac-ci">n {s.n}</span>'
    )
    return (
        narrow(f"{m.label} {test} ({m.unit}): ")
        + link(num(s.mean, m.decimals), run_link(row.groups[test].newest.id))
        + ci
    )


def _singles_table(singles: list[tuple[int, Board]], this_host: str | None) -> str:
    rows = []
    for bi, b in singles:
        hr = b.hosts_rows[0]
        row = hr.representative
        for t in b.tests:
            f = row.figure(t)
            if f is None:
                continue
            m = b.metrics[t]
            rows.append(
                [
                    _host_cell(
                        hr.host_label,
                        hr.host_id,
                        bi,
                        0,
                        backend=b.rows[0].any.backend,
                        this_host=this_host,
                    ),
                    cell(b.model)
                    + (" " + SYNTHETIC_BADGE if b.synthetic else "")
                    + (
                        " " + endpoint_badge(b.endpoint)
                        if b.endpoint is not None
                        else ""
                    ),
                    code(t),
                    code(row.any.backend),
                    cell(m.label),
                    figures.cell_html(f) + " " + cell(m.unit),
                ]
            )
    return table(
        ["host", "model", "test", "backend", "metric", "value"],
        rows,
        ["l", "l", "l", "l", "l", "r"],
        max_rows=None,
    )


def _filters(boards: list[Board]) -> str:
    hosts = sorted({(hr.host_label, hr.host_id) for b in boards for hr in b.hosts_rows})
    models = sorted({b.model for b in boards})
    backends = sorted({r.any.backend for b in boards for r in b.rows})
    tests = sorted({t for b in boards for t in b.tests})

    def select(name: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = "".join(
            f'<option value="{as_text(v)}">{as_text(text)}</option>'
            for text, v in options
        )
        return f'<label>{label} <select data-filter="{name}"><option value="">all</option>{opts}</select></label>'

    return (
        '<div class="almanac-filters" id="almanac-fleet-filters">'
        + select("host", "Host", [(f"{lab} ({hid})", hid) for lab, hid in hosts])
        + select("model", "Model", [(m, m) for m in models])
        + select("backend", "Backend", [(b, b) for b in backends])
        + select("test", "Test", [(t, t) for t in tests])
        + '<button type="button" class="md-button" data-filter-reset>Show all</button>'
        + '<span class="almanac-count" data-filter-count></span></div>'
        + '<p class="almanac-nomatch" hidden>No board matches this selection: '
        + "no result of the chosen host, model, backend and test.</p>"
    )


def _data_blob(boards: list[Board]) -> str:
    data = [{"model": b.model, "tests": b.tests} for b in boards]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{DATA_ID}">{safe}</script>'


def how_to_read() -> str:
    return fold(
        "How to read a board",
        "\n\n".join(
            [
                "**Figures.** "
                + cell(facts_mod.RULE)
                + " Below each figure: its CI95, n (the samples behind it) and what the "
                "interval rests on; a badge marks a run that missed its precision target or "
                "drifted across its repetitions. "
                "Each figure links to its newest artifact.",
                "**Ranks (#).** " + cell(ranking.RULE),
                "**Rows.** " + cell(facts_mod.REPRESENTATIVE_RULE),
                "**Score.** " + cell(facts_mod.SCORE_RULE),
                "**Setup.** What the row ran: backend and build, the settings as the host "
                "resolved them, those asked for, and "
                "the method (how precisely it was measured). Neither keeps hosts apart on a "
                "board: the work is the same.",
            ]
        ),
        "almanac-method",
    )


def leaderboard_page(fx: Facts, this_host: str | None = None) -> str:
    """This workload, every machine: the reference workload first, then every shared workload."""
    all_boards = fx.boards
    if not all_boards:
        return admonition(
            "info", "No results yet", "Run `invoke all` to measure this host."
        )
    ranked = [(i, b) for i, b in enumerate(all_boards) if not b.single]
    singles = [(i, b) for i, b in enumerate(all_boards) if b.single]
    out = [_data_blob(all_boards), ""]
    ref = [(i, b) for i, b in ranked if b.reference]
    out += ["## Reference workload", ""]
    if ref:
        out += [board_markdown(b, i, this_host=this_host) for i, b in ref]
    else:
        out += [
            "No reference workload has been measured on two configurations yet: `invoke all` measures it.",
            "",
        ]
    out += [how_to_read(), ""]
    other = [(i, b) for i, b in ranked if not b.reference]
    out += ["## Every shared workload", "", _filters(all_boards), ""]
    if other:
        fold_others = bool(
            ref
        )  # the reference boards answer first; without them the shared boards are the answer
        out += [
            f"{len(other)} {'more ' if ref else ''}workloads ran on two or more configurations (hosts, backends or "
            "settings)" + ("; open one to see its board." if fold_others else "."),
            "",
        ]
        out += [
            board_markdown(b, i, this_host=this_host, folded=fold_others)
            for i, b in other
        ]
    else:
        out += ["No other workload ran on two configurations.", ""]
    if singles:
        out += [
            "## Measured on one configuration only",
            "",
            '<div class="almanac-board almanac-singles" markdown="1">',
            "",
            fold(
                f"{len(singles)} workloads with a single result (nothing to rank them against yet)",
                "The host's own boards (click its name) set them beside its other models and settings.\n\n"
                + _singles_table(singles, this_host),
                "almanac-fold",
            ),
            "",
            "</div>",
            "",
        ]
    return "\n".join(out)


# -- the reference chart -----------------------------------------------------------------------
CHART_HOSTS = 40  # hosts a reference chart draws at most (30 px each); the board above it lists every host


def chart_sample(board: Board) -> list[str]:
    """The hosts the chart draws, in the board's order: all of them up to CHART_HOSTS, else CHART_HOSTS
    spread evenly over the order (the first and the last included)."""
    from pipelines.site.downsample import evenly

    return evenly([hr.host_id for hr in board.hosts_rows], CHART_HOSTS)


def reference_chart(board: Board) -> str:
    """Decode and prefill of one reference model on every host: dots at each host's figure with its CI95
    as a rule, log scale (a GPU and a 2-core VM differ a hundredfold), one panel per test."""
    from pipelines import dataset

    json_of = dataset.published_json()
    shown = chart_sample(board)
    labels = {hr.host_id: hr.host_label for hr in board.hosts_rows}
    rows = []
    for t in board.tests:
        for h in shown:
            st = board.standing(t, h)
            if st is None:
                continue
            f = st.figure
            rows.append(
                {
                    "host": labels[h],
                    "panel": f"{TEST_WORDS.get(t, t)} ({t})",
                    "mean": f.mean,
                    "ci95_low": f.ci95_low if f.ci95_low is not None else f.mean,
                    "ci95_high": f.ci95_high if f.ci95_high is not None else f.mean,
                    "n": f.n,
                    "rank": st.rank_label,
                    "id": f.newest_id,
                    "json": json_of.get(f.newest_id, ""),
                }
            )
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    order = [labels[h] for h in shown]
    panels = []
    for t in reversed(board.tests):  # decode first: the figure readers look for
        panel = f"{TEST_WORDS.get(t, t)} ({t})"
        sub = df[df["panel"] == panel]
        if sub.empty:
            continue
        axis = (f"{TEST_WORDS.get(t, t)} {t}", board.metrics[t].unit)
        base = alt.Chart(sub).encode(
            y=alt.Y("host:N", sort=order, title=None, axis=alt.Axis(labelLimit=160))
        )
        rule = base.mark_rule(color=charts.INK).encode(
            x=charts.qx("ci95_low", *axis, log=True), x2="ci95_high:Q"
        )
        dots = base.mark_point(filled=True, size=80, color=charts.ACCENT).encode(
            x=charts.qx("mean", *axis, log=True),
            href=alt.Href("json:N"),
            tooltip=[
                alt.Tooltip("host:N"),
                alt.Tooltip("panel:N", title="test"),
                alt.Tooltip("mean:Q", format=",.1f"),
                alt.Tooltip("ci95_low:Q", format=",.1f"),
                alt.Tooltip("ci95_high:Q", format=",.1f"),
                alt.Tooltip("rank:N"),
                alt.Tooltip("n:Q"),
                alt.Tooltip("id:N", title="artifact"),
            ],
        )
        panels.append(
            (rule + dots).properties(
                width="container",
                height=max(60, 30 * sub["host"].nunique()),
                title=panel,
            )
        )
    every = len(shown) == len(board.hosts_rows)
    chart = alt.vconcat(*panels).properties(
        title=f"{board.model}: "
        + ("every host" if every else f"{len(shown)} of {len(board.hosts_rows)} hosts")
    )
    sample = (
        ""
        if every
        else (
            f" {len(shown)} of the board's {len(board.hosts_rows)} hosts, evenly spaced in its order "
            "(the first and the last included); the board lists every host."
        )
    )
    return charts.embed(
        chart,
        caption=f"{as_text(board.model)}: decode and prefill per host (each host's figure, CI95 "
        "bar; log scale); click a dot for its artifact's JSON." + sample,
    )
