"""Every run's small answers kept between builds (pipelines/site/answer_store.py): a build with nothing new
asks no run (each answer is given back as computed, the run itself where an answer holds it); a run whose
file changed is asked again, and only it; other code asks every run again. Committed artifacts of two
hosts, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import dataset, memo, run_answers
from pipelines.site import answer_store, page_cache
from tests.support import two_hosts

HOSTS = two_hosts.HOSTS


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    data = two_hosts.use(monkeypatch, tmp_path)
    asked: list[str] = []
    real = run_answers.ask

    def spy(r):
        asked.append(r.data_path)
        return real(r)

    monkeypatch.setattr(run_answers, "ask", spy)
    yield data, asked
    page_cache.finish()
    dataset._CACHE.clear()


def _build(asked: list[str]) -> tuple[dataset.Dataset, list[str]]:
    """One build's priming on a freshly loaded set: the set, and the runs it asked."""
    dataset._CACHE.clear()  # the records of a new build (nothing kept with them)
    asked.clear()
    page_cache.reset()  # as the build's hooks do
    ds = dataset.load()
    answer_store.prime(ds)
    page_cache.prune()
    page_cache.finish()
    return ds, list(asked)


def _answers(ds: dataset.Dataset) -> dict[str, dict[str, str]]:
    return {
        r.data_path: {memo.answer_name(f): repr(f(r)) for f in run_answers.ANSWERS}
        for r in ds.runs
    }


def test_a_build_with_nothing_new_asks_no_run(fleet):
    data, asked = fleet
    first, asked_first = _build(asked)
    assert sorted(asked_first) == sorted(r.data_path for r in first.runs)
    computed = _answers(first)
    again, asked_again = _build(asked)
    assert asked_again == []
    assert _answers(again) == computed  # as computed (repr: every field, nested)


def test_an_answer_holding_its_run_gets_this_builds_run(fleet):
    """(pipelines.overhead.breakdown holds its run): stored as a reference, given back as the run of the
    build that reads it; an answer holding another record is not stored."""
    data, asked = fleet
    ds, _ = _build(asked)
    a, b = ds.runs[0], ds.runs[1]
    blob = answer_store._pack(a, {"run": a, "n": 3})
    assert blob is not None
    back = answer_store._unpack(blob, b)  # b: the same run as loaded by a later build
    assert back == {"run": b, "n": 3} and back["run"] is b
    assert answer_store._pack(a, {"other": b}) is None


def test_a_changed_run_is_asked_again_and_only_it(fleet):
    data, asked = fleet
    _build(asked)
    path = sorted((data / "runs" / HOSTS[1]).rglob("*.json"))[0]
    # other bytes, the same artifact
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1) + "\n")
    ds, again = _build(asked)
    assert again == [path.relative_to(data).as_posix()]
    # other code (the code's digest): every run asked again
    page_cache.reset()
    page_cache._MEMO["code"] = "other code"
    dataset._CACHE.clear()
    asked.clear()
    answer_store.prime(dataset.load())
    assert len(asked) == len(ds.runs)


def test_off_with_the_page_cache(fleet, monkeypatch):
    data, asked = fleet
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    _build(asked)
    _, again = _build(asked)
    assert again and not list(Path(page_cache.cache_dir()).rglob("*.pickle"))


def test_a_run_s_keys_are_kept_and_given_back_as_computed(fleet, monkeypatch):
    from core import identity
    from core.records.run import RunRecord

    data, asked = fleet
    first, _ = _build(asked)
    computed = {
        r.data_path: (r.key, r.comparability_key(), r.history_key, r.work_key)
        for r in first.runs
    }
    # distinct keys: a hash of each run's own configuration, not one value given to all
    assert len({k[0] for k in computed.values()}) > 1
    made: list[str] = []
    for name in ("configuration_key", "comparability_key", "history_key", "work_key"):
        real = getattr(identity, name)

        def spy(*a, _real=real, _name=name, **k):
            made.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(identity, name, spy)
    again, asked_again = _build(asked)
    assert asked_again == [] and made == []  # every key given back, none computed
    assert {
        r.data_path: (r.key, r.comparability_key(), r.history_key, r.work_key)
        for r in again.runs
    } == computed
    # a comparability key over fewer settings is still computed when asked
    r = again.runs[0]
    r.comparability_key(("n_threads",))
    assert made == ["comparability_key"]
    assert set(RunRecord.KEYS_KEPT) <= set(r._cache)


def _stored(ds: dataset.Dataset) -> dict[str, tuple[bytes, dict[str, str]]]:
    """The store as written: each run's digest and its answers read back (repr)."""
    out = {}
    by_path = {r.data_path: r for r in ds.runs}
    for path, (digest, blobs) in answer_store._read(answer_store._path(ds)).items():
        r = by_path[path]
        out[path] = (
            digest,
            {name: repr(answer_store._unpack(b, r)) for name, b in blobs.items()},
        )
    return out


@pytest.mark.integration  # forks a worker
def test_a_cold_build_asks_over_the_cores_and_keeps_what_one_process_would(
    fleet, monkeypatch
):
    data, asked = fleet
    serial_ds, _ = _build(asked)
    serial, serial_store = _answers(serial_ds), _stored(serial_ds)
    answer_store._path(serial_ds).unlink()  # a cold build again, over two processes
    monkeypatch.setattr(answer_store, "PARALLEL_FROM", 1)
    monkeypatch.setattr(answer_store.cores, "workers", lambda most: 2)
    ds, here = _build(asked)
    runs = [r.data_path for r in ds.runs]
    # this process asked every other run (the worker's asks are in its own copy of the spy's list), and
    # again any run the worker could not hand back whole (an answer that raised is not stored)
    whole = {
        p
        for p, (_, answers) in serial_store.items()
        if len(answers) == len(run_answers.ANSWERS) + 1
    }
    assert set(runs[0::2]) <= set(here)
    assert set(here) - set(runs[0::2]) == set(runs[1::2]) - whole
    assert len(set(runs[1::2]) & whole) > 0  # the worker's answers were kept
    assert _answers(ds) == serial
    assert _stored(ds) == serial_store
    _, again = _build(asked)
    assert again == []  # the next build asks no run


@pytest.mark.integration  # forks a worker
def test_a_worker_that_fails_costs_time_only(fleet, monkeypatch):
    import os

    data, asked = fleet
    serial_ds, _ = _build(asked)
    serial, serial_store = _answers(serial_ds), _stored(serial_ds)
    answer_store._path(serial_ds).unlink()
    monkeypatch.setattr(answer_store, "PARALLEL_FROM", 1)
    monkeypatch.setattr(answer_store.cores, "workers", lambda most: 2)
    parent, real = os.getpid(), answer_store._ask

    def dies_in_the_worker(r):
        if os.getpid() != parent:
            raise RuntimeError("a worker that fails")
        return real(r)

    monkeypatch.setattr(answer_store, "_ask", dies_in_the_worker)
    ds, here = _build(asked)
    assert sorted(here) == sorted(r.data_path for r in ds.runs)  # every run asked here
    assert _answers(ds) == serial and _stored(ds) == serial_store
    assert not list(
        answer_store._path(ds).parent.glob(".*.tmp")
    )  # nothing left beside the store
