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


def _files(site: Path) -> dict[str, bytes]:
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file() and (p.parent.name == "index" or p.name.startswith("index"))
    }


def test_what_is_made_from_the_whole_set_is_linked_while_the_set_is_the_same(
    tmp_path, monkeypatch
):
    """The browsers' indexes and the columnar index's tables (hooks.publish) of a set published once are
    linked into the next site while the set is the same (not made again: ``publish_group`` not asked
    to make); one more host's runs make them again; every file is what a publish without the store
    writes. Two committed hosts, in process."""
    from pipelines import dataset
    from tests.support import two_hosts

    data = two_hosts.use(monkeypatch, tmp_path)
    made: list[str] = []
    real = table_store.publish_group

    def spy(folder, names, key, make):
        real(folder, names, key, lambda: (made.append(folder.name), make())[1])

    monkeypatch.setattr(table_store, "publish_group", spy)

    def publish(site: Path, cached: bool = True) -> dict[str, bytes]:
        monkeypatch.setenv("ALMANAC_PAGE_CACHE", "1" if cached else "0")
        page_cache.reset()
        table_store.reset()
        try:
            hooks.publish(site, dataset.load(data))
            table_store.prune()
        finally:
            page_cache.finish()
            table_store.reset()
        return _files(site)

    first = publish(tmp_path / "s1")
    assert {
        "runs/index-data.js",
        "index/artifacts.parquet",
        "index/metrics.csv",
    } <= set(first)
    assert sorted(made) == ["index", "perplexity-runs", "quality-runs", "runs"]
    made.clear()
    second = publish(tmp_path / "s2")
    assert made == [] and second == first  # linked, not made
    linked = tmp_path / "s2" / "index" / "artifacts.csv"
    assert os.stat(linked).st_nlink > 1
    assert publish(tmp_path / "plain", cached=False) == first
    two_hosts.add_host(data, tmp_path / "more")
    made.clear()
    third = publish(tmp_path / "s3")
    assert "index" in made and "runs" in made
    assert third != first
    assert publish(tmp_path / "plain2", cached=False) == third
