"""What a loaded set keeps in memory, and the fast path that reads bytes already known valid.

core.artifacts reads bytes the validation cache knows with msgspec (``_parse_known``); it must read
them to exactly the values json reads (types included: 8.0 stays a float, a huge integer an int).
core.records keeps a run's samples and details models for the most recently read records only
(``HEAVY_KEPT``); one read again is the same value. pipelines.dataset leaves a build's set out of
the cyclic collector's generations, keeps a run's heavy parts (samples, details, log_tail) in its
file (core.records.heavy) and makes equal repeated parts (model, host, ...) one object.
"""

from __future__ import annotations

import gc
import json

import pytest

from core import artifacts
from core.records import base
from core.records.run import RunRecord
from tests.conftest import GOLDEN


def _exact(doc: object) -> str:
    """Text that tells every value and its type apart (1 from 1.0 from True, key order kept)."""
    return json.dumps(doc, ensure_ascii=True)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 8.0, "b": 8, "c": -0.0, "d": 0.1, "e": 5e-324, "f": 1.7976931348623157e308}',
        '{"big": 123456789012345678901234567890, "neg": -123456789012345678901234567890}',
        '{"t": true, "f": false, "n": null, "l": [1, 2.50, [], {}], "s": ""}',
        '{"u": "\\u00e9\\u4e2d\\ud83d\\ude00 caf\u00e9", "esc": "a\\"b\\\\c\\n\\t\\/"}',
        '{"lone": "\\ud800 half a pair"}',  # JSON allows it; msgspec refuses it: json reads it
        '  {"z": 1, "a": {"y": [0.30000000000000004, 1e-7, 12345678.9]}}  \n',
    ],
)
def test_bytes_known_valid_read_to_the_values_json_reads(text):
    assert _exact(artifacts._parse_known(text.encode())) == _exact(json.loads(text))


def test_every_committed_artifact_reads_the_same_through_the_validation_cache(
    tmp_path,
):
    cache = artifacts.ValidationCache(tmp_path / "validated.txt")
    paths = sorted(GOLDEN.rglob("*.json"))
    assert len(paths) > 5
    for path in paths:
        strict = artifacts.load(path, cache)  # validated, its digest now known
        known = artifacts.load(path, cache)  # the known bytes' path
        assert _exact(known) == _exact(strict), path.name
    assert len(cache.new) == len(paths)


def _runs(n: int) -> list[RunRecord]:
    path = next(GOLDEN.rglob("tg16--*.json"))
    return [RunRecord(artifacts.load(path), f"run-{i}.json") for i in range(n)]


def test_samples_and_details_models_are_kept_for_the_latest_readers_only(
    monkeypatch,
):
    monkeypatch.setattr(base, "HEAVY_KEPT", 3)
    monkeypatch.setattr(base, "_HEAVY", type(base._HEAVY)())
    runs = _runs(5)
    first = [r.samples for r in runs]
    assert [("samples" in r._cache) for r in runs] == [False, False, True, True, True]
    assert len(base._HEAVY) == 3
    # read again: the same value as before, and the record kept again
    again = runs[0].samples
    assert again == first[0] and again is not first[0]
    assert "samples" in runs[0]._cache and "samples" not in runs[2]._cache
    # a hit keeps a record among the latest: runs[3] read now outlives runs[4]
    assert runs[3].samples is first[3]
    details = runs[1].details  # a heavy part too: kept by the same rule
    assert "samples" in runs[3]._cache and "samples" not in runs[4]._cache
    kind = runs[1].kind
    assert kind is not None
    assert details == runs[1]._shape("details", kind.details, object)
    assert list(base._HEAVY)[-1] == (id(runs[1]), "details")


def test_resources_are_kept_for_the_latest_readers_and_the_spec_shared_by_all(
    monkeypatch,
):
    """What a fleet's runs would each keep otherwise: a Resources model (read by the memory pages) is
    kept by the heavy parts' rule, one spec object serves every run of one test."""
    monkeypatch.setattr(base, "HEAVY_KEPT", 2)
    monkeypatch.setattr(base, "_HEAVY", type(base._HEAVY)())
    runs = _runs(4)
    first = [r.resources for r in runs]
    assert [("resources" in r._cache) for r in runs] == [False, False, True, True]
    again = runs[0].resources
    assert again == first[0] and again.wall_s == runs[0].doc["resources"]["wall_s"]
    assert [r.disturbed for r in runs] == [f.disturbed for f in first]
    assert all(r.spec is runs[0].spec for r in runs) and runs[0].spec is not None


def test_a_builds_set_is_out_of_the_collectors_generations():
    from pipelines import dataset

    dataset._CACHE.clear()
    gc.collect()  # what this test process holds now is frozen with the set: no garbage among it
    try:
        ds = dataset.freeze()
        assert ds.runs
        tracked = {id(o) for o in gc.get_objects()}
        for r in ds.runs[:20]:
            assert id(r.doc) not in tracked and id(r) not in tracked
    finally:
        dataset.thaw()
        dataset._CACHE.clear()
        gc.unfreeze()


def test_a_set_loaded_outside_a_build_is_left_to_the_collector():
    from pipelines import dataset

    dataset._CACHE.clear()
    frozen = gc.get_freeze_count()
    ds = dataset.load()
    assert ds.runs and gc.get_freeze_count() == frozen
    dataset._CACHE.clear()


def _deep_size(objs: list[object]) -> int:
    """Bytes of ``objs`` and everything they hold (an object reached twice counted once)."""
    import sys

    seen: set[int] = set()
    total = 0
    stack = list(objs)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack += [*o.keys(), *o.values()]
        elif isinstance(o, list | tuple):
            stack += list(o)
    return total


def test_a_loaded_run_holds_its_light_part_only():
    """The committed runs' documents held by a loaded set: about 12 KiB a run (the light part, the
    repeated model, host, build, test, matrix and settings shared); holding whole documents took
    about 100 KiB a run (samples, details and log_tail of every run)."""
    from pipelines import dataset

    dataset._CACHE.clear()
    try:
        runs = dataset.load().runs
        assert len(runs) > 100
        per_run = _deep_size([r.doc for r in runs]) / len(runs)
        assert per_run < 25 * 1024, f"{per_run:.0f} bytes a run"
        assert not any(
            k in r.doc for r in runs for k in ("samples", "details", "log_tail")
        )
    finally:
        dataset._CACHE.clear()


def test_a_loaded_quality_artifact_holds_its_light_part_and_its_verdicts_only():
    """The committed quality artifacts' documents held by a loaded set: about 10 KiB an artifact (the
    light part, the repeated suite, model, host, ... shared) and a few hundred bytes of item verdicts
    (the ids and tags shared by every artifact of a suite sample); holding whole documents took about
    112 KiB an artifact (its items and log tail; ~143 KiB of JSON at the every-kind 100k fleet)."""
    import sys

    from pipelines import dataset

    dataset._CACHE.clear()
    try:
        qs = dataset.load().by_type["quality"]
        assert len(qs) > 20
        per_doc = _deep_size([q.doc for q in qs]) / len(qs)
        assert per_doc < 24 * 1024, f"{per_doc:.0f} bytes an artifact"
        assert not any(k in q.doc for q in qs for k in ("items", "log_tail"))
        own = [
            sys.getsizeof(v)
            + sys.getsizeof(v.passed)
            + sys.getsizeof(v.degenerate)
            + (sys.getsizeof(v.flags) if v.flags else 0)
            for v in (q.verdicts for q in qs)
        ]
        assert sum(own) / len(own) < 1024, (
            f"{sum(own) / len(own):.0f} bytes of verdicts"
        )
        assert len({id(q.verdicts.ids) for q in qs}) == len(
            {q.verdicts.ids for q in qs}
        )
    finally:
        dataset._CACHE.clear()
