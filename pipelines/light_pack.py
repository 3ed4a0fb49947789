"""The light part of every artifact a build loaded, kept between builds by the file's stamp.

A build's load (pipelines.dataset) reads every artifact file, hashes it (the validation cache is keyed
by content), parses it and takes its heavy parts out (core.records.heavy): about a sixth of a build
with nothing new at 10,000 artifacts. What it keeps of a file (the light document and where its heavy
parts are) is a function of the file's bytes and of the code that reads them, so it is kept here, one
pack per folder of the data folder: ``{file name: (stamp, sha256 hex, light part as msgpack)}``. The next
build takes a file's entry when

* the file's stamp (core.filestamp: size, mtime, inode; not ctime, which publishing changes) is the one
  recorded, and the file had settled when it was recorded (git's racy case);
* the recorded sha256 is in the validation cache (those bytes passed every check under the current
  schemas: the cache's namespace is the schemas' digest);
* the pack was written by the same code (``code_digest``: core/, this module and pipelines.dataset;
  the Python version).

Any other file is read as always, and the checks of the set as a whole (ids unique, one machine per
host id, request-record sidecars) run on every file, packed or read. A pack that cannot be read, or of
other code, is ignored with nothing said: its files are read (and the pack written again). What the
stamp cannot see (core.filestamp) the pack cannot: a file rewritten in place to the same size with its
mtime set back; a heavy part read later still checks the file's bytes against the sha256 loaded
(core.records.heavy), and deleting the cache (``ALMANAC_CACHE``) loses nothing.

A load that finds ``PARALLEL_FROM`` files or more in no pack (a cold build: a new cache, a new data
folder, new code) makes their light parts in worker processes first, one per core (:meth:`Packs.prefill`:
each worker reads, hashes, checks and splits its share of the files, as the load would, and hands back
their entries), then loads as a warm build does, taking every file's entry. The result is the same set:
a file a worker could not read or check is read again by the load, which says what is wrong with it as
it always does; a worker that fails costs time only.

Used by a build only (pipelines.dataset.freeze), and not with ``ALMANAC_PAGE_CACHE=0`` (a build
without caches). Memory: one folder's pack is read at a time, its bytes let go as its entries are
unpickled; a folder's entries are held to be written again only when the folder changed.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import pickle
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from core import artifacts, filestamp
from core.paths import cache_dir
from core.records import heavy
from pipelines import cores

VERSION = 1  # bump when a pack's format changes
_HERE = Path(__file__).resolve()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """What a light part is made by: core/ (parsing, migrations, record classes, heavy parts), this
    module, pipelines.dataset, the Python version, and the schemas (the validation cache's namespace)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"v{VERSION}\0{sys.version}\0{artifacts.schemas_digest()}\0".encode())
    core = _HERE.parents[1] / "core"
    for p in sorted(
        [*core.rglob("*.py"), _HERE, _HERE.parent / "dataset.py"],
        key=lambda p: p.as_posix(),
    ):
        h.update(p.as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def enabled() -> bool:
    return os.environ.get("ALMANAC_PAGE_CACHE", "1") != "0"


#: stamp, sha256 (hex), (light document, heavy parts' place) as msgpack
Entry = tuple[str, str, bytes]
#: a file read and checked: its light document, its sha256 (hex), its heavy parts' place (or None)
Read = Callable[[Path], tuple[dict[str, Any], str, Any]]

#: files in no pack from which a load makes their light parts in worker processes (fewer: read in turn)
PARALLEL_FROM = 400
#: the most worker processes a load starts (one per core up to this)
MOST_WORKERS = 8
_SHARE = 64  # files a worker is handed at a time

# the workers' reader: set before they fork, so nothing of it is pickled
_READ: Read | None = None


def workers() -> int:
    """How many worker processes a load may use: the cores this process may run on, up to
    ``MOST_WORKERS``; 1 (none) where processes cannot be forked (pipelines.cores)."""
    return cores.workers(MOST_WORKERS)


def _fill(paths: list[str]) -> list[tuple[str, Entry, bool]]:
    """A worker's share: each file's entry and whether it may be kept (it has settled); a file that
    cannot be read or checked is left out (the load reads it and says why)."""
    read = _READ
    assert read is not None
    gc.disable()  # parsed JSON holds no cycles
    out = []
    for p in paths:
        path = Path(p)
        try:
            doc, digest, src = read(path)
            got = Packs._entry(path, doc, digest, src, settled_only=False)
        except Exception:
            continue
        if got is not None:
            entry, settled = got
            out.append((p, entry, settled))
    return out


# msgpack through msgspec, as the loader parses JSON (core.artifacts): a decoded document's keys are the
# objects every other document's are (one string per key in the set, not one per document), and a
# JSON document's values come back as they were (str, int, float, bool, None, list, dict)
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


class Packs:
    """The packs of one data folder during one load: ``take`` a file's light part, ``keep`` one read
    from its file (each folder's pack written, when it changed, once its last file is done); ``prune``
    the packs of folders gone."""

    def __init__(self, root: Path, files: list[Path], cache: artifacts.ValidationCache):
        self.cache = cache
        where = hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()
        self.folder = cache_dir() / "light" / where
        self.code = code_digest()
        # folder -> the names of its artifact files in this set
        self.names: dict[str, set[str]] = {}
        for p in files:
            d, n = os.path.split(p)
            self.names.setdefault(d, set()).add(n)
        self._left = {d: len(n) for d, n in self.names.items()}  # files not yet done
        # while a folder's files are being loaded: its pack's entries, and those taken or made this load
        self._read: dict[str, dict[str, Entry]] = {}
        self._new: dict[str, dict[str, Entry]] = {}
        # made by the workers this load (prefill): folder -> name -> (entry, may be kept)
        self._made: dict[str, dict[str, tuple[Entry, bool]]] = {}
        self._dirty: set[str] = set()  # folders some entry of which was made this load
        self._pool: ProcessPoolExecutor | None = None
        self._shares: list[Future[list[tuple[str, Entry, bool]]] | None] = []
        self._share_of: dict[str, int] = {}  # a file given to the workers -> its share

    def prefill(self, files: list[Path], read: Read) -> int:
        """Start making the entries of the files of ``files`` whose folder has no pack yet in worker
        processes (``read``: what the load does to a file, done in a worker), when there are
        ``PARALLEL_FROM`` of them or more and more than one core: :meth:`take` gives each file's entry
        as its share is done (the load takes them in ``files`` order, as the workers make them, so
        little waits in memory). Returns how many files the workers were given (0: the load reads them
        in turn, as without this). Only a folder's pack file is looked for, not read (a warm load reads
        each pack once, as it takes its files). :meth:`close` ends the workers."""
        global _READ
        bare = {folder for folder in self.names if not self._pack_path(folder).exists()}
        todo = [str(p) for p in files if os.path.dirname(p) in bare]
        n = workers()
        if n < 2 or len(todo) < PARALLEL_FROM:
            return 0
        shares = [todo[i : i + _SHARE] for i in range(0, len(todo), _SHARE)]
        _READ = read
        try:
            self._pool = ProcessPoolExecutor(
                n, mp_context=multiprocessing.get_context("fork")
            )
            self._shares = [self._pool.submit(_fill, share) for share in shares]
        except OSError:  # no process could be started: the files are read in turn
            self.close()
            return 0
        for i, share in enumerate(shares):
            for p in share:
                self._share_of[p] = i
        return len(todo)

    def _collect(self, path: str) -> None:
        """Wait for the share ``path`` was given to and keep what it made; a share that failed costs
        time only (its files are read in turn)."""
        i = self._share_of.pop(path, None)
        share = self._shares[i] if i is not None else None
        if share is None or i is None:
            return
        self._shares[i] = None
        try:
            got = share.result()
        except (
            Exception
        ):  # a worker that died (BrokenProcessPool), a result not pickled, ...
            return
        for p, entry, settled in got:
            folder, name = os.path.split(p)
            self._made.setdefault(folder, {})[name] = (entry, settled)
            self.cache.add(entry[1])  # these bytes passed every check, in the worker

    def close(self) -> None:
        """End the workers of :meth:`prefill` (what they have not made is read in turn)."""
        global _READ
        _READ = None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self._shares = []
        self._share_of.clear()

    def _entry_of(self, path: Path) -> Entry | None:
        """The entry of ``path`` in its folder's pack when it is still the file's (stamp and checked)."""
        folder, name = os.path.split(path)
        entry = self._load(folder).get(name)
        if entry is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if entry[0] != filestamp.stamp(st) or entry[1] not in self.cache:
            return None
        return entry

    def _pack_path(self, folder: str) -> Path:
        name = hashlib.blake2b(folder.encode(), digest_size=12).hexdigest()
        return self.folder / f"{name}.pickle"

    def _load(self, folder: str) -> dict[str, Entry]:
        if folder in self._read:
            return self._read[folder]
        try:
            stored = pickle.loads(self._pack_path(folder).read_bytes())
        except Exception:  # missing, cut short, of another format: its files are read
            stored = None
        ok = (
            isinstance(stored, tuple)
            and len(stored) == 3
            and stored[0] == self.code
            and stored[1] == folder
            and isinstance(stored[2], dict)
        )
        entries: dict[str, Entry] = stored[2] if ok else {}
        self._read[folder] = entries
        return entries

    def take(self, path: Path) -> tuple[dict[str, Any], str, Any] | None:
        """The light document, sha256 (hex) and heavy parts' place (a core.records.heavy.Source, None
        for a type without heavy parts) of ``path`` from its folder's pack, or None (read the file)."""
        if self._share_of:
            self._collect(str(path))
        folder, name = os.path.split(path)
        made = self._made.get(folder, {}).pop(name, None)
        if made is not None:
            entry: Entry | None = made[0]
            # made this load: the pack is written again, with the entry when the file had settled
            keep = made[1]
        else:
            entry, keep = self._entry_of(path), True
        if entry is None:
            return None
        digest, blob = entry[1], entry[2]
        try:
            doc, place = _DECODER.decode(blob)
            src = None
            if place is not None:
                keys, order, full, light = place
                order = tuple(order)
                src = heavy.Source(
                    doc["artifact"],
                    path,
                    bytes.fromhex(digest),
                    tuple(keys),
                    heavy._ORDERS.setdefault(order, order),
                    full,
                    None if light is None else pickle.loads(light),
                )
        except Exception:  # an entry this code cannot read back: the file is read
            return None
        if keep:
            self._new.setdefault(folder, {})[name] = entry
        if made is not None:
            self._dirty.add(folder)
        self._done(folder)
        return doc, digest, src

    def keep(self, path: Path, doc: dict[str, Any], digest: str, src: Any) -> None:
        """Remember the light part of ``path``, just read (``doc`` its light document, ``src`` where its
        heavy parts are), when the file has settled (else it is read again next time)."""
        folder, name = os.path.split(path)
        try:
            got = self._entry(path, doc, digest, src)
            if got is not None:
                self._new.setdefault(folder, {})[name] = got[0]
        finally:
            self._done(folder)

    @staticmethod
    def _entry(
        path: Path,
        doc: dict[str, Any],
        digest: str,
        src: Any,
        settled_only: bool = True,
    ) -> tuple[Entry, bool] | None:
        """The entry of ``path`` and whether it has settled (``settled_only``: None when it has not)."""
        if not digest:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        settled = filestamp.settled(st)
        if settled_only and not settled:
            return None
        try:
            place = (
                None
                if src is None
                else (
                    src.keys,
                    src.order,
                    src.records_full,
                    None
                    if src.light is None
                    else pickle.dumps(src.light, protocol=pickle.HIGHEST_PROTOCOL),
                )
            )
            blob = _ENCODER.encode((doc, place))
        except (
            Exception
        ):  # a part msgpack cannot hold (an integer past 64 bits): read next time
            return None
        return (filestamp.stamp(st), digest, blob), settled

    def _done(self, folder: str) -> None:
        """One more file of ``folder`` taken or read; after its last, its pack is written when it changed
        (atomically; a cache that cannot be written costs time only) and its entries let go."""
        self._left[folder] -= 1
        if self._left[folder]:
            return
        new = self._new.pop(folder, {})
        old = self._read.pop(folder, None)
        names = self.names[folder]
        if (
            old is not None
            and folder not in self._dirty
            and new.keys() == old.keys() == names
            and all(new[n] is old[n] for n in names)
        ):
            return  # every entry taken as it was
        path = self._pack_path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(
                pickle.dumps((self.code, folder, new), protocol=pickle.HIGHEST_PROTOCOL)
            )
            tmp.replace(path)
        except OSError:
            pass

    def prune(self) -> None:
        """Remove the packs of folders no longer in the set (after a load that read every file)."""
        keep = {self._pack_path(folder).name for folder in self.names}
        try:
            stale = [p for p in self.folder.glob("*.pickle") if p.name not in keep]
        except OSError:
            stale = []
        for p in stale:
            p.unlink(missing_ok=True)
