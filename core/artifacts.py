"""The one serialization path for every artifact type: dumps, write, load, validate, migrate.

Every canonical artifact is a JSON object with two stamps:

* ``artifact``: its type (``run``, ``host``, ...), one of ``ARTIFACT_TYPES``;
* ``schema_version``: the version of that type's JSON Schema it follows.

Files are written sorted and indented, atomically (temp file + fsync + rename), after
validation against ``data/schema/<type>.v<version>.schema.json``. Loading refuses files
from a newer version with an actionable message and migrates older ones through
``update_to_<N>`` steps (the asv way).
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import msgspec

from core import hostid, migrations, safefile
from core.errors import ArtifactError, ArtifactErrors, StorageError
from core.paths import cache_dir, relpath, schema_dir
from core.registry import Registry

Migration = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ArtifactType:
    """A kind of artifact: its current schema version and how to migrate older files."""

    name: str
    version: int
    description: str
    # migrations[n] turns a version n-1 document into version n.
    migrations: dict[int, Migration] = field(default_factory=dict)
    oldest: int = 1

    def schema_path(self, version: int | None = None) -> Path:
        return schema_dir() / f"{self.name}.v{version or self.version}.schema.json"


ARTIFACT_TYPES: Registry[ArtifactType] = Registry("artifact type")


def register_type(artifact_type: ArtifactType) -> ArtifactType:
    return ARTIFACT_TYPES.add(artifact_type.name, artifact_type, stacklevel=2)


register_type(
    ArtifactType(
        "run",
        2,
        (
            "One measured configuration: request, host, build, model (a local file or "
            "an endpoint model), settings, samples, summary."
        ),
        {2: migrations.run_to_2},
    )
)
register_type(
    ArtifactType(
        "host",
        1,
        (
            "A host probe: fingerprint and memory bandwidth (large copy, bytes read + "
            "written), single- and multi-threaded."
        ),
    )
)
register_type(
    ArtifactType(
        "projection",
        1,
        (
            "A projection record: per role and scenario, the measured baseline, the "
            "projected value, and the measurement that verified it where one existed."
        ),
    )
)
register_type(
    ArtifactType(
        "perplexity",
        1,
        (
            "Perplexity on a public text (llama-perplexity's chunking and standard "
            "error) and, against a reference model, KL-divergence and top-token "
            "agreement."
        ),
    )
)
register_type(
    ArtifactType(
        "noise",
        2,
        (
            "A host's run-to-run noise (`invoke noise`): a small matrix run again and "
            "again in fresh processes, the warm-up run dropped, until the estimate is "
            "useful or the budget ends; per kind of test, the spread of run means and "
            "whether the host is too noisy to rank a single run."
        ),
        {2: migrations.noise_to_2},
    )
)
register_type(
    ArtifactType(
        "decision",
        1,
        (
            "A go/no-go decision on one optimization and host: every gate's measured "
            "value, CI95, thresholds, verdict and the artifacts it rests on."
        ),
    )
)
register_type(
    ArtifactType(
        "quality",
        1,
        (
            "One quality run: a model and configuration answering a suite's seeded "
            "sample; per-item prompt, output, verdict, evidence, degeneration flag and "
            "timing."
        ),
    )
)


def dumps(doc: dict[str, Any]) -> str:
    """Canonical text of an artifact: sorted keys, two-space indent, UTF-8, no NaN."""
    try:
        return (
            json.dumps(
                doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False
            )
            + "\n"
        )
    except ValueError as exc:  # NaN or infinity slipped into a number
        raise ArtifactError(
            f"cannot serialise: {exc}", file=str(doc.get("id", "<artifact>"))
        ) from None


@cache
def _validator(name: str, version: int) -> jsonschema.protocols.Validator:
    path = ARTIFACT_TYPES[name].schema_path(version)
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


@cache
def _fast_validator(name: str, version: int) -> Callable[[dict[str, Any]], Any] | None:
    """The same schema compiled to Python by fastjsonschema (about 40x faster than jsonschema
    here), used to accept valid documents quickly; a document it rejects is checked again by
    jsonschema, whose best_match names the field. None when the schema cannot be compiled."""
    try:
        import fastjsonschema
    except (
        ImportError
    ):  # pragma: no cover - a dependency; jsonschema alone still validates
        return None
    schema = json.loads(ARTIFACT_TYPES[name].schema_path(version).read_text())
    # Our schemas use only keywords whose meaning draft 7 shares ($defs is reached by a JSON
    # pointer), and fastjsonschema knows drafts 4, 6 and 7.
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    cached = _compiled_from_cache(name, version)
    if cached is not None:
        return cached
    try:
        from core.models.base import DATE_TIME_PATTERN

        code = fastjsonschema.compile_to_code(
            schema, formats={"date-time": DATE_TIME_PATTERN}
        )
        compiled = compile(code, f"<schema {name} v{version}>", "exec")
    except Exception:
        return None
    _compiled_to_cache(name, version, compiled)
    return _entry_point(compiled)


# The run schema compiles to about 1 MB of Python, and compiling that source costs about 0.5 s a
# process: the compiled code is kept in the cache folder, keyed by the schemas' digest and the
# interpreter (marshal's format is the interpreter's own), and loaded in milliseconds.
def _compiled_path(name: str, version: int) -> Path:
    import sys

    from core.paths import cache_dir

    tag = f"{sys.implementation.cache_tag}-{schemas_digest()}"
    return cache_dir() / "schema-code" / f"{name}-v{version}-{tag}.marshal"


def _entry_point(compiled: Any) -> Callable[[dict[str, Any]], Any] | None:
    namespace: dict[str, Any] = {}
    exec(compiled, namespace)
    entry = [
        v for k, v in namespace.items() if k.startswith("validate") and callable(v)
    ]
    return (
        entry[0] if entry else None
    )  # the first def is the schema's root (fastjsonschema writes it first)


def _compiled_from_cache(
    name: str, version: int
) -> Callable[[dict[str, Any]], Any] | None:
    import marshal

    try:
        return _entry_point(marshal.loads(_compiled_path(name, version).read_bytes()))
    except Exception:
        return None


def _compiled_to_cache(name: str, version: int, compiled: Any) -> None:
    import marshal

    try:
        path = _compiled_path(name, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(compiled))
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache folder: the next process compiles again
        pass


# -- what JSON Schema cannot say ------------------------------------------------------------------
# JSON has no NaN or Infinity, but Python's json module reads and writes them (and reads 1e999 as
# infinity); a repeated key in one object is legal JSON whose meaning is undefined (Python keeps the
# last). The loader refuses both, naming the field, so whatever validates is what every page reads.


def _path_text(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts) if parts else "(top level)"


def non_finite_field(doc: Any) -> tuple[str, float] | None:
    """The first field (dotted path) holding NaN or an infinity, with its value; None when all are finite."""
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return _path_text(where), node
        elif isinstance(node, dict):
            stack.extend(
                (v, [*where, k])
                for k, v in reversed(node.items())
                if isinstance(v, (dict, list, float))
            )
        elif isinstance(node, list):
            stack.extend(
                (v, [*where, i])
                for i, v in reversed(list(enumerate(node)))
                if isinstance(v, (dict, list, float))
            )
    return None


def check_finite(doc: Any, source: str = "<artifact>") -> None:
    """Refuse NaN and infinities anywhere in a document: one ArtifactError naming the field."""
    found = non_finite_field(doc)
    if found is not None:
        where, value = found
        shown = (
            "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        )
        raise ArtifactError(
            f"{shown} is not a number JSON allows (NaN and infinities are refused; "
            "write null for a value that was not measured)",
            file=source,
            field=where,
        )


class _Pairs(dict):
    """A parsed JSON object that repeated a key (which one counts is undefined): kept to be reported."""

    repeated: str = ""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for k, _ in pairs:
        if k in seen:
            break
        seen.add(k)
    out = _Pairs(obj)
    out.repeated = k
    return out


def _repeated_key(doc: Any) -> str | None:
    stack: list[tuple[Any, list[Any]]] = [(doc, [])]
    while stack:
        node, where = stack.pop()
        if isinstance(node, _Pairs):
            return _path_text([*where, node.repeated])
        if isinstance(node, dict):
            stack.extend(
                (v, [*where, k]) for k, v in node.items() if isinstance(v, (dict, list))
            )
        elif isinstance(node, list):
            stack.extend(
                (v, [*where, i])
                for i, v in enumerate(node)
                if isinstance(v, (dict, list))
            )
    return None


def parse(text: str, source: str = "<artifact>") -> Any:
    """Parse an artifact's text strictly: invalid JSON, a key repeated in one object, NaN or an
    infinity (``NaN``, ``Infinity``, ``1e999``) are one ArtifactError naming the place."""
    found: list[bool] = []

    def pairs(p: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = _pairs(p)
        if type(obj) is _Pairs:
            found.append(True)
        return obj

    try:
        doc = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            file=source,
        ) from None
    except RecursionError:
        raise ArtifactError("invalid JSON: nested too deeply", file=source) from None
    if found:
        where = _repeated_key(doc)
        key = where.rsplit(".", 1)[-1] if where else "?"
        raise ArtifactError(
            f"key {key!r} appears twice in one object (which value counts is undefined: keep one)",
            file=source,
            field=where,
        )
    check_finite(doc, source)
    return doc


def validate(doc: dict[str, Any], source: str = "<artifact>") -> None:
    """Raise ``ArtifactError`` naming the file, the field and the problem: a document of the
    current version that its type's JSON Schema accepts, with every number finite."""
    if not isinstance(doc, dict):
        raise ArtifactError("is not a JSON object", file=source)
    check_finite(doc, source)
    name = doc.get("artifact")
    if name not in ARTIFACT_TYPES:
        known = ", ".join(sorted(ARTIFACT_TYPES))
        raise ArtifactError(
            f"unknown artifact type {name!r} (known: {known})",
            file=source,
            field="artifact",
        )
    atype = ARTIFACT_TYPES[name]
    version = doc.get("schema_version")
    if version != atype.version:
        raise ArtifactError(
            f"schema_version {version!r} is not the current {atype.version}",
            file=source,
            field="schema_version",
        )
    _check_schema(doc, name, version, source)


def check(doc: dict[str, Any], source: str = "<artifact>") -> None:
    """Raise ``ArtifactError`` unless ``doc`` is a valid artifact of any version this almanac reads
    (an older one checked against its own version's schema and as it migrates), every number finite."""
    check_finite(doc, source)
    upgraded = upgrade(copy.deepcopy(doc), source)
    _check_schema(upgraded, upgraded["artifact"], upgraded["schema_version"], source)


def _check_schema(doc: dict[str, Any], name: str, version: int, source: str) -> None:
    fast = _fast_validator(name, version)
    fast_error: Exception | None = None
    if fast is not None:
        try:
            fast(doc)
            return
        except Exception as exc:
            fast_error = exc
    # built only when needed: checking a schema against its metaschema costs about 0.3 s a type,
    # and a build whose every document passes the fast validator never needs it
    validator = _validator(name, version)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        raise ArtifactError(error.message, file=source, field=_field_path(error))
    if fast_error is not None:
        # what jsonschema does not check without optional packages (a string's ``format``, e.g. a
        # date-time) the fast validator did: its refusal stands, so every reader (the artifact
        # models check a date-time too) sees only what the loader accepted
        path = getattr(fast_error, "path", None)
        field = ".".join(str(p) for p in path[1:]) if isinstance(path, list) else None
        message = str(getattr(fast_error, "message", fast_error))
        message = message.removeprefix(f"{getattr(fast_error, 'name', '')} ")
        raise ArtifactError(message, file=source, field=field or None)


# -- content-keyed validation cache -------------------------------------------------------------
# A file whose exact bytes were validated against the exact same schemas need not be validated
# again: repeated builds of a large data folder read and parse each file, nothing more.


# What the loader checks beyond the schemas (finite numbers, unique keys, a migration's input checked
# against its own version): part of the validation cache's namespace, so bytes validated under
# looser rules are validated again. Bump when the loader's checks change.
LOADER_RULES = (
    4  # 3: the fast validator's refusal stands (formats); 4: the models' date-time
)
MAX_ARTIFACT_BYTES = (
    64 << 20
)  # an artifact file larger than this is refused before it is parsed


@lru_cache(maxsize=1)
def schemas_digest() -> str:
    """Digest of every schema file and the validator versions: the cache's namespace."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        versions = f"jsonschema {version('jsonschema')} fastjsonschema {version('fastjsonschema')}"
    except PackageNotFoundError:
        versions = ""
    h = hashlib.sha256(f"{versions} loader rules {LOADER_RULES}".encode())
    for p in sorted(schema_dir().glob("*.json")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class ValidationCache:
    """The set of sha256 digests of artifact files already validated, kept in the user cache."""

    def __init__(self, path: Path | None = None) -> None:
        self.enabled = not os.environ.get("ALMANAC_NO_VALIDATION_CACHE")
        self.path = path or cache_dir() / "validated" / f"{schemas_digest()}.txt"
        self.known: set[str] = set()
        self.new: set[str] = set()
        if self.enabled:
            try:
                self.known = set(self.path.read_text().split())
            except (FileNotFoundError, OSError):
                pass

    def __contains__(self, digest: str) -> bool:
        return self.enabled and (digest in self.known or digest in self.new)

    def add(self, digest: str) -> None:
        if self.enabled and digest not in self.known:
            self.new.add(digest)

    def save(self) -> None:
        if not (self.enabled and self.new):
            return
        try:
            atomic_write_text(
                self.path, "\n".join(sorted(self.known | self.new)) + "\n"
            )
        except (OSError, StorageError):  # a read-only or full cache only costs time
            return
        self.known |= self.new
        self.new = set()


def upgrade(
    doc: dict[str, Any], source: str = "<artifact>", *, checked: bool = False
) -> dict[str, Any]:
    """Bring a document to its type's current version, or refuse with what to do. An older
    document is first checked against its own version's schema (``checked``: it was, its bytes
    are known valid), so a migration only ever reads the shape it was written for."""
    name = doc.get("artifact") if isinstance(doc, dict) else None
    if name not in ARTIFACT_TYPES:
        known = ", ".join(sorted(ARTIFACT_TYPES))
        raise ArtifactError(
            f"unknown artifact type {name!r} (known: {known})",
            file=source,
            field="artifact",
        )
    atype = ARTIFACT_TYPES[name]
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ArtifactError(
            "missing or non-integer schema_version", file=source, field="schema_version"
        )
    if version > atype.version:
        raise ArtifactError(
            f"schema_version {version} is newer than this almanac understands ({atype.version}); "
            "upgrade inference-almanac (git pull && pip install -e .)",
            file=source,
            field="schema_version",
        )
    if version < atype.oldest:
        raise ArtifactError(
            f"schema_version {version} is older than the oldest supported ({atype.oldest}); "
            "re-run the benchmark that produced it",
            file=source,
            field="schema_version",
        )
    if version < atype.version and not checked and atype.schema_path(version).is_file():
        _check_schema(doc, name, version, source)
    while version < atype.version:
        step = atype.migrations.get(version + 1)
        if step is None:
            raise ArtifactError(
                f"no migration from version {version} to {version + 1}",
                file=source,
                field="schema_version",
            )
        doc = step(dict(doc))
        version += 1
        doc["schema_version"] = version
    return doc


def _parse_known(raw: bytes) -> Any:
    """The document of bytes already known valid (UTF-8, strict JSON, no repeated key, every number
    finite): msgspec's decoder, which reads them to the same values as json at about twice its speed
    here and shares dict keys between documents (a loaded set of 10,000 artifacts took 625 MiB, not
    701). json reads what msgspec refuses (an escaped lone surrogate, which JSON allows)."""
    try:
        return _KNOWN_DECODER.decode(raw)
    except msgspec.MsgspecError:
        return json.loads(raw.decode("utf-8"))


_KNOWN_DECODER = msgspec.json.Decoder()


def parse_known(raw: bytes, source: str = "<artifact>") -> dict[str, Any]:
    """The document of bytes that passed every check of :func:`load` under the current schemas (the
    validation cache knows their digest): parsed (msgspec) and migrated only."""
    doc = _parse_known(raw)
    if doc.get("schema_version") == getattr(
        ARTIFACT_TYPES.get(doc.get("artifact")), "version", None
    ):
        return doc
    return upgrade(doc, source, checked=True)


def load(path: Path | str, cache: ValidationCache | None = None) -> dict[str, Any]:
    """Read, upgrade and validate one artifact file (``cache``: skip validating bytes seen valid).
    Any problem is one ArtifactError naming the file (the name is worked out only then): unreadable,
    not UTF-8, invalid JSON, a key repeated in one object, NaN or an infinity, a schema violation."""
    return load_digest(path, cache)[0]


def load_digest(
    path: Path | str, cache: ValidationCache | None = None
) -> tuple[dict[str, Any], str]:
    """:func:`load`, and the sha256 (hex) of the bytes read ("" without ``cache``)."""
    path = Path(path)
    raw = safefile.read_bytes(
        path, max_bytes=MAX_ARTIFACT_BYTES, what="artifact", error=ArtifactError
    )
    digest = hashlib.sha256(raw).hexdigest() if cache is not None else ""
    if cache is not None and digest in cache:
        # these exact bytes passed every check below under the same schemas: parse and migrate only
        # (a name for messages, a resolve() per file, is not needed)
        return parse_known(raw, str(path)), digest
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}",
            file=relpath(path),
        ) from None
    source = relpath(path)
    doc = parse(text, source)
    if not isinstance(doc, dict):
        raise ArtifactError(
            f"is a JSON {type(doc).__name__}, not an artifact object", file=source
        )
    doc = upgrade(doc, source)
    name = doc["artifact"]
    _check_schema(doc, name, ARTIFACT_TYPES[name].version, source)
    if cache is not None:
        cache.add(digest)
    return doc, digest


_STORAGE_FAULTS = {
    errno.ENOSPC: ("no space left on the device", "free space there"),
    errno.EDQUOT: ("disk quota exceeded", "free space there"),
    errno.EROFS: ("the file system is read-only", "remount it read-write"),
    errno.EACCES: ("permission denied", "make it writable for this user"),
    errno.EPERM: ("operation not permitted", "make it writable for this user"),
}
STORAGE_ERRNOS = frozenset(_STORAGE_FAULTS)
DATA_ELSEWHERE = "or set ALMANAC_DATA to a writable data folder"


def storage_error(
    exc: OSError,
    path: Path | str,
    doing: str = "cannot write",
    elsewhere: str = DATA_ELSEWHERE,
) -> StorageError:
    """One line for a storage fault (full disk, read-only, permission denied, ...): the path, what
    went wrong and what to do (``elsewhere``: how to write somewhere else instead)."""
    what, fix = _STORAGE_FAULTS.get(
        exc.errno or 0, (exc.strerror or str(exc), "fix that")
    )
    return StorageError(
        f"{doing}: {what}; {fix}, {elsewhere}", file=relpath(Path(path))
    )


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.
    A storage fault (no space, read-only, permission denied) is one StorageError naming the path;
    the temporary file is removed and the old file, if any, stays as it was."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes (a compressed sidecar, core.request_records)."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
        )
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            raise storage_error(exc, path) from None
        raise


# Checks beyond the schema that a type's record module runs before one of its files is written
# (core.records.run: a run's samples and details against its kind's models, for kinds the schema
# does not name).
WRITE_CHECKS: Registry[Callable[[dict[str, Any], str], None]] = Registry(
    "write check of artifact type"
)


def write(path: Path | str, doc: dict[str, Any]) -> Path:
    """Validate then atomically write one artifact."""
    path = Path(path)
    validate(doc, relpath(path))
    check = WRITE_CHECKS.get(doc.get("artifact"))
    if check is not None:
        check(doc, relpath(path))
    atomic_write_text(path, dumps(doc))
    return path


NOT_ARTIFACTS = (
    "schema",
    "quarantine",
)  # folders under data/ that hold JSON which is not an artifact (quarantine: corrupt ones set aside)


def iter_files(root: Path | str) -> Iterator[Path]:
    """Artifact files under ``root``: ``*.json``, skipping hidden temp files and schema folders."""
    root = Path(root)
    if not root.exists():
        return
    # os.walk and strings, not rglob and a relative_to per file: the same files in the same order (a
    # path's order is its parts', compared one by one), at a fraction of the cost at 10,000 files
    top = str(root)
    found: list[tuple[str, ...]] = []
    for folder, dirs, names in os.walk(top):
        rel = os.path.relpath(folder, top)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        if any(part in NOT_ARTIFACTS for part in parts):
            dirs[:] = []
            continue
        found.extend(
            (*parts, n) for n in names if n.endswith(".json") and not n.startswith(".")
        )
        # a folder named like a file ("x.json") is one rglob yields: it fails to load, as before
        found.extend(
            (*parts, n) for n in dirs if n.endswith(".json") and not n.startswith(".")
        )
    found.sort()
    for parts in found:
        yield root.joinpath(*parts)


def iter_artifacts(
    root: Path | str, artifact: str | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every valid artifact under ``root`` (optionally of one type); bad files raise. Each file on its
    own: :func:`read_set` reads them as a set."""
    cache = ValidationCache()
    try:
        for path in iter_files(root):
            doc = load(path, cache)
            if artifact is None or doc["artifact"] == artifact:
                yield path, doc
    finally:
        cache.save()


def read_set(
    root: Path | str, artifact: str | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """Every valid artifact under ``root`` (optionally of one type), bad files raising as in
    :func:`iter_artifacts`, read as one set: two machines under one host id are an ArtifactErrors,
    an older fingerprint's host that is a newer host takes that host's id (core.hostid.reconcile)."""
    loaded = list(
        iter_artifacts(root)
    )  # every type: a host is checked on all its artifacts
    problems = hostid.reconcile(loaded, relpath)
    if problems:
        raise ArtifactErrors(problems, len(loaded))
    return [(p, d) for p, d in loaded if artifact is None or d["artifact"] == artifact]


FUTURE_TOLERANCE_S = (
    3600.0  # a "created" later than the reader's clock by more than this is refused
)


def from_the_future(doc: dict[str, Any], now: datetime) -> str:
    """Why ``doc``'s ``created`` cannot be true ("" when it can): a time beyond ``now`` plus
    FUTURE_TOLERANCE_S (a host whose clock is ahead). Such a run would be its configuration's newest
    until that date and be pooled with real ones, so it is refused like any invalid artifact."""
    created = doc.get("created")
    if not isinstance(created, str):
        return ""
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ahead = (when - now).total_seconds()
    if ahead <= FUTURE_TOLERANCE_S:
        return ""
    span = (
        f"{ahead / 86400 / 365.25:.0f} years"
        if ahead > 2 * 365.25 * 86400
        else (
            f"{ahead / 86400:.1f} days"
            if ahead > 2 * 86400
            else f"{ahead / 3600:.1f} hours"
        )
    )
    return (
        f"{created!r} is {span} after this reader's clock ({now.isoformat(timespec='seconds')}; "
        f"tolerance {FUTURE_TOLERANCE_S / 3600:g} h): the measuring host's clock was ahead; "
        "correct its clock and remeasure, or remove this file"
    )


#: what a loader does with each valid document as it is read (path, document, sha256 of its bytes, hex):
#: it may take parts out of the document, in place (pipelines.dataset: a run's heavy parts,
#: core.records.heavy), once the checks that read them are done
Keep = Callable[[Path, dict[str, Any], str], None]
#: a document known from an earlier load of the same bytes (pipelines.light_pack): (the document as a
#: ``keep`` left it, sha256 hex, what the request-record check reads of it), or None: read the file
Known = Callable[[Path], tuple[dict[str, Any], str, Mapping[str, Any]] | None]


def load_tree(
    root: Path | str,
    files: list[Path] | None = None,
    cache: ValidationCache | None = None,
    keep: Keep | None = None,
    known: Known | None = None,
) -> tuple[list[tuple[Path, dict[str, Any]]], list[str]]:
    """Every artifact under ``root`` (or of ``files``), each checked as ``load`` checks it, and the set
    checked as a whole: two files with the same id are one problem naming both, and so are two files
    that claim one host id with different hardware (core.hostid.conflicts). An older fingerprint's
    host that is a newer host takes that host's id (core.hostid.reconcile). Returns the valid
    (path, document) pairs in file order and one line per problem; nothing stops at the first.
    ``keep``: called on each valid document as it is read (:data:`Keep`). ``known``: a file whose
    document it gives (:data:`Known`: bytes checked by an earlier load) is not read; every check of the
    set as a whole runs on it as on the others, and ``keep`` is not called on it."""
    from core import request_records

    problems: list[str] = []
    sidecars: list[str] = []
    loaded: list[tuple[Path, dict[str, Any]]] = []
    first: dict[str, Path] = {}
    now = datetime.now(UTC)
    own_cache = cache is None
    cache = cache if cache is not None else ValidationCache()
    try:
        for path in files if files is not None else iter_files(root):
            got = known(path) if known is not None else None
            if got is not None:
                doc, digest, checked = got
            else:
                try:
                    doc, digest = load_digest(path, cache)
                except ArtifactError as exc:
                    problems.append(str(exc))
                    continue
                checked = doc
            ahead = from_the_future(doc, now)
            if ahead:
                problems.append(
                    str(ArtifactError(ahead, file=relpath(path), field="created"))
                )
                continue
            ident = doc.get("id")
            seen = first.get(ident)
            if seen is not None:
                other = (
                    seen.name + " in the same folder"
                    if seen.parent == path.parent
                    else relpath(seen)
                )
                problems.append(
                    str(
                        ArtifactError(
                            f"{ident!r} is also the id of {other} (two copies of one artifact: keep one)",
                            file=relpath(path),
                            field="id",
                        )
                    )
                )
                continue
            first[ident] = path
            # the full request records a run wrote beside itself, still the ones it names
            # (core.request_records): checked now, while the document is whole
            side = request_records.problem(path, checked)
            if side:
                sidecars.append(side)
            if keep is not None and got is None:
                keep(path, doc, digest)
            loaded.append((path, doc))
    finally:
        if own_cache:
            cache.save()
    # one host id, one machine; an older fingerprint's host joined to the newer host it is (core.hostid)
    problems += hostid.reconcile(loaded, relpath)
    problems += sidecars
    return loaded, problems


def validate_tree(root: Path | str) -> tuple[int, list[str]]:
    """Validate every artifact under ``root``: (number checked, one line per problem)."""
    files = list(iter_files(root))
    loaded, problems = load_tree(root, files)
    return len(files), problems + implausible(loaded)


def implausible(loaded: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """One line per valid artifact whose server-reported numbers cannot be true (core.plausibility:
    the checks a request passes before it becomes a measurement, run on what was stored)."""
    from core import plausibility

    out = []
    for path, doc in loaded:
        found = plausibility.artifact_problems(doc)
        if found:
            where, what = found[0]
            out.append(
                str(
                    ArtifactError(
                        f"implausible: {what}", file=relpath(path), field=where
                    )
                )
            )
    return out


def load_all(
    root: Path | str,
    files: list[Path] | None = None,
    cache: ValidationCache | None = None,
    keep: Keep | None = None,
    known: Known | None = None,
) -> list[tuple[Path, dict[str, Any]]]:
    """Every artifact under ``root`` when all are valid; otherwise one ArtifactErrors listing every
    problem (one line each), so that nothing is built from a partly bad set (``keep``: as
    :func:`load_tree`; ``known``: as :func:`load_tree`)."""
    files = list(iter_files(root)) if files is None else files
    loaded, problems = load_tree(root, files, cache, keep, known)
    if problems:
        raise ArtifactErrors(problems, len(files))
    return loaded
