"""Every artifact under data/, read and validated once.

The site build (every page, macro and generated file) works from one loaded set: each file
is read, parsed and validated once per build, through core.artifacts' content-keyed
validation cache (bytes already seen valid under the same schemas are not validated again).
Outside a build the set is reloaded when a file under data/ is added, removed or changed.

A run's heavy parts (samples, details, log_tail) are not held: each record keeps its light part and
reads those from its file when asked (core.records.heavy), refusing bytes that are not the ones
validated here (a file changed after load is one ArtifactError: build again).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core import artifacts
from core.paths import data_dir, relpath
from core.records import heavy, record_class
from core.records.base import ArtifactRecord
from core.records.host import HostRecord
from core.records.perplexity import PerplexityRecord
from core.records.projection import ProjectionRecord
from core.records.quality import QualityRecord
from core.records.run import RunRecord, resolve_baselines
from pipelines import light_pack

T = TypeVar("T")


@dataclass(frozen=True)
class Dataset:
    """Every artifact of a data folder, by type, oldest first, each as its type's typed record
    (core.records: RunRecord, QualityRecord, PerplexityRecord, HostRecord, ProjectionRecord) with
    ``path`` (relative to the project root, for links) and ``data_path`` (relative to the data
    folder: where the site publishes its JSON)."""

    root: Path
    by_type: dict[str, list[ArtifactRecord]] = field(default_factory=dict)
    files: tuple[
        tuple[str, Path], ...
    ] = ()  # (path relative to root, absolute path) of every artifact
    _derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def derived(
        self, name: str, compute: Callable[[Dataset], T], fresh: bool = False
    ) -> T:
        """A value computed from this loaded set, once: the set does not change while it is loaded
        (a changed data folder loads as a new set), so every page of a build shares the answer.
        ``fresh``: computed again now (a value that also depends on something outside the set)."""
        if fresh or name not in self._derived:
            self._derived[name] = compute(self)
        return self._derived[name]

    def of(self, artifact: str) -> list[Any]:
        return self.by_type.get(artifact, [])

    @property
    def runs(self) -> list[RunRecord]:
        return self.of("run")

    @property
    def quality(self) -> list[QualityRecord]:
        return self.of("quality")

    @property
    def perplexity(self) -> list[PerplexityRecord]:
        return self.of("perplexity")

    @property
    def hosts(self) -> list[HostRecord]:
        return self.of("host")

    @property
    def projections(self) -> list[ProjectionRecord]:
        return self.of("projection")


_CACHE: dict[Path, tuple[object, Dataset]] = {}
_FROZEN: set[Path] = set()


def _fingerprint(files: list[Path]) -> object:
    out = []
    for p in files:
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return hash(tuple(out))


def load(root: Path | None = None) -> Dataset:
    """The loaded set of ``root`` (default: the data folder), from memory when nothing changed."""
    return _load(root, hold=False)


def _load(root: Path | None, hold: bool) -> Dataset:
    """:func:`load`; ``hold``: a build's set, moved out of the collector's generations as it is made."""
    root = Path(root or data_dir()).resolve()
    cached = _CACHE.get(root)
    if cached is not None and root in _FROZEN:
        return cached[1]
    files = list(artifacts.iter_files(root))
    fp = _fingerprint(files)
    if cached is not None and cached[0] == fp:
        return cached[1]
    cache = artifacts.ValidationCache()
    heavy.forget()  # the parts an older set read (a new set reads its own)
    sources: dict[Path, heavy.Source] = {}
    seen: dict[bytes, Any] = {}
    classes: dict[str, Any] = {}

    # a build's load takes what an earlier build kept of each unchanged file (pipelines.light_pack)
    packs = (
        light_pack.Packs(root, files, cache) if hold and light_pack.enabled() else None
    )

    def split(path: Path, doc: dict[str, Any], digest: str) -> heavy.Source | None:
        # the document's heavy parts taken out, as its record class reads them (light_of)
        kind: str = doc["artifact"]
        cls = classes.get(kind) or classes.setdefault(kind, record_class(kind))
        return heavy.split(path, doc, digest, cls.light_of)

    def light(path: Path, doc: dict[str, Any], digest: str) -> None:
        # a run's and a quality artifact's heavy parts stay in the file (core.records.heavy), out of
        # the set as it is read, what every build reads of them kept beside (the record class's
        # light_of); the parts many documents repeat (model, host, suite, ...) are one object each
        heavy.share(doc, seen)
        src = split(path, doc, digest)
        if src is not None:
            sources[path] = src
        if packs is not None:
            packs.keep(path, doc, digest, src)

    def known(path: Path) -> tuple[dict[str, Any], str, dict[str, Any]] | None:
        got = packs.take(path) if packs is not None else None
        if got is None:
            return None
        doc, digest, src = got
        heavy.share(doc, seen)
        if src is None:
            return (
                doc,
                digest,
                doc,
            )  # whole: the sidecar check reads it as it reads a file
        sources[path] = src
        full = src.records_full
        return (
            doc,
            digest,
            (
                {"details": {"request_records": {"full": full}}}
                if full is not None
                else {}
            ),
        )

    def read(path: Path) -> tuple[dict[str, Any], str, Any]:
        # what ``light`` makes of a file, made in a worker process (light_pack.Packs.prefill)
        doc, digest = artifacts.load_digest(path, cache)
        return doc, digest, split(path, doc, digest)

    by_type: dict[str, list[Any]] = {}
    rels = []
    # every file lies under root: its path for messages is root's (resolved once) plus its place in root
    root_shown = relpath(root)
    prefix = "" if root_shown == "." else root_shown.rstrip("/") + "/"
    collecting = gc.isenabled()
    gc.disable()  # parsed JSON holds no cycles: scanning the growing set at every collection is wasted work
    try:
        # every file checked, and the set as a whole (ids unique): a bad set is one ArtifactErrors
        # listing every problem, raised before any page is built from it
        if packs is not None:
            # a cold load: the files in no pack are read, checked and split in worker processes
            packs.prefill(files, read)
        try:
            loaded = artifacts.load_all(root, files, cache, light, known)
        finally:
            if packs is not None:
                packs.close()
        if packs is not None:
            packs.prune()
        top = str(root)
        cut = len(top) if top.endswith(os.sep) else len(top) + 1
        for path, doc in loaded:
            rel = str(path)[cut:]  # every file lies under root (artifacts.iter_files)
            if os.sep != "/":
                rel = rel.replace(os.sep, "/")
            kind = doc["artifact"]
            cls = classes.get(kind) or classes.setdefault(kind, record_class(kind))
            by_type.setdefault(kind, []).append(
                cls(doc, prefix + rel, rel, sources.get(path))
            )
            rels.append((rel, path))
        del loaded
        sources.clear()
        seen.clear()
        for recs in by_type.values():
            recs.sort(key=lambda r: (r.created, r.id))
        resolve_baselines(by_type.get("run", []))
        if hold:
            # A build's set lives for the whole build and holds no cycles: out of the collector's
            # generations now (gc.freeze, which the build's hooks called after this returned). Left in
            # them until then, the first allocation after the collector is enabled again scans all of it
            # (a young collection over every container just parsed): about a second at 10,000 artifacts.
            # Frozen objects are still freed when their last reference goes. Not outside a build, where
            # whatever else is alive now would be frozen with it for good.
            gc.freeze()
    finally:
        if collecting:
            gc.enable()
        cache.save()
    ds = Dataset(root=root, by_type=by_type, files=tuple(rels))
    _CACHE[root] = (fp, ds)
    return ds


def freeze(root: Path | None = None) -> Dataset:
    """Load now and serve this set without re-checking the files until ``thaw`` (one build)."""
    root = Path(root or data_dir()).resolve()
    _FROZEN.discard(root)
    ds = _load(root, hold=True)
    _FROZEN.add(root)
    return ds


def thaw(root: Path | None = None) -> None:
    _FROZEN.discard(Path(root or data_dir()).resolve())


def building() -> Dataset | None:
    """The set a build loaded (:func:`freeze`), or None outside a build."""
    for root in _FROZEN:
        return _CACHE[root][1]
    return None


def published_json() -> dict[str, str]:
    """Artifact id -> the site path of its published JSON, for the set being built (empty outside a build)."""
    ds = building()
    if ds is None:
        return {}
    return ds.derived(
        "id_json",
        lambda ds: {
            r.id: "data/" + r.data_path for recs in ds.by_type.values() for r in recs
        },
    )
