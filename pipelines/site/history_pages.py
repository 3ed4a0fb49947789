"""History, Regressions and Host-vs-host pages: Markdown and chart specs from run records.

Builders only: the numbers come from pipelines.history and pipelines.compare; every value
reaching a page goes through markdown.cell()/num()/code(), every figure links to its
artifact through markdown.run_link, every table through markdown.table().
"""

from __future__ import annotations

import json
from typing import Any

from core import quiet, stats
from core.records.run import RunRecord
from pipelines import compare as cmp
from pipelines import history, hostnames
from pipelines.site import charts
from pipelines.site.markdown import (
    ROOT,
    STALE_BADGE,
    admonition,
    as_text,
    cell,
    code,
    fold,
    link,
    num,
    prose,
    run_link,
    table,
)


def method_text() -> str:
    """The step-detection method, as stated on the Methodology page."""
    return cell(history.METHOD)


def fdr_text() -> str:
    """The false discovery rate over a family of comparisons, as stated on the Methodology page."""
    return cell(stats.FDR_METHOD)


def quiet_text() -> str:
    """The quiet-machine rule (core.quiet), as stated on the Methodology page."""
    return cell(quiet.RULE) + "."


def _settings(req: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
        for k, v in sorted(req.items())
        if v is not None
    )


def history_chart(ser: history.Series) -> dict[str, Any]:
    """One dot per result (mean) with its CI95 rule, over time, coloured by build."""
    values = [
        {
            "created": p.created,
            "mean": p.mean,
            "ci95_low": p.ci95_low,
            "ci95_high": p.ci95_high,
            "n": p.n,
            "stddev": p.stddev,
            "build": p.build_label,
            "id": p.id,
        }
        for p in ser.points
    ]
    return charts.dots_over_time(values, ser.metric, title=ser.label)


def host_cell(labels: dict[str, str] | None, host_id: str) -> str:
    """A host as pages name it: its label (pipelines.hostnames), its id small beside it."""
    from pipelines.site import figures

    label = (labels or {}).get(host_id)
    return (
        f"{figures.host(label, host_id)}<br><small>{code(host_id)}</small>"
        if label and label != host_id
        else figures.host(host_id, host_id, code(host_id))
    )


def _named(labels: dict[str, str] | None, host_id: str) -> str:
    """A host's label inside raw HTML (a fold's summary), marked as host_cell marks it."""
    from pipelines.site import figures

    label = (labels or {}).get(host_id, host_id)
    return figures.host(label, host_id, as_text(label))


def build_value(field: str, v: Any) -> str:
    """A build field's value in a change ("label: ordinary → threads-halved"): never a Python None."""
    if v is None:
        return "ordinary" if field == "label" else "—"
    return str(v)


def _step_rows(
    steps: list[history.Step], from_dir: str = "", labels: dict[str, str] | None = None
) -> list[list[str]]:
    from pipelines.site import figures

    rows = []
    for st in steps:
        s = st.series
        before = ", ".join(
            link(p.id.split("-", 1)[-1], run_link(p.id, from_dir)) for p in st.before
        )
        after = ", ".join(
            link(p.id.split("-", 1)[-1], run_link(p.id, from_dir)) for p in st.after
        )
        change = "; ".join(
            f"{k}: {build_value(k, v[0])} → {build_value(k, v[1])}"
            for k, v in st.build_change.items()
        )
        eff = "; ".join(
            f"{k}: {json.dumps(v[0])} → {json.dumps(v[1])}"
            for k, v in st.settings_change.items()
        )
        ratio = f"{num(st.ratio, 3)} [{num(st.ci95_low, 3)}, {num(st.ci95_high, 3)}]"
        if (
            st.before_figure is not None
            and st.after_figure is not None
            and st.verdict in ("regression", "improvement")
        ):
            ratio = figures.verdict(
                ratio,
                st.before_figure,
                st.after_figure,
                "loss" if st.verdict == "regression" else "win",
            )
        rows.append(
            [
                cell(st.verdict),
                cell(s.model),
                code(s.test),
                f"{num(st.change_pct, 1)}%",
                ratio,
                "—"
                if st.q_value is None
                else (f"{st.q_value:.1e}" if st.q_value < 1e-3 else num(st.q_value, 3)),
                cell(change or "—"),
                cell(eff or "—"),
                code(s.backend),
                host_cell(labels, s.host_id),
                (
                    figures.cell_html(st.before_figure, from_dir=from_dir)
                    if st.before_figure is not None
                    else "—"
                )
                + f"<br>{before}",
                (
                    figures.cell_html(st.after_figure, from_dir=from_dir)
                    if st.after_figure is not None
                    else "—"
                )
                + f"<br>{after}",
            ]
        )
    return rows


STEP_HEADERS = [
    "step",
    "model",
    "test",
    "change",
    "after/before [CI95]",
    "q (false discovery rate)",
    "build change",
    "effective settings change",
    "backend",
    "host",
    "before: the build's figure (CI95, n, runs), its artifacts",
    "after: the build's figure (CI95, n, runs), its artifacts",
]
ALIGN = ["l", "l", "l", "r", "r", "r", "l", "l", "l", "l", "r", "r"]


def _disturbed_note(docs: list[RunRecord]) -> str:
    """How many runs never got a quiet slot (core.quiet) and are left out of every verdict here."""
    from pipelines import facts as facts_mod

    n = len(facts_mod.of(docs).disturbed)
    if not n:
        return ""
    return (
        f" {n} run{'s' if n != 1 else ''} measured without a quiet slot after every attempt "
        "(others' CPU above the quiet-machine rule, Methodology) "
        f"{'are' if n != 1 else 'is'} left out of every figure and verdict."
    )


def _release_changes_tested(
    sers: list[history.Series], labels: dict[str, str]
) -> list[str]:
    """Every tested boundary of the release line, flagged or not, with its verdict in the family (a boundary
    that is no step reads "within noise"): where a real build change was measured and found to change nothing,
    the page says so."""
    from dataclasses import replace

    tested = []
    for s in sers:
        flagged = {id(st) for st in s.steps}
        for st in s.boundaries:
            if st.variant:
                continue
            tested.append(
                st if id(st) in flagged else replace(st, verdict="within noise")
            )
    if not tested:
        return []
    tested.sort(key=lambda st: (st.series.model, st.series.test, st.series.host_id))
    return [
        "## Release build changes tested",
        "",
        (
            f"Every boundary of the release line ({len(tested)}): a configuration measured with one release build "
            "and then with the next, its verdict among all boundaries tested (a boundary that is no step reads "
            "within noise)."
        ),
        "",
        table(STEP_HEADERS, _step_rows(tested, labels=labels), ALIGN),
        "",
    ]


def regressions_page(docs: list[RunRecord]) -> str:
    sers = history.series(docs)
    steps = history.all_steps(sers)
    release = [st for st in steps if not st.variant]
    variants = [st for st in steps if st.variant]
    labels = hostnames.labels(docs)
    n_tested = history.tested(sers)
    out = [
        (
            f"**{n_tested}** boundaries tested (a configuration's build changed, with a figure on both sides), held "
            f"together to a false discovery rate of {stats.FDR_Q:g}: a change is called only if it stands among "
            "all of them. Steps are ranked by size and confidence: the smallest change their interval allows, "
            "largest first." + _disturbed_note(docs)
        ),
        "",
    ]
    found = history.findings(sers)
    if found:
        out += [
            "## Findings by build change",
            "",
            (
                "Flagged boundaries of the release line grouped by build change and test: the same change seen "
                "on many hosts is one finding. The change is the geometric mean over the hosts tested, with a CI95 "
                "from the spread between them (one host: its own interval)."
            ),
            "",
            table(
                [
                    "finding",
                    "test",
                    "change [CI95]",
                    "hosts flagged / tested",
                    "build change",
                ],
                [
                    [
                        cell(f.verdict),
                        code(f.test),
                        history.pct_interval(f.ratio, f.ci95_low, f.ci95_high),
                        f"{f.hosts_flagged} of {f.hosts_tested}",
                        cell(history.change_text(f.change)),
                    ]
                    for f in found
                ],
                ["l", "l", "r", "r", "l"],
                max_rows=None,
            ),
            "",
        ]
    if not release:
        out.append(
            admonition(
                "success",
                "No regression",
                "No configuration changed by more than the noise where its "
                "release build changed.",
            )
        )
    else:
        n_reg = sum(st.verdict == "regression" for st in release)
        out += [
            f"**{n_reg}** regression(s) and **{len(release) - n_reg}** improvement(s) across "
            f"{len({st.series.key for st in release})} configuration(s) where the release build changed. The change "
            "is after ÷ before − 1 on the test's headline metric (a regression is worse whichever direction is "
            "better).",
            "",
            table(
                STEP_HEADERS, _step_rows(release, labels=labels), ALIGN, max_rows=None
            ),
            "",
        ]
    out += _release_changes_tested(sers, labels)
    if variants:
        out += [
            "## Deliberate variants",
            "",
            f"{len(variants)} step(s) into or out of a deliberately changed build (a variant label, e.g. threads "
            "halved to show what a regression looks like): A/B comparisons, not regressions of the release line.",
            "",
            table(
                STEP_HEADERS, _step_rows(variants, labels=labels), ALIGN, max_rows=None
            ),
            "",
        ]
    out += [
        fold(
            "Method",
            prose(history.METHOD) + "\n\n" + prose(stats.FDR_METHOD),
            "almanac-method",
        ),
        "",
    ]
    # each stepped configuration once, in the tables' order: the release line's largest steps first
    stepped = list({st.series.key: st.series for st in release + variants}.values())
    if stepped:
        out += ["## Over time", ""]
        if len(stepped) > STEP_CHARTS:
            out += [
                f"The {STEP_CHARTS} configurations of the largest steps are charted here; the other "
                f"{len(stepped) - STEP_CHARTS:,} are not (a page stays under 1 MB): every result of every "
                "configuration is a row of the [open data](open-data.md)'s index, and each host's runs are in "
                "the [runs browser](runs/index.md).",
                "",
            ]
        charts_md = [
            charts.embed(
                history_chart(s),
                caption=f"{as_text(s.label)}: one dot per artifact (mean) with its CI95, by build.",
            )
            for s in stepped[:STEP_CHARTS]
        ]
        out += ["\n\n".join(charts_md), ""]
    return "\n".join(out)


# configurations charted over time on the Regressions page, those of its largest steps: a chart is ~4 KB, which
# page cuts do not shorten (#30: at 100,000 artifacts, 1,023 stepped configurations charted made a 9.2 MB page)
STEP_CHARTS = 50


def build_to_build_section(
    sers: list[history.Series], labels: dict[str, str]
) -> list[str]:
    """Build to build: per configuration, its earliest release build's figure against its newest, the speed-up
    with its CI95 and verdict (the rows one family at the false discovery rate)."""
    from pipelines.site import figures

    spans = history.build_to_build(sers)
    if not spans:
        return []
    rows = []
    for st in spans:
        s = st.series
        hib = s.metric.higher_is_better
        sp = None if st.ratio is None else (st.ratio if hib else 1.0 / st.ratio)
        lo, hi = st.ci95_low, st.ci95_high
        if not hib and lo and hi:
            lo, hi = 1.0 / hi, 1.0 / lo
        text = f"{num(sp, 3)}× [{num(lo, 3)}, {num(hi, 3)}]"
        if st.verdict != "within noise":
            text = figures.verdict(
                text,
                st.before_figure,
                st.after_figure,
                "loss" if st.verdict == "regression" else "win",
            )
        rows.append(
            [
                cell(s.model),
                code(s.test),
                host_cell(labels, s.host_id),
                cell(st.before[0].build_label),
                figures.cell_html(st.before_figure),
                cell(st.after[0].build_label),
                figures.cell_html(st.after_figure),
                cell(history.change_text(st.build_change) or "—"),
                text,
                cell(st.verdict),
            ]
        )
    return [
        "## Build to build",
        "",
        (
            f"{len(spans)} configuration(s) measured with two or more release builds: the earliest build's figure "
            "against the newest's, the speed-up (newest over earliest, in the better direction: above 1 is "
            f"faster) with its CI95, the rows held together to a false discovery rate of {stats.FDR_Q:g}."
        ),
        "",
        table(
            [
                "model",
                "test",
                "host",
                "earliest build",
                "earliest figure",
                "newest build",
                "newest figure",
                "speed-up [CI95]",
                "verdict",
            ],
            rows,
            ["l", "l", "l", "l", "r", "l", "r", "r", "l"],
            max_rows=None,
        ),  # fmt: skip
        "",
    ]


CHARTED = 100  # configurations charted over time on the History page, the most recently measured first


def history_page(docs: list[RunRecord]) -> str:
    from pipelines import facts as facts_mod
    from pipelines.site import figures

    sers = history.series(docs)
    if not sers:
        return admonition(
            "warning", "No measurements yet", "Run `invoke bench` to add some."
        )
    fx = facts_mod.of(docs)
    out = []
    from pipelines.host_boards import split_settings

    varying, _ = split_settings(
        [s.requested for s in sers]
    )  # only what tells configurations apart
    labels = hostnames.labels(docs)
    rows = []
    for s in sers:
        last = s.points[-1]
        fig = fx.figure_of(last.id)
        rows.append(
            [
                cell(s.model),
                code(s.test),
                code(s.backend),
                host_cell(labels, s.host_id),
                cell(_settings({k: s.requested.get(k) for k in varying}) or "defaults"),
                num(len(s.points), 0),
                num(len(s.builds), 0),
                figures.cell_html(fig, stale=last.stale) if fig is not None else "—",
                cell(s.metric.unit),
                num(len(s.steps), 0),
            ]
        )
    out.append(
        fold(
            f"Every configuration ({len(sers):,}): its current build's figure, how often and with how many builds "
            "it was measured",
            table(
                [
                    "model",
                    "test",
                    "backend",
                    "host",
                    "requested settings (those that differ)",
                    "results",
                    "builds",
                    "current build's figure (CI95, n, runs)",
                    "unit",
                    "steps",
                ],
                rows,
                ["l", "l", "l", "l", "l", "r", "r", "r", "l", "r"],
                max_rows=None,
            ),
            "almanac-fold",
            open=len(sers) <= 30,
        )
    )
    out.append("")
    out += build_to_build_section(sers, labels)
    multi = [s for s in sers if len(s.points) > 1]
    if multi:
        out += [
            "## Over time",
            "",
            f"{len(multi)} configuration(s) measured more than once, the most recently measured "
            "first; each opens to its chart.",
            "",
        ]
        multi = sorted(multi, key=lambda s: s.points[-1].created, reverse=True)
        if len(multi) > CHARTED:
            out += [
                f"The {CHARTED} most recently measured are charted here; the other {len(multi) - CHARTED:,} "
                "are not (a page stays under 1 MB): every result of every configuration is a row of the "
                "[open data](open-data.md)'s index, and each host's runs are in the [runs browser](runs/index.md).",
                "",
            ]
        for s in multi[:CHARTED]:
            out.append(
                fold(
                    "",
                    charts.embed(
                        history_chart(s),
                        caption="One dot per artifact (mean) with its CI95, by build.",
                    ),
                    title_html=f"{as_text(s.model)} · {as_text(s.test)} · {as_text(s.backend)} · "
                    f"{_named(labels, s.host_id)} · "
                    f"{len(s.points):,} results, {len(s.builds):,} build(s)",
                )
            )
    out += [
        "",
        fold(
            "Method",
            prose(history.METHOD)
            + " A result measured with an older build than the newest one on "
            "its host, backend and server software is marked " + STALE_BADGE + ".",
            "almanac-method",
        ),
    ]
    return "\n".join(out)


def compare_table(res: cmp.Result, from_dir: str = "") -> str:
    """A compare result as a site table: values link to their artifacts."""
    hs = cmp.headers(res)
    rows = []
    for r, text in zip(res.rows, cmp.text_rows(res)):
        row = [cell(c) for c in text]
        ia, ib = hs.index("A"), hs.index("B")
        row[ia] = link(text[ia], run_link(r.a_id, from_dir))
        row[ib] = link(text[ib], run_link(r.b_id, from_dir))
        rows.append(row)
    return table(hs, rows, ["r" if h in ("A", "B", "B/A [CI95]") else "l" for h in hs])


FOLD_AFTER = (
    3  # workloads shown open; the others fold (their summary line says who leads)
)


def _ratio_text(st: Any) -> str:
    """A host's ratio to the median host, as `invoke compare` writes a ratio (and the picker shows it)."""
    if st.is_median:
        return "1 (median host)"
    if st.ratio is None:
        return "—"
    if st.ratio_low is None:
        return num(st.ratio, 3) + (
            f" (no interval: {cell(st.verdict_note)})" if st.verdict_note else ""
        )
    return f"{num(st.ratio, 3)} [{num(st.ratio_low, 3)}, {num(st.ratio_high, 3)}]"


def _picker(data: dict[str, Any]) -> str:
    """The two-host picker: an empty container the browser fills (docs/assets/js/fleet.js) and its data as
    inert JSON; one line, so that the build keeps it out of the Markdown parser (markdown.hold_figures)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (
        '<figure class="almanac-figure"><div class="almanac-fleet" id="almanac-fleet" data-spec="almanac-fleet-data" '
        f'data-root="{ROOT}">'
        "<noscript>The picker needs JavaScript; every host against the fleet is in the tables below.</noscript></div>"
        f'<script type="application/json" id="almanac-fleet-data">{safe}</script></figure>'
    )


def host_vs_host_page(docs: list[RunRecord]) -> str:
    """Each host against the fleet on every workload it shares with another host (rank, ratio to the median
    host with CI95, verdict), and a picker that compares any two hosts in the browser from the same data.
    Every figure and rank is the fact layer's, the Leaderboard's. Linear in results and hosts."""
    from pipelines import facts as facts_mod
    from pipelines import host_vs_fleet as hvf
    from pipelines.site import figures

    fx = facts_mod.of(docs)
    recs = [r for r in fx.records if r.ok]
    host_docs = {r.host_id: r.host for r in recs}
    if len(host_docs) < 2:
        return admonition(
            "info", "One host", "Results from at least two hosts are needed."
        )
    wls = hvf.workloads(fx)
    if not wls:
        return admonition(
            "info",
            "Nothing shared",
            "No two hosts ran the same work (model file, test and backend "
            "class), so there is nothing to compare host to host.",
        )
    labels = fx.labels
    sharing = {s.host_id for w in wls for s in w.standings}
    out = [
        f"**{len(sharing):,} of {len(host_docs):,} hosts** share **{len(wls):,} workload(s)** (the same model file, "
        "test and backend class; only the host differs). Pick two hosts to compare them on every workload both "
        "ran; below, each workload ranks every host that ran it against the fleet's median host, with the figures "
        "and ranks of the [Leaderboard](leaderboard.md).",
        "",
        _picker(hvf.picker_data(wls, host_docs, labels)),
        "",
    ]
    alone = sorted(set(host_docs) - sharing)
    if alone:
        out += [
            f"{len(alone):,} host(s) ran nothing another host ran: "
            + ", ".join(host_cell(labels, h) for h in alone)
            + ".",
            "",
        ]
    out += [
        "## Each host against the fleet",
        "",
        "Per workload: every host that ran it, by rank, with its ratio to the workload's median host and whether "
        "that difference is beyond the noise (the method is below the tables).",
        "",
    ]
    for i, w in enumerate(wls):
        m = w.metric
        best = w.standings[0]
        summary = (
            f"{as_text(w.label)} · {len(w.standings):,} hosts · best {_named(labels, best.host_id)} "
            f"{num(best.figure.mean, m.decimals)} {as_text(m.unit)} · median host "
            f"{_named(labels, w.median.host_id)} {num(w.median.figure.mean, m.decimals)} "
            f"{as_text(m.unit)}"
        )
        rows = []
        for st in w.standings:
            verdict = cell(st.verdict)
            if not st.is_median:
                verdict = figures.verdict(
                    verdict, w.median.figure, st.figure, st.verdict
                )
            rows.append(
                [
                    figures.rank(st.standing, w.board.key, w.test),
                    host_cell(labels, st.host_id),
                    figures.cell_html(st.figure),
                    _ratio_text(st),
                    verdict,
                ]
            )
        body = table(
            [
                "rank",
                "host",
                f"{cell(m.label)} ({cell(m.unit)}, {'higher' if m.higher_is_better else 'lower'} is better)",
                "÷ median host [CI95]",
                "verdict vs median host",
            ],
            rows,
            ["r", "l", "r", "r", "l"],
            max_rows=None,
        )
        out += [
            fold(
                "",
                f"Test {code(w.test)} on {cell(w.model)}, {cell(w.board.backend_class)}.\n\n{body}",
                "almanac-workload",
                open=i < FOLD_AFTER,
                title_html=summary,
            ),
            "",
        ]
    out += [fold("Method", prose(hvf.METHOD), "almanac-method"), ""]
    return "\n".join(out)


# -- the stated rules of every verdict (Methodology) -----------------------------------------
def verdict_rules() -> str:
    """How every verdict on the site is reached, from the code's own statements (Methodology page)."""
    from core import stats
    from pipelines import facts, memory, projections, quality, ranking, roles
    from pipelines import noise as noise_mod

    items = [
        "**The run is the unit, one figure per configuration.** Two processes of the same build on a shared machine "
        "differ by more than the repetitions inside one suggest, so every figure on the site (the fact layer: "
        "Home, Leaderboard, per-host boards, Host vs host, History, Regressions, Projections, Roles, What-if, "
        "Serving) and `invoke compare` treat *runs*: "
        + prose(facts.RULE)
        + " The variance of a figure's log is "
        "the host's run-to-run noise for that kind of test over its runs (pooled over every configuration of the "
        "host measured more than once, and its noise A/A: two runs alone say little of their spread); without a "
        "host estimate, the spread between its runs; a single run of a host without one, the fleet's pooled noise "
        "(labelled so). "
        + prose(noise_mod.METHOD)
        + " `invoke noise` measures it with an A/A on a host; the "
        "table below shows what every host has.",
        "**Calibrated.** `benchmarks/aa_calibration.py` runs a small matrix many times under two labels that "
        "change nothing and feeds the runs through the history and `invoke compare`: the false-alarm rate and the "
        "smallest slowdown still detected are in `benchmarks/results/aa_calibration.md`.",
        f"**Intervals stay in their domain.** Fewer than {stats.MIN_INTERVAL_N} samples: no interval. A stored "
        "interval from before this rule is recomputed from its n, mean and stddev when the site is built.",
        "**Percentiles** (p95, p99) carry distribution-free bounds from order statistics (the number of samples "
        "below the true quantile is binomial): a bound that needs more samples than there are is not given, and "
        "the page says how many it needs (a one-sided 95% bound of p99 needs "
        f"{stats.quantile_samples_needed(0.99, 0.95, False)} "
        f"samples, of p95 {stats.quantile_samples_needed(0.95, 0.95, False)}).",
        "**Quality, paired.** " + cell(quality.PAIRED_RULE),
        "**Ranks.** " + cell(ranking.RULE),
        "**Roles, ties.** " + cell(roles.TIE_RULE),
        "**Projections.** " + cell(projections.VERDICT_RULE),
        "**Units.** Memory is in GiB (2^30 bytes), bandwidth in GB/s (10^9 bytes per second). "
        + cell(memory.GPU_UNITS_NOTE),
    ]
    return "\n".join(f"- {x}" for x in items) + "\n\n" + noise_table()


def noise_table() -> str:
    """Every host's run-to-run noise per kind of test, and where it comes from."""
    from pipelines import noise as noise_mod
    from pipelines.runs import load_runs

    table_ = noise_mod.host_noise(list(load_runs()))
    if not table_:
        return "No host has a run-to-run noise estimate yet: run `invoke noise` on it."
    rows = [
        [code(h), code(c), f"{num(100 * n.sigma, 2)}%", num(n.df, 0), cell(n.source)]
        for (h, c), n in sorted(table_.items())
    ]
    return table(
        [
            "host",
            "kind of test",
            "run-to-run noise (log sd of run means)",
            "degrees of freedom",
            "from",
        ],
        rows,
        ["l", "l", "r", "r", "l"],
    )


def ranking_rule() -> str:
    from pipelines import ranking

    return cell(ranking.RULE)
