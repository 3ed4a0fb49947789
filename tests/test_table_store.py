"""The table downloads' store (pipelines/site/table_store.py): a download an earlier build made of
the same rows with the same code is linked into the site, not made again; a different code makes it
again; an empty stored file (a write a crash cut short) is never served; a build keeps only what it
used; outside a build nothing is stored. In process, on this machine's file system."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.site import hooks, markdown, page_cache, table_store


@pytest.fixture
def building(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ALMANAC_PAGE_CACHE", raising=False)
    code = ["a" * 40]
    monkeypatch.setattr(page_cache, "code_digest", lambda: code[0])
    page_cache.reset()  # as the build's hooks do
    table_store.reset()
    yield tmp_path, code
    page_cache.finish()
    table_store.reset()
    markdown.reset_tables()


def _made(text: str, calls: list[str]):
    def make() -> str:
        calls.append(text)
        return text

    return make


def _stored(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "cache" / "tables").rglob("*") if p.is_file())


def test_a_download_made_once_is_linked_into_the_next_site(building):
    tmp_path, code = building
    calls: list[str] = []
    first = tmp_path / "site1" / "tables" / "d1.csv"
    table_store.publish(first, _made("a,b\n1,2\n", calls), hooks._write)
    assert first.read_text() == "a,b\n1,2\n" and calls == ["a,b\n1,2\n"]
    assert len(_stored(tmp_path)) == 1
    second = tmp_path / "site2" / "tables" / "d1.csv"
    table_store.publish(second, _made("never made", calls), hooks._write)
    assert second.read_text() == "a,b\n1,2\n" and len(calls) == 1  # not made again
    assert os.stat(second).st_ino == os.stat(_stored(tmp_path)[0]).st_ino  # a link
    # a site folder not emptied first: the file is replaced by the link, not refused
    table_store.publish(second, _made("never made", calls), hooks._write)
    assert second.read_text() == "a,b\n1,2\n" and len(calls) == 1
    # other code: made again (the store's file is of the code that wrote it)
    code[0] = "b" * 40
    table_store.reset()  # the next build, with other code
    third = tmp_path / "site3" / "tables" / "d1.csv"
    table_store.publish(third, _made("a;b\n", calls), hooks._write)
    assert third.read_text() == "a;b\n" and len(calls) == 2


def test_an_empty_stored_file_is_made_again(building):
    tmp_path, _ = building
    calls: list[str] = []
    table_store.publish(
        tmp_path / "s1" / "t.json", _made("[\n]\n", calls), hooks._write
    )
    (stored,) = _stored(tmp_path)
    stored.write_text("")  # what a crash between the write and the disk can leave
    out = tmp_path / "s2" / "t.json"
    table_store.publish(out, _made("[\n]\n", calls), hooks._write)
    assert out.read_text() == "[\n]\n" and len(calls) == 2


def test_a_build_keeps_only_the_downloads_it_used(building):
    tmp_path, _ = building
    calls: list[str] = []
    for name in ("x.csv", "y.csv"):
        table_store.publish(tmp_path / "s1" / name, _made(name, calls), hooks._write)
    table_store.prune()
    assert len(_stored(tmp_path)) == 2
    table_store.reset()  # the next build uses x only
    table_store.publish(tmp_path / "s2" / "x.csv", _made("x.csv", calls), hooks._write)
    table_store.prune()
    assert [p.name.split("-", 1)[1] for p in _stored(tmp_path)] == ["x.csv"]
    assert (
        tmp_path / "s1" / "y.csv"
    ).read_text() == "y.csv"  # a built site keeps its files


def test_outside_a_build_the_files_are_written_and_nothing_is_stored(building):
    tmp_path, _ = building
    page_cache.finish()
    calls: list[str] = []
    out = tmp_path / "s" / "t.csv"
    table_store.publish(out, _made("h\n", calls), hooks._write)
    assert out.read_text() == "h\n" and not _stored(tmp_path)


def test_write_tables_writes_what_the_pages_registered_from_the_store(building):
    """The hooks' writer: every registered table's CSV and JSON, the same bytes made or linked."""
    tmp_path, _ = building
    markdown.reset_tables()
    digest = markdown.register_table(["model", "t/s"], [["m", "1.5"]])
    hooks._WRITTEN.clear()
    hooks.write_tables(tmp_path / "site1")
    made = {
        ext: (tmp_path / "site1" / "tables" / f"{digest}.{ext}").read_bytes()
        for ext in ("csv", "json")
    }
    assert made["csv"] == b"model,t/s\nm,1.5\n"
    assert made["json"] == b'[\n{"model": "m", "t/s": "1.5"}\n]\n'
    markdown.register_table(["model", "t/s"], [["m", "1.5"]])
    hooks._WRITTEN.clear()
    hooks.write_tables(tmp_path / "site2")
    for ext, body in made.items():
        assert (tmp_path / "site2" / "tables" / f"{digest}.{ext}").read_bytes() == body
    hooks._WRITTEN.clear()
