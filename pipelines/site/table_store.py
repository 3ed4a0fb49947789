"""The table downloads (``tables/<digest>.csv`` and ``.json``) kept between builds, by content.

Every page's tables are published as CSV and JSON (pipelines.site.hooks.write_tables): a fleet of
10,000 artifacts has some 17,000 tables, 177 MB of files, and a build that changed one host's runs
serialised and wrote all of them again. A download is a function of the table's digest (the
digest of its plain headers and rows: pipelines.site.markdown.register_table, also its file name
in the site) and of the code that writes it (``page_cache.code_digest``: pipelines/, the hooks,
the rendering packages). The store keeps each file under that pair and hard-links it into the
site (a copy where the two do not share a file system); a file it does not hold is written as
always and kept.

A file is written to a temporary name and renamed, never changed in place, so a link keeps the
content it was made with; an empty file (a write a crash cut short) is never served. A build keeps
the files it used and removes the rest of its data folder's store (``prune``). Outside a build,
or with ``ALMANAC_PAGE_CACHE=0``, nothing is stored: the files are written directly. Deleting the
store loses nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from core.paths import cache_dir
from pipelines import dataset
from pipelines.site import page_cache

_USED: dict[Path, set[str]] = {}  # store folder -> the file names this build used
_FOLDER: dict[Path, Path] = {}  # data folder -> its store folder (once per build)


def _folder() -> Path:
    """This data folder's store (one per data folder, as the page cache's entries)."""
    root = dataset.load().root
    if root not in _FOLDER:
        where = hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()
        _FOLDER[root] = cache_dir() / "tables" / where
    return _FOLDER[root]


def _stored(folder: Path, name: str, text: Callable[[], str]) -> Path | None:
    """The store's file ``name`` (written from ``text()`` when the store lacks it); None when the
    store cannot be written (the caller writes the site's file itself)."""
    src = folder / name
    try:
        if os.stat(src).st_size > 0:
            return src
    except OSError:
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text(), encoding="utf-8")
        tmp.replace(src)
    except OSError:
        return None
    return src


def publish(
    dest: Path, text: Callable[[], str], write: Callable[[Path, str], None]
) -> None:
    """Put the download ``dest`` (``tables/<digest>.<ext>`` of the site) in place: linked from the
    store when it holds it, else made from ``text()`` (``write(dest, text)`` writes a site file)."""
    if not page_cache.enabled():
        write(dest, text())
        return
    folder = _folder()
    name = f"{page_cache.code_digest()[:16]}-{dest.name}"
    _USED.setdefault(folder, set()).add(name)
    made: list[str] = []

    def once() -> (
        str
    ):  # the text, made at most once whichever way the file is put in place
        if not made:
            made.append(text())
        return made[0]

    src = _stored(folder, name, once)
    if src is None:
        write(dest, once())
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
        return
    except FileExistsError:  # a site folder not emptied first (mkdocs build --dirty)
        dest.unlink()
    except OSError:  # another file system (or no hard links there): a copy
        shutil.copyfile(src, dest)
        return
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def prune() -> None:
    """End of a build: each store folder the build used keeps the files it used, nothing else."""
    for folder, used in _USED.items():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for n in names:
            if n not in used:
                try:
                    os.unlink(folder / n)
                except OSError:
                    pass
    _USED.clear()
    _FOLDER.clear()


def reset() -> None:
    """Start of a build (or after one): nothing remembered."""
    _USED.clear()
    _FOLDER.clear()
