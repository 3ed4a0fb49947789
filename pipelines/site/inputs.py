"""What a site build is made from, as one content digest, so that `invoke all` with nothing new skips the build.

The digest covers every file the build reads: the data folder (artifacts, registries), the
pages (docs/), the code that renders them (pipelines/, runtime/), mkdocs.yml, and the
versions of the packages that render the site. A built site keeps the digest of its inputs
in ``.almanac-inputs``; when the digest of the current inputs is the same and the site is
still there, a build would write the same files, and is skipped. Linear in the size of
the inputs (one read of each file).
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

from core.paths import data_dir

STAMP = ".almanac-inputs"
PACKAGES = (
    "mkdocs",
    "mkdocs-material",
    "mkdocs-macros-plugin",
    "mkdocs-gen-files",
    "markdown",
    "jinja2",
    "altair",
    "pandas",
)
_SKIP_DIRS = {"__pycache__", ".pytest_cache"}


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not _SKIP_DIRS.intersection(p.parts)
    )


def digest(root: Path) -> str:
    """The digest of everything a build of the site from ``root`` (the repository) reads."""
    h = hashlib.blake2b(digest_size=20)
    h.update(code_digest(root).encode())
    _hash_folder(h, "data", data_dir())
    return h.hexdigest()


def code_digest(root: Path) -> str:
    """The digest of what renders the pages: the rendering packages' versions, the pages (docs/), the
    code (pipelines/, runtime/, core/) and mkdocs.yml; the data aside."""
    h = hashlib.blake2b(digest_size=20)
    for name in PACKAGES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "-"
        h.update(f"pkg\0{name}\0{version}\0".encode())
    for name in ("docs", "pipelines", "runtime", "core"):
        _hash_folder(h, name, root / name)
    for name in ("mkdocs.yml",):
        p = root / name
        h.update(f"file\0{name}\0".encode() + (p.read_bytes() if p.exists() else b"-"))
    return h.hexdigest()


def _hash_folder(h: Any, label: str, folder: Path) -> None:
    for p in _files(folder):
        h.update(f"{label}\0{p.relative_to(folder).as_posix()}\0".encode())
        with p.open("rb") as fh:
            h.update(hashlib.file_digest(fh, "blake2b").digest())


def up_to_date(site: Path, current: str) -> bool:
    """Whether ``site`` was built from inputs with the digest ``current`` (and is still complete)."""
    stamp = site / STAMP
    return (
        (site / "index.html").is_file()
        and stamp.is_file()
        and stamp.read_text(encoding="utf-8").strip() == current
    )


def mark(site: Path, current: str) -> None:
    """Record the digest of the inputs a finished build of ``site`` was made from (atomic)."""
    tmp = site / (STAMP + ".tmp")
    tmp.write_text(current + "\n", encoding="utf-8")
    tmp.replace(site / STAMP)
