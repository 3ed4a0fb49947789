"""The table downloads (``tables/<digest>.csv`` and ``.json``) kept between builds, by content.

Every page's tables are published as CSV and JSON (pipelines.site.hooks.write_tables): a fleet of
10,000 artifacts has some 17,000 tables, 177 MB of files, and a build that changed one host's runs
serialised and wrote all of them again. A download is a function of the table's digest (the
digest of its plain headers and rows: pipelines.site.markdown.register_table, also its file name
in the site) and of the code that writes it (``page_cache.code_digest``: pipelines/, the hooks,
the rendering packages). The store keeps each file under that pair and hard-links it into the
site (a copy where the two do not share a file system); a file it does not hold is written as
always and kept.

What a build makes from the whole set (the runs browsers' indexes, the columnar index's Parquet and
CSV: some 30 MB at 10,000 artifacts) is kept the same way, under the set's content
(``publish_group``): a build with nothing new links them instead of writing them again.

The store takes a site's file once it is written and closed (a link to it: no second copy), and
nothing changes a file in place, so a link keeps the content it was made with; an empty file (a
write a crash cut short) is never served. A build keeps the files it used and removes the rest of
its data folder's store (``prune``). Outside a build, or with ``ALMANAC_PAGE_CACHE=0``, nothing is
stored: the files are written directly. Deleting the store loses nothing.
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

_USED: dict[str, set[str]] = {}  # store folder -> the file names this build used
# once per build (``reset``): the store folder and the code's prefix of its names, the site folders made
_NOW: dict[str, str] = {}
_MADE: set[str] = set()


def _folder() -> str:
    """This data folder's store (one per data folder, as the page cache's entries)."""
    if "folder" not in _NOW:
        root = str(dataset.load().root)
        where = hashlib.blake2b(root.encode(), digest_size=8).hexdigest()
        _NOW["folder"] = os.path.join(cache_dir(), "tables", where)
        _NOW["prefix"] = page_cache.code_digest()[:16] + "-"
    return _NOW["folder"]


def _keep(src: str, folder: str, name: str) -> None:
    """Keep the site's new file ``src`` in the store as ``name``: a link to it (a file is complete
    before it is linked, and never changed after); a store that cannot take it keeps nothing."""
    dest = os.path.join(folder, name)
    try:
        _makedirs(folder)
        try:
            os.link(src, dest)
        except (
            FileExistsError
        ):  # an empty file a crash left (or another build's): replaced
            tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
            os.link(src, tmp)
            os.replace(tmp, dest)
    except OSError:
        pass


def _makedirs(folder: str) -> None:
    if folder not in _MADE:
        os.makedirs(folder, exist_ok=True)
        _MADE.add(folder)


def publish(
    dest: Path, text: Callable[[], str], write: Callable[[Path, str], None]
) -> None:
    """Put the download ``dest`` (``tables/<digest>.<ext>`` of the site) in place: linked from the
    store when it holds it, else written from ``text()`` (``write(dest, text)`` writes a site file)
    and kept. Paths as strings, each folder made once: the store costs a stat and a link a file."""
    if not page_cache.enabled():
        write(dest, text())
        return
    folder = _folder()
    site_dir, base = os.path.split(os.fspath(dest))
    name = _NOW["prefix"] + base
    _USED.setdefault(folder, set()).add(name)
    src = os.path.join(folder, name)
    try:
        held = os.stat(src).st_size > 0  # an empty file is a write a crash cut short
    except OSError:
        held = False
    if not held:
        write(dest, text())
        _keep(os.fspath(dest), folder, name)
        return
    _makedirs(site_dir)
    _link(src, os.fspath(dest))


def publish_group(
    folder: Path, names: tuple[str, ...], key: str, make: Callable[[], object]
) -> None:
    """Put the site files ``folder/<name>`` in place, which ``make()`` writes together from the loaded
    set (the runs browser's indexes, the columnar index's tables): linked from the store when it holds
    every one of them under ``key`` (the set's content: pipelines.site.set_macros.set_digest), else
    made and kept. Without the store (outside a build, ``ALMANAC_PAGE_CACHE=0``): made."""
    if not page_cache.enabled():
        make()
        return
    store = _folder()
    held = [_NOW["prefix"] + key + "-" + n for n in names]
    _USED.setdefault(store, set()).update(held)
    try:
        whole = all(os.stat(os.path.join(store, h)).st_size > 0 for h in held)
    except OSError:
        whole = False
    if not whole:
        make()
        for n, h in zip(names, held, strict=True):
            if os.path.isfile(folder / n):
                _keep(os.fspath(folder / n), store, h)
        return
    _makedirs(os.fspath(folder))
    for n, h in zip(names, held, strict=True):
        _link(os.path.join(store, h), os.fspath(folder / n))


def _link(src: str, dest: str) -> None:
    """The stored file ``src`` as the site's ``dest``: a hard link, else a copy."""
    try:
        os.link(src, dest)
        return
    except FileExistsError:  # a site folder not emptied first (mkdocs build --dirty)
        os.unlink(dest)
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
                    os.unlink(os.path.join(folder, n))
                except OSError:
                    pass
    reset()


def reset() -> None:
    """Start of a build (or after one): nothing remembered."""
    _USED.clear()
    _NOW.clear()
    _MADE.clear()
