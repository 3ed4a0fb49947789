"""The site's figures do not move when the code under them does (#18): every data page rendered
from the golden artifacts and from the measurements committed when the fixture was written shows
the same numbers, in the same order, as tests/fixtures/golden_pages.json recorded before the core
layer's records replaced the pipelines' raw reads (tests/fixtures/make_golden_pages.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from tests.support.golden_sets import make_set
from tests.support.page_values import DATA_PAGES, numbers, page_values

EXPECTED = json.loads((FIXTURES / "golden_pages.json").read_text())


@pytest.mark.parametrize("name", ["golden", "committed"])
def test_pages_show_the_recorded_figures(name, tmp_path, monkeypatch):
    data = make_set(name, tmp_path / name, EXPECTED["committed_files"])
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    got = page_values(data)
    want = EXPECTED["pages"][name]
    assert set(got) == set(want) == set(DATA_PAGES)
    for page in DATA_PAGES:
        assert got[page] == want[page], (
            f"{name}: {page} shows other figures than recorded"
        )
    if (
        name == "committed"
    ):  # the set exercises every page (a page rendering nothing would prove nothing)
        assert all(len(want[p]) > 50 for p in DATA_PAGES)


def test_a_changed_figure_is_seen():
    text = "| a | 1,234.5 | [7.25](runs/run.md?id=abc-20261126T040430.390Z) | 12% |"
    assert numbers(text) == ["1,234.5", "7.25", "12%"]
    assert numbers(text.replace("7.25", "7.26")) != numbers(text)
    assert (
        numbers(
            '<div id="chart-0123456789"></div> <a href="tables/0123456789abcdef.csv">'
        )
        == []
    )
