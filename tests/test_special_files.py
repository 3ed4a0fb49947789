"""Issue 34 item 11: a FIFO in data/, or as a matrix, include, models.yaml or workload text, made
commands hang forever; a symlink to /dev/zero was read without limit. Every reader refuses them by
type before opening (core.safefile), with one line naming the file (the corpus runs the commands:
tests/hostile/round3_files.py)."""

from __future__ import annotations

import os
import threading

import pytest

from core import artifacts, safefile
from core.errors import ArtifactError, ConfigError, UserError
from core.yamlio import load_yaml


def _soon(fn, timeout: float = 10.0):
    """``fn()``'s exception, failing (not hanging) when it does not return within ``timeout``."""
    box: list[BaseException | None] = []

    def run():
        try:
            fn()
            box.append(None)
        except BaseException as exc:
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert box, "the read hung"
    return box[0]


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    return fifo, zero


def test_fifo_and_dev_zero_are_refused_unopened(specials):
    fifo, zero = specials
    exc = _soon(
        lambda: safefile.read_bytes(
            fifo, max_bytes=100, what="YAML file", error=ConfigError
        )
    )
    assert isinstance(exc, ConfigError)
    assert str(exc).endswith(
        "pipe.yaml: is a FIFO (named pipe), not a YAML file: refused without reading it"
    )
    exc = _soon(lambda: safefile.read_bytes(zero, max_bytes=100, what="artifact"))
    assert (
        "zero.json: is a character device (a symlink to /dev/zero), not an artifact"
        in str(exc)
    )


def test_every_reader_goes_through_it(specials, tmp_path):
    fifo, zero = specials
    assert isinstance(_soon(lambda: load_yaml(fifo)), ConfigError)
    assert isinstance(_soon(lambda: artifacts.load(zero)), ArtifactError)
    named = tmp_path / "runs" / "h" / "a.json"
    named.parent.mkdir(parents=True)
    os.mkfifo(named)
    box = []
    exc = _soon(lambda: box.append(artifacts.load_tree(tmp_path / "runs")))
    assert exc is None and len(box[0][1]) == 1 and "a.json: is a FIFO" in box[0][1][0]


def test_a_regular_file_past_the_bound_or_growing_past_it_is_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * 1001)
    with pytest.raises(
        UserError, match="is 1001 bytes, more than the 1000 a file may have"
    ):
        safefile.read_bytes(big, max_bytes=1000)
    assert safefile.read_bytes(big, max_bytes=1001) == b"x" * 1001


def test_workload_text_fifo_is_refused(specials, tmp_path, monkeypatch):
    from runtime.load import workload

    texts = tmp_path / "data" / "texts"
    texts.mkdir(parents=True)
    (texts / "texts.yaml").write_text("schema_version: 1\ntexts:\n  t: {file: t.txt}\n")
    os.mkfifo(texts / "t.txt")
    monkeypatch.setenv("ALMANAC_DATA", str(tmp_path / "data"))
    exc = _soon(lambda: workload.corpus("t"))
    assert isinstance(exc, ConfigError) and "t.txt: is a FIFO" in str(exc)
