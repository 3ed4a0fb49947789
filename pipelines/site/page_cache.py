"""A page's rendered Markdown kept between builds, keyed by the content of what it was made from.

A fleet's per-host pages (pipelines.site.per_host) are most of a build: 200 hosts make 1,200 of
them, each a full render of its host's runs. One more host's run changes none of the others, so
a rebuild renders only the pages whose inputs changed. The key of a page is the digest of

* the code and the pages' sources (``code_digest``: docs/, pipelines/, runtime/, core/, mkdocs.yml
  and the versions of the packages that render the site, as pipelines.site.inputs hashes them);
* the data folder's files that are not artifacts (registries such as roles.yaml and slots.yaml);
* every artifact that is neither a run nor a host artifact (quality, perplexity, projections:
  the fleet's few shared inputs), by content;
* the page's own artifacts: its host's runs, their request-record sidecars and its host
  artifacts, by content (``host_digest``);
* what the page reads across hosts (``extra``, the page's ``reads``): digests of those inputs, each
  computed once per build (pipelines.site.page_inputs: e.g. the fleet's pooled run-to-run noise, the
  configurations the roles judge), never the page's own output.

A hit gives back the Markdown and the table downloads the render registered (so the build writes
the same files); a miss renders and stores both. Entries live under the user cache
(``ALMANAC_CACHE``), one folder per data folder; a build removes the entries of that folder it
did not use, so the cache holds one build's pages. ``ALMANAC_PAGE_CACHE=0`` turns it off; outside a
build (a test or a tool rendering a page in process, perhaps with its code patched) it is off.
Deleting the cache loses nothing: the next build renders every page.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import filestamp
from core.paths import cache_dir
from pipelines import cores, dataset
from pipelines.site import markdown

VERSION = 1  # bump when the entry format or the key's parts change
_ROOT = Path(__file__).resolve().parents[2]
# once per build (``reset``): the code's and the set's shared digests, each host's, what pages read across
# hosts (pipelines.site.page_inputs); each page's key; the entries used
_MEMO: dict[str, Any] = {}
_KEYS: dict[tuple[str, ...], str] = {}
_USED: dict[
    Path, set[str]
] = {}  # folder -> entries (kept at the end of the build, the rest removed)


_BUILDING: list[bool] = [
    False
]  # set by the build's hooks: outside a build (a test, a tool) nothing is cached


def enabled() -> bool:
    return _BUILDING[0] and os.environ.get("ALMANAC_PAGE_CACHE", "1") != "0"


# A file's digest is of its content; like git's index, a file whose stamp (core.filestamp: size, mtime,
# inode; not ctime, which publishing changes) is the one it had when it was last hashed is not read again
# (an artifact is written by rename: a new inode). Re-reading and hashing every artifact for the keys was
# a tenth of a rebuild at 10,000 artifacts. Kept per cache, for the files the last build hashed.
_DIGESTS: dict[
    str, list[str]
] = {}  # path -> [stat signature, hex digest], this build's
_KNOWN: list[dict[str, list[str]] | None] = [None]  # the last build's, read once


def _digests_path() -> Path:
    return cache_dir() / "pages" / "digests.json.z"


def per_build(name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, once per build (outside a build: every time): a value read from files that are not
    artifacts (a registry), which can change between two builds of one loaded set (mkdocs serve)."""
    if not _BUILDING[0]:
        return compute()
    key_ = f"build:{name}"
    if key_ not in _MEMO:
        _MEMO[key_] = compute()
    return _MEMO[key_]


def file_digest(path: Path) -> bytes:
    """The digest of the file's content (read again only when the file changed since it was last read)."""
    return _file_digest(path)


def _file_digest(path: Path) -> bytes:
    st = path.stat()
    sig = filestamp.stamp(st)
    name = str(path)
    known = _KNOWN[0]
    if known is None:
        try:
            read = json.loads(zlib.decompress(_digests_path().read_bytes()))
        except (OSError, ValueError, zlib.error):
            read = {}
        known = _KNOWN[0] = read if isinstance(read, dict) else {}
    hit = _DIGESTS.get(name) or known.get(name)
    if isinstance(hit, list) and len(hit) == 2 and hit[0] == sig:
        try:
            _DIGESTS[name] = hit
            return bytes.fromhex(hit[1])
        except (TypeError, ValueError):
            pass
    with path.open("rb") as fh:
        digest = hashlib.file_digest(fh, "blake2b").digest()
    if filestamp.settled(st):  # else hashed again next time
        _DIGESTS[name] = [sig, digest.hex()]
    return digest


def _save_digests() -> None:
    if _DIGESTS:
        _store(_digests_path(), dict(_DIGESTS))


def code_digest() -> str:
    """The code, the pages' sources and the rendering packages (once per process)."""
    if "code" not in _MEMO:
        from pipelines.site import inputs

        _MEMO["code"] = inputs.code_digest(_ROOT)
    return str(_MEMO["code"])


def _shared(ds: dataset.Dataset) -> str:
    """The part of every page's key that is the same for the whole set: the data folder's files that are
    not artifacts, and the artifacts other than runs and host artifacts, by content."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"v{VERSION}\0{code_digest()}\0".encode())
    own = {str(p) for _, p in ds.files}
    for r in ds.runs:
        side = _sidecar(ds, r)
        if side is not None:
            own.add(str(side))
    # os.walk and strings, as core.artifacts.iter_files: the files rglob("*") gives, in its order (a
    # path's parts compared one by one), without a Path and a relative_to per file of the set
    top = str(ds.root)
    found: list[tuple[str, ...]] = []
    for folder, _dirs, names in os.walk(top):
        rel = os.path.relpath(folder, top)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        found.extend((*parts, n) for n in names if not n.startswith("."))
    found.sort()
    for parts in found:
        full = os.path.join(top, *parts)
        if full in own or not os.path.isfile(full):
            continue
        h.update(f"file\0{'/'.join(parts)}\0".encode() + _file_digest(Path(full)))
    for kind, recs in sorted(ds.by_type.items()):
        if kind in ("run", "host"):
            continue
        for rec in recs:
            h.update(
                f"{kind}\0{rec.data_path}\0".encode()
                + _file_digest(ds.root / rec.data_path)
            )
    return h.hexdigest()


def _shared_of(ds: dataset.Dataset) -> str:
    # once per build: a registry (not an artifact) edited between two builds of one process (mkdocs serve)
    # leaves the loaded set as it was, so this is not kept with the set
    key = f"shared:{id(ds)}"
    if key not in _MEMO:
        _MEMO[key] = _shared(ds)
    return str(_MEMO[key])


def shared_digest(ds: dataset.Dataset) -> str:
    """The part of every page's key that is the same for the whole set (once per build)."""
    return _shared_of(ds)


def hosts(ds: dataset.Dataset) -> list[str]:
    """Every host of the set with a run or a host artifact, sorted."""
    return sorted(ds.derived("page_cache_by_host", _artifacts_by_host))


def _sidecar(ds: dataset.Dataset, r: Any) -> Path | None:
    from core import request_records

    side = request_records.sidecar_of(r.data_path, r.records_full)
    return None if side is None else ds.root / side


def host_digest(host: str) -> str:
    """The content of one host's artifacts: its runs (with their request-record sidecars) and its
    host artifacts (once per loaded set and host)."""
    memo = f"host:{host}"
    if memo in _MEMO:
        return str(_MEMO[memo])
    ds = dataset.load()
    by_host = ds.derived("page_cache_by_host", _artifacts_by_host)
    h = hashlib.blake2b(digest_size=20)
    for r in by_host.get(host, []):
        h.update(f"{r.data_path}\0".encode() + _file_digest(ds.root / r.data_path))
        side = _sidecar(ds, r) if r.artifact == "run" else None
        if side is not None and side.is_file():
            h.update(b"sidecar\0" + _file_digest(side))
    if _BUILDING[0]:  # once per build: a host's pages (six of them) share it
        _MEMO[memo] = h.hexdigest()
    return h.hexdigest()


def _artifacts_by_host(ds: dataset.Dataset) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in [*ds.runs, *ds.hosts]:
        out.setdefault(r.host_id, []).append(r)
    return out


def stable_text(obj: Any) -> str:
    """The whole of ``obj`` as text, for a key: dataclasses field by field, DataFrames and arrays every
    value (``repr`` elides long ones, and formats a DataFrame slowly), everything else by ``repr``."""
    return repr(_plain(obj))


_SCALARS = frozenset((str, int, float, bool, type(None)))
# type -> its dataclass field names (None: not a dataclass), found once per type: ``dataclasses.fields``
# and ``is_dataclass`` per object were a third of a fleet's warm build's key texts
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _plain(obj: Any) -> Any:
    t = type(obj)
    if (
        t in _SCALARS
    ):  # most of what a key reads: itself (checked first, the rest costs)
        return obj
    # containers of scalars (most of them) without a call per item
    if t is list or t is tuple:
        return [v if type(v) in _SCALARS else _plain(v) for v in obj]
    if t is dict:
        return [
            (
                k if type(k) in _SCALARS else _plain(k),
                v if type(v) in _SCALARS else _plain(v),
            )
            for k, v in obj.items()
        ]
    names = _FIELDS.get(t, ())
    if names == ():
        names = _FIELDS[t] = _dataclass_fields(t)
    if names is not None:
        return (t.__name__, [(n, _plain(getattr(obj, n))) for n in names])
    return _other(obj)


def _dataclass_fields(t: type) -> tuple[str, ...] | None:
    import dataclasses

    if dataclasses.is_dataclass(t):
        return tuple(f.name for f in dataclasses.fields(t))
    return None


def _other(obj: Any) -> Any:
    import numpy as np
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        return (
            "DataFrame",
            _plain(obj.index.tolist()),
            [  # column by column: a row at a time (to_dict, itertuples) is ten times slower; a numeric
                # column as its bytes (every value, exactly, without a Python object per value); each
                # column taken once (a DataFrame's column lookup costs more than a small column's values)
                (_plain(c), str(col.dtype), _column(col))
                for c, col in obj.items()
            ],
        )
    if isinstance(obj, pd.Series):
        return ("Series", obj.name, _plain(obj.to_dict()), str(obj.dtype))
    if isinstance(obj, np.ndarray):
        return ("ndarray", str(obj.dtype), obj.tolist())
    if isinstance(obj, dict):
        return [(_plain(k), _plain(v)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(repr(_plain(v)) for v in obj)
    return obj


def _column(col: Any) -> Any:
    import numpy as np

    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "biuf":
        return ("bytes", col.to_numpy().tobytes())
    return _plain(col.tolist())


def _folder(ds: dataset.Dataset) -> Path:
    where = hashlib.blake2b(str(ds.root).encode(), digest_size=8).hexdigest()
    return cache_dir() / "pages" / where


def key(parts: tuple[str, ...], host: str, extra: Callable[[], str] | None) -> str:
    """The cache key of the page ``parts`` (its name and host) of ``host`` (once per build)."""
    memo = (*parts, host)
    if memo not in _KEYS:
        ds = dataset.load()
        _KEYS[memo] = hashlib.blake2b(
            "\0".join(
                [
                    _shared_of(ds),
                    *parts,
                    host_digest(host),
                    hashlib.blake2b((extra() if extra else "").encode()).hexdigest(),
                ]
            ).encode(),
            digest_size=20,
        ).hexdigest()
    return _KEYS[memo]


def is_cached(
    parts: tuple[str, ...], host: str, extra: Callable[[], str] | None
) -> bool:
    return (_folder(dataset.load()) / f"{key(parts, host, extra)}.json.z").is_file()


def cached(
    parts: tuple[str, ...],
    host: str,
    render: Callable[[], str],
    extra: Callable[[], str] | None = None,
) -> str:
    """The page ``parts`` (its name and host) of ``host``: from the cache when its inputs are unchanged,
    else rendered by ``render`` and stored. ``extra``: what else the page reads, as text (its key's part)."""
    if not enabled():
        return render()
    ds = dataset.load()
    key_ = key(parts, host, extra)
    folder = _folder(ds)
    _USED.setdefault(folder, set()).add(key_)
    path = folder / f"{key_}.json.z"
    try:
        entry = json.loads(zlib.decompress(path.read_bytes()))
        text, tables = entry["text"], entry["tables"]
    except (OSError, ValueError, KeyError, zlib.error):
        entry = None  # missing, or unreadable: rendered again (never trusted half-read)
    if entry is not None:
        for digest, (headers, rows) in tables.items():
            markdown.table_files()[digest] = (headers, rows)
        return str(text)
    before = set(markdown.table_files())
    text = render()
    tables = {
        d: v for d, v in markdown.table_files().items() if d not in before
    }  # what the render registered: its downloads
    _store(path, {"text": text, "tables": tables})
    return text


def workers() -> int:
    """How many processes may render a build's pages, this one included: ``ALMANAC_PAGE_WORKERS`` (default 2),
    at most one per core, and 1 where processes cannot be forked (pipelines.cores)."""
    try:
        asked = int(os.environ.get("ALMANAC_PAGE_WORKERS", "2"))
    except ValueError:
        asked = 1
    return cores.workers(asked) if asked >= 2 else 1


def fill(
    jobs: list[Any], render_one: Callable[[Any], object], pending: Callable[[Any], bool]
) -> None:
    """Render the ``pending`` of ``jobs`` (those not in the cache: their keys are computed here, once,
    before any worker starts) into the cache over the machine's cores before the build's page loop needs them:
    ``ALMANAC_PAGE_WORKERS`` processes (default 2: one forked beside this one, where the machine has two cores;
    1: none) each take a share, forked workers and this one (the loaded set is shared with the build, copy on
    write). A page that fails (in a worker or here) is left to the page loop, which renders what it does not
    find (and reports there, as always, a real error).

    Measured on the 2-core Xeon VM (python benchmarks/site_scale.py --mode fleet [--every-kind] --hosts 200
    --sizes 10000 --reuse --builds cold, 2026-11-30): the every-kind fleet's cold build 110.9 s with one process,
    90.5 s with two, its peak PSS 1,057 and 1,103 MiB; the reference-only fleet's 42.6 and 40.5 s, 658 and
    680 MiB. (An older build measured 153 and 146 s, +370 MiB, and kept it off.)"""
    if not enabled():
        return
    n = workers()
    if n < 2:
        return
    jobs = [j for j in jobs if pending(j)]
    n = min(n, len(jobs))
    if n < 2:
        return
    try:
        cores.in_forks(n, lambda w: [render_one(job) for job in jobs[w::n]])
    except Exception:  # left to the page loop, which reports it where the page is
        pass
    finally:
        markdown.reset_tables()  # the pages register their downloads again when the page loop shows them


def read_entry(name: str, ds: dataset.Dataset) -> dict[str, Any] | None:
    """The entry ``name`` of the set's folder (marked used by this build), or None when it is missing or
    unreadable (never trusted half-read). pipelines.site.html_cache keeps its entries here too."""
    folder = _folder(ds)
    _USED.setdefault(folder, set()).add(name)
    try:
        entry = json.loads(zlib.decompress((folder / f"{name}.json.z").read_bytes()))
    except (OSError, ValueError, zlib.error):
        return None
    return entry if isinstance(entry, dict) else None


def write_entry(name: str, ds: dataset.Dataset, entry: dict[str, Any]) -> None:
    """Store the entry ``name`` in the set's folder (atomic; marked used by this build)."""
    folder = _folder(ds)
    _USED.setdefault(folder, set()).add(name)
    _store(folder / f"{name}.json.z", entry)


def _store(path: Path, entry: dict[str, Any]) -> None:
    """Written atomically; a cache that cannot be written costs only time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(
            zlib.compress(json.dumps(entry, ensure_ascii=False).encode(), 1)
        )
        tmp.replace(path)
    except OSError:
        pass


def prune() -> None:
    """Remove the entries of each folder this build used that it did not use (end of a build); keep the
    digests of the files this build hashed."""
    _save_digests()
    for folder, used in _USED.items():
        try:
            entries = list(folder.glob("*.json.z"))
        except OSError:
            continue
        for p in entries:
            if p.name[: -len(".json.z")] not in used:
                p.unlink(missing_ok=True)
    _USED.clear()


def reset() -> None:
    """Start of a build: the cache in use, nothing remembered from the last build (what it used, its digests)."""
    _USED.clear()
    _MEMO.clear()
    _KEYS.clear()
    _DIGESTS.clear()
    _KNOWN[0] = None
    _BUILDING[0] = True


def finish() -> None:
    """End of a build (finished or failed): pages rendered outside a build are not cached."""
    _BUILDING[0] = False
    _USED.clear()
    _MEMO.clear()
    _KEYS.clear()
    _DIGESTS.clear()
    _KNOWN[0] = None


__all__ = [
    "cached",
    "code_digest",
    "enabled",
    "fill",
    "workers",
    "is_cached",
    "key",
    "prune",
    "reset",
    "registries",
]


def registries() -> str:
    """The roles' and models' registries as the roles read them: the data folder's (also in every page's
    shared part), else the project's own."""
    from core.paths import data_dir, project_root
    from pipelines import roles

    def compute() -> str:
        models = data_dir() / "models.yaml"
        paths = [
            roles.roles_path(),
            models if models.exists() else project_root() / "data" / "models.yaml",
        ]
        return value_digest(
            [(str(p), file_digest(p).hex() if p.is_file() else None) for p in paths]
        )

    return per_build("registries", compute)


def value_digest(value: Any) -> str:
    """A JSON-able value's digest (sorted keys; what is not JSON by its repr): what a key reads."""
    return hashlib.blake2b(
        json.dumps(value, sort_keys=True, default=repr).encode(), digest_size=20
    ).hexdigest()
