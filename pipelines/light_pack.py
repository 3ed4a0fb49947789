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

Used by a build only (pipelines.dataset.freeze), and not with ``ALMANAC_PAGE_CACHE=0`` (a build
without caches). Memory: one folder's pack is read at a time, its bytes let go as its entries are
unpickled; a folder's entries are held to be written again only when the folder changed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from core import artifacts, filestamp
from core.paths import cache_dir
from core.records import heavy

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
        folder, name = os.path.split(path)
        entry = self._load(folder).get(name)
        if entry is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        sig, digest, blob = entry
        if sig != filestamp.stamp(st) or digest not in self.cache:
            return None
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
        self._new.setdefault(folder, {})[name] = entry
        self._done(folder)
        return doc, digest, src

    def keep(self, path: Path, doc: dict[str, Any], digest: str, src: Any) -> None:
        """Remember the light part of ``path``, just read (``doc`` its light document, ``src`` where its
        heavy parts are), when the file has settled (else it is read again next time)."""
        folder, name = os.path.split(path)
        try:
            blob = self._entry(path, doc, digest, src)
            if blob is not None:
                self._new.setdefault(folder, {})[name] = blob
        finally:
            self._done(folder)

    @staticmethod
    def _entry(path: Path, doc: dict[str, Any], digest: str, src: Any) -> Entry | None:
        if not digest:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not filestamp.settled(st):
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
        return filestamp.stamp(st), digest, blob

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
