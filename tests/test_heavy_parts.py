"""A loaded run's heavy parts stay in its file (core.records.heavy).

The loaded set keeps each run's light part; samples, details and log_tail are read from the file when
asked, through every way in (typed properties, the Mapping interface, ``stored``), the last few kept
in memory and every read counted. A file changed or removed after load is refused, never read as
the bytes it was loaded from.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core import artifacts
from core.errors import ArtifactError
from core.records import heavy
from pipelines import dataset
from tests.conftest import GOLDEN
from tests.support import committed


@pytest.fixture
def copied(tmp_path, monkeypatch):
    """A copy of the golden data, loaded as a set (kept parts and counts reset)."""
    d = tmp_path / "data"
    shutil.copytree(GOLDEN, d)
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    dataset._CACHE.clear()
    heavy.forget()
    yield d
    dataset._CACHE.clear()
    heavy.forget()


def _file(root: Path, r) -> dict:
    return artifacts.load(root / r.data_path)


def test_a_loaded_run_holds_its_light_part_and_reads_the_rest_from_its_file(copied):
    ds = dataset.load(copied)
    assert len(ds.runs) >= 5
    for r in ds.runs:
        whole = _file(copied, r)
        for k in heavy.HEAVY["run"]:
            assert k not in r.doc
            assert k in r and r[k] == whole[k] and r.get(k) == whole[k]
        # the light part is the document less those keys; iterating the record gives its file's keys
        assert r.doc == {k: v for k, v in whole.items() if k not in heavy.HEAVY["run"]}
        assert list(r) == list(whole) and len(r) == len(whole)
        assert r.stored == whole and dict(r) == whole
        assert json.dumps(r.stored) == json.dumps(whole)  # key order kept
        kind = r.kind
        if kind is not None:
            assert r.samples == kind.samples.model_validate(whole["samples"])
            assert r.details == kind.details.model_validate(whole["details"])
        assert r.log_tail == whole["log_tail"]
        assert r.envelope.id == whole["id"]
    # host artifacts have no heavy part: whole, as before
    assert all(h._src is None and h.stored == _file(copied, h) for h in ds.hosts)


def test_equal_parts_are_one_object_and_a_set_is_smaller_than_its_documents(copied):
    ds = dataset.load(copied)
    by_host: dict[str, list] = {}
    for r in ds.runs:
        by_host.setdefault(r.host_id, []).append(r)
    many = max(by_host.values(), key=len)
    assert len(many) > 2
    equal = [r for r in many if r.doc["host"] == many[0].doc["host"]]
    assert len(equal) > 2 and all(r.doc["host"] is equal[0].doc["host"] for r in equal)


def test_reads_are_counted_and_the_kept_parts_bounded(copied, monkeypatch):
    monkeypatch.setattr(heavy, "KEPT", 2)
    ds = dataset.load(copied)
    runs = ds.runs[:4]
    before = heavy.COUNTS.copy()
    for r in runs:
        assert r["log_tail"] == r["log_tail"]  # read, then a hit
    assert heavy.COUNTS["read"] - before["read"] == 4
    assert heavy.COUNTS["hit"] - before["hit"] == 4
    assert len(heavy._KEPT) == 2  # the two read last
    assert [k[0] for k in heavy._KEPT] == [r._src.path for r in runs[2:]]
    runs[0]["samples"]  # read again from its file
    assert heavy.COUNTS["read"] - before["read"] == 5 and len(heavy._KEPT) == 2


def _edit_log_tail(path: Path) -> dict:
    """Edit a loaded artifact's file in place (its log tail); the edited document."""
    doc = json.loads(path.read_text())
    doc["log_tail"] = "edited after the build loaded it"
    path.write_text(json.dumps(doc, indent=1))
    return doc


def _refused(*reads) -> None:
    """Each read of a heavy part of an edited file is refused, none served from the old bytes."""
    for read in reads:
        with pytest.raises(ArtifactError, match="changed after it was loaded"):
            read()


def test_a_file_changed_after_load_is_refused_not_read_as_the_old_one(copied):
    ds = dataset.load(copied)
    r = ds.runs[0]
    _edit_log_tail(copied / r.data_path)
    _refused(lambda: r.samples, lambda: r["log_tail"])
    gone = ds.runs[1]
    (copied / gone.data_path).unlink()
    with pytest.raises(ArtifactError, match="removed after it was loaded"):
        _ = gone.stored
    # outside a build the set is loaded again from the files as they are now: the edit is read
    dataset._CACHE.clear()
    assert {x.id: x for x in dataset.load(copied).runs}[r.id].log_tail == (
        "edited after the build loaded it"
    )


def test_parts_kept_from_a_file_are_not_served_for_other_bytes(copied):
    ds = dataset.load(copied)
    r = ds.runs[0]
    old = r["log_tail"]  # kept in memory now
    path = copied / r.data_path
    doc = json.loads(path.read_text())
    doc["log_tail"] = "new"
    path.write_text(json.dumps(doc))
    dataset._CACHE.clear()
    again = {x.id: x for x in dataset.load(copied).runs}[r.id]
    assert again.log_tail == "new" and old != "new"


def test_every_runs_small_answers_read_its_file_once(copied, monkeypatch):
    from pipelines import corpus, facts, roofline, run_answers

    monkeypatch.setattr(heavy, "KEPT", 1)
    ds = dataset.load(copied)
    before = heavy.COUNTS["read"]
    run_answers.prime(ds.runs)
    assert heavy.COUNTS["read"] - before == len(
        ds.runs
    )  # each run's file once, for every answer
    # asked again, page after page: kept with each run, no file read again, the values computed fresh
    for r in ds.runs:
        assert roofline.decode_point(r) == roofline.decode_point.__wrapped__(r)
        assert facts.precision(r) is facts.precision(r)
        assert corpus.generation(r) == r.generation()
    after = heavy.COUNTS["read"]
    for r in ds.runs:
        roofline.decode_point(r), facts.precision(r), corpus.generation(r)
    assert heavy.COUNTS["read"] == after


def test_a_build_that_meets_a_changed_file_says_so_in_one_line(capsys):
    from pipelines.site import hooks

    try:
        try:
            raise ArtifactError(
                "changed after it was loaded (not the bytes validated then): build again",
                file="data/runs/x.json",
            )
        except ArtifactError as exc:
            raise RuntimeError("a macro failed") from exc
    except RuntimeError as wrapped:
        hooks.on_build_error(wrapped)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: data/runs/x.json: changed after it was loaded (not the bytes validated "
        "then): build again"
    ]


# -- a quality artifact's items and log tail stay in its file too ---------------------------------
@pytest.fixture
def quality_set(tmp_path, monkeypatch):
    """The committed quality artifacts, copied and loaded as a set (kept parts and counts reset)."""
    d = tmp_path / "data"
    root = committed.committed_root()
    for path in committed.committed_paths("quality"):
        dest = d / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    dataset._CACHE.clear()
    heavy.forget()
    yield d
    dataset._CACHE.clear()
    heavy.forget()


def test_a_loaded_quality_artifact_holds_its_light_part_and_reads_the_rest_from_its_file(
    quality_set,
):
    from core.models.quality import QualityItem

    qs = dataset.load(quality_set).by_type["quality"]
    assert len(qs) >= 20
    for q in qs:
        whole = _file(quality_set, q)
        assert whole["items"] and whole["log_tail"]
        for k in ("items", "log_tail"):
            assert k not in q.doc
            assert k in q and q[k] == whole[k] and q.get(k) == whole[k]
        assert q.doc == {
            k: v for k, v in whole.items() if k not in ("items", "log_tail")
        }
        assert list(q) == list(whole) and q.stored == whole and dict(q) == whole
        assert json.dumps(q.stored) == json.dumps(whole)  # key order kept
        assert q.items == [QualityItem.read(it) for it in whole["items"]]
        assert q.envelope.id == whole["id"] and len(q.envelope.items) == len(
            whole["items"]
        )


def test_every_quality_artifacts_verdicts_are_its_items_read_once_at_load(
    quality_set,
):
    from pipelines import quality as quality_mod
    from pipelines import speculation

    qs = dataset.load(quality_set).by_type["quality"]
    before = heavy.COUNTS["read quality"]
    # pages' answers from every artifact: pass rates and intervals, paired comparisons, per model
    frame = quality_mod.scores_frame(qs)
    pairs = quality_mod.paired_against_leader(qs)
    by_sha = speculation.quality_by_sha(qs)
    assert len(frame) == len(qs) and pairs and by_sha
    assert heavy.COUNTS["read quality"] == before  # no file read for any of them
    degenerate = 0
    for q in qs:
        items = _file(quality_set, q)["items"]
        v = q.verdicts
        assert [tuple(x) for x in v] == [
            (
                it["id"],
                it["passed"],
                it["degeneration"]["degenerate"],
                tuple(it["tags"]),
                tuple(it["degeneration"]["flags"])
                if it["degeneration"]["degenerate"]
                else (),
            )
            for it in items
        ]
        assert q.n_items == len(items) and q.passed == sum(it["passed"] for it in items)
        assert q.rate.passed == q.summary.passed and q.rate.n == q.summary.n
        assert v.n_degenerate == q.summary.degenerate
        assert quality_mod.item_verdicts(q) == {it["id"]: it["passed"] for it in items}
        degenerate += v.n_degenerate
    assert (
        degenerate > 0
    )  # the committed set has degenerate items: their flags were compared
    # one tuple of ids (and of tags) for every artifact of one suite sample
    by_ids: dict[tuple, list] = {}
    for q in qs:
        by_ids.setdefault(q.verdicts.ids, []).append(q.verdicts)
    many = max(by_ids.values(), key=len)
    assert len(many) > 5 and all(
        v.ids is many[0].ids and v.tags is many[0].tags for v in many
    )


def test_quality_items_reads_are_counted_bounded_and_a_changed_file_refused(
    quality_set, monkeypatch
):
    monkeypatch.setattr(heavy, "KEPT", 2)
    qs = dataset.load(quality_set).by_type["quality"]
    before = heavy.COUNTS.copy()
    for q in qs[:3]:
        assert q["log_tail"] == q["log_tail"]  # read, then a hit
    assert heavy.COUNTS["read quality"] - before["read quality"] == 3
    assert heavy.COUNTS["hit"] - before["hit"] == 3
    assert [k[0] for k in heavy._KEPT] == [q._src.path for q in qs[1:3]]
    # an item models' list is kept by the records' rule (base.HEAVY_KEPT), its file read once for it
    assert qs[0].items is qs[0].items
    assert heavy.COUNTS["read quality"] - before["read quality"] == 4
    q = qs[4]
    path = quality_set / q.data_path
    doc = _edit_log_tail(path)
    _refused(lambda: q.items, lambda: q["log_tail"])
    assert q.n_items == len(
        doc["items"]
    )  # the verdicts were read as the file was loaded
    gone = qs[5]
    (quality_set / gone.data_path).unlink()
    with pytest.raises(ArtifactError, match="removed after it was loaded"):
        _ = gone.stored
