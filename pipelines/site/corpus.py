"""The home page's corpus totals: a self-contained section builder (``corpus_section(docs)``)."""

from __future__ import annotations

from typing import Any

from pipelines import corpus
from pipelines.site.markdown import admonition, cell, code, fold, num, table


def _hours(seconds: float) -> str:
    h = seconds / 3600.0
    return f"{num(h, 2)} h" if h >= 0.1 else f"{num(seconds / 60.0, 1)} min"


def corpus_section(docs: list[Any]) -> str:
    t = corpus.totals(docs)
    if not t["runs"]:
        return ""
    rate = f"{num(t['rate'], 1)} t/s" if t["rate"] else "—"
    out = [
        "## The corpus",
        "",
        f"**{num(t['tokens'], 0)} tokens generated** in **{_hours(t['seconds'])}** of generation, an average of "
        f"**{rate}**, over {num(t['runs'], 0)} successful runs of {num(len(t['models']), 0)} models on "
        f"{num(len(t['by_host']), 0)} hosts ({cell(str(t['first'])[:10])} to {cell(str(t['last'])[:10])}); "
        f"{num(t['prompt_tokens'], 0)} prompt tokens processed besides. "
        f"{num(t['synthetic_tokens'], 0)} of the generated tokens came from synthetic models (random weights).",
        "",
        admonition(
            "note",
            "Not a production figure",
            "The average is total tokens over total time across everything measured: baselines, deliberately "
            "slow configurations, tiny synthetic models, long contexts, failed approaches, every host. It "
            "describes this corpus, not what any one configuration does in production (seed 000 says the "
            "same of its own benchmark average). For a configuration's speed, see the Leaderboard.",
        ),
        "",
    ]
    rows = [
        [
            cell(k),
            num(v["runs"], 0),
            num(v["tokens"], 0),
            _hours(v["seconds"]),
            num(v["rate"], 1) if v["rate"] else "—",
            cell("; ".join(v["time"]) or "—"),
        ]
        for k, v in sorted(t["by_kind"].items(), key=lambda kv: -kv[1]["tokens"])
    ]
    body = [
        table(
            [
                "test kind",
                "runs",
                "tokens generated",
                "generation time",
                "average (t/s)",
                "time counted as",
            ],
            rows,
            ["l", "r", "r", "r", "r", "l"],
            downloads=False,
        ),
        "",
        table(
            ["host", "runs", "tokens generated", "generation time", "average (t/s)"],
            [
                [
                    code(k),
                    num(v["runs"], 0),
                    num(v["tokens"], 0),
                    _hours(v["seconds"]),
                    num(v["rate"], 1) if v["rate"] else "—",
                ]
                for k, v in sorted(t["by_host"].items())
            ],
            ["l", "r", "r", "r", "r"],
            downloads=False,
        ),
        "",
        "Every run artifact on disk counts (re-measurements too: that work was done), successful runs only, "
        "timed parts only (warm-ups and failed requests left out). Rate tests count `n_gen` tokens per "
        "repetition (a pp test generates none); requests count their output tokens.",
    ]
    out += [
        fold("By test kind and by host, and how the time is counted", "\n".join(body)),
        "",
    ]
    return "\n".join(out)
