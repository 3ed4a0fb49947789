"""core.yamlio.load_yaml keeps a file's parsed document while the file is unchanged (size, times,
inode): a build asks for the same registry once per page. Each caller gets its own copy, and a
changed file is parsed again."""

from __future__ import annotations

import time

import pytest

from core import filestamp, yamlio


@pytest.fixture
def clock(monkeypatch):
    """The clock core.filestamp reads: ``clock(s)`` moves it ``s`` seconds past now (a file changed
    within the last seconds is never kept; a file's change time cannot be set back to age it)."""

    def later(seconds: float) -> None:
        now = time.time_ns() + int(seconds * 1e9)
        monkeypatch.setattr(filestamp, "now_ns", lambda: now)

    return later


def _counted(monkeypatch) -> list[object]:
    parses: list[object] = []
    real = yamlio._parse

    def parse(p):
        parses.append(p)
        return real(p)

    monkeypatch.setattr(yamlio, "_parse", parse)
    return parses


def test_an_unchanged_file_is_parsed_once_and_each_caller_gets_its_own_copy(
    tmp_path, monkeypatch, clock
):
    path = tmp_path / "reg.yaml"
    path.write_text("a: [1, 2]\nb: {c: x}\n")
    clock(10)
    parses = _counted(monkeypatch)
    first = yamlio.load_yaml(path)
    first["a"].append(3)  # a caller changing what it got changes no one else's
    second = yamlio.load_yaml(path)
    assert second == {"a": [1, 2], "b": {"c": "x"}}
    assert len(parses) == 1


def test_a_changed_or_fresh_file_is_parsed_again(tmp_path, monkeypatch, clock):
    path = tmp_path / "reg.yaml"
    path.write_text("a: 1\n")
    clock(20)
    assert yamlio.load_yaml(path) == {"a": 1}
    path.write_text("a: 2\n")  # same size, new times
    clock(30)
    assert yamlio.load_yaml(path) == {"a": 2}
    path.write_text(
        "a: 3\n"
    )  # just written: read every time until it is older than a tick
    clock(0)
    parses = _counted(monkeypatch)
    assert yamlio.load_yaml(path) == {"a": 3}
    assert yamlio.load_yaml(path) == {"a": 3}
    assert len(parses) == 2
