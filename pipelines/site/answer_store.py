"""Every run's small answers (pipelines.run_answers) kept between builds, keyed by the run's file.

A build asks seven small questions of every run before its pages (what it generated, how its repetition
stopped, its decode point, its requests' token counts, its overheads, its outputs' degeneration, its
part of its host's noise): each reads the run's heavy parts from its file (core.records.heavy), and the
degeneration detector reads every output. At 10,000 artifacts that was a fifth of a build in which
nothing had changed. Each answer is a function of its run's artifact alone (pipelines.memo.per_run), so
it is kept here with the digest of the run's file and of its request-record sidecar
(pipelines.site.page_cache.file_digest: read again only when the file changed), under the code's digest
(page_cache.code_digest): a build asks the runs whose file is new or changed, and takes the others'
answers from here, as they were computed. A run's keys (core.records.run.RunRecord.keys_kept:
configuration, comparability, history, work: canonical JSON hashed, and for a run of an older writer its
stored key's recipe found again) are kept with its answers.

One file per data folder under the user cache (pickle: the cache is the user's own, like the code that
reads it), written atomically when a run's answers were added or a run left the set. An answer that
raised is not kept (the page that asks raises it again, where it belongs), nor one that holds a record
other than its own run (its run is stored as a reference and given back as the run of this build).
``ALMANAC_PAGE_CACHE=0`` turns it off, as it does the page cache; outside a build nothing is kept.
Deleting it loses nothing: the next build asks every run again.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from pathlib import Path
from typing import Any

from core import request_records
from core.paths import cache_dir
from core.records.base import ArtifactRecord
from pipelines import cores, dataset, memo, run_answers
from pipelines.site import page_cache

VERSION = 2  # bump when the file's format changes
_RUN = "run"  # the persistent id of the run an answer is about
_KEYS = "@keys"  # a run's keys (RunRecord.keys_kept), kept beside its answers


def _path(ds: dataset.Dataset) -> Path:
    where = hashlib.blake2b(str(ds.root).encode(), digest_size=8).hexdigest()
    return cache_dir() / "answers" / f"{where}.pickle"


def run_digest(ds: dataset.Dataset, r: Any) -> bytes:
    """The content of what a run's answers are made from: its file and its request-record sidecar."""
    digest = page_cache.file_digest(ds.root / r.data_path)
    side = request_records.sidecar_of(r.data_path, r.records_full)
    if side is not None and (ds.root / side).is_file():
        digest += page_cache.file_digest(ds.root / side)
    return digest


class _Foreign(Exception):
    """An answer holds a record other than its own run: not kept."""


class _Pickler(pickle.Pickler):
    def __init__(self, fh: Any, run: Any) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._run = run

    def persistent_id(self, obj: Any) -> str | None:
        if obj is self._run:
            return _RUN
        if isinstance(obj, ArtifactRecord):
            raise _Foreign
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh: Any, run: Any) -> None:
        super().__init__(fh)
        self._run = run

    def persistent_load(self, pid: Any) -> Any:
        if pid != _RUN:
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        return self._run


def _pack(run: Any, value: Any) -> bytes | None:
    fh = io.BytesIO()
    try:
        _Pickler(fh, run).dump(value)
    except (_Foreign, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return None
    return fh.getvalue()


def _unpack(blob: bytes, run: Any) -> Any:
    return _Unpickler(io.BytesIO(blob), run).load()


def _read(path: Path) -> dict[str, tuple[bytes, dict[str, bytes]]]:
    try:
        with path.open("rb") as fh:
            stored = pickle.load(fh)
    except (
        OSError,
        EOFError,
        pickle.UnpicklingError,
        ValueError,
        TypeError,
        AttributeError,
    ):
        return {}
    if (
        not isinstance(stored, dict)
        or stored.get("version") != VERSION
        or stored.get("code") != page_cache.code_digest()
        or not isinstance(stored.get("runs"), dict)
    ):
        return {}
    return stored["runs"]


def _write(path: Path, runs: dict[str, tuple[bytes, dict[str, bytes]]]) -> None:
    """Written atomically; a cache that cannot be written costs only time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(
                {"version": VERSION, "code": page_cache.code_digest(), "runs": runs},
                fh,
                protocol=pickle.HIGHEST_PROTOCOL,
            )
        tmp.replace(path)
    except OSError:
        pass


#: runs to ask from which a build asks them over the machine's cores (fewer: in turn)
PARALLEL_FROM = 400
#: the most processes that ask (this one included)
MOST_WORKERS = 8


def prime(ds: dataset.Dataset) -> None:
    """Every run's answers (pipelines.run_answers.ANSWERS) kept with it: taken from the store for a run whose
    file is unchanged, else asked of the run (its heavy parts read) and stored. The runs to ask, when there
    are ``PARALLEL_FROM`` of them or more (a cold build), are asked over the machine's cores (:func:`_asked`)."""
    if not page_cache.enabled():
        run_answers.prime(ds.runs)
        return
    path = _path(ds)
    stored = _read(path)
    names = {memo.answer_name(fn): fn for fn in run_answers.ANSWERS}
    kept: dict[str, tuple[bytes, dict[str, bytes]]] = {}
    todo: list[tuple[Any, bytes]] = []
    for r in ds.runs:
        digest = run_digest(ds, r)
        hit = stored.get(r.data_path)
        if hit is not None and hit[0] == digest and _restore(r, hit[1], names):
            kept[r.data_path] = hit
            continue
        todo.append((r, digest))
    made, here = _asked([r for r, _ in todo], path)
    for i, ((r, digest), blobs) in enumerate(zip(todo, made, strict=True)):
        if blobs is None or (i not in here and not _restore(r, blobs, names)):
            # not asked over the cores, or a worker's answers that could not be kept: asked here
            blobs = _ask(r)
        kept[r.data_path] = (digest, blobs)
    if todo or kept.keys() != stored.keys():
        _write(path, kept)


def _ask(r: Any) -> dict[str, bytes]:
    """Ask every answer of the run (kept with it) and its keys: each as stored (an answer that raised, or
    that cannot be stored, left out)."""
    blobs = {}
    for fn, value in run_answers.ask(r).items():
        blob = _pack(r, value)
        if blob is not None:
            blobs[memo.answer_name(fn)] = blob
    try:
        keys = _pack(r, r.keys_kept())
    except Exception:  # a key that raises is computed (and raises) where a page asks it
        keys = None
    if keys is not None:
        blobs[_KEYS] = keys
    return blobs


def _asked(
    runs: list[Any], store: Path
) -> tuple[list[dict[str, bytes] | None], set[int]]:
    """Each run's answers as stored, in order, where they were asked over the cores (None: not asked), and
    the places of those this process asked (their answers kept with them already; a worker's are not).

    A cold build asks every run: each answer reads the run's heavy parts from its file, a seventh of the
    100,000-artifact build's time, in one process. With ``PARALLEL_FROM`` runs or more and more than one
    core, workers forked from this process (the loaded set shared copy on write, as
    pipelines.site.page_cache.fill's) each ask every n-th run and hand its answers back as stored, through a
    file beside the store, while this process asks its own share. A worker that fails, or an answer it
    could not hand back, costs time only: those runs are asked here."""
    out: list[dict[str, bytes] | None] = [None] * len(runs)
    here: set[int] = set()
    n = min(cores.workers(MOST_WORKERS), len(runs))
    if n < 2 or len(runs) < PARALLEL_FROM:
        return out, here
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return out, here
    handed = [store.with_name(f".{store.name}.{os.getpid()}.{w}.tmp") for w in range(n)]

    def share(w: int) -> None:
        if w == 0:  # here: the answers kept with the runs
            for i in range(0, len(runs), n):
                out[i] = _ask(runs[i])
                here.add(i)
            return
        got = [(i, _ask(runs[i])) for i in range(w, len(runs), n)]
        with handed[w].open("wb") as fh:
            pickle.dump(got, fh, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        cores.in_forks(n, share)
    finally:
        for w in range(1, n):
            try:
                with handed[w].open("rb") as fh:
                    for i, blobs in pickle.load(fh):
                        out[i] = blobs
            except Exception:  # a worker that failed: its runs are asked here
                pass
            handed[w].unlink(missing_ok=True)
    return out, here


def _restore(r: Any, blobs: dict[str, bytes], names: dict[str, Any]) -> bool:
    """Keep the stored answers with the run; False (nothing kept) when one is missing or unreadable, so the
    run is asked again."""
    if blobs.keys() != names.keys() | {_KEYS}:
        return False  # an answer (or a key) that raised, or was not stored: asked again
    try:
        values = {name: _unpack(blob, r) for name, blob in blobs.items()}
        keys = values.pop(_KEYS)
        r.keep_keys(keys)
    except Exception:  # an entry this code cannot read back: asked again
        return False
    for name, value in values.items():
        memo.keep(names[name], r, value)
    return True
