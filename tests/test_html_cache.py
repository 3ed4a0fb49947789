"""What MkDocs makes of a page, cached between builds (pipelines/site/html_cache.py): the content key
follows the page's Markdown, place and the existence of the pages it links; a restored page is what
Markdown made of it (content, table of contents, title, anchors); and the committed site built with
an empty cache and then with a full one is byte for byte the site built without any cache. Real
MkDocs objects and real builds; nothing mocked."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from pipelines.site import html_cache, page_cache
from tests.support.committed import committed_data

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def docs(tmp_path, monkeypatch):
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(
        "ALMANAC_DATA", str(committed_data(tmp_path / "data", only=["models.yaml"]))
    )
    monkeypatch.delenv("ALMANAC_PAGE_CACHE", raising=False)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text(
        "# Title A\n\nSee [b](b.md#part) and [c](sub/c.md).\n\n## Part one\n\n"
        "text\n\n## Part two\n"
    )
    (root / "b.md").write_text("# B\n\n## Part\n")
    cfg = MkDocsConfig()
    cfg.load_dict(
        {
            "site_name": "t",
            "docs_dir": str(root),
            "site_dir": str(tmp_path / "site"),
            "markdown_extensions": ["toc", "attr_list"],
        }
    )
    assert cfg.validate() == ([], [])
    page_cache.reset()  # as the build's hooks do
    yield root, cfg
    page_cache.finish()


def _files(root: Path, cfg: MkDocsConfig, names: list[str]) -> Files:
    return Files([File(n, str(root), cfg["site_dir"], True) for n in names])


def _page(files: Files, cfg: MkDocsConfig, name: str) -> tuple[Page, str]:
    """The page ``name`` read from its file, and its Markdown."""
    file = files.get_file_from_path(name)
    assert file is not None
    page = Page(None, file, cfg)
    page.read_source(cfg)
    return page, page.markdown or ""


def test_the_content_key_follows_the_text_the_place_and_the_linked_pages(docs):
    root, cfg = docs
    files = _files(root, cfg, ["a.md", "b.md"])
    page, text = _page(files, cfg, "a.md")
    key = html_cache.content_key(text, page, files)
    assert key is not None and key == html_cache.content_key(text, page, files)
    assert html_cache.content_key(text + " ", page, files) != key
    # a page it links appears (a link that warned resolves now): converted again
    (root / "sub").mkdir()
    (root / "sub" / "c.md").write_text("# C\n")
    with_c = _files(root, cfg, ["a.md", "b.md", "sub/c.md"])
    assert html_cache.content_key(text, page, with_c) != key
    # a page it does not link appears (another host's page): the same key
    more = _files(root, cfg, ["a.md", "b.md", "other.md"])
    assert html_cache.content_key(text, page, more) == key
    # the same text at another place
    other = SimpleNamespace(file=SimpleNamespace(src_uri="x/a.md"), url="x/a/")
    assert html_cache.content_key(text, other, files) != key
    page_cache.finish()  # outside a build: nothing is cached
    assert html_cache.content_key(text, page, files) is None


def test_a_restored_page_is_what_markdown_made_of_it(docs):
    root, cfg = docs
    files = _files(root, cfg, ["a.md", "b.md"])
    made, text = _page(files, cfg, "a.md")
    made.render(cfg, files)
    key = html_cache.content_key(text, made, files)
    assert key is not None and made.content is not None
    html_cache.store_content(key, made, made.content)
    entry = html_cache.cached_content(key)
    assert entry is not None
    again, _ = _page(files, cfg, "a.md")
    html_cache.restore(again, entry)
    again.render(cfg, files)
    assert again.content == made.content and "Title A" in (again.content or "")
    assert str(again.toc) == str(made.toc) and again.title == made.title == "Title A"
    assert again.present_anchor_ids == made.present_anchor_ids
    assert {"title-a", "part-one"} <= (made.present_anchor_ids or set())
    assert again.links_to_anchors == made.links_to_anchors
    assert {f.src_uri: a for f, a in (again.links_to_anchors or {}).items()} == {
        "b.md": {"part": "b.md#part"}
    }
    # the class's own render again afterwards
    assert "render" not in vars(again)


def _build(data: Path, cache: Path, site: Path, *, cached: bool) -> str:
    """``mkdocs build`` of ``data`` into ``site`` with ``cache`` (the page cache on or off); its log."""
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(cache),
        ALMANAC_PAGE_CACHE="1" if cached else "0",
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"]
        + ["--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def _same_tree(a: Path, b: Path) -> list[str]:
    """The files that differ between two folders (or are in one only)."""
    out: list[str] = []

    def walk(cmp: filecmp.dircmp, rel: str) -> None:
        out.extend(f"{rel}{n}" for n in cmp.left_only + cmp.right_only)
        out.extend(
            f"{rel}{n}"
            for n in cmp.common_files
            if not filecmp.cmp(Path(cmp.left) / n, Path(cmp.right) / n, shallow=False)
        )
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{rel}{name}/")

    walk(filecmp.dircmp(a, b), "")
    return out


@pytest.mark.integration  # three site builds
def test_the_committed_site_is_the_same_built_with_an_empty_and_a_full_cache(
    tmp_path,
):
    data = committed_data(tmp_path / "data")
    _build(data, tmp_path / "c0", tmp_path / "plain", cached=False)
    _build(data, tmp_path / "c1", tmp_path / "cold", cached=True)
    entries = list((tmp_path / "c1" / "pages").rglob("*.json.z"))
    assert any(p.name.startswith("t-") for p in entries)  # themed pages stored
    assert any(p.name.startswith("c-") for p in entries)  # and their contents
    _build(data, tmp_path / "c1", tmp_path / "warm", cached=True)
    assert _same_tree(tmp_path / "plain", tmp_path / "cold") == []
    assert _same_tree(tmp_path / "plain", tmp_path / "warm") == []


@pytest.mark.integration  # two small site builds
def test_a_page_whose_conversion_warned_warns_again_in_the_next_build(tmp_path):
    """A link to a missing page is a warning, which fails a strict build. The content cache kept the page made
    with the warning, so the second build of the same inputs restored it without warning and passed: a
    broken link failed a build once. A page whose conversion warned is not kept; a clean page still is."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the other page](other.md).\n")
    (docs / "fine.md").write_text("# Fine\n\nSee [home](index.md).\n")
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(
        "site_name: t\n"
        f"docs_dir: {docs}\n"
        "nav: [index.md, fine.md]\n"
        f"hooks: [{ROOT / 'pipelines' / 'site' / 'hooks.py'}]\n"
    )
    env = dict(
        os.environ,
        ALMANAC_DATA=str(committed_data(tmp_path / "data", only=["models.yaml"])),
        ALMANAC_CACHE=str(tmp_path / "cache"),
        ALMANAC_PAGE_CACHE="1",
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(cfg)]
            + ["--site-dir", str(tmp_path / "site")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "contains a link 'other.md', but the target is not found" in proc.stderr
    kept = list((tmp_path / "cache").rglob("c-*.json.z"))
    assert len(kept) == 1, kept  # fine.md's content, not index.md's
