"""The cold build's shortcuts (issue 30: the every-kind 10k fleet's cold build) give what the plain
computation gives: the degeneration detector's tail loop found without the pattern's search. Over the
committed runs' generated texts and seeded texts built to loop, in process."""

from __future__ import annotations

import random
from typing import Any

import pytest

from core import degeneration
from core.kinds.generate import GenerateDetails
from pipelines.runs import load_runs


def _by_search(text: str) -> tuple[str, int, int] | None:
    """The tail loop as the pattern's search finds it (what _tail_loop computed before its shortcut)."""
    tail = text[-degeneration.TAIL_WINDOW :].rstrip()
    m = degeneration._TAIL_LOOP.search(tail)
    if not m:
        return None
    span = len(tail) - m.start()
    return m.group(1), span // max(len(m.group(1)), 1), span


def _committed_texts() -> list[str]:
    texts: list[str] = []
    for r in load_runs():
        details: Any = r.details
        if isinstance(details, GenerateDetails):
            texts += [o.text for o in details.outputs or [] if isinstance(o.text, str)]
        requests = getattr(r.samples, "requests", None) or []
        texts += [q.text for q in requests if isinstance(getattr(q, "text", None), str)]
    return texts


def test_tail_loop_is_the_search_over_the_committed_texts():
    texts = _committed_texts()
    assert len(texts) > 20
    found = [degeneration._tail_loop(t) for t in texts]
    assert found == [_by_search(t) for t in texts]
    assert any(f is not None for f in found) and any(f is None for f in found)


def _looping(rng: random.Random) -> str:
    alphabet = rng.choice(
        ["ab", "abc", " a\n", "xyz ", "ab\u00a0", "\x1c a", "aab", "a"]
    )
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
    if rng.random() < 0.7:
        unit = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        text += unit * rng.randint(1, 12) + (
            unit[: rng.randint(0, len(unit))] if rng.random() < 0.3 else ""
        )
        if rng.random() < 0.2:
            text += rng.choice(["  ", "\n", "\x1c", "\u00a0", " x"])
    if rng.random() < 0.05:
        text *= rng.randint(20, 60)  # past the window, many unit lengths alike
    return text


def test_tail_loop_is_the_search_over_seeded_texts():
    rng = random.Random(30)
    texts = [_looping(rng) for _ in range(5000)]
    found = [degeneration._tail_loop(t) for t in texts]
    assert found == [_by_search(t) for t in texts]
    assert sum(f is not None for f in found) > 1000  # most were built to loop, and loop


@pytest.mark.parametrize(
    "text, loop",
    [
        ("x" + "ab" * 10, ("ab", 10, 20)),  # the leftmost start: "x" is no part of it
        ("a" * 9, ("a", 9, 9)),  # the shortest unit at that start
        ("abab" * 3, ("ab", 6, 12)),
        (
            "the end. " * 5 + "\n",
            (" the end.", 4, 36),
        ),  # rstripped: the unit that repeats ends on "."
        (
            "the end. " * 4 + "\n",
            None,
        ),  # and only three whole ones follow the first "the end."
        ("ab" * 3, None),  # three repeats are not a loop
        ("prose with no loop at its end", None),
    ],
)
def test_tail_loop_values(text, loop):
    assert degeneration._tail_loop(text) == loop == _by_search(text)
