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

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from core import migrations
from core.errors import ArtifactError
from core.paths import cache_dir, relpath, schema_dir

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


ARTIFACT_TYPES: dict[str, ArtifactType] = {}


def register_type(artifact_type: ArtifactType) -> ArtifactType:
    ARTIFACT_TYPES[artifact_type.name] = artifact_type
    return artifact_type


register_type(ArtifactType("run", 2, "One measured configuration: request, host, build, model (a local file or an endpoint model), settings, samples, summary.",
                           {2: migrations.run_to_2}))
register_type(ArtifactType("host", 1, "A host probe: fingerprint and memory bandwidth (large copy, bytes read + written), single- and multi-threaded."))
register_type(ArtifactType("projection", 1, "A projection record: per role and scenario, the measured baseline, the projected value, and the measurement that verified it where one existed."))
register_type(ArtifactType("perplexity", 1, "Perplexity on a public text (llama-perplexity's chunking and standard error) and, against a reference model, KL-divergence and top-token agreement."))
register_type(ArtifactType("decision", 1, "A go/no-go decision on one optimization and host: every gate's measured value, CI95, thresholds, verdict and the artifacts it rests on."))
register_type(ArtifactType("quality", 1, "One quality run: a model and configuration answering a suite's seeded sample; per-item prompt, output, verdict, evidence, degeneration flag and timing."))


def dumps(doc: dict[str, Any]) -> str:
    """Canonical text of an artifact: sorted keys, two-space indent, UTF-8, no NaN."""
    try:
        return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError as exc:  # NaN or infinity slipped into a number
        raise ArtifactError(f"cannot serialise: {exc}", file=str(doc.get("id", "<artifact>"))) from None


@lru_cache(maxsize=None)
def _validator(name: str, version: int) -> jsonschema.protocols.Validator:
    path = ARTIFACT_TYPES[name].schema_path(version)
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


@lru_cache(maxsize=None)
def _fast_validator(name: str, version: int) -> Callable[[dict[str, Any]], Any] | None:
    """The same schema compiled to Python by fastjsonschema (about 40x faster than jsonschema
    here), used to accept valid documents quickly; a document it rejects is checked again by
    jsonschema, whose best_match names the field. None when the schema cannot be compiled."""
    try:
        import fastjsonschema
    except ImportError:  # pragma: no cover - a dependency; jsonschema alone still validates
        return None
    schema = json.loads(ARTIFACT_TYPES[name].schema_path(version).read_text())
    # Our schemas use only keywords whose meaning draft 7 shares ($defs is reached by a JSON
    # pointer), and fastjsonschema knows drafts 4, 6 and 7.
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    try:
        return fastjsonschema.compile(schema)
    except Exception:  # noqa: BLE001 - fall back to jsonschema, which compiled it above
        return None


def validate(doc: dict[str, Any], source: str = "<artifact>") -> None:
    """Raise ``ArtifactError`` naming the file, the field and the problem."""
    if not isinstance(doc, dict):
        raise ArtifactError("is not a JSON object", file=source)
    name = doc.get("artifact")
    if name not in ARTIFACT_TYPES:
        known = ", ".join(sorted(ARTIFACT_TYPES))
        raise ArtifactError(f"unknown artifact type {name!r} (known: {known})", file=source, field="artifact")
    atype = ARTIFACT_TYPES[name]
    version = doc.get("schema_version")
    if version != atype.version:
        raise ArtifactError(f"schema_version {version!r} is not the current {atype.version}", file=source, field="schema_version")
    validator = _validator(name, version)
    fast = _fast_validator(name, version)
    if fast is not None:
        try:
            fast(doc)
            return
        except Exception:  # noqa: BLE001 - rejected: let jsonschema say where and why
            pass
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        raise ArtifactError(error.message, file=source, field=_field_path(error))


# -- content-keyed validation cache -------------------------------------------------------------
# A file whose exact bytes were validated against the exact same schemas need not be validated
# again: repeated builds of a large data folder read and parse each file, nothing more.


@lru_cache(maxsize=1)
def schemas_digest() -> str:
    """Digest of every schema file and the validator versions: the cache's namespace."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        versions = f"jsonschema {version('jsonschema')} fastjsonschema {version('fastjsonschema')}"
    except PackageNotFoundError:
        versions = ""
    h = hashlib.sha256(versions.encode())
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
            atomic_write_text(self.path, "\n".join(sorted(self.known | self.new)) + "\n")
        except OSError:  # a read-only cache only costs time
            return
        self.known |= self.new
        self.new = set()


def upgrade(doc: dict[str, Any], source: str = "<artifact>") -> dict[str, Any]:
    """Bring a document to its type's current version, or refuse with what to do."""
    name = doc.get("artifact") if isinstance(doc, dict) else None
    if name not in ARTIFACT_TYPES:
        known = ", ".join(sorted(ARTIFACT_TYPES))
        raise ArtifactError(f"unknown artifact type {name!r} (known: {known})", file=source, field="artifact")
    atype = ARTIFACT_TYPES[name]
    version = doc.get("schema_version")
    if not isinstance(version, int):
        raise ArtifactError("missing or non-integer schema_version", file=source, field="schema_version")
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
    while version < atype.version:
        step = atype.migrations.get(version + 1)
        if step is None:
            raise ArtifactError(f"no migration from version {version} to {version + 1}", file=source, field="schema_version")
        doc = step(dict(doc))
        version += 1
        doc["schema_version"] = version
    return doc


def load(path: Path | str, cache: ValidationCache | None = None) -> dict[str, Any]:
    """Read, upgrade and validate one artifact file (``cache``: skip validating bytes seen valid).
    Any problem is one ArtifactError naming the file (the name is worked out only then)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError("no such file", file=relpath(path)) from None
    except IsADirectoryError:
        raise ArtifactError("is a directory, not an artifact", file=relpath(path)) from None
    except OSError as exc:
        raise ArtifactError(f"cannot be read: {exc.strerror or exc}", file=relpath(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}", file=relpath(path)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=relpath(path)) from None
    except RecursionError:
        raise ArtifactError("invalid JSON: nested too deeply", file=relpath(path)) from None
    if not isinstance(doc, dict):
        raise ArtifactError(f"is a JSON {type(doc).__name__}, not an artifact object", file=relpath(path))
    digest = hashlib.sha256(raw).hexdigest() if cache is not None else ""
    if cache is not None and digest in cache \
            and doc.get("schema_version") == getattr(ARTIFACT_TYPES.get(doc.get("artifact")), "version", None):
        return doc  # seen valid: the name for messages (a resolve() per file) is not needed
    source = relpath(path)
    doc = upgrade(doc, source)
    validate(doc, source)
    if cache is not None:
        cache.add(digest)
    return doc


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write(path: Path | str, doc: dict[str, Any]) -> Path:
    """Validate then atomically write one artifact."""
    path = Path(path)
    validate(doc, relpath(path))
    atomic_write_text(path, dumps(doc))
    return path


NOT_ARTIFACTS = ("schema", "quarantine")  # folders under data/ that hold JSON which is not an artifact (quarantine: corrupt ones set aside)


def iter_files(root: Path | str) -> Iterator[Path]:
    """Artifact files under ``root``: ``*.json``, skipping hidden temp files and schema folders."""
    root = Path(root)
    if not root.exists():
        return
    for p in sorted(root.rglob("*.json")):
        rel = p.relative_to(root).parts
        if p.name.startswith(".") or any(part in NOT_ARTIFACTS for part in rel[:-1]):
            continue
        yield p


def iter_artifacts(root: Path | str, artifact: str | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every valid artifact under ``root`` (optionally of one type); bad files raise."""
    cache = ValidationCache()
    try:
        for path in iter_files(root):
            doc = load(path, cache)
            if artifact is None or doc["artifact"] == artifact:
                yield path, doc
    finally:
        cache.save()


def validate_tree(root: Path | str) -> tuple[int, list[str]]:
    """Validate every artifact under ``root``: (number checked, one line per problem)."""
    problems: list[str] = []
    count = 0
    cache = ValidationCache()
    for path in iter_files(root):
        count += 1
        try:
            load(path, cache)
        except ArtifactError as exc:
            problems.append(str(exc))
    cache.save()
    return count, problems
