"""How a figure of the fact layer (pipelines.facts) reaches a page: one renderer for every page.

Every figure carries its identity in the HTML (``data-fact``: its group and metric; ``data-v``: its
value at full precision), every rank its board and host (``data-rank``), every verdict the two
figures it compares (``data-verdict``), every host name its host (``almanac-host``): the site-wide consistency check
(pipelines.site.consistency) reads them back from the built pages and proves that one figure reads
the same wherever it appears, that no rank contradicts a verdict and that a host has one name.
"""

from __future__ import annotations

from pipelines.facts import BASIS_FLEET, BASIS_HOST, BASIS_NONE, Figure, Standing
from pipelines.site.markdown import STALE_BADGE, as_text, cell, link, num, run_link
from pipelines.site.sigfig import sig as sig  # re-exported: the pages call figures.sig

FLAG_BADGE = '<span class="almanac-badge stale" title="{title}">{text}</span>'


def _attrs(fig: Figure) -> str:
    return f'data-fact="{as_text(fig.key)}" data-v="{fig.mean!r}"'


def value(
    fig: Figure,
    *,
    from_dir: str = "",
    decimals: int | None = None,
    digits: int | None = None,
    linked: bool = True,
) -> str:
    """The figure's value, marked with its identity, linked to its newest artifact. ``digits``:
    significant figures (Home) instead of the metric's decimals."""
    d = fig.metric.decimals if decimals is None else decimals
    text = sig(fig.mean, digits) if digits else num(fig.mean, d)
    inner = link(text, run_link(fig.newest_id, from_dir)) if linked else cell(text)
    return f'<span class="almanac-fact" {_attrs(fig)}>{inner}</span>'


def interval(
    fig: Figure, *, decimals: int | None = None, digits: int | None = None
) -> str:
    """The figure's CI95 as "low – high", or "no CI95" and why."""
    d = fig.metric.decimals if decimals is None else decimals
    if not fig.has_interval:
        return "no CI95 (" + cell(fig.note) + ")"
    fmt = (lambda v: sig(v, digits)) if digits else (lambda v: num(v, d))
    return f"{fmt(fig.ci95_low)} – {fmt(fig.ci95_high)}"


def basis(fig: Figure) -> str:
    """What the interval rests on, in a few words."""
    if fig.basis == BASIS_NONE:
        return "no interval"
    if fig.runs > 1:
        return f"{fig.runs} runs"
    if fig.basis == BASIS_FLEET:
        return "1 run + fleet noise"
    if fig.basis == BASIS_HOST:
        return "1 run + host noise"
    return "1 run"


def flags(fig: Figure) -> str:
    """Badges for what a reader must know about the runs behind a figure (missed target, drift)."""
    out = []
    for f in fig.flags:
        short = (
            "missed target"
            if f.startswith("missed")
            else "drifted"
            if f.startswith("drifted")
            else "note"
        )
        out.append(FLAG_BADGE.format(title=as_text(f), text=short))
    return " ".join(out)


def cell_html(fig: Figure | None, *, from_dir: str = "", stale: bool = False) -> str:
    """A table cell: the value (linked), its flags, and below it the CI95, n and what the interval rests on."""
    if fig is None:
        return "—"
    badges = " ".join(b for b in (flags(fig), STALE_BADGE if stale else "") if b)
    detail = f"{interval(fig)} · n {fig.n} · {basis(fig)}"
    return (
        value(fig, from_dir=from_dir)
        + (" " + badges if badges else "")
        + f'<br><span class="almanac-ci">{detail}</span>'
    )


def rank(st: Standing, board_key: str, test: str, prefix: str = "") -> str:
    """A host's rank on a board's test, marked for the consistency check (``prefix``: "#" in prose)."""
    return (
        f'<span class="almanac-rank" data-board="{as_text(board_key)}" data-test="{as_text(test)}" '
        f'data-host="{as_text(st.host_id)}" data-fact="{as_text(st.figure.key)}" data-rank="{as_text(st.rank_label)}">'
        f"{cell(prefix + st.rank_label)}</span>"
    )


def host(label: str, host_id: str, inner: str | None = None) -> str:
    """A host as a page names it: its label (``inner``: the label already rendered, a link say), marked with
    the host's id, so that the consistency check proves one host reads one name on every page."""
    return (
        f'<span class="almanac-host" data-host="{as_text(host_id)}">'
        f"{cell(label) if inner is None else inner}</span>"
    )


def verdict(text: str, baseline: Figure, candidate: Figure, verdict_: str) -> str:
    """A verdict of ``candidate`` against ``baseline`` (win / loss / within noise ...), marked."""
    return (
        f'<span class="almanac-verdict" data-a="{as_text(baseline.key)}" data-b="{as_text(candidate.key)}" '
        f'data-verdict="{as_text(verdict_)}">{text}</span>'
    )


def missing(what: str, href: str, *, work: str = "", host: str = "") -> str:
    (
        """ "Not measured", marked with what is missing (the check proves the fact """
        """layer has none), and how to measure it."""
    )
    return (
        f'<span class="almanac-missing" data-work="{as_text(work)}" data-host="{as_text(host)}">'
        f"not measured: {cell(what)} ([how to measure it]({href}))</span>"
    )


def ratio_digits(
    lo: float | None, hi: float | None, verdict: str, digits: int = 2
) -> int:
    """Significant figures for a ratio's interval: ``digits``, more where the interval is told apart from 1 yet
    one bound would read 1.0 (a reader must see it does not touch 1)."""
    while (
        digits < 4
        and lo is not None
        and hi is not None
        and verdict in ("win", "loss")
        and (sig(lo, digits) == "1.0" or sig(hi, digits) == "1.0")
    ):
        digits += 1
    return digits


def ratio_text(
    ratio: float | None, lo: float | None, hi: float | None, digits: int = 2
) -> str:
    if ratio is None:
        return "—"
    if lo is None or hi is None:
        return f"{sig(ratio, digits)}×"
    return f"{sig(ratio, digits)}× [{sig(lo, digits)}, {sig(hi, digits)}]"


def lossless(artifact_id: str, identical: bool, text: str) -> str:
    """A lossless verdict of one artifact (pipelines.optimization.judge_lossless), marked: the check proves
    the artifact reads the same verdict wherever it is shown."""
    return (
        f'<span class="almanac-lossless" data-artifact="{as_text(artifact_id)}" '
        f'data-verdict="{"lossless" if identical else "not lossless"}">{text}</span>'
    )
