"""The light part of each artifact kept between builds (pipelines/light_pack.py): a build's second load
reads no artifact file and gives the set the first gave, record for record; a file rewritten (even
with its old size and mtime put back: the writer's rename gives another inode), a pack cut short or
garbled, and a pack of other code are read from the files, with the same set as a load without packs;
an invalid file is refused as before. Committed artifacts of two hosts, in process."""

from __future__ import annotations

import gc
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from core import artifacts, filestamp
from core.errors import ArtifactErrors
from core.records import heavy
from pipelines import dataset, light_pack
from tests.support import two_hosts


@pytest.fixture
def data(tmp_path, monkeypatch):
    import time

    data = two_hosts.use(monkeypatch, tmp_path)
    # the committed files were copied just now: aged past the racy window (else never packed)
    real_ns = time.time_ns
    monkeypatch.setattr(filestamp, "now_ns", lambda: real_ns() + 10**10)
    yield data
    dataset.thaw(data)
    dataset._CACHE.clear()
    heavy.forget()


def _build_load(data: Path) -> dataset.Dataset:
    """A build's load (dataset.freeze), as a new process makes it."""
    dataset._CACHE.clear()
    heavy.forget()
    try:
        return dataset.freeze(data)
    finally:
        dataset.thaw(data)
        gc.unfreeze()


def _records(ds: dataset.Dataset) -> list[Any]:
    out = []
    for kind, recs in sorted(ds.by_type.items()):
        for r in recs:
            src = r._src
            where = (
                None
                if src is None
                else (
                    src.artifact,
                    src.path,
                    src.digest,
                    src.keys,
                    src.order,
                    src.records_full,
                    pickle.dumps(src.light),
                )
            )
            out.append((kind, r.path, r.data_path, r.doc, where))
    return out


def _counting_reads(monkeypatch) -> list[Path]:
    read: list[Path] = []
    real = artifacts.load_digest

    def spy(path, cache=None):
        read.append(Path(path))
        return real(path, cache)

    monkeypatch.setattr(artifacts, "load_digest", spy)
    return read


def _packs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "light").rglob("*.pickle"))


def test_a_second_load_reads_no_file_and_is_the_same_set(data, tmp_path, monkeypatch):
    first = _records(_build_load(data))
    assert _packs(tmp_path)
    read = _counting_reads(monkeypatch)
    second = _build_load(data)
    assert read == []
    assert _records(second) == first
    # the shared parts are one object across the set, as when read from the files
    hosts = [r.doc["host"] for r in second.runs]
    assert len({id(h) for h in hosts}) == len({repr(h) for h in hosts})
    # without the packs (ALMANAC_PAGE_CACHE=0, or outside a build): every file read, the same set
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    assert _records(_build_load(data)) == first and len(read) == len(
        list(artifacts.iter_files(data))
    )


def test_a_rewritten_file_is_read_with_its_old_size_and_mtime(data, monkeypatch):
    _build_load(data)
    path = sorted((data / "runs" / two_hosts.HOSTS[0]).rglob("*.json"))[0]
    st = path.stat()
    doc = artifacts.load(path)
    created = doc["created"]
    doc["created"] = created[:18] + ("1" if created[18] != "1" else "2") + created[19:]
    artifacts.write(path, doc)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    read = _counting_reads(monkeypatch)
    ds = _build_load(data)
    assert read == [path]
    (rec,) = [r for r in ds.runs if r.doc["id"] == doc["id"]]
    assert rec.doc["created"] == doc["created"] != created
    read.clear()
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    assert _records(_build_load(data)) == _records(ds)


@pytest.mark.parametrize("damage", ["cut", "garbage", "code"])
def test_a_damaged_or_foreign_pack_is_ignored(data, tmp_path, monkeypatch, damage):
    first = _records(_build_load(data))
    packs = _packs(tmp_path)
    if damage == "cut":
        for p in packs:
            p.write_bytes(p.read_bytes()[:40])
    elif damage == "garbage":
        for p in packs:
            p.write_bytes(b"\x80\x05not a pickle")
    else:
        light_pack.code_digest.cache_clear()
        monkeypatch.setattr(light_pack, "VERSION", light_pack.VERSION + 1)
    read = _counting_reads(monkeypatch)
    try:
        assert _records(_build_load(data)) == first
    finally:
        light_pack.code_digest.cache_clear()
    assert len(read) == len(list(artifacts.iter_files(data)))  # every file read
    read.clear()
    if damage != "code":
        assert _records(_build_load(data)) == first and read == []  # packed again


def test_an_invalid_file_is_refused_and_a_removed_one_gone(data, monkeypatch):
    _build_load(data)
    runs = sorted((data / "runs" / two_hosts.HOSTS[0]).rglob("*.json"))
    runs[0].unlink()
    ds = _build_load(data)
    assert all(r.doc["id"] != runs[0].stem for r in ds.runs)
    assert str(runs[0]) not in {str(p) for _, p in ds.files}
    raw = runs[1].read_bytes()
    runs[1].write_bytes(raw.replace(b'"schema_version"', b'"schema_versio"', 1))
    with pytest.raises(ArtifactErrors):
        _build_load(data)


def _in_workers(monkeypatch, share: int = 3) -> list[int]:
    """Every cold load's files made in two worker processes, ``share`` files at a time; the number of
    files each load gave them."""
    given: list[int] = []
    real = light_pack.Packs.prefill

    def spy(self, files, read):
        n = real(self, files, read)
        given.append(n)
        return n

    monkeypatch.setattr(light_pack, "PARALLEL_FROM", 1)
    monkeypatch.setattr(light_pack, "_SHARE", share)
    monkeypatch.setattr(light_pack, "workers", lambda: 2)
    monkeypatch.setattr(light_pack.Packs, "prefill", spy)
    return given


def test_a_cold_load_made_in_worker_processes_is_the_load_made_in_turn(
    data, tmp_path, monkeypatch
):
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    in_turn = _records(_build_load(data))
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "1")
    files = list(artifacts.iter_files(data))
    given = _in_workers(monkeypatch)
    # the main process's reads (a worker's are its own)
    read = _counting_reads(monkeypatch)
    cold = _build_load(data)
    assert given == [len(files)] and read == []
    assert _records(cold) == in_turn
    # what the workers made was packed: the next load reads no file and starts no worker
    assert len(_packs(tmp_path)) == len({f.parent for f in files})
    warm = _build_load(data)
    assert given == [len(files), 0] and read == []
    assert _records(warm) == in_turn


def test_a_cold_load_says_what_is_wrong_with_a_file_as_a_load_in_turn_does(
    data, tmp_path, monkeypatch
):
    runs = sorted((data / "runs" / two_hosts.HOSTS[0]).rglob("*.json"))
    runs[1].write_bytes(
        runs[1].read_bytes().replace(b'"schema_version"', b'"schema_versio"', 1)
    )
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    with pytest.raises(ArtifactErrors) as in_turn:
        _build_load(data)
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "1")
    given = _in_workers(monkeypatch)
    read = _counting_reads(monkeypatch)
    with pytest.raises(ArtifactErrors) as cold:
        _build_load(data)
    assert given and given[0] > 0
    # the workers left it to the load, which read it and said why
    assert read == [runs[1]]
    assert cold.value.lines() == in_turn.value.lines()
    (line,) = cold.value.problems
    assert runs[1].name in line and "schema_version" in line


def _die(paths):
    os._exit(3)


def test_a_worker_that_dies_costs_time_only(data, tmp_path, monkeypatch):
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    in_turn = _records(_build_load(data))
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "1")
    given = _in_workers(monkeypatch)
    monkeypatch.setattr(light_pack, "_fill", _die)
    read = _counting_reads(monkeypatch)
    assert _records(_build_load(data)) == in_turn
    assert given and given[0] > 0
    assert len(read) == len(list(artifacts.iter_files(data)))  # every file read in turn


def test_files_changed_within_the_racy_window_are_made_but_not_packed(
    data, tmp_path, monkeypatch
):

    monkeypatch.setattr(filestamp, "now_ns", lambda: 0)  # every file changed just now
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    in_turn = _records(_build_load(data))
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "1")
    given = _in_workers(monkeypatch)
    read = _counting_reads(monkeypatch)
    assert _records(_build_load(data)) == in_turn and read == []
    assert given and given[0] > 0
    # the packs were written without them: the next load reads every file (in turn: its folders
    # have packs) and gives the same set
    assert _records(_build_load(data)) == in_turn
    assert len(read) == len(list(artifacts.iter_files(data)))


def test_no_workers_without_a_second_core_or_fork(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert light_pack.workers() == 1
    monkeypatch.undo()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert light_pack.workers() == 1
    monkeypatch.setattr(
        os, "sched_getaffinity", lambda pid: set(range(64)), raising=False
    )
    assert light_pack.workers() == light_pack.MOST_WORKERS
