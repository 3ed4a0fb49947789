"""The load-time section of the Comparisons page (pipelines.load_time): model load time per model and
size, before and after a build change, and with weight repacking off and on (seed 001, "Parallel Tensor
Repacking"). Every number is a figure of the fact layer from the run artifacts."""

from __future__ import annotations

from typing import Any

from core import stats
from pipelines import hostnames
from pipelines import load_time as lt
from pipelines.site import figures
from pipelines.site.history_pages import host_cell
from pipelines.site.markdown import cell, num, table

HOW = (
    'Measure with `invoke bisect --builds "OLD,NEW" --matrix load-time --runs data/runs` (each build in '
    "fresh processes, A B B A blocks, every run an artifact)."
)


def _size(b: int | None) -> str:
    if not b:
        return "—"
    return f"{num(b / 2**30, 2)} GiB" if b >= 2**30 else f"{num(b / 2**20, 0)} MiB"


def _speedup(p: lt.Pair) -> str:
    sp, lo, hi = p.speedup
    text = f"{num(sp, 2)}× [{num(lo, 2)}, {num(hi, 2)}]"
    if p.verdict != "within noise":
        text = figures.verdict(
            text, p.before, p.after, "win" if p.verdict == "faster" else "loss"
        )
    return text


def section(docs: list[Any]) -> str:
    ps = lt.pairs(docs)
    if not ps:
        return "No load-time runs yet (data/matrices/load-time.yaml). " + HOW + "\n"
    labels = hostnames.labels(docs)
    builds = [p for p in ps if p.kind == "build"]
    repack = [p for p in ps if p.kind == "repack"]
    tested = sum(p.comparison.q_value is not None for p in ps)
    out = [
        (
            f"Model load time (`load_time_s`: a fresh process, from the load call to a ready context, the run as "
            f"the unit) per model, {len(builds)} build change(s) and {len(repack)} repacking pair(s); speed-up "
            "= before ÷ after (above 1: faster to load) with its CI95, the "
            f"{tested} comparisons held together to a false discovery rate of {stats.FDR_Q:g}. "
            + HOW
        ),
        "",
    ]
    if builds:
        out += [
            "### Before and after a build change",
            "",
            table(
                [
                    "model",
                    "size",
                    "repack",
                    "host",
                    "build before",
                    "load time before",
                    "build after",
                    "load time after",
                    "speed-up [CI95]",
                    "verdict",
                ],
                [
                    [
                        cell(p.model),
                        _size(p.size_bytes),
                        cell(p.repack),
                        host_cell(labels, p.host_id),
                        cell(p.before_label),
                        figures.cell_html(p.before),
                        cell(p.after_label),
                        figures.cell_html(p.after),
                        _speedup(p),
                        cell(p.verdict),
                    ]
                    for p in builds
                ],
            ),  # fmt: skip
            "",
        ]
    if repack:
        out += [
            "### Weight repacking off and on",
            "",
            (
                "`extra_bufts: true` (llama.cpp's default) repacks Q4_0 and Q4_K weights into the CPU's extra "
                "buffer types at load; `false` keeps them as stored."
            ),
            "",
            table(
                [
                    "model",
                    "size",
                    "host",
                    "build",
                    "repack off",
                    "repack on",
                    "speed-up [CI95]",
                    "verdict",
                ],
                [
                    [
                        cell(p.model),
                        _size(p.size_bytes),
                        host_cell(labels, p.host_id),
                        cell(p.build),
                        figures.cell_html(p.before),
                        figures.cell_html(p.after),
                        _speedup(p),
                        cell(p.verdict),
                    ]
                    for p in repack
                ],
            ),  # fmt: skip
            "",
        ]
    return "\n".join(out) + "\n"
