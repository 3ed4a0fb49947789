"""The per-host page cache (pipelines/site/page_cache.py): a page whose inputs did not change is given
back as it was rendered, with the same table downloads; a change to its host's artifacts, to the
fleet's shared artifacts or to what it declares it reads renders it again; another host's new run
does not. Committed artifacts of two hosts, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.site import (
    figures,
    markdown,
    page_cache,
    per_host,
    split_pages,  # noqa: F401 - registers the per-host pages
)
from tests.support import two_hosts

HOSTS = two_hosts.HOSTS


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    data = two_hosts.use(monkeypatch, tmp_path)
    stored: list[str] = []
    real = page_cache._store

    def spy(path: Path, entry: dict) -> None:
        if not path.name.startswith(
            "v-"
        ):  # pages (not what their keys read: set_macros.kept)
            stored.append(path.name)
        real(path, entry)

    monkeypatch.setattr(page_cache, "_store", spy)
    page_cache.reset()  # as the build's hooks do
    yield data, stored
    page_cache.finish()
    markdown.reset_tables()


def _render(name: str, host: str) -> tuple[str, dict]:
    markdown.reset_tables()
    text = per_host.render(name, host)
    return text, dict(markdown.table_files())


def _touch_run(data: Path, host: str) -> None:
    """Rewrite one of the host's runs laid out otherwise (other bytes, the same artifact)."""
    path = sorted((data / "runs" / host).rglob("*.json"))[0]
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1) + "\n")


def test_a_cached_page_is_the_page_rendered_with_its_downloads(fleet, monkeypatch):
    data, stored = fleet
    host = HOSTS[0]
    first = _render("boards", host)
    assert len(stored) == 1 and first[1]  # rendered, stored, with its table downloads
    page_cache.reset()
    again = _render("boards", host)
    assert again == first and len(stored) == 1  # a hit: the same Markdown and downloads
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    assert (
        _render("boards", host) == first
    )  # the same as a page rendered without the cache
    monkeypatch.delenv("ALMANAC_PAGE_CACHE")
    page_cache.finish()  # outside a build (a test rendering in process): nothing is cached
    stored.clear()
    _render("boards", HOSTS[1])
    assert stored == []


def test_only_the_pages_whose_inputs_changed_render_again(fleet):
    data, stored = fleet
    a, b = HOSTS
    for name in ("boards", "hosts", "roles"):
        for host in HOSTS:
            _render(name, host)
    assert len(stored) == 6
    page_cache.prune()
    _touch_run(
        data, b
    )  # host b's runs changed: its pages render again, host a's do not
    page_cache.reset()
    stored.clear()
    for name in ("boards", "hosts", "roles"):
        for host in HOSTS:
            _render(name, host)
    assert len(stored) == 3
    # the set's shared inputs (a registry) changed: every page renders again
    (data / "roles.yaml").write_text((data / "roles.yaml").read_text() + "\n# edited\n")
    page_cache.reset()  # the next build
    stored.clear()
    _render("boards", a)
    assert len(stored) == 1


def _pages(folder: Path) -> list[Path]:
    """The page entries of the cache's folder (not what their keys read: set_macros.kept)."""
    return [p for p in folder.glob("*.json.z") if not p.name.startswith("v-")]


def test_prune_keeps_the_entries_this_build_used(fleet):
    data, stored = fleet
    a, b = HOSTS
    _render("boards", a)
    _render("boards", b)
    folder = next((Path(page_cache.cache_dir()) / "pages").iterdir())
    assert len(_pages(folder)) == 2
    page_cache.prune()
    page_cache.reset()
    _render("boards", a)  # the next build shows host a's page only
    page_cache.prune()
    assert len(_pages(folder)) == 1


def test_an_unreadable_entry_is_rendered_again(fleet):
    data, stored = fleet
    first = _render("hosts", HOSTS[0])
    folder = next((Path(page_cache.cache_dir()) / "pages").iterdir())
    for p in folder.glob("*.json.z"):
        p.write_bytes(b"not zlib")
    stored.clear()
    assert _render("hosts", HOSTS[0]) == first and len(stored) == 1


@pytest.mark.integration  # forks a worker
def test_fill_renders_the_pages_over_the_cores_and_the_page_loop_finds_them(
    fleet, monkeypatch
):
    data, stored = fleet
    monkeypatch.setattr(page_cache.os, "sched_getaffinity", lambda _pid: {0, 1})
    jobs = [(name, host) for name in ("boards", "hosts") for host in HOSTS]

    def pending(job: tuple[str, str]) -> bool:
        return not page_cache.is_cached((job[0],), job[1], per_host._reads(*job))

    monkeypatch.setenv(
        "ALMANAC_PAGE_WORKERS", "1"
    )  # one process: nothing ahead, the page loop renders
    page_cache.fill(jobs, lambda job: per_host.render(*job), pending)
    assert stored == [] and all(map(pending, jobs))
    monkeypatch.delenv(
        "ALMANAC_PAGE_WORKERS"
    )  # the default: a second process where there are two cores
    page_cache.fill(jobs, lambda job: per_host.render(*job), pending)
    assert len(stored) == 2  # this process's share; the worker stored the other two
    folder = next((Path(page_cache.cache_dir()) / "pages").iterdir())
    pages = [p for p in folder.glob("*.json.z") if not p.name.startswith("v-")]
    assert (
        len(pages) == 4
    )  # the four pages (a "v-" entry is a kept value the keys read: set_macros)
    assert markdown.table_files() == {}  # the downloads come with the pages, not before
    stored.clear()
    page_cache.fill(jobs, lambda job: per_host.render(*job), pending)
    assert not any(map(pending, jobs))  # nothing left to render
    shown = [_render(*job) for job in jobs]
    assert stored == []  # every page found in the cache
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    assert shown == [_render(*job) for job in jobs]  # as rendered without the cache


def test_a_file_is_hashed_again_only_when_it_changed(fleet, monkeypatch):
    """A key's file digests are of content; a file whose size, times and inode are those it had when the
    last build hashed it is not read again, and one rewritten in place (same size, other bytes) is."""
    import time

    from core import filestamp

    data, _ = fleet
    real_ns = time.time_ns
    # every file older than the window in which a change could go unseen (files written just now are
    # hashed again each time: git's racy case)
    monkeypatch.setattr(filestamp, "now_ns", lambda: real_ns() + 10**10)
    path = sorted((data / "runs" / HOSTS[0]).rglob("*.json"))[0]
    first = page_cache._file_digest(path)
    page_cache.prune()  # the end of a build keeps the digests
    page_cache.reset()  # the next build
    reads = _counting_opens(monkeypatch)
    assert page_cache._file_digest(path) == first and path not in reads
    raw = path.read_bytes()
    path.write_bytes(raw[:-1] + (b" " if raw[-1:] != b" " else b"\n"))
    reads.clear()
    assert page_cache._file_digest(path) != first and path in reads


def test_the_key_text_reads_every_value_whatever_holds_it():
    """``stable_text`` (what a page declares it reads, in its key): the same content gives the same
    text, a value changed anywhere inside (a dataclass in a list in a dict, a frame's cell) another;
    a set's order does not count."""
    from dataclasses import dataclass

    import pandas as pd

    @dataclass
    class Inner:
        name: str
        values: list[float]

    def made(x: float, cell: float) -> object:
        return {
            "a": [Inner("n", [1.0, x]), (2, None)],
            "tags": {"b", "c", "a"},
            "frame": pd.DataFrame({"v": [1.5, cell], "o": [{"k": 1}, Inner("m", [])]}),
        }

    text = page_cache.stable_text(made(2.0, 3.0))
    assert text == page_cache.stable_text(made(2.0, 3.0))
    assert text != page_cache.stable_text(made(2.5, 3.0))
    assert text != page_cache.stable_text(made(2.0, 3.5))
    assert "Inner" in text and "'k'" in text
    assert page_cache.stable_text({"x", "y", "z"}) == page_cache.stable_text(
        {"z", "y", "x"}
    )


def _counting_opens(monkeypatch) -> list[Path]:
    """The files ``page_cache`` reads to hash (every hash opens its file through ``Path.open``)."""
    reads: list[Path] = []
    real_open = Path.open

    def spy(self, *args, **kwargs):
        reads.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spy)
    return reads


def test_publishing_the_set_hashes_no_artifact_again(fleet, monkeypatch, tmp_path):
    """A build publishes every artifact by a hard link into the site and the next one removes that site:
    both change each file's ctime (asserted), not its content. The next build's digests read no file
    (core.filestamp leaves ctime out of the stamp)."""
    import os
    import time

    from core import artifacts, filestamp
    from pipelines.site import hooks

    data, _ = fleet
    real_ns = time.time_ns
    monkeypatch.setattr(filestamp, "now_ns", lambda: real_ns() + 10**10)
    files = list(artifacts.iter_files(data))
    assert len(files) > 10
    first = {p: page_cache._file_digest(p) for p in files}
    page_cache.prune()
    page_cache.reset()
    ctimes = {p: p.stat().st_ctime_ns for p in files}
    time.sleep(0.01)  # past the file system's timestamp tick
    site = tmp_path / "site"
    for i, p in enumerate(files):  # what the build's publish does with each artifact
        (site / str(i)).mkdir(parents=True)
        hooks._mirror(p, site / str(i) / p.name)
    for i, p in enumerate(files):  # and removing the old site
        os.unlink(site / str(i) / p.name)
    assert all(p.stat().st_ctime_ns != ctimes[p] for p in files)
    reads = _counting_opens(monkeypatch)
    assert {p: page_cache._file_digest(p) for p in files} == first
    assert [
        r for r in reads if r in first
    ] == []  # (the digests' own file is read, once)


def test_an_artifact_rewritten_is_seen_even_with_its_mtime_set_back(fleet, monkeypatch):
    """The artifacts' writer (core.artifacts, by rename: another inode) changes the stamp even when the
    new bytes have the old size and the old mtime is put back: the file is hashed again. The one edit
    the stamp cannot see (core.filestamp's docstring): bytes rewritten in place, same size, mtime set
    back; shown here so that the limit is a stated one."""
    import os
    import time

    from core import artifacts, filestamp

    data, _ = fleet
    real_ns = time.time_ns
    monkeypatch.setattr(filestamp, "now_ns", lambda: real_ns() + 10**10)
    path = sorted((data / "runs" / HOSTS[0]).rglob("*.json"))[0]
    first = page_cache._file_digest(path)
    page_cache.prune()
    page_cache.reset()
    st = path.stat()
    raw = path.read_bytes()
    other = raw[:-1] + (
        b" " if raw[-1:] != b" " else b"\n"
    )  # the same size, other bytes
    artifacts.atomic_write_bytes(path, other)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert after.st_ino != st.st_ino
    reads = _counting_opens(monkeypatch)
    second = page_cache._file_digest(path)
    assert second != first and path in reads
    # in place (same inode), same size, mtime set back: the stamp is the same, the old digest stands
    page_cache.prune()
    page_cache.reset()
    with path.open("r+b") as fh:
        fh.write(raw)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_ino == after.st_ino
    reads.clear()
    assert page_cache._file_digest(path) == second and path not in reads


def test_every_generated_host_page_has_one_body_and_says_which_host_it_is(fleet):
    """The generated per-host pages differ in their front matter only (mkdocs-macros then compiles the one
    body once: docs/macros.py); the body renders the host's heading, the line naming it, and its page."""
    import yaml

    pages = per_host.generated_pages()  # "boards" is one page per host however few
    assert {p for p, _ in pages} >= {f"boards/{h}.md" for h in HOSTS}
    bodies = set()
    for path, text in pages:
        _, front, body = text.split("---\n", 2)
        meta = yaml.safe_load(front)
        name, host = meta["almanac_split"], meta["almanac_host"]
        assert path == per_host.page_file(name, host)
        assert meta["title"].startswith(per_host.PAGES[name].title + ": ")
        bodies.add(body)
    assert bodies == {"\n" + per_host.HOST_PAGE_BODY + "\n"}
    label = per_host.host_labels()[HOSTS[0]]
    title = per_host.PAGES["boards"].title
    text = per_host.host_page("boards", HOSTS[0])
    assert text.startswith(
        f"# {title}: {figures.host(label, HOSTS[0])}\n\nHost {markdown.code(HOSTS[0])}. "
    )
    assert text.endswith(per_host.render("boards", HOSTS[0]))


def test_the_shared_digest_reads_every_file_that_is_not_an_artifact_in_path_order(
    fleet, tmp_path
):
    """What every page's key shares: the data folder's files other than the set's artifacts (and their
    sidecars), by name and content, in path order (parts compared one by one: "a/x" before "a-b/x"),
    hidden files and folders' links left out; a change to one of them changes it."""
    import hashlib
    import os

    from pipelines import dataset

    data, _ = fleet
    (data / "a").mkdir()
    (data / "a-b").mkdir()
    (data / "a" / "x.yaml").write_text("one\n")
    (data / "a-b" / "x.yaml").write_text("two\n")
    (data / "a" / ".hidden").write_text("not read\n")
    os.symlink(data / "a-b", data / "a" / "linked")  # a folder's link: not followed
    ds = dataset.load()
    own = {p for _, p in ds.files}
    for r in ds.runs:
        side = page_cache._sidecar(ds, r)
        if side is not None:
            own.add(side)
    h = hashlib.blake2b(digest_size=20)
    h.update(f"v{page_cache.VERSION}\0{page_cache.code_digest()}\0".encode())
    files = sorted(
        q for q in data.rglob("*") if q.is_file()
    )  # the reference: pathlib's order
    rels = [p.relative_to(data).as_posix() for p in files if p not in own]
    assert rels.index("a/x.yaml") < rels.index("a-b/x.yaml")
    for p in files:
        if p in own or p.name.startswith("."):
            continue
        h.update(
            f"file\0{p.relative_to(data).as_posix()}\0".encode()
            + page_cache._file_digest(p)
        )
    for kind, recs in sorted(ds.by_type.items()):
        if kind not in ("run", "host"):
            for rec in recs:
                h.update(
                    f"{kind}\0{rec.data_path}\0".encode()
                    + page_cache._file_digest(data / rec.data_path)
                )
    before = page_cache._shared(ds)
    assert before == h.hexdigest()
    (data / "a-b" / "x.yaml").write_text("three\n")  # another size: another stamp
    assert page_cache._shared(ds) != before


def test_a_build_resolves_the_host_labels_once_and_the_next_build_reads_hosts_yaml_again(
    fleet, monkeypatch
):
    """Every per-host page names its host: the labels are resolved from the set once per build (asked of
    the whole set per page, they were a pass over every artifact per page), and a label added to
    hosts.yaml between two builds of one loaded set (mkdocs serve) is on the next build's pages."""
    from pipelines import hostnames

    data, _ = fleet
    calls: list[int] = []
    real = hostnames.labels

    def spy(docs: list) -> dict[str, str]:
        calls.append(len(docs))
        return real(docs)

    monkeypatch.setattr(hostnames, "labels", spy)
    pages = {
        (name, host): per_host.host_page(name, host)
        for name in ("boards", "hosts", "roles")
        for host in HOSTS
    }
    whole = list(per_host.dataset.load().runs) + list(per_host.dataset.load().hosts)
    assert (
        calls.count(len(whole)) == 1
    )  # once over the whole set (pages ask of their own runs too)
    derived = real(whole)
    for (name, host), text in pages.items():
        assert text.startswith(
            f"# {per_host.PAGES[name].title}: {figures.host(derived[host], host)}\n"
        )
    hosts_yaml = data / "hosts.yaml"
    hosts_yaml.write_text(
        hosts_yaml.read_text() + f"\nhost_labels:\n  {HOSTS[0]}: Bench box seven\n"
    )
    assert per_host.host_page("hosts", HOSTS[0]).startswith(
        f"# {per_host.PAGES['hosts'].title}: {figures.host(derived[HOSTS[0]], HOSTS[0])}\n"
    )  # the same build: as it started
    page_cache.reset()  # the next build
    assert per_host.host_page("hosts", HOSTS[0]).startswith(
        f"# {per_host.PAGES['hosts'].title}: {figures.host('Bench box seven', HOSTS[0])}\n"
    )
    assert calls.count(len(whole)) == 2
