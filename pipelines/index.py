"""A columnar index over the artifacts: one row per artifact and one per (artifact, metric).

The canonical JSON files under data/ stay the source of truth; the index is derived from them
and kept in the user cache (``<cache>/index/<data folder digest>/``), so deleting it loses
nothing: the next update rebuilds it from the files.

Format: Parquet through pyarrow, one file per table (``artifacts.parquet``, ``metrics.parquet``)
and ``meta.json`` naming the index version, the schemas digest, the data folder and each
table file's sha256. Why Parquet rather than DuckDB: the index is read by pandas (the pipelines'
frames) and published as is (Open data); Parquet files are that exchange format, open in
pandas, DuckDB, Polars or Spark without a server, a lock or a storage-format version of a
database engine to match. DuckDB can query these files directly when a user wants SQL.

Incremental by content: a file whose (size, mtime) did not change keeps its rows unread; a
changed one is hashed, and only when its sha256 (the validation cache's key) differs is it read,
validated (core.artifacts.load, cached by that digest) and its rows made again; a removed
file's rows go. A missing index is built; a corrupt one (unreadable, a table whose hash is not
the one recorded) or a stale one (another index version or schemas) is rebuilt from the files,
with one line saying so, never trusted over them.

A site build brings the index up to date once, before its pages render, from the set it loaded
(:func:`of_set`); the artifact browsers list its rows (pipelines.site.browser) and the build publishes
the same tables. What a browser lists of an artifact beyond its identity (a run's headline figure, a
quality run's pass rate, a perplexity run's figures) is computed here, from the artifact's typed record,
once: the listing columns.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import artifacts
from core.errors import StorageError
from core.paths import cache_dir, data_dir
from core.records import record_class
from core.records.base import ArtifactRecord

if TYPE_CHECKING:
    from pipelines.dataset import Dataset

INDEX_VERSION = 2  # 2: the listing columns
TABLES = ("artifacts", "metrics")
STATS = (
    "n",
    "mean",
    "median",
    "stddev",
    "min",
    "max",
    "p95",
    "p99",
    "ci95_low",
    "ci95_high",
)

# what the artifact browsers show of a run, quality or perplexity run beyond its identity (listing()),
# each with its column type
LISTING_TYPES: dict[str, type] = {
    "origin": str,  # an endpoint run's model: <served name> at <URL> (<server>)
    "headline_metric": str,  # a run's kind's headline metric (a core.metrics name) ...
    "headline_mean": float,  # ... and its mean, when it has one
    "pass_rate": float,  # a quality run's pass rate (0-1), items passed, items scored
    "n_passed": int,
    "n_items": int,
    "reference": str,  # a perplexity run's reference model, text and figures
    "text": str,
    "ppl": float,
    "ppl_se": float,
    "kld_mean": float,
    "kld_se": float,
    "same_top": float,
    "same_top_se": float,
    "n_scored_tokens": int,
}
LISTING_COLUMNS = tuple(LISTING_TYPES)
# columns of the artifacts table (strings unless _TYPES names another type)
ARTIFACT_COLUMNS = (
    "path",
    "sha256",
    "size",
    "mtime_ns",
    "artifact",
    "id",
    "key",
    "created",
    "status",
    "host_id",
    "host_name",
    "model",
    "model_sha256",
    "test",
    "test_kind",
    "backend",
    "backend_version",
    "matrix",
    "error_kind",
    "error_message",
    *LISTING_COLUMNS,
)
METRIC_COLUMNS = (
    "path",
    "id",
    "key",
    "artifact",
    "created",
    "host_id",
    "model",
    "test",
    "metric",
    *STATS,
)
_TYPES: dict[str, type] = {
    "size": int,
    "mtime_ns": int,
    **{c: int if c == "n" else float for c in STATS},
    **LISTING_TYPES,
}


@dataclass
class Update:
    """What one update did."""

    rows: int = 0
    kept: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    rebuilt: str | None = None  # the one line saying why the index was rebuilt
    messages: list[str] = field(default_factory=list)
    read: list[str] = field(
        default_factory=list
    )  # the files whose rows were made again


def index_dir(root: Path | None = None) -> Path:
    root = Path(root or data_dir()).resolve()
    return cache_dir() / "index" / hashlib.sha256(str(root).encode()).hexdigest()[:16]


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def artifact_row(
    rel: str, digest: str, size: int, mtime_ns: int, doc: dict[str, Any]
) -> dict[str, Any]:
    host = _obj(doc.get("host"))
    model = _obj(doc.get("model"))
    test = _obj(doc.get("test"))
    build = _obj(doc.get("build"))
    matrix = _obj(doc.get("matrix"))
    error = _obj(doc.get("error"))
    suite = _obj(doc.get("suite"))
    return {
        "path": rel,
        "sha256": digest,
        "size": size,
        "mtime_ns": mtime_ns,
        "artifact": _s(doc.get("artifact")),
        "id": _s(doc.get("id")),
        "key": _s(doc.get("key")),
        "created": _s(doc.get("created")),
        "status": _s(doc.get("status")),
        "host_id": _s(host.get("id") or doc.get("host_id")),
        "host_name": _s(host.get("name")),
        "model": _s(model.get("name")),
        "model_sha256": _s(model.get("sha256") or model.get("identity")),
        "test": _s(test.get("name") or suite.get("name")),
        "test_kind": _s(test.get("kind")),
        "backend": _s(doc.get("backend") or build.get("backend")),
        "backend_version": _s(build.get("backend_version")),
        "matrix": _s(matrix.get("name")),
        "error_kind": _s(error.get("kind")),
        "error_message": _s(error.get("message")),
    }


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def listing(rec: ArtifactRecord) -> dict[str, Any]:
    """The listing columns of one artifact, from its typed record (None where its type has none)."""
    out: dict[str, Any] = dict.fromkeys(LISTING_COLUMNS)
    kind = rec.artifact
    if kind == "run":
        r: Any = rec
        if r.is_endpoint:
            out["origin"] = r.model_origin
        m, st = r.headline_metric, r.headline
        if m is not None and st is not None:
            out["headline_metric"], out["headline_mean"] = m.name, float(st.mean)
    elif kind == "quality":
        q: Any = rec
        rate = q.summary.rate
        out["pass_rate"] = _num(rate.pass_rate)
        out["n_passed"], out["n_items"] = rate.passed, rate.n
    elif kind == "perplexity":
        p: Any = rec
        out["reference"] = p.reference.name if p.reference else None
        out["text"] = p.text.name
        res = p.results
        if res is not None:  # a failed measurement has no figures
            for k in ("ppl", "ppl_se", "kld_mean", "kld_se", "same_top", "same_top_se"):
                out[k] = _num(res.get(k))
            out["n_scored_tokens"] = res.get("n_scored_tokens")
    return out


_LISTED = ("run", "quality", "perplexity")


def _record(doc: Mapping[str, Any], rel: str) -> ArtifactRecord | None:
    kind = doc.get("artifact")
    return record_class(kind)(doc, data_path=rel) if kind in _LISTED else None


def rows_of(
    records: Iterable[ArtifactRecord | Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Artifact rows of records held in memory (a file's bytes unknown: no sha256, size or mtime), as
    :func:`update` makes them from the files: what a page or test listing documents not on disk reads."""
    out = []
    for d in records:
        rec = d if isinstance(d, ArtifactRecord) else _record(d, "")
        doc = d.doc if isinstance(d, ArtifactRecord) else dict(d)
        rel = rec.data_path if rec is not None else str(doc.get("_data_path", ""))
        row = artifact_row(rel, "", 0, 0, doc)
        row.update(listing(rec) if rec is not None else {})
        out.append(row)
    return out


def metric_rows(arow: dict[str, Any], doc: dict[str, Any]) -> list[dict[str, Any]]:
    summary = doc.get("summary")
    if not isinstance(summary, dict) or doc.get("status", "ok") != "ok":
        return []
    out = []
    base = {
        k: arow[k]
        for k in (
            "path",
            "id",
            "key",
            "artifact",
            "created",
            "host_id",
            "model",
            "test",
        )
    }
    for metric, st in summary.items():
        if not isinstance(st, dict) or "mean" not in st:
            continue
        row = {**base, "metric": str(metric)}
        for k in STATS:
            v = st.get(k)
            row[k] = (
                v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
            )
        out.append(row)
    return out


#: artifacts whose rows an update holds as Python objects before it makes them an Arrow table
ROWS_AT_ONCE = 2000


def _schema(columns: tuple[str, ...]) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            (
                c,
                {int: pa.int64(), float: pa.float64()}.get(
                    _TYPES.get(c, str), pa.string()
                ),
            )
            for c in columns
        ]
    )


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=_schema(columns))


def _sha_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _meta(root: Path) -> dict[str, Any]:
    return {
        "index_version": INDEX_VERSION,
        "schemas": artifacts.schemas_digest(),
        "root": str(root),
    }


def read(root: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The index's tables as pyarrow tables ({} when there is none), and why it cannot be trusted
    (None when it can: present, intact and of this version)."""
    import pyarrow.parquet as pq

    root = Path(root or data_dir()).resolve()
    d = index_dir(root)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        return {}, None
    where = str(d)
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return {}, f"index {where} is corrupt (meta.json: {exc})"
    if not isinstance(meta, dict):
        return {}, f"index {where} is corrupt (meta.json is not an object)"
    want = _meta(root)
    for k in ("index_version", "schemas", "root"):
        if meta.get(k) != want[k]:
            return {}, f"index {where} is stale ({k} {meta.get(k)!r}, now {want[k]!r})"
    tables = {}
    for name in TABLES:
        p = d / f"{name}.parquet"
        try:
            if _sha_file(p) != (meta.get("tables") or {}).get(name):
                return (
                    {},
                    f"index {where} is corrupt ({name}.parquet does not hash to the recorded sha256)",
                )
            tables[name] = pq.read_table(p)
        except (OSError, ValueError) as exc:
            return {}, f"index {where} is corrupt ({name}.parquet: {exc})"
    return tables, None


def _write(root: Path, tables: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    d = index_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    meta = {**_meta(root), "tables": {}}
    for name, t in tables.items():
        tmp = d / f".{name}.parquet.tmp"
        pq.write_table(t, tmp, compression="zstd")
        meta["tables"][name] = _sha_file(tmp)
        os.replace(tmp, d / f"{name}.parquet")
    artifacts.atomic_write_text(
        d / "meta.json", json.dumps(meta, indent=1, sort_keys=True) + "\n"
    )


def update(
    root: Path | None = None,
    docs: dict[str, dict[str, Any]] | None = None,
    files: list[tuple[str, Path]] | None = None,
    records: Mapping[str, ArtifactRecord] | None = None,
) -> tuple[dict[str, Any], Update]:
    """Bring the index of ``root`` up to date with its files; (tables, what was done).

    ``docs``: documents already loaded and validated (path relative to ``root`` -> document); ``records``:
    the same as typed records, as a site build has them (what a record computed once, its listing reads):
    a changed file among either is hashed but not read again. ``files``: the (relative path, path) of
    every artifact file, when the caller has just listed them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    root = Path(root or data_dir()).resolve()
    tables, why = read(root)
    res = Update(rebuilt=why)
    # the old rows stay in Arrow: only their (path, size, mtime, sha256) are looked at here
    old_paths: dict[str, int] = {}
    old_stat: dict[str, list[Any]] = {"size": [], "mtime_ns": [], "sha256": []}
    if tables:
        cols = (
            tables["artifacts"]
            .select(["path", "size", "mtime_ns", "sha256"])
            .to_pydict()
        )
        old_paths = {p: i for i, p in enumerate(cols["path"])}
        old_stat = cols
    order: list[
        str
    ] = []  # every artifact's path, in the order listed (the rows' order)
    keep: list[int] = []  # rows of the old artifacts table kept as they are
    # new or re-made rows, made into Arrow tables every ROWS_AT_ONCE artifacts: a cold index of 100,000
    # artifacts held as Python dicts until the end was 350 MiB of a build's peak, twice what its tables are
    fresh: list[dict[str, Any]] = []
    fresh_metrics: list[dict[str, Any]] = []
    made_a: list[Any] = []
    made_m: list[Any] = []
    n_fresh = 0
    restamped: dict[
        int, tuple[int, int]
    ] = {}  # same bytes, new (size, mtime): the old row, new stat
    cache = artifacts.ValidationCache()
    seen: set[str] = set()
    try:
        listed = (
            files
            if files is not None
            else (
                (p.relative_to(root).as_posix(), p) for p in artifacts.iter_files(root)
            )
        )
        for rel, path in listed:
            seen.add(rel)
            order.append(rel)
            st = path.stat()
            i = old_paths.get(rel)
            if (
                i is not None
                and old_stat["size"][i] == st.st_size
                and old_stat["mtime_ns"][i] == st.st_mtime_ns
            ):
                keep.append(i)
                continue
            digest = _sha_file(path)
            if i is not None and old_stat["sha256"][i] == digest:
                restamped[i] = (st.st_size, st.st_mtime_ns)
                continue
            rec = (records or {}).get(rel)
            doc = rec.doc if rec is not None else (docs or {}).get(rel)
            if doc is None:
                doc = artifacts.load(path, cache)
            res.read.append(rel)
            if rec is None:
                rec = _record(doc, rel)
            row = artifact_row(rel, digest, st.st_size, st.st_mtime_ns, doc)
            row.update(listing(rec) if rec is not None else {})
            fresh.append(row)
            fresh_metrics += metric_rows(row, doc)
            n_fresh += 1
            if len(fresh) >= ROWS_AT_ONCE:
                made_a.append(_table(fresh, ARTIFACT_COLUMNS))
                made_m.append(_table(fresh_metrics, METRIC_COLUMNS))
                fresh, fresh_metrics = [], []
            if i is None:
                res.added += 1
            else:
                res.changed += 1
    finally:
        cache.save()
    res.kept = len(keep) + len(restamped)
    res.removed = len(set(old_paths) - seen)
    res.rows = res.kept + n_fresh
    if tables and not (n_fresh or res.removed or restamped or why):
        return tables, res  # nothing changed: nothing rewritten
    parts_a = [*made_a, _table(fresh, ARTIFACT_COLUMNS)]
    parts_m = [*made_m, _table(fresh_metrics, METRIC_COLUMNS)]
    del made_a, made_m, fresh, fresh_metrics
    if tables:
        # made once: a set made again per row was 3 s at 10,000 artifacts
        kept = set(keep).union(restamped)
        kept_paths = [path for path, i in old_paths.items() if i in kept]
        parts_a.insert(
            0, tables["artifacts"].take(pa.array(sorted(keep), type=pa.int64()))
        )
        for i, (size, mtime) in restamped.items():
            row = tables["artifacts"].slice(i, 1).to_pylist()[0]
            parts_a.append(
                _table([{**row, "size": size, "mtime_ns": mtime}], ARTIFACT_COLUMNS)
            )
        m = tables["metrics"]
        parts_m.insert(
            0,
            m.filter(
                pc.is_in(m["path"], value_set=pa.array(kept_paths, type=pa.string()))
            ),
        )
    new = {
        "artifacts": pa.concat_tables(parts_a).cast(_schema(ARTIFACT_COLUMNS)),
        "metrics": pa.concat_tables(parts_m).cast(_schema(METRIC_COLUMNS)),
    }
    if tables:
        # kept rows first, then the new and changed: put back in the order the files are listed, as an index
        # made from nothing has them (a site rebuilt after one more host publishes the rows a build of the
        # same data without an index would)
        new = {name: _in_order(t, order) for name, t in new.items()}
    try:
        _write(root, new)
    except (
        OSError,
        StorageError,
    ) as exc:  # a read-only or full cache costs the next update time, nothing else
        res.messages.append(
            f"index {index_dir(root)} not saved ({exc}); the next update reads the files again"
        )
    if why:
        res.messages.append(f"{why}: rebuilt from {res.rows} artifacts")
    return new, res


def _in_order(table: Any, order: list[str]) -> Any:
    """``table``'s rows by their path's place in ``order`` (a stable sort: one artifact's rows keep theirs)."""
    import pyarrow as pa

    place = {rel: k for k, rel in enumerate(order)}
    paths = table.column("path").to_pylist()
    rows = sorted(range(len(paths)), key=lambda i: place[paths[i]])
    return table.take(pa.array(rows, type=pa.int64()))


def of_set(ds: Dataset, fresh: bool = False) -> tuple[dict[str, Any], Update]:
    """The index of a loaded set, brought up to date from it once (the set's derived value: every page
    and the publishing of one build read the same tables); ``fresh``: update it again now (a build's
    first step: the index may have been deleted or damaged since this set was loaded)."""

    def make(ds: Dataset) -> tuple[dict[str, Any], Update]:
        recs = {r.data_path: r for recs in ds.by_type.values() for r in recs}
        return update(ds.root, files=list(ds.files), records=recs)

    return ds.derived("index", make, fresh=fresh)


def listed(ds: Dataset) -> Any:
    """The artifacts table of a loaded set's index (what the fleet listings query)."""
    return of_set(ds)[0]["artifacts"]


def frame(table: str, root: Path | None = None) -> Any:
    """One table of the up-to-date index as a pandas DataFrame (what pipelines query)."""
    tables, _ = update(root)
    return tables[table].to_pandas()


def publish(tables: dict[str, Any], folder: Path) -> list[Path]:
    """Each table as Parquet and CSV under ``folder`` (the site's open data)."""
    import pyarrow.parquet as pq

    from core import csvcell

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, t in tables.items():
        t = t.drop_columns([c for c in ("mtime_ns",) if c in t.column_names])
        pq.write_table(t, folder / f"{name}.parquet", compression="zstd")
        # cells that a spreadsheet would run as a formula (=, +, -, @ first) neutralised (core.csvcell)
        with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
            w = csvcell.writer(fh)
            w.writerow(t.column_names)
            w.writerows(zip(*(t.column(c).to_pylist() for c in t.column_names)))
        out += [folder / f"{name}.parquet", folder / f"{name}.csv"]
    return out
