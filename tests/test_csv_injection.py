"""Issue 34 item 12: a name such as ``=HYPERLINK("…","click")`` never starts a CSV cell in what the
site (runs/index.csv, tables/*.csv) or ``invoke compare`` writes; plain numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pytest

from core import csvcell
from pipelines import compare
from pipelines.site import browser, markdown

FORMULAS = [
    '=HYPERLINK("https://evil.example","click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("text", [f for f in FORMULAS if "\r" not in f])
def test_formula_cell_gets_a_quote(text):
    assert csvcell.cell(text) == "'" + text


def test_carriage_return_cannot_start_a_row():
    assert csvcell.cell("\r=1+1") == "'\n=1+1"
    assert csvcell.cell("a\r\n=1") == "a\n=1"


@pytest.mark.parametrize(
    "value",
    ["-3.5", "+12%", "-1e-3", "1,234.5", "-.5", -3.5, 7, None, "", "q4_k_m", "—", "-"],
)
def test_numbers_and_plain_text_are_left_alone(value):
    assert csvcell.cell(value) == value


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]


def _unsafe(cells: list[str]) -> list[str]:
    return [
        c
        for c in cells
        if c.startswith(csvcell.TRIGGERS) and not csvcell._NUMBER.fullmatch(c)
    ]


def test_site_table_csv_neutralises_every_cell():
    text = markdown.table_csv(["=cmd()", "tokens/s"], [[f, "-12.5"] for f in FORMULAS])
    cells = _cells(text)
    assert _unsafe(cells) == []
    assert "-12.5" in cells and "'=cmd()" in cells
    assert f"'{FORMULAS[0]}" in cells


def test_runs_index_csv_neutralises_names():
    kind = next(iter(browser._COLUMNS))
    names = [c[0] for c in browser._COLUMNS[kind]]
    row = {n: FORMULAS[i % len(FORMULAS)] for i, n in enumerate(names)}
    cells = _cells(browser.index_csv(kind, [row]))
    assert _unsafe(cells) == []
    assert sum(c.startswith("'") for c in cells) == len(names)


def test_compare_csv_neutralises_names():
    row = compare.Row(
        model=FORMULAS[0],
        test="@test",
        metric="tokens_per_second",
        unit="t/s",
        higher_is_better=True,
        host_a="=host",
        host_b="+host",
        backend_a="llama-cpp",
        backend_b="llama-cpp",
        build_a="-b",
        build_b="b",
        a_id="a",
        b_id="b",
        a_mean=-1.5,
        a_stddev=None,
        a_n=3,
        b_mean=2.0,
        b_stddev=0.1,
        b_n=3,
        ratio=-0.5,
        ci95_low=None,
        ci95_high=None,
        verdict="loss",
    )
    res = compare.Result(
        compare.parse_selection("host=a"),
        compare.parse_selection("host=b"),
        ["model"],
        [row],
    )
    cells = _cells(compare.to_csv(res))
    assert _unsafe(cells) == []
    assert {
        "'" + FORMULAS[0],
        "'@test",
        "'=host",
        "'+host",
        "'-b",
        "-1.5",
        "-0.5",
    } <= set(cells)
