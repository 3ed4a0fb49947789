"""What every typed record of a loaded artifact shares.

A record wraps the canonical document (``doc``: exactly what the file holds, for the renderers that
show or publish it whole) and gives its fields typed (``rec.id``, ``rec.created``, ``rec.host_id``,
...). Each artifact type has its record in this package, with the one function that builds its
document (``new_<type>``) beside it: ``run``, ``quality``, ``perplexity``, ``host``, ``projection``.

The Mapping interface (``rec["id"]``) is the document, kept for code that hands a whole artifact on
(the artifact viewer, the published JSON); pipelines read the typed fields.

A record of a loaded set (pipelines.dataset) may hold its light part only: a run's heavy keys
(samples, details, log_tail) and a quality artifact's (items, log_tail) stay in its file and are read
from there when asked, through every way in (the typed properties, the Mapping interface, ``stored``):
core.records.heavy. ``doc`` is then the document without them; code outside core.records reads heavy
keys through the record.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from core.records import heavy
from core.records.heavy import Source

R = TypeVar("R", bound="ArtifactRecord")


class ArtifactRecord(Mapping):
    """A loaded artifact of one type (subclasses name it in ``ARTIFACT``)."""

    ARTIFACT: ClassVar[str] = ""
    __slots__ = ("doc", "path", "data_path", "_cache", "_src")

    def __init__(
        self,
        doc: Mapping[str, Any],
        path: str = "",
        data_path: str = "",
        source: Source | None = None,
    ):
        if isinstance(doc, ArtifactRecord):
            path = path or doc.path
            data_path = data_path or doc.data_path
            source = source or doc._src
            doc = doc.doc
        self.doc: dict[str, Any] = doc  # type: ignore[assignment]
        #: path relative to the project root (for links); relative to the data folder (where the site publishes it)
        self.path: str = path or str(doc.get("_path", ""))
        self.data_path: str = data_path or str(doc.get("_data_path", ""))
        self._cache: dict[str, Any] = {}
        #: where the heavy keys left out of ``doc`` are (core.records.heavy); None: ``doc`` is whole
        self._src: Source | None = source

    # Mapping: the canonical document ("_path" / "_data_path": where it was loaded from); a heavy key
    # left in the file is read from there
    def __getitem__(self, k: str) -> Any:
        if k == "_path":
            return self.path
        if k == "_data_path":
            if not self.data_path:
                raise KeyError(k)
            return self.data_path
        try:
            return self.doc[k]
        except KeyError:
            src = self._src
            if src is None or k not in src.keys:
                raise
            return heavy.parts(src)[k]

    def __contains__(self, k: object) -> bool:
        if k in self.doc:
            return True
        if k == "_path" or (k == "_data_path" and self.data_path):
            return True
        return self._src is not None and k in self._src.keys

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc if self._src is None else self._src.order)

    def __len__(self) -> int:
        return len(self.doc if self._src is None else self._src.order)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"

    def _part(self, k: str) -> Any:
        """One key of the document, None when it has none: a heavy one read from the file."""
        v = self.doc.get(k)
        if v is None and self._src is not None and k in self._src.keys:
            return heavy.parts(self._src)[k]
        return v

    @property
    def stored(self) -> dict[str, Any]:
        """The canonical document alone (without the "_path" / "_data_path" a caller may have put
        beside its fields): what a model reads. Whole: heavy keys left in the file are read from it."""
        if self._src is None:
            return {
                k: v for k, v in self.doc.items() if k not in ("_path", "_data_path")
            }
        parts = heavy.parts(self._src)
        return {
            k: parts[k] if k in parts else self.doc[k]
            for k in self._src.order
            if k not in ("_path", "_data_path")
        }

    def _cached(self, name: str, compute: Any) -> Any:
        v = self._cache.get(name, _MISSING)
        if v is _MISSING:
            v = self._cache[name] = compute()
        return v

    def answer(self, key: tuple[Any, ...], compute: Any) -> Any:
        """A small answer a pipeline computes from this record alone (``key``: the function and its
        arguments), kept with the record: computed once however many pages ask (pipelines.memo.per_run),
        so a run's heavy parts are read for it once. The record never changes, so it never goes stale;
        callers treat it as read-only."""
        return self._cached(key, compute)  # type: ignore[arg-type]

    def _cached_bounded(self, name: str, compute: Any) -> Any:
        """:meth:`_cached` for a heavy part's parsed form (a run's samples and details as their kind's
        models): kept only on the ``HEAVY_KEPT`` records that read one most recently, over every record
        alive, and read again from the document (a loaded run's heavy part: from its file, through
        core.records.heavy) when asked after that (the same value: the document is never modified)."""
        v = self._cache.get(name, _MISSING)
        key = (
            id(self),
            name,
        )  # the record is held in _HEAVY while the key is there: the id stays its own
        if v is not _MISSING:
            if key in _HEAVY:
                _HEAVY.move_to_end(key)
            return v
        v = self._cache[name] = compute()
        _HEAVY[key] = self
        if len(_HEAVY) > HEAVY_KEPT:
            (_, old_name), old = _HEAVY.popitem(last=False)
            old._cache.pop(old_name, None)
        return v

    @classmethod
    def light_of(cls, doc: Mapping[str, Any]) -> Any:
        """What every build reads of a whole document's heavy parts, small: computed as the file is
        loaded, before they are left in it (core.records.heavy: the Source's ``light``); None when
        nothing (a run's small answers are computed when first asked: pipelines.run_answers)."""
        return None

    # every artifact type
    @property
    def artifact(self) -> str:
        return self.doc["artifact"]

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def created(self) -> str:
        return self.doc["created"]

    # the measured types (run, quality, perplexity): a key, a status, an error
    @property
    def key(self) -> str:
        return self.doc.get("key") or self.doc["id"]

    @property
    def status(self) -> str:
        return self.doc.get("status", "ok")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def error(self) -> dict[str, Any] | None:
        return self.doc.get("error")

    @property
    def error_kind(self) -> str | None:
        return (self.doc.get("error") or {}).get("kind")

    @property
    def error_message(self) -> str | None:
        return (self.doc.get("error") or {}).get("message")

    # the model it measured (run, quality, perplexity)
    @property
    def model_name(self) -> str:
        return self.doc["model"]["name"]

    @property
    def model_sha256(self) -> str | None:
        """A local file's sha256; None for an endpoint model (and a never-reached remote file)."""
        return self.doc["model"].get("sha256")

    # the host it ran on (a fingerprint: runtime.hosts.fingerprint)
    @property
    def host(self) -> dict[str, Any]:
        return self.doc["host"]

    @property
    def host_id(self) -> str:
        return self.doc["host"]["id"]

    @property
    def host_name(self) -> str:
        return self.doc["host"]["name"]

    @property
    def host_label(self) -> str:
        """The label this record's fingerprint gives its host (core.hostlabel.derived_label); pages
        use pipelines.hostnames.labels, which adds data/hosts.yaml's labels and keeps them unique."""
        from core.hostlabel import derived_label

        return derived_label(self.doc["host"])

    @property
    def cpu_model(self) -> str:
        return (self.doc["host"].get("cpu") or {}).get("model", "")

    @property
    def memory_bytes(self) -> int | None:
        return self.doc["host"].get("memory_bytes")

    @property
    def gpus(self) -> list[dict[str, Any]]:
        return list(self.doc["host"].get("gpus") or [])

    @property
    def gpu_names(self) -> str:
        return ", ".join(g.get("name", "") for g in self.doc["host"].get("gpus") or [])


_MISSING = object()

# A run's samples and details, typed, are most of a loaded set's memory once the pages have read them:
# kept for every record to the end of the build they cost ~270 MiB of peak at 10,000 runs (2,147 MiB
# against 1,873 MiB kept this way; details alone ~100 MiB), growing with the set. The price is time: a
# build reads each run's parts about four times, far apart (site-wide figures, then each per-host page
# kind in turn), so a record read again after 2,000 others is validated again: ~54,000 more model
# validations in a cold build at 10,000 runs, whatever the eviction policy short of keeping them all
# (replayed over the access trace of a whole build), several seconds of CPU.
HEAVY_KEPT = 2000
_HEAVY: OrderedDict[tuple[int, str], ArtifactRecord] = OrderedDict()


def wrap(
    cls: type[R], doc: Mapping[str, Any], path: str = "", data_path: str = ""
) -> R:
    """``doc`` as a record of ``cls`` (a record of that class is returned as it is)."""
    return doc if isinstance(doc, cls) else cls(doc, path, data_path)


def latest_per_key(records: list[R]) -> list[R]:
    """The newest record of each key, oldest first (a forced rerun supersedes; history stays on disk)."""
    latest: dict[str, R] = {}
    for r in records:
        cur = latest.get(r.key)
        if cur is None or (r.created, r.id) > (cur.created, cur.id):
            latest[r.key] = r
    return sorted(latest.values(), key=lambda r: (r.created, r.id))


def read_all(cls: type[R], root: Path | str) -> list[R]:
    """Every artifact of ``cls``'s type under ``root``, validated and read as one set
    (core.artifacts.read_set), as records, oldest first."""
    from core import artifacts
    from core.paths import relpath

    root = Path(root)
    out = [
        cls(doc, relpath(path)) for path, doc in artifacts.read_set(root, cls.ARTIFACT)
    ]
    out.sort(key=lambda r: (r.created, r.id))
    return out
