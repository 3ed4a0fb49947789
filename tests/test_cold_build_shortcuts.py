"""The cold build's shortcuts (issue 30: the every-kind 10k fleet's cold build) give what the plain
computation gives: the degeneration detector's tail loop found without the pattern's search (over the
committed runs' generated texts and seeded texts built to loop), the Roles page's states read once, a
board's chart made from its rows without a frame, a table cell's HTML kept for the texts met again (over
the committed data, several hosts). In process."""

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


# -- Roles: each candidate's state and each assignment's status read once per page -------------------------
def _every_assignment() -> list[Any]:
    from pipelines.site import quality_pages

    return quality_pages._assignments()[1]


def test_states_read_once_are_each_candidates_state_and_each_assignments_status():
    from pipelines.site import quality_pages

    assignments = _every_assignment()
    assert len({a.host_id for a in assignments}) >= 3  # several hosts
    state, status = quality_pages._states(assignments)
    assert state == {id(c): c.state for a in assignments for c in a.rejected}
    assert status == {id(a): a.status for a in assignments}
    seen = set(state.values()) | set(status.values())
    assert {
        "rejected",
        "not measured",
        "assigned",
    } <= seen  # the committed data reaches several branches


@pytest.mark.parametrize(
    "states, status",
    [
        ([], "no data"),
        (["not measured", "partly measured"], "no data"),
        (["not measured", "rejected"], "no candidate meets every requirement"),
        (["rejected", "unresolved"], "not resolved"),
    ],
)
def test_status_of_reads_the_states_it_is_given(states, status):
    from pipelines import roles

    assert roles.status_of(None, states) == status
    assert roles.status_of(object(), states) == "assigned"  # type: ignore[arg-type]


# -- boards: a board's chart made from its rows as dicts, without a frame per board --------------------------
def test_a_boards_chart_from_its_rows_is_the_chart_from_their_frame():
    import pandas as pd

    from core.metrics import METRICS
    from pipelines import dataset, host_boards
    from pipelines.site import charts, host_boards_page

    runs = list(dataset.load().runs)
    checked = 0
    for b in host_boards.of(runs):
        recs = host_boards.board_records(b)
        if len(recs) < 2:
            continue
        rows = [
            {
                "label": f"{r['rank_label']} {r['model']}",
                "mean": r["mean"],
                "stddev": host_boards_page._val(r["stddev"]),
                "n": r["n"],
                "ci95_low": host_boards_page._val(r["ci95_low"]),
                "ci95_high": host_boards_page._val(r["ci95_high"]),
                "id": r["id"],
                "json": "data/x.json",
            }
            for r in recs
        ]
        assert charts.dots_with_ci(rows, b.metric, title="t") == charts.dots_with_ci(
            pd.DataFrame(rows), b.metric, title="t"
        )
        checked += 1
    assert checked >= 5
    # a missing figure (None beside numbers: NaN in a frame), a whole number, no JSON link
    rows = [
        {
            "label": "a",
            "mean": 2,
            "stddev": None,
            "n": 1,
            "ci95_low": None,
            "ci95_high": 3.5,
            "id": "x",
        },
        {
            "label": "b",
            "mean": 1,
            "stddev": 0.5,
            "n": 3,
            "ci95_low": 0.5,
            "ci95_high": None,
            "id": "y",
        },
    ]
    metric = METRICS["tg_tps"] if "tg_tps" in METRICS else next(iter(METRICS.values()))
    spec = charts.dots_with_ci(rows, metric)
    assert spec == charts.dots_with_ci(pd.DataFrame(rows), metric)
    assert spec["data"]["values"][0]["stddev"] is None and "href" not in str(
        spec["layer"][1]["encoding"]
    )


# -- table cells: a cell's text as HTML, kept for the texts met again ----------------------------------------
def test_a_cells_html_kept_is_the_html_made_afresh():
    from pipelines import dataset
    from pipelines.site import host_boards_page, markdown

    page = host_boards_page.host_boards_page(list(dataset.load().runs))
    cells = [
        c.strip()
        for line in page.splitlines()
        if line.startswith("| ")
        for c in markdown._split_row(line)
        if "](" not in c
    ]
    assert len(cells) > 200
    made = []
    for c in cells:
        try:
            made.append(markdown._bold_html.__wrapped__(c))
        except markdown._Unsure:
            made.append(None)
    for _ in range(2):  # the second time from what was kept
        kept = []
        for c in cells:
            try:
                kept.append(markdown._bold_html(c))
            except markdown._Unsure:
                kept.append(None)
        assert kept == made
    # the text is the whole key: another text, another answer
    assert (
        markdown._bold_html("a\\_b") == "a_b"
        and markdown._bold_html("**a\\_c**") == "<strong>a_c</strong>"
    )
