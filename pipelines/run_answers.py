"""Every run's small answers, computed in one pass over a build's loaded set.

A run's heavy parts (samples, details) stay in its file (core.records.heavy) and the pages ask
several small questions of every run (its decode point, its precision, its prompt sizes, its request
overheads, its outputs' degeneration, what it generated, its part of its host's noise): each answer is
kept with the run (pipelines.memo.per_run), but asked page after page, far apart, each would read every
run's file again. :func:`prime` asks them all of one run while its parts are in memory: each file is read
once per build for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines import corpus, facts, memory, noise, optimization, overhead, roofline

#: the per-run answers asked of every run, one run at a time
ANSWERS: tuple[Callable[[Any], Any], ...] = (
    corpus.generation,
    facts.precision,
    roofline.decode_point,
    memory._prompt_tokens,
    overhead.breakdown,
    optimization.degeneration_of,
    noise.history_cell,
)


def prime(runs: list[Any]) -> None:
    """Ask every answer of :data:`ANSWERS` of each run of ``runs`` in turn (kept with each run)."""
    for r in runs:
        ask(r)


def ask(r: Any) -> dict[Callable[[Any], Any], Any]:
    """Every answer of :data:`ANSWERS` of the run ``r`` (kept with it), by its function; an answer that
    raised is left out (not kept: the page that asks this run raises it again, where it belongs)."""
    out = {}
    for answer in ANSWERS:
        try:
            out[answer] = answer(r)
        except Exception:
            pass
    return out
