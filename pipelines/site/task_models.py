"""The Quality page's "One task per model" table (seed 001, "Summarization Model Comparison": Model |
Acceleration | Elapsed | Tokens | t/s | Summary Len | Quality): one task (the ``summarise`` suite: short
texts, each summarised within a word limit and scored by the key facts it names) per model variant, from
each quality artifact: the elapsed time (the items' wall time summed), the output tokens, the generation
rate (output tokens ÷ elapsed), the mean summary length in words, and the pass rate with its Wilson CI95.
Every value goes through ``cell()``/``num()``/``code()``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.memo import per_run
from pipelines.site.markdown import cell, code, link, num, table

SUITE = "summarise"


def task_rows(docs: list[Any], suite: str = SUITE) -> list[Any]:
    """The newest ok artifact of the task per host and model (plain configuration)."""
    best: dict[tuple[str, str], Any] = {}
    for q in (d for d in docs):
        if (
            not q.ok
            or q.suite_name != suite
            or (q.requested.get("speculative") or "none") != "none"
        ):
            continue
        k = (q.host_id, q.model_name)
        if k not in best or q.created > best[k].created:
            best[k] = q
    return [best[k] for k in sorted(best)]


def _words(text: str) -> int:
    return len(text.split())


@per_run
def _figures(q: Any) -> tuple[float, int, list[int]]:
    """The items' wall time summed, their output tokens summed, each output's length in words: read
    from the items once per artifact (a loaded artifact's items are in its file, core.records.heavy)."""
    items = q.items
    wall = sum(float(i.timing.get("wall_s") or 0.0) for i in items)
    toks = sum(int(i.timing.get("output_tokens") or 0) for i in items)
    return wall, toks, [_words(i.output) for i in items]


def task_table(rows: list[Any], quality_link: Callable[[str], str]) -> str:
    """``quality_link``: a quality artifact's id -> its view (the Quality page's own link rule)."""
    out = []
    for q in rows:
        wall, toks, words = _figures(q)
        r = q.rate
        out.append(
            [
                cell(q.model_name),
                cell(q.quantization or "—"),
                code(q.host_id),
                f"{num(wall, 1)} s",
                num(toks, 0),
                num(toks / wall, 1) if wall else "—",
                f"{num(sum(words) / len(words), 0)} words" if words else "—",
                f"{num(100 * (r.pass_rate or 0), 0)}% ({num(r.passed, 0)} of {num(r.n, 0)})"
                f"<br><small>{num(100 * (r.ci95_low or 0), 0)}–{num(100 * (r.ci95_high or 0), 0)}%</small>",
                link(q.id, quality_link(q.id)),
            ]
        )
    return table(
        [
            "model",
            "quantization",
            "host",
            "elapsed",
            "tokens",
            "t/s",
            "summary length",
            "quality",
            "artifact",
        ],
        out,
        ["l", "l", "l", "r", "r", "r", "r", "r", "l"],
    )


def task_section(docs: list[Any], quality_link: Callable[[str], str]) -> str:
    rows = task_rows(docs)
    if not rows:
        return ""
    return "\n".join(
        [
            "## One task per model",
            "",
            "Seed 001 compares models on one task (a summary). Here: the `summarise` suite (short texts, each to "
            "summarise within 60 words, passed when the summary names every key fact of its text and keeps to the "
            "limit) per model variant, greedy. Elapsed is the items' wall time summed (prompt and generation), "
            "t/s the output tokens over it, the length the summary's mean word count; quality the pass rate with "
            "its Wilson CI95 (few items: a wide interval).",
            "",
            task_table(rows, quality_link),
            "",
        ]
    )
