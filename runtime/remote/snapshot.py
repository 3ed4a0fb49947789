"""The project's source as it is here, packed for a remote host, with a digest.

A remote host must run the same code as this checkout, uncommitted edits included (a
benchmark run from a working tree measures that tree). So the snapshot is the working
tree's files that git would see (tracked plus untracked-but-not-ignored, read from disk),
not a wheel (the JSON Schemas live beside the packages, not inside them) and not a bare
``git archive HEAD`` (that would drop uncommitted edits). Artifacts already measured
(data/runs/) stay here. The digest (sha256 over every path and its bytes) names the copy
on the host and is recorded in each artifact's build block (``almanac_source``), with the
git commit and whether the tree was dirty. Outside a git checkout the packages, schemas,
benchmarks and pyproject are taken.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from core.paths import project_root

# measurements never travel: a remote host measures its own (a user's runs, probes, quality and
# perplexity results, projections stay on the controller's disk)
EXCLUDE_PREFIXES = (
    "data/runs/",
    "data/hosts/",
    "data/quality/",
    "data/perplexity/",
    "data/projections/",
    ".git/",
)
FALLBACK_ROOTS = (
    "core",
    "runtime",
    "pipelines",
    "data/schema",
    "benchmarks",
    "pyproject.toml",
    "tasks.py",
    "almanac_tasks",
)
REQUIREMENTS = ".almanac-remote/requirements.txt"


@dataclass(frozen=True)
class Snapshot:
    digest: str  # sha256 over (path, bytes) of every file
    commit: str | None  # git HEAD, when a git checkout
    dirty: bool  # uncommitted changes (tracked or untracked) were included
    files: tuple[str, ...]
    data: bytes  # tar.gz

    @property
    def short(self) -> str:
        return self.digest[:16]

    def describe(self) -> str:
        return f"{self.short}" + (
            f" (git {self.commit[:12]}{', dirty' if self.dirty else ''})"
            if self.commit
            else ""
        )


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def list_files(root: Path | None = None) -> tuple[list[str], str | None, bool]:
    """(relative paths, git commit, dirty) of what a snapshot holds."""
    root = root or project_root()
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is not None:
        paths = sorted({p for p in listed.split("\0") if p})
        commit = (_git(root, "rev-parse", "HEAD") or "").strip() or None
        status = _git(root, "status", "--porcelain")
        dirty = bool(status and status.strip())
    else:
        paths, commit, dirty = [], None, False
        for top in FALLBACK_ROOTS:
            p = root / top
            if p.is_file():
                paths.append(top)
            elif p.is_dir():
                paths += [
                    str(f.relative_to(root))
                    for f in p.rglob("*")
                    if f.is_file() and "__pycache__" not in f.parts
                ]
        paths.sort()
    # a virtual environment inside the tree (python3 -m venv .venv, the usual install) is never
    # the project: it is recognised by its pyvenv.cfg whatever its name, and left behind
    venvs = tuple(p[: -len("pyvenv.cfg")] for p in paths if p.endswith("/pyvenv.cfg"))
    keep = [
        p
        for p in paths
        if not p.startswith(EXCLUDE_PREFIXES + venvs) and (root / p).is_file()
    ]
    return keep, commit, dirty


def requirements(root: Path | None = None) -> list[str]:
    """The project's runtime dependencies, as pinned in pyproject.toml."""
    root = root or project_root()
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    return list(meta["project"]["dependencies"])


def make(root: Path | None = None) -> Snapshot:
    """Pack the project (deterministic: sorted, fixed mtimes and owners) with its digest."""
    root = root or project_root()
    files, commit, dirty = list_files(root)
    contents = {rel: (root / rel).read_bytes() for rel in files}
    contents[REQUIREMENTS] = ("\n".join(requirements(root)) + "\n").encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w") as tar:
            for rel in sorted(contents):
                executable = rel in files and bool((root / rel).stat().st_mode & 0o111)
                _add(tar, rel, contents[rel], executable=executable)
    return Snapshot(digest(contents), commit, dirty, tuple(files), buf.getvalue())


def digest(contents: dict[str, bytes]) -> str:
    """sha256 over every (path, sha256 of bytes), paths sorted."""
    sha = hashlib.sha256()
    for rel in sorted(contents):
        sha.update(rel.encode() + b"\0" + hashlib.sha256(contents[rel]).digest())
    return sha.hexdigest()


def tree_digest(folder: Path, skip: tuple[str, ...] = (".complete",)) -> str:
    """The digest of an unpacked snapshot (to check a copy on a host is the one recorded)."""
    contents = {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and p.name not in skip and "__pycache__" not in p.parts
    }
    return digest(contents)


def _add(
    tar: tarfile.TarFile, name: str, data: bytes, executable: bool = False
) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o755 if executable else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))
