"""core.yamlio.load_yaml keeps a file's parsed document while the file is unchanged (size, times,
inode): a build asks for the same registry once per page. Each caller gets its own copy, and a
changed file is parsed again."""

from __future__ import annotations

import os
import time

from core import yamlio


def _aged(path, seconds: float = 10.0) -> None:
    """The file as if written a while ago (a file changed within the last seconds is never kept)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def _counted(monkeypatch) -> list[object]:
    parses: list[object] = []
    real = yamlio._parse

    def parse(p):
        parses.append(p)
        return real(p)

    monkeypatch.setattr(yamlio, "_parse", parse)
    return parses


def test_an_unchanged_file_is_parsed_once_and_each_caller_gets_its_own_copy(
    tmp_path, monkeypatch
):
    path = tmp_path / "reg.yaml"
    path.write_text("a: [1, 2]\nb: {c: x}\n")
    _aged(path)
    parses = _counted(monkeypatch)
    first = yamlio.load_yaml(path)
    first["a"].append(3)  # a caller changing what it got changes no one else's
    second = yamlio.load_yaml(path)
    assert second == {"a": [1, 2], "b": {"c": "x"}}
    assert len(parses) == 1


def test_a_changed_or_fresh_file_is_parsed_again(tmp_path, monkeypatch):
    path = tmp_path / "reg.yaml"
    path.write_text("a: 1\n")
    _aged(path, 20)
    assert yamlio.load_yaml(path) == {"a": 1}
    path.write_text("a: 2\n")  # same size, new times
    _aged(path, 10)
    assert yamlio.load_yaml(path) == {"a": 2}
    path.write_text(
        "a: 3\n"
    )  # just written: read every time until it is older than a tick
    parses = _counted(monkeypatch)
    assert yamlio.load_yaml(path) == {"a": 3}
    assert yamlio.load_yaml(path) == {"a": 3}
    assert len(parses) == 2
