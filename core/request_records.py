"""Per-request records of the load kinds, bounded in the artifact.

A load, capacity or concurrency level can send many thousands of requests (a concurrency level up
to 256 clients x 100 rounds, more when repeated to a precision); an artifact keeps at most
``requests_kept`` records a level (a matrix field, ``invoke bench --requests-kept``; default
1,000), chosen by a seeded reservoir (core.reservoir, Algorithm R, ``random.Random(test seed +
level index)``; a concurrency test has no seed: 0), in schedule order. GuideLLM bounds its stored requests the same way
(``sample_requests``), AIPerf writes every record to a separate export file: both here.

* Every statistic of the run (``details.summary``, a sweep's ``details.sweep`` with the totals its
  readers need, ``details.precision``, the metrics) was computed from *all* the requests before the
  records were bounded, and readers take them from there, never from the sample; a sampled level
  says ``sampled: {kept, of, seed, method}`` and ``details.request_records`` totals it, so a page
  reads "k of n requests shown".
  Absent (every artifact written before this): every record is stored.
* With ``keep_all_requests`` (matrix field or ``--keep-all-requests``), a run whose records were
  sampled also writes every record beside the artifact: ``<artifact>.requests.jsonl.gz``, one
  JSON object a line (the record plus its ``level_index``), gzip without a timestamp, written
  atomically before the artifact names it with its sha256, size and line count. Loading the
  artifact checks the file (core.artifacts.load_tree), and the site publishes it beside the
  artifact's JSON.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import reservoir, safefile
from core.errors import ArtifactError, ConfigError
from core.paths import relpath

DEFAULT_KEPT = 1000
MAX_KEPT = 1_000_000
KINDS = (
    "load",
    "capacity",
    "concurrency",
)  # the kinds whose levels store request records (core.kinds.load, core.kinds.concurrency)
SUFFIX = ".requests.jsonl.gz"
MAX_RECORD_BYTES = 16 * 1024**2  # one line, decompressed


@dataclass(frozen=True)
class RecordPolicy:
    """How many request records a level stores, and whether every record is kept beside the artifact."""

    kept: int = DEFAULT_KEPT
    keep_all: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.kept, int) or not 1 <= self.kept <= MAX_KEPT:
            raise ConfigError(
                f"must be a whole number from 1 to {MAX_KEPT} (got {self.kept!r})",
                field="requests_kept",
            )


def sidecar_path(artifact: Path) -> Path:
    """Where an artifact's full request records live: beside it, ``<name>.requests.jsonl.gz``."""
    return artifact.with_name(artifact.name.removesuffix(".json") + SUFFIX)


def sidecar_rel(rel: str, doc: Mapping[str, Any]) -> str | None:
    """The sidecar's path relative to the data folder, for an artifact at ``rel`` there (None: it names none)."""
    return sidecar_of(rel, full_file(doc))


def sidecar_of(rel: str, full: Mapping[str, Any] | None) -> str | None:
    """:func:`sidecar_rel` for the artifact's ``details.request_records.full`` entry (``full``: what
    :func:`full_file` gives, or a loaded run's ``records_full``)."""
    if full is None:
        return None
    return sidecar_path(Path(rel)).as_posix()


def full_file(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The artifact's ``details.request_records.full`` (the sidecar it names), or None."""
    details = doc.get("details")
    rr = details.get("request_records") if isinstance(details, dict) else None
    full = rr.get("full") if isinstance(rr, dict) else None
    return full if isinstance(full, dict) else None


def bound(
    doc: dict[str, Any], policy: RecordPolicy
) -> tuple[dict[str, Any], bytes | None]:
    """``doc`` with each level's records bounded to ``policy.kept`` (a new dict; ``doc`` is not changed),
    and the full records as sidecar bytes when the policy keeps them all and a level was sampled."""
    test = doc.get("test") or {}
    samples = doc.get("samples")
    if not isinstance(samples, dict):
        return doc, None
    levels = samples.get("levels")
    if test.get("kind") not in KINDS or not levels:
        return doc, None
    base = int(test.get("seed") or 0)
    out, lines = [], []
    kept = sent = 0
    for i, lv in enumerate(levels):
        recs = lv.get("requests") or []
        n = len(recs)
        if n > policy.kept:
            seed = base + i
            idx = reservoir.sample_indices(n, policy.kept, seed)
            lv = {
                **lv,
                "requests": [recs[j] for j in idx],
                "sampled": {
                    "kept": len(idx),
                    "of": n,
                    "seed": seed,
                    "method": reservoir.METHOD,
                },
            }
        kept += len(lv.get("requests") or [])
        sent += n
        if policy.keep_all:
            lines += [{"level_index": i, **r} for r in recs]
        out.append(lv)
    sampled = kept < sent
    info = {
        "limit": policy.kept,
        "kept": kept,
        "of": sent,
        "sampled": sampled,
        "full": None,
    }
    new = {
        **doc,
        "samples": {**samples, "levels": out},
        "details": {**(doc.get("details") or {}), "request_records": info},
    }
    if not (policy.keep_all and sampled):
        return new, None
    text = "".join(
        json.dumps(r, sort_keys=True, allow_nan=False, separators=(",", ":")) + "\n"
        for r in lines
    )
    return new, gzip.compress(text.encode("utf-8"), mtime=0)


def prepare(
    path: Path, doc: dict[str, Any], policy: RecordPolicy
) -> tuple[dict[str, Any], bytes | None]:
    """:func:`bound`, and for the artifact that will live at ``path`` the sidecar it names (file, sha256,
    lines, bytes) when every record is kept."""
    doc, data = bound(doc, policy)
    if data is not None:
        rr = doc["details"]["request_records"]
        rr["full"] = {
            "file": sidecar_path(path).name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "records": rr["of"],
            "bytes": len(data),
        }
    return doc, data


_CHECKED: dict[
    tuple[str, int, int], str
] = {}  # (path, size, mtime_ns) -> sha256 already computed


def _sha256(path: Path) -> str:
    st = safefile.check_regular(path, what="request records file", error=ArtifactError)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _CHECKED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _CHECKED[key] = h.hexdigest()
    return _CHECKED[key]


def problem(path: Path, doc: Mapping[str, Any]) -> str | None:
    """Why the sidecar an artifact names is not the one it wrote (missing, renamed, edited); None when
    it is, or when the artifact names none. One line naming the file and the field."""
    full = full_file(doc)
    if full is None:
        return None
    where = "details.request_records.full"
    want = sidecar_path(path).name
    if full.get("file") != want:
        return str(
            ArtifactError(
                f"names {full.get('file')!r}, not the file beside it ({want})",
                file=relpath(path),
                field=f"{where}.file",
            )
        )
    side = sidecar_path(path)
    try:
        if os.path.islink(side):
            raise ArtifactError("is a symbolic link", file=relpath(side))
        got = _sha256(side)
    except ArtifactError as exc:
        return f"{relpath(path)}: {where}.file: {exc}"
    if got != full.get("sha256"):
        return str(
            ArtifactError(
                f"{side.name} has sha256 {got[:16]}…, not the {str(full.get('sha256'))[:16]}… the artifact "
                "recorded (the file changed after the run)",
                file=relpath(path),
                field=f"{where}.sha256",
            )
        )
    return None


def carry(src: Path, doc: dict[str, Any], dest: Path) -> Path | None:
    """Copy the sidecar of the artifact at ``src`` beside ``dest`` (a run brought home from another
    machine), checked before and while it is copied and written atomically; None when it names none.
    ArtifactError, one line, when it is missing or not the one the artifact recorded."""
    full = full_file(doc)
    if full is None:
        return None
    bad = problem(src, doc)
    if bad:
        raise ArtifactError(bad)
    target = sidecar_path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        h = hashlib.sha256()
        with open(sidecar_path(src), "rb") as fin, os.fdopen(fd, "wb") as fout:
            for chunk in iter(lambda: fin.read(1 << 20), b""):
                h.update(chunk)
                fout.write(chunk)
            fout.flush()
            os.fsync(fout.fileno())
        if h.hexdigest() != full.get("sha256"):
            raise ArtifactError(
                "changed while it was copied", file=relpath(sidecar_path(src))
            )
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_full(path: Path, doc: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """Every request record of the run, per level (the sidecar, checked against the artifact; a run
    that names none: the records it stores). ArtifactError, one line, for anything wrong."""
    samples = doc.get("samples") or {}
    levels = samples.get("levels") or []
    full = full_file(doc)
    if full is None:
        return [list(lv.get("requests") or []) for lv in levels]
    bad = problem(path, doc)
    if bad:
        raise ArtifactError(bad)
    side = sidecar_path(
        path
    )  # checked just now: a regular file, the bytes the run wrote
    limit = int(full.get("records") or 0)
    out: list[list[dict[str, Any]]] = [[] for _ in levels]
    n = 0
    try:
        with gzip.open(side, "rt", encoding="utf-8") as fh:
            for line in iter(lambda: fh.readline(MAX_RECORD_BYTES + 1), ""):
                n += 1
                if n > limit:
                    break
                if len(line) > MAX_RECORD_BYTES:
                    raise ArtifactError(
                        "a line is longer than 16 MiB",
                        file=relpath(side),
                        field=f"line {n}",
                    )
                rec = json.loads(line)
                i = rec.pop("level_index", None) if isinstance(rec, dict) else None
                if not isinstance(i, int) or not 0 <= i < len(out):
                    raise ArtifactError(
                        f"level_index {i!r} is not a level of the run (0..{len(out) - 1})",
                        file=relpath(side),
                        field=f"line {n}",
                    )
                out[i].append(rec)
    except (OSError, EOFError, ValueError) as exc:
        raise ArtifactError(
            f"cannot be read as gzip JSON lines: {exc}",
            file=relpath(side),
            field=f"line {n}",
        ) from None
    if n != limit:
        got = f"more than {limit}" if n > limit else str(n)
        raise ArtifactError(
            f"holds {got} records, the artifact says {limit}", file=relpath(side)
        )
    return out
