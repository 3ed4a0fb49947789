"""The columnar index (pipelines.index) over a copy of the committed artifacts: built from the
files, updated incrementally by content, rebuilt with one line when corrupt or stale, never
trusted over the files; and published as Parquet and CSV per table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from core import artifacts
from core.errors import ArtifactError
from tests.support import committed


@pytest.fixture
def data(tmp_path, monkeypatch):
    d = committed.committed_data(tmp_path / "data")
    monkeypatch.setenv("ALMANAC_DATA", str(d))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    return d


def _files(d: Path) -> list[Path]:
    return list(artifacts.iter_files(d))


def test_one_row_per_artifact_and_per_metric(data):
    from pipelines import index

    tables, done = index.update(data)
    files = _files(data)
    assert done.rows == done.added == len(files) and not done.messages
    arts = tables["artifacts"].to_pandas()
    assert sorted(arts["path"]) == sorted(p.relative_to(data).as_posix() for p in files)
    # a run's row and its metrics are the artifact's own values
    run = next(
        p
        for p in files
        if p.parts[-4] == "runs" and json.loads(p.read_text())["status"] == "ok"
    )
    doc = json.loads(run.read_text())
    rel = run.relative_to(data).as_posix()
    row = arts[arts["path"] == rel].iloc[0]
    assert (
        row["id"],
        row["key"],
        row["host_id"],
        row["model"],
        row["test"],
        row["status"],
    ) == (
        doc["id"],
        doc["key"],
        doc["host"]["id"],
        doc["model"]["name"],
        doc["test"]["name"],
        "ok",
    )
    mets = tables["metrics"].to_pandas()
    mine = mets[mets["path"] == rel].set_index("metric")
    assert set(mine.index) == {m for m, s in doc["summary"].items() if "mean" in s}
    for m, s in doc["summary"].items():
        assert (
            mine.loc[m, "mean"] == pytest.approx(s["mean"])
            and mine.loc[m, "n"] == s["n"]
        )
    # failed runs have an artifact row and no metric rows
    failed = arts[arts["status"] == "failed"]
    assert len(failed) and not set(failed["path"]) & set(mets["path"])


def test_rows_made_into_tables_a_few_at_a_time_are_the_rows_made_at_once(
    data, tmp_path, monkeypatch
):
    """An update turns its new rows into Arrow every ROWS_AT_ONCE artifacts (memory): the same tables,
    in the same order, as all at once."""
    import shutil as sh

    from pipelines import index

    whole, _ = index.update(data)
    sh.rmtree(index.index_dir(data))
    monkeypatch.setattr(index, "ROWS_AT_ONCE", 3)
    parts, done = index.update(data)
    assert done.added == len(_files(data)) > 3 * 3
    for name in ("artifacts", "metrics"):
        assert parts[name].equals(whole[name]), name


def test_incremental_by_content_and_rebuilt_from_the_files(data, tmp_path):
    from pipelines import index

    index.update(data)
    files = sorted(
        p
        for p in _files(data)
        if p.parts[-4] == "runs" and '"status": "ok"' in p.read_text()
    )
    gone, edited, touched = files[0], files[1], files[2]
    gone.unlink()
    doc = artifacts.load(edited)
    metric = next(iter(doc["summary"]))
    doc["summary"][metric]["mean"] = 12345.5
    artifacts.write(edited, doc)
    os.utime(touched, None)  # new mtime, same bytes: kept, not read
    tables, done = index.update(data)
    assert (done.removed, done.changed, done.added) == (1, 1, 0)
    assert done.kept == len(_files(data)) - 1 and not done.messages
    mets = tables["metrics"].to_pandas()
    rel = edited.relative_to(data).as_posix()
    assert (
        mets[(mets["path"] == rel) & (mets["metric"] == metric)]["mean"].item()
        == 12345.5
    )
    assert gone.relative_to(data).as_posix() not in set(
        tables["artifacts"].to_pandas()["path"]
    )
    # nothing changed: nothing rewritten
    d = index.index_dir(data)
    before = (d / "meta.json").stat().st_mtime_ns
    _, again = index.update(data)
    assert (
        again.kept == len(_files(data))
        and (d / "meta.json").stat().st_mtime_ns == before
    )
    # deleting the index loses nothing
    shutil.rmtree(d)
    t2, fresh = index.update(data)
    assert fresh.added == len(_files(data)) and not fresh.messages
    assert (
        t2["artifacts"]
        .sort_by("path")
        .drop_columns(["mtime_ns"])
        .equals(tables["artifacts"].sort_by("path").drop_columns(["mtime_ns"]))
    )


def test_an_updated_index_has_the_rows_of_one_made_from_nothing_in_their_order(
    data, tmp_path
):
    """Kept, changed and new artifacts' rows in the order the files are listed, as an index made from
    nothing has them: a site rebuilt after one more host publishes the tables a build without an index
    would, byte for byte (the new host's rows were last)."""
    from pipelines import index

    runs = sorted(p for p in _files(data) if p.parts[-4] == "runs")
    host = runs[0].parent.parent  # one host's runs, away and back: new rows
    away = tmp_path / "away"
    shutil.move(host, away)
    index.update(data)
    shutil.move(away, host)
    edited = runs[-1]  # and a changed one, far from the new
    doc = artifacts.load(edited)
    doc["summary"][next(iter(doc["summary"]))]["mean"] = 12345.5
    artifacts.write(edited, doc)
    updated, done = index.update(data)
    assert done.added and done.changed == 1
    shutil.rmtree(index.index_dir(data))
    made, _ = index.update(data)
    for name in ("artifacts", "metrics"):
        drop = [c for c in ("mtime_ns",) if c in made[name].column_names]
        assert updated[name].drop_columns(drop).equals(made[name].drop_columns(drop))
    site_a, site_b = tmp_path / "a", tmp_path / "b"
    index.publish(updated, site_a)
    index.publish(made, site_b)
    for f in ("artifacts.csv", "metrics.csv"):
        assert (site_a / f).read_bytes() == (site_b / f).read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "swapped", "meta", "version"])
def test_a_corrupt_or_stale_index_is_rebuilt_with_one_line(data, damage):
    from pipelines import index

    good, _ = index.update(data)
    d = index.index_dir(data)
    if damage == "garbage":
        (d / "metrics.parquet").write_bytes(b"PAR1 not really")
        why = "is corrupt (metrics.parquet does not hash to the recorded sha256)"
    elif (
        damage == "swapped"
    ):  # a valid Parquet file, but not the one recorded: not trusted
        shutil.copyfile(d / "artifacts.parquet", d / "metrics.parquet")
        why = "is corrupt (metrics.parquet does not hash to the recorded sha256)"
    elif damage == "meta":
        (d / "meta.json").write_text("{")
        why = "is corrupt (meta.json: "
    else:
        meta = json.loads((d / "meta.json").read_text())
        meta["index_version"] = 0
        (d / "meta.json").write_text(json.dumps(meta))
        why = f"is stale (index_version 0, now {index.INDEX_VERSION})"
    tables, done = index.update(data)
    n = len(_files(data))
    assert len(done.messages) == 1 and "\n" not in done.messages[0]
    assert done.messages[0].startswith(f"index {d} {why}") and done.messages[
        0
    ].endswith(f": rebuilt from {n} artifacts")
    assert done.added == n and tables["metrics"].num_rows == good["metrics"].num_rows
    _, after = index.update(data)
    assert not after.messages and after.kept == n


def test_an_invalid_artifact_stops_the_update_and_leaves_the_index_as_it_was(data):
    from pipelines import index

    index.update(data)
    d = index.index_dir(data)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    bad = min(p for p in _files(data) if p.parts[-4] == "runs")
    doc = json.loads(bad.read_text())
    del doc["status"]
    bad.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        index.update(data)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_published_as_parquet_and_csv_per_table(data, tmp_path):
    from pipelines import index

    tables, _ = index.update(data)
    out = index.publish(tables, tmp_path / "site" / "index")
    assert sorted(p.name for p in out) == [
        "artifacts.csv",
        "artifacts.parquet",
        "metrics.csv",
        "metrics.parquet",
    ]
    for name in ("artifacts", "metrics"):
        pq_t = pq.read_table(tmp_path / "site" / "index" / f"{name}.parquet")
        csv_t = pacsv.read_csv(tmp_path / "site" / "index" / f"{name}.csv")
        assert pq_t.num_rows == csv_t.num_rows == tables[name].num_rows
        assert "mtime_ns" not in pq_t.column_names and "path" in pq_t.column_names


def test_a_cache_that_cannot_be_written_costs_time_only(data, tmp_path, monkeypatch):
    from pipelines import index

    ro = tmp_path / "ro-cache"
    ro.mkdir()
    (ro / "index").write_text("a file where the index folder would be")
    monkeypatch.setenv("ALMANAC_CACHE", str(ro))
    tables, done = index.update(data)
    assert tables["artifacts"].num_rows == len(_files(data))
    assert len(done.messages) == 1 and "not saved" in done.messages[0]
