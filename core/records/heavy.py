"""A loaded run's and quality artifact's heavy parts: left in its file, read from there when asked.

A run's ``samples``, ``details`` and ``log_tail`` are most of its document (by JSON bytes about 53%,
8% and 18% of a committed run; more in memory, where every sample is a Python float in a dict).
Pages read them for a few figures, and a loaded set that held them for every run grew past 8 GB
at 100,000 artifacts. So the loader (pipelines.dataset, through core.artifacts.load_tree) keeps each
run's light part as its record's ``doc`` and a :class:`Source` beside it: the file, the sha256 of the
bytes it validated, the heavy keys it took out and the document's key order. Asked for a heavy key
(the typed properties, ``rec["samples"]``, ``.get``, ``stored``, iterating the record), the record
reads its file again (:func:`parts`): only that file, decoded as core.artifacts decodes bytes
already known valid (msgspec; migrated as on load). The parts of the ``KEPT`` files read last stay
in memory (an LRU); every read from a file and every hit is counted (:data:`COUNTS`, per artifact
type too: ``COUNTS["read quality"]``).

A quality artifact's ``items`` and ``log_tail`` are left in its file the same way (at the every-kind
100,000-artifact fleet its items held 1.7 GiB of a 2.9 GiB loaded set, its log tail 0.1 GiB). What
every build reads of every artifact's items (each item's id, verdict, degeneration and tags: pass
rates, paired comparisons, roles' evidence) is computed from the whole document as it is loaded, before
the items are taken out (the record class's ``light_of``, kept as the Source's ``light``): a build
reads a quality file only for a page that shows its items' text or timings (backend parity, the task
table), once.

A file changed or removed after the set was loaded is never read as if it were the old one: its
bytes must have the sha256 the loader validated, else the read is one ArtifactError naming the file
("changed after it was loaded: build again"). A build serves one loaded set from start to end
(pipelines.dataset.freeze); outside a build, pipelines.dataset.load loads a new set when a file
changed, and a record of the old set still refuses the new bytes.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter, OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from core.errors import ArtifactError

_encode = msgspec.json.Encoder().encode

#: the heavy keys of each artifact type, left in the file after load
HEAVY: dict[str, tuple[str, ...]] = {
    "run": ("samples", "details", "log_tail"),
    "quality": ("items", "log_tail"),
}

#: how many files' heavy parts stay in memory after they were read (the most recently read)
KEPT = 500

#: reads from a file ("read") and answers from memory ("hit"), since the process started
COUNTS: Counter[str] = Counter()
#: with ALMANAC_HEAVY_TRACE set (a file): file reads per caller (the first function outside
#: core.records), appended to that file as one JSON line when the process ends
CALLERS: Counter[str] = Counter()
_TRACE = os.environ.get("ALMANAC_HEAVY_TRACE", "")


def _report() -> None:
    import json

    with open(_TRACE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"counts": COUNTS, "callers": CALLERS}) + "\n")


if _TRACE:
    import atexit

    atexit.register(_report)

_KEPT: OrderedDict[tuple[Path, bytes], dict[str, Any]] = OrderedDict()
_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}


class Source:
    """Where a light record's heavy parts are: its file, the sha256 of the bytes loaded, the keys taken
    out, the whole document's key order, and its full request records' entry (a run's
    ``details.request_records.full``: the sidecar it names, None for most runs), kept because the
    site's publishing and page cache ask it of every run."""

    __slots__ = ("artifact", "path", "digest", "keys", "order", "records_full", "light")

    def __init__(
        self,
        artifact: str,
        path: Path,
        digest: bytes,
        keys: tuple[str, ...],
        order: tuple[str, ...],
        records_full: dict[str, Any] | None,
        light: Any = None,
    ):
        self.artifact = artifact
        self.path = path
        self.digest = digest
        self.keys = keys
        self.order = order
        self.records_full = records_full
        #: what every build reads of the heavy parts, computed from them once as the file was loaded
        #: (a quality artifact's item verdicts, core.records.quality.Verdicts); None for a run
        self.light = light


def split(
    path: Path,
    doc: dict[str, Any],
    digest: str,
    light: Callable[[dict[str, Any]], Any] | None = None,
) -> Source | None:
    """Take ``doc``'s heavy keys out of it, in place (a loaded document of ``path`` whose bytes have
    sha256 ``digest``, hex); the :class:`Source` to read them back from, None for a type without heavy
    parts. ``light``: what every build reads of the heavy parts, computed from the whole document
    before they are taken out (its record class's ``light_of``), kept as the Source's ``light``."""
    heavy = HEAVY.get(doc.get("artifact"))  # type: ignore[arg-type]
    if not heavy or not digest:
        return None  # without the digest of the bytes loaded, a later read could not be checked
    order = tuple(doc)
    order = _ORDERS.setdefault(
        order, order
    )  # one tuple for every document of one shape
    keys = tuple(k for k in heavy if k in doc)
    details = doc.get("details")
    rr = details.get("request_records") if isinstance(details, dict) else None
    full = rr.get("full") if isinstance(rr, dict) else None
    answers = light(doc) if light is not None else None
    for k in keys:
        del doc[k]
    return Source(
        doc["artifact"],
        path,
        bytes.fromhex(digest),
        keys,
        order,
        full if isinstance(full, dict) else None,
        answers,
    )


#: the parts of a document that many documents repeat word for word (a run's model, host, build, ...,
#: a quality artifact's suite and its sample's ids):
#: one object for all the equal ones in a loaded set (:func:`share`)
SHARED = ("model", "host", "build", "test", "matrix", "settings", "suite")


def share(doc: dict[str, Any], seen: dict[bytes, Any]) -> None:
    """Make each :data:`SHARED` part of ``doc`` the object an earlier document of the set has for equal
    content (``seen``: the set's, by the part's JSON with types and key order kept), in place. A loaded
    document is read, never modified (core.records), so equal parts may be one object."""
    for k in SHARED:
        v = doc.get(k)
        if isinstance(v, dict):
            doc[k] = seen.setdefault(k.encode() + b"\0" + _encode(v), v)


def parts(src: Source) -> dict[str, Any]:
    """The heavy parts of ``src``'s file (key -> value as loaded): from memory when read lately, else
    from the file, whose bytes must be the ones loaded."""
    key = (
        src.path,
        src.digest,
    )  # the same bytes have the same parts, whichever set loaded them
    got = _KEPT.get(key)
    if got is not None:
        _KEPT.move_to_end(key)
        COUNTS["hit"] += 1
        return got
    got = _read(src)
    COUNTS["read"] += 1
    COUNTS[f"read {src.artifact}"] += 1
    if _TRACE:
        CALLERS[f"{src.artifact} {_caller()}"] += 1
    _KEPT[key] = got
    if len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return got


def forget() -> None:
    """Drop every kept part (a test, or a new set loaded over an old one)."""
    _KEPT.clear()


def _read(src: Source) -> dict[str, Any]:
    from core import artifacts
    from core.paths import relpath

    try:
        raw = src.path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(
            "was removed after it was loaded: build again", file=relpath(src.path)
        ) from None
    except OSError as exc:
        raise ArtifactError(
            f"cannot be read again ({exc.strerror or exc})", file=relpath(src.path)
        ) from None
    if hashlib.sha256(raw).digest() != src.digest:
        raise ArtifactError(
            "changed after it was loaded (not the bytes validated then): build again",
            file=relpath(src.path),
        )
    try:
        part = _PART_DECODER.decode(
            raw
        )  # the heavy keys only: the rest of the file is skipped
        if part.schema_version == _current(part.artifact):
            return {k: getattr(part, k) for k in src.keys}
    except msgspec.MsgspecError:
        pass  # what msgspec refuses (an escaped lone surrogate), or an older version: read it whole
    doc = artifacts.parse_known(raw, str(src.path))
    return {k: doc[k] for k in src.keys}


class _Parts(msgspec.Struct):
    """What :func:`_read` takes from a file (values as core.artifacts' msgspec decoder reads them)."""

    artifact: Any = None
    schema_version: Any = None
    samples: Any = None
    details: Any = None
    log_tail: Any = None
    items: Any = None


_PART_DECODER = msgspec.json.Decoder(_Parts)


def _current(artifact: Any) -> int | None:
    from core import artifacts

    t = artifacts.ARTIFACT_TYPES.get(artifact)
    return t.version if t is not None else None


def _caller() -> str:
    f = sys._getframe(2)
    while f is not None and (
        f.f_code.co_filename.endswith(("core/records/heavy.py", "core/records/base.py"))
        or f.f_code.co_filename.endswith(
            ("core/records/run.py", "core/records/quality.py")
        )
        or "/collections/" in f.f_code.co_filename
        or "/_collections_abc" in f.f_code.co_filename
    ):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    mod = f.f_globals.get("__name__", "?")
    return f"{mod}.{f.f_code.co_name}"
