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
