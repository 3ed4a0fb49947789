"""Home: the answer first.

For every reference workload (a reference model's prefill and decode), the fastest host and the
runner-up with the ratio between them and its interval, then *this host* (the one that built the
site) with its rank and interval, at two significant figures; the score per host beside the rates;
the reference chart; the newest regressions; when each host last measured. Every figure, rank and
ratio is the fact layer's (pipelines.facts): the Leaderboard shows the same ones.
"""

from __future__ import annotations

from typing import Any

from core.records.run import RunRecord
from pipelines import facts as facts_mod
from pipelines.facts import Board, Facts
from pipelines.site import figures
from pipelines.site.leaderboard_page import (
    TEST_WORDS,
    THIS_HOST_BADGE,
    host_page,
    narrow,
    reference_chart,
)
from pipelines.site.markdown import (
    admonition,
    cell,
    code,
    link,
    num,
    run_link,
    table,
)

TOO_WIDE = 1.25  # an interval reaching further than ×1.25 each way cannot place a host among others


def _host(fx: Facts, host_id: str, this_host: str | None) -> str:
    mine = " " + THIS_HOST_BADGE if host_id == this_host else ""
    label = fx.labels.get(host_id, host_id)
    return figures.host(label, host_id, link(label, host_page(host_id))) + mine


def _figure(fig: facts_mod.Figure) -> str:
    unit = cell(fig.metric.unit)
    ci = (
        f" [{figures.sig(fig.ci95_low)}, {figures.sig(fig.ci95_high)}]"
        if fig.has_interval
        else " (no CI95)"
    )
    badges = figures.flags(fig)
    return (
        figures.value(fig, digits=2) + f" {unit}{ci}" + (" " + badges if badges else "")
    )


def _verdict_words(v: str) -> str:
    return {
        "win": "told apart",
        "loss": "told apart",
        "within noise": "within noise: not told apart",
    }.get(v, v)


def answer_rows(fx: Facts, this_host: str | None) -> list[list[str]]:
    """One row per reference workload and test: fastest, runner-up, their ratio, this host."""
    rows = []
    for b in fx.reference_boards:
        if b.single:
            continue
        for t in reversed(b.tests):  # decode first
            st = b.standings.get(t) or []
            if not st:
                continue
            m = b.metrics[t]
            what = link(
                f"{b.model} · {TEST_WORDS.get(t, t)} {t}", f"leaderboard.md#w-{b.key}"
            )
            first = st[0]
            second = st[1] if len(st) > 1 else None
            ratio = "—"
            if second is not None:
                c = fx.compare(second.figure, first.figure)
                if c.ratio is not None:
                    r = c.ratio if m.higher_is_better else 1.0 / c.ratio
                    lo, hi = (
                        (c.ci95_low, c.ci95_high)
                        if m.higher_is_better
                        else (
                            (1 / c.ci95_high, 1 / c.ci95_low)
                            if c.ci95_low and c.ci95_high
                            else (None, None)
                        )
                    )
                    digits = figures.ratio_digits(lo, hi, c.verdict)
                    ratio = figures.verdict(
                        figures.ratio_text(r, lo, hi, digits),
                        second.figure,
                        first.figure,
                        c.verdict,
                    )
                    ratio += "<br>" + cell(_verdict_words(c.verdict))
            mine = "—"
            if this_host is not None and this_host in fx.labels:
                mst = b.standing(t, this_host)
                if mst is None:
                    mine = figures.missing(
                        f"{b.model} {t} on this host",
                        "tasks.md",
                        work=b.work_keys[t],
                        host=this_host,
                    )
                else:
                    mine = (
                        f"rank {figures.rank(mst, b.key, t)} of {len(st)}<br>"
                        + _figure(mst.figure)
                        + _width_note(mst.figure)
                    )
            row = [
                what,
                narrow("fastest: ")
                + _host(fx, first.host_id, this_host)
                + f" {figures.rank(first, b.key, t, '#')}<br>"
                + _figure(first.figure),
                (
                    narrow("runner-up: ")
                    + _host(fx, second.host_id, this_host)
                    + f" {figures.rank(second, b.key, t, '#')}<br>"
                    + _figure(second.figure)
                )
                if second is not None
                else "—",
                narrow("fastest ÷ runner-up: ") + ratio,
            ]
            rows.append(
                row
                + (
                    [narrow("this host: ") + mine]
                    if this_host is not None and this_host in fx.labels
                    else []
                )
            )
    return rows


def _width_note(fig: facts_mod.Figure) -> str:
    w = fig.half_width_factor
    if w is None:
        return "<br><small>" + cell(f"no interval: {fig.note}") + "</small>"
    if w > TOO_WIDE:
        return (
            "<br><small>"
            + cell(
                f"too noisy to place among hosts: the interval reaches ×{w:.2f} each way "
                f"(more than ×{TOO_WIDE}); {fig.note}. `invoke noise` measures this host's noise "
                "with more runs"
            )
            + "</small>"
        )
    return (
        "<br><small>"
        + cell(f"interval ×{w:.2f} each way ({figures.basis(fig)})")
        + "</small>"
    )


def scores_table(fx: Facts, board: Board, this_host: str | None) -> str:
    sc = facts_mod.scores(board)
    if not sc:
        return ""
    rows = []
    for s in sc:
        ci = (
            f"{figures.sig(s.ci95_low)} – {figures.sig(s.ci95_high)}"
            if s.ci95_low is not None
            else "no CI95"
        )
        rows.append(
            [
                cell(s.rank_label),
                _host(fx, s.host_id, this_host),
                f'<span class="almanac-fact" data-fact="{s.key}" data-v="{s.value!r}">{figures.sig(s.value)}</span>',
                ci,
                figures.value(s.prefill, digits=2),
                figures.value(s.decode, digits=2),
                figures.sig(s.ttft_ms),
            ]
        )
    return table(
        [
            "#",
            "host",
            "score",
            "CI95",
            "prefill pp512 (t/s)",
            "decode tg128 (t/s)",
            "TTFT of 512 tokens (ms)",
        ],
        rows,
        ["r", "l", "r", "r", "r", "r", "r"],
        max_rows=None,
    )


def home_page(
    fx: Facts, this_host: str | None, *, regressions: str, hosts_table: str, totals: str
) -> str:
    if not fx.records:
        return admonition(
            "warning",
            "No data yet",
            "Run `invoke all` to measure the embedded model on this host.",
        )
    rows = answer_rows(fx, this_host)
    out = [
        "## Every reference workload: the fastest host, the runner-up, this host",
        "",
    ]
    if rows:
        mine = len(rows[0]) == 5
        out += [
            '<div class="almanac-cards" markdown="1">',
            "",
            table(
                ["workload", "fastest", "runner-up", "fastest ÷ runner-up [CI95]"]
                + (["this host"] if mine else []),
                rows,
                ["l", "l", "l", "r"] + (["l"] if mine else []),
                max_rows=None,
            ),
            "",
            "</div>",
            "",
        ]
    else:
        out += [
            "No reference workload measured on two hosts yet: `invoke all` measures it here "
            "([Leaderboard](leaderboard.md) shows what there is).",
            "",
        ]
    out += [_this_host_line(fx, this_host), ""]
    refs = [
        b
        for b in fx.reference_boards
        if not b.single and b.tests == list(facts_mod.PAIRED)
    ]
    if refs:
        board = max(refs, key=lambda b: (len(b.hosts), b.synthetic, b.model))
        out += [
            f"### One number per host: {cell(board.model)}",
            "",
            "The score sets each host's prefill, decode and time to first token in one figure, beside the rates it "
            "comes from, never instead of them (its formula is below the table).",
            "",
            scores_table(fx, board, this_host),
            "",
            figures_rule_fold(),
            "",
            reference_chart(board),
            "",
            f"Every reference model and every other workload: [Leaderboard](leaderboard.md#w-{board.key}).",
            "",
        ]
    out += [
        "## Newest regressions",
        "",
        regressions,
        "",
        "## Hosts: when each last measured, what is stale",
        "",
        hosts_table,
        "",
        totals,
    ]
    return "\n".join(out)


def figures_rule_fold() -> str:
    from pipelines.site.markdown import fold

    return fold(
        "How these figures are made",
        "\n\n".join(
            [
                cell(facts_mod.RULE),
                cell(facts_mod.REPRESENTATIVE_RULE),
                "**Score.** " + cell(facts_mod.SCORE_RULE),
                "**Ratios** are fastest ÷ runner-up with the run as the unit (the two "
                "figures' variances of the log added, "
                "Welch-Satterthwaite degrees of freedom); *within noise* when the interval contains 1.",
            ]
        ),
        "almanac-method",
    )


def _this_host_line(fx: Facts, this_host: str | None) -> str:
    if this_host is None:
        return ""
    label = fx.labels.get(this_host)
    if label is None:
        return (
            f"**This host** ({code(this_host)}, the one that built this site) has no measurement here yet: "
            "`invoke all` measures it."
        )
    n = sum(1 for r in fx.records if r.host_id == this_host)
    return (
        f"**This host** is {link(label, host_page(this_host))} ({code(this_host)}, the one that built this site): "
        f"{num(n, 0)} artifacts."
    )


def hosts_last_measured(fx: Facts, this_host: str | None) -> str:
    """When each host last measured, newest first, with what is stale there."""
    from pipelines import history
    from pipelines.runs import latest_per_key
    from pipelines.site.history_pages import STALE_BADGE

    recs = fx.records
    newest: dict[str, Any] = {}
    count: dict[str, int] = {}
    for r in recs:
        count[r.host_id] = count.get(r.host_id, 0) + 1
        if r.host_id not in newest or (r.created, r.id) > (
            newest[r.host_id].created,
            newest[r.host_id].id,
        ):
            newest[r.host_id] = r
    stale = history.stale_ids([r for r in recs if r.ok])
    stale_count: dict[str, int] = {}
    for r in latest_per_key(
        recs
    ):  # the current results (older ones are history, not stale)
        if r.id in stale:
            stale_count[r.host_id] = stale_count.get(r.host_id, 0) + 1
    rows = []
    for hid, r in sorted(newest.items(), key=lambda kv: kv[1].created, reverse=True):
        rows.append(
            [
                _host(fx, hid, this_host),
                cell(r.created[:16].replace("T", " ")),
                num(count[hid], 0),
                (num(stale_count[hid], 0) + " " + STALE_BADGE)
                if stale_count.get(hid)
                else "0",
            ]
        )
    return (
        f"A current result is {STALE_BADGE} when its host has measured with a newer build since (on the same "
        "backend): it shows an older release than the host now runs.\n\n"
        + table(
            ["host", "last measured (UTC)", "artifacts", "stale results"],
            rows,
            ["l", "l", "r", "r"],
            downloads=False,
            max_rows=None,
        )
    )


def totals(fx: Facts) -> str:
    from pipelines.runs import last_updated, latest_per_key

    recs = fx.records
    latest = latest_per_key(recs)
    ok = sum(1 for d in latest if d.ok)
    return (
        f"**Last measured:** {cell(last_updated(recs))}. **Artifacts:** {len(recs):,} on disk, {len(latest):,} "
        f"current configurations ({ok:,} measured, {len(latest) - ok:,} failed): browse them in "
        "[Runs](runs/index.md), download them from [Open data](open-data.md)."
    )


def home(fx: Facts, this_host: str | None) -> str:
    """The Home page's data part (docs/index.md)."""
    from pipelines.site.corpus import corpus_section

    if not fx.records:
        return admonition(
            "warning",
            "No data yet",
            "Run `invoke all` to measure the embedded model on this host.",
        )
    return home_page(
        fx,
        this_host,
        regressions=newest_regressions(fx.records)
        + "\n\n"
        + corpus_section(fx.records),
        hosts_table=hosts_last_measured(fx, this_host),
        totals=totals(fx),
    )


HOME_REGRESSIONS = (
    5  # newest regressions on the home page (all on the Regressions page)
)


def newest_regressions(docs: list[RunRecord], limit: int = HOME_REGRESSIONS) -> str:
    from pipelines import history, hostnames
    from pipelines.site.history_pages import build_value, host_cell

    steps = [
        st
        for st in history.all_steps(history.series(docs))
        if st.verdict == "regression" and not st.variant
    ][:limit]
    labels = hostnames.labels(docs)
    if not steps:
        return (
            "No regression detected (see [Regressions](regressions.md) for the method)."
        )
    rows = []
    for st in steps:
        s = st.series
        change = "; ".join(
            f"{k}: {build_value(k, v[0])} → {build_value(k, v[1])}"
            for k, v in st.build_change.items()
        )
        rows.append(
            [
                cell(st.after[0].created[:10]),
                cell(s.model),
                code(s.test),
                host_cell(labels, s.host_id),
                link(f"{num(st.change_pct, 1)}%", run_link(st.after[0].id)),
                f"{num(st.ci95_low, 3)} – {num(st.ci95_high, 3)}",
                cell(change or "—"),
            ]
        )
    return (
        table(
            [
                "measured",
                "model",
                "test",
                "host",
                "change",
                "after/before CI95",
                "build change",
            ],
            rows,
            ["l", "l", "l", "l", "r", "r", "l"],
            downloads=False,
        )
        + "\n\nAll of them, with the method: [Regressions](regressions.md)."
    )
