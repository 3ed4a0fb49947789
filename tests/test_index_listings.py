"""The fleet listings read the columnar index (pipelines.index): the artifact browsers' rows and counts
made from its artifacts table are the ones the typed records give; the index a site build brings up to
date before its pages is rebuilt from the files when deleted, corrupt or stale (one line), with the same
site; an artifact changed on disk is the only one read again."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from core import artifacts
from core.records.base import ArtifactRecord
from pipelines import dataset, index
from pipelines.site import browser
from pipelines.site.markdown import data_url
from tests.conftest import make_golden_data
from tests.support import committed, two_hosts
from tests.test_html_cache import _build as build


def _records_row(kind: str, r: Any) -> dict[str, Any]:
    """A browser row read from the typed record (what the browsers listed before the index did)."""

    def rnd(v: Any, decimals: int, scale: float = 1.0) -> float | None:
        if v is None:
            return None
        x = scale * float(v)
        return round(x, decimals) if math.isfinite(x) else None

    base = {
        "id": r.id,
        "created": r.created,
        "host": r.host_id,
        "model": r.model_name,
        "status": r.status,
        "json": data_url(r.data_path),
    }
    if kind == "run":
        m, st = r.headline_metric, r.headline
        value, unit, label = (
            (None, "", "")
            if m is None or st is None
            else (round(float(st.mean), m.decimals), m.unit, m.label)
        )
        served = f" · {r.model_origin}" if r.is_endpoint else ""
        return base | {
            "test": r.test_name,
            "backend": r.backend,
            "metric": label,
            "value": value,
            "unit": unit,
            "title": f"{r.model_name} · {r.test_name} · {r.host_id}{served}",
        }
    if kind == "quality":
        s = r.summary.rate
        return base | {
            "suite": r.suite_name,
            "backend": r.backend,
            "pass_rate": None
            if s.pass_rate is None
            else round(100 * float(s.pass_rate), 1),
            "passed": s.passed,
            "n": s.n,
            "title": f"{r.model_name} · {r.suite_name} · {r.host_id}",
        }
    res: Any = r.results or {}
    ref = r.reference.name if r.reference else ""
    what = "KLD vs " + ref if ref else "perplexity"
    return base | {
        "reference": ref,
        "text": r.text.name,
        "ppl": rnd(res.get("ppl"), 5),
        "ppl_se": rnd(res.get("ppl_se"), 5),
        "kld": rnd(res.get("kld_mean"), 7),
        "kld_se": rnd(res.get("kld_se"), 7),
        "same_top": rnd(res.get("same_top"), 3, 100),
        "same_top_se": rnd(res.get("same_top_se"), 3, 100),
        "n": res.get("n_scored_tokens") if r.results is not None else None,
        "title": f"{r.model_name} · {what} · {r.text.name} · {r.host_id}",
    }


def test_the_browsers_read_the_index_s_columns():
    """A browser row is made of the index's columns, under their names (the listing ones in their order)."""
    fields = browser.Listed._fields
    assert set(fields) <= set(index.ARTIFACT_COLUMNS)
    assert fields[-len(index.LISTING_COLUMNS) :] == index.LISTING_COLUMNS


@pytest.mark.parametrize("name", ["committed", "golden"])
def test_the_browsers_rows_from_the_index_are_the_records_rows(
    name, tmp_path, monkeypatch
):
    data = (
        committed.committed_data(tmp_path / "data")
        if name == "committed"
        else make_golden_data(tmp_path / "data")
    )
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    ds = dataset.load(data)
    tables, done = index.of_set(ds)
    assert done.added == len(ds.files) and done.read == [rel for rel, _ in ds.files]
    arts = tables["artifacts"]
    for kind in browser.KINDS:
        recs: list[ArtifactRecord] = ds.of(kind)
        want = [
            _records_row(kind, r)
            for r in sorted(recs, key=lambda r: (r.created, r.id), reverse=True)
        ]
        got = browser.index_rows(kind, arts)
        assert got == want and len(got) == browser.count(kind, arts) == len(recs)
        # the same rows from the index read back from its files (a warm build's), and from rows in memory
        again, kept = index.update(data)
        assert kept.kept == len(ds.files) and not kept.read
        assert browser.index_rows(kind, again["artifacts"]) == want
        assert browser.index_rows(kind, index.rows_of(recs)) == want
    # the sets exercise every listing column (the golden set has no quality run)
    assert (
        ds.of("run") and ds.of("perplexity") and (name == "golden" or ds.of("quality"))
    )
    if name == "committed":
        runs = browser.index_rows("run", arts)
        assert any(" at http" in r["title"] for r in runs)  # an endpoint's origin
        assert any(r["value"] is None for r in runs)  # a run without a headline


def test_an_artifact_changed_on_disk_is_the_only_one_read_again(tmp_path, monkeypatch):
    data = two_hosts.use(monkeypatch, tmp_path)
    index.update(data)
    reads: list[Path] = []
    real = artifacts.load

    def counted(path: Path, *a: Any, **k: Any) -> Any:
        reads.append(Path(path))
        return real(path, *a, **k)

    monkeypatch.setattr(artifacts, "load", counted)
    _, done = index.update(data)
    assert reads == [] and done.kept == done.rows and not done.read
    ds = dataset.load(data)
    run = next(
        r
        for r in ds.runs
        if r.ok and r.headline is not None and r.headline_metric is not None
    )
    path = data / run.data_path
    doc = json.loads(path.read_text())
    m = run.headline_metric.name
    doc["summary"][m]["mean"] = doc["summary"][m]["mean"] * 2 + 1
    artifacts.atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    before = {r["path"]: r for r in index.read(data)[0]["artifacts"].to_pylist()}
    tables, done = index.update(data)
    assert reads == [path] and done.read == [run.data_path]
    assert (done.changed, done.added, done.removed) == (1, 0, 0)
    after = {r["path"]: r for r in tables["artifacts"].to_pylist()}
    assert after[run.data_path]["headline_mean"] == doc["summary"][m]["mean"]
    assert after[run.data_path]["sha256"] != before[run.data_path]["sha256"]
    assert {p: r for p, r in after.items() if p != run.data_path} == {
        p: r for p, r in before.items() if p != run.data_path
    }
    # and the browser lists the new figure
    row = next(
        r for r in browser.index_rows("run", tables["artifacts"]) if r["id"] == run.id
    )
    assert row["value"] == round(
        doc["summary"][m]["mean"], run.headline_metric.decimals
    )
    # a build hands the loaded record over: the changed file is not read again for the index
    path.write_text(
        path.read_text().replace("\n", "\n ", 1)
    )  # same document, other bytes
    ds = dataset.load(data)
    reads.clear()
    _, done = index.of_set(ds, fresh=True)
    assert done.read == [run.data_path] and reads == []


def _build(data: Path, cache: Path, site: Path) -> str:
    return build(data, cache, site, cached=True)


def _differ(a: Path, b: Path) -> list[str]:
    """The files that differ between two site folders (or are in one only)."""

    def files(d: Path) -> dict[str, bytes]:
        return {
            p.relative_to(d).as_posix(): p.read_bytes()
            for p in d.rglob("*")
            if p.is_file()
        }

    fa, fb = files(a), files(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))


def _index_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "index " in ln and "rebuilt" in ln]


@pytest.mark.integration  # four site builds
def test_a_deleted_corrupt_or_stale_index_is_rebuilt_and_the_site_is_the_same(
    tmp_path, monkeypatch
):
    data = two_hosts.use(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    n = len(list(artifacts.iter_files(data)))
    first = _build(data, cache, tmp_path / "site0")
    assert _index_lines(first) == []
    d = index.index_dir(data)
    assert (d / "artifacts.parquet").is_file()
    published = index.read(data)[0]["artifacts"]
    assert published.num_rows == n

    # deleted: built again from the files, without a word (nothing was wrong), the same site
    for p in d.iterdir():
        p.unlink()
    d.rmdir()
    assert _index_lines(_build(data, cache, tmp_path / "site1")) == []
    assert (d / "meta.json").is_file()
    assert _differ(tmp_path / "site0", tmp_path / "site1") == []

    # corrupt: a truncated table
    p = d / "artifacts.parquet"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    lines = _index_lines(_build(data, cache, tmp_path / "site2"))
    assert len(lines) == 1 and "is corrupt" in lines[0]
    assert lines[0].endswith(f": rebuilt from {n} artifacts")
    assert _differ(tmp_path / "site0", tmp_path / "site2") == []

    # stale: another index version
    meta = json.loads((d / "meta.json").read_text())
    meta["index_version"] = index.INDEX_VERSION - 1
    (d / "meta.json").write_text(json.dumps(meta))
    lines = _index_lines(_build(data, cache, tmp_path / "site3"))
    assert len(lines) == 1 and (
        f"is stale (index_version {index.INDEX_VERSION - 1}, now {index.INDEX_VERSION})"
        in lines[0]
    )
    assert _differ(tmp_path / "site0", tmp_path / "site3") == []
    assert index.read(data)[0]["artifacts"].equals(published)
