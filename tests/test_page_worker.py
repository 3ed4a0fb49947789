"""The page worker (pipelines/site/page_worker.py): a second process makes a build's pages from the end of the
list into the caches while MkDocs' page loop works from the start. Real MkDocs builds, real forks; nothing
mocked. What it must never change: the site (byte for byte the one-process site), the errors and warnings a
build reports (each once, from the loop), and a failed build's exit status."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.site import page_worker
from tests.conftest import make_golden_data
from tests.support.committed import committed_data
from tests.test_html_cache import _same_tree

ROOT = Path(__file__).resolve().parents[1]
MADE = re.compile(r"INFO +- +([\d,]+) of ([\d,]+) pages made by a second process")


def _mkdocs(
    data: Path, cache: Path, site: Path, workers: str, cfg: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(cache),
        ALMANAC_PAGE_CACHE="1",
        ALMANAC_PAGE_WORKERS=workers,
        DISABLE_MKDOCS_2_WARNING="true",
        NO_MKDOCS_2_WARNING="1",
    )
    config = ["-f", str(cfg)] if cfg is not None else []
    # every CPU of the machine, whatever this test process was left pinned to (the worker needs two)
    cpus = range(os.cpu_count() or 1)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", *config]
        + ["--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )


two_cores = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2, reason="the page worker needs a second core"
)


@two_cores
@pytest.mark.integration  # three site builds
def test_the_site_made_over_two_processes_is_the_one_process_site(tmp_path):
    data = make_golden_data(tmp_path / "data")
    one = _mkdocs(data, tmp_path / "c1", tmp_path / "one", "1")
    assert one.returncode == 0, one.stderr[-3000:]
    assert MADE.search(one.stderr) is None  # one process: no worker
    two = _mkdocs(data, tmp_path / "c2", tmp_path / "two", "2")
    assert two.returncode == 0, two.stderr[-3000:]
    made = MADE.search(two.stderr)
    assert made is not None, two.stderr[-3000:]
    n, total = (int(g.replace(",", "")) for g in made.groups())
    assert 0 < n < total  # the two met in the middle: each made some of the pages
    assert _same_tree(tmp_path / "one", tmp_path / "two") == []
    # built again with nothing new: every page from the caches, the same site
    again = _mkdocs(data, tmp_path / "c2", tmp_path / "again", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _same_tree(tmp_path / "one", tmp_path / "again") == []


def _small_site(tmp_path: Path, last: str) -> Path:
    """A site of twelve pages with the project's hooks and macros, ``last`` the text of its last page (the
    worker's first)."""
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    names = [f"p{i:02}.md" for i in range(12)]
    for name in names[:-1]:
        (docs / name).write_text(f"# Page {name}\n\nSee [the first](p00.md).\n")
    (docs / names[-1]).write_text(last)
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(
        "site_name: t\n"
        f"docs_dir: {docs}\n"
        f"nav: [{', '.join(names)}]\n"
        "plugins:\n"
        "  - macros:\n"
        f"      module_name: {ROOT / 'docs' / 'macros'}\n"
        "      on_error_fail: true\n"
        "      on_undefined: strict\n"
        f"hooks: [{ROOT / 'pipelines' / 'site' / 'hooks.py'}]\n"
    )
    return cfg


@two_cores
@pytest.mark.integration  # four small site builds
def test_a_page_the_worker_fails_on_or_warns_on_is_reported_once_by_the_loop(
    tmp_path,
):
    data = committed_data(tmp_path / "data", only=["models.yaml"])
    # a macro that does not exist, on the page the worker makes first: the worker fails on it silently, the loop
    # makes it again and fails the build with the error as one process does, once
    broken = _small_site(tmp_path / "a", "# Last\n\n{{ no_such_macro() }}\n")
    alone = _mkdocs(data, tmp_path / "a" / "c1", tmp_path / "a" / "s1", "1", broken)
    assert alone.returncode != 0 and MADE.search(alone.stderr) is None
    for _ in range(2):
        proc = _mkdocs(
            data, tmp_path / "a" / "cache", tmp_path / "a" / "site", "2", broken
        )
        assert proc.returncode == alone.returncode, proc.stderr[-3000:]
        for said in ("_Macro Rendering Error_", "'no_such_macro' is undefined"):
            assert proc.stderr.count(said) == alone.stderr.count(said) > 0, said
    # a link to a missing page, on the worker's first page: the worker made it but kept nothing (a step that
    # warned is not cached), so the loop converts it again and warns, once; the second build fails as the first
    warned = _small_site(tmp_path / "b", "# Last\n\nSee [gone](gone.md).\n")
    for _ in range(2):
        proc = _mkdocs(
            data, tmp_path / "b" / "cache", tmp_path / "b" / "site", "2", warned
        )
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert (
            proc.stderr.count("contains a link 'gone.md', but the target is not found")
            == 1
        )
        made = MADE.search(proc.stderr)
        assert made is not None and int(made.group(1)) >= 1, proc.stderr[-3000:]


def test_no_worker_outside_a_build_or_with_one_process(monkeypatch):
    """Outside a build (the page cache off) and with ALMANAC_PAGE_WORKERS=1 nothing is forked."""
    files = type("F", (), {"documentation_pages": lambda self: [object()] * 20})()
    page_worker.start({}, files)  # not in a build: the caches are off
    assert page_worker.finish() is None
    from pipelines.site import page_cache

    monkeypatch.setattr(page_cache, "_BUILDING", [True])
    monkeypatch.setenv("ALMANAC_PAGE_WORKERS", "1")
    page_worker.start({}, files)
    assert page_worker.finish() is None
