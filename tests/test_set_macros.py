"""The whole-set macros kept between builds (pipelines/site/set_macros.py): a kept macro gives back what
the macro renders, with the same table downloads; one more host's runs, a changed run, a changed
registry or another building host render it again, as a build without the cache would. Committed
artifacts of a few hosts, the fleet pages' macros through the site's composition root (docs/macros.py),
in process."""

from __future__ import annotations

import json

import pytest

from pipelines.site import markdown, page_cache
from tests.support import two_hosts
from tests.support.page_values import macros

HOSTS, NEW_HOST = two_hosts.HOSTS, two_hosts.NEW_HOST
# a few of the data pages (every one is registered the same way in docs/macros.py): the fleet's front page,
# its ranking, a split page's index and the runs browser
PAGES = ("home_summary", "leaderboard", "hosts_page", "runs_browser")


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    data = two_hosts.use(monkeypatch, tmp_path)
    monkeypatch.setenv("ALMANAC_THIS_HOST", "none")
    stored: list[str] = []
    real = page_cache.write_entry

    def spy(name: str, ds, entry: dict) -> None:
        stored.append(name)
        real(name, ds, entry)

    monkeypatch.setattr(page_cache, "write_entry", spy)
    yield data, stored, macros()
    page_cache.finish()
    markdown.reset_tables()


def _pages(fns: dict, cached: bool, monkeypatch) -> dict[str, tuple[str, dict]]:
    """Every data page's macro output and the downloads it registered, in one build (``cached``: with the
    caches of a build, else as a build without them)."""
    if cached:
        monkeypatch.delenv("ALMANAC_PAGE_CACHE", raising=False)
    else:
        monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")
    page_cache.reset()  # as the build's hooks do
    out = {}
    for name in PAGES:
        markdown.reset_tables()
        text = fns[name]()
        out[name] = (text, dict(markdown.table_files()))
    page_cache.finish()
    return out


def test_a_kept_macro_is_the_macro_rendered_with_its_downloads(fleet, monkeypatch):
    data, stored, fns = fleet
    plain = _pages(fns, cached=False, monkeypatch=monkeypatch)
    assert stored == []  # without the cache nothing is kept
    first = _pages(fns, cached=True, monkeypatch=monkeypatch)
    assert first == plain
    kept = [n for n in stored if n.startswith("m-")]
    assert len(kept) == len(PAGES)  # each data page's macro stored once
    assert any(tables for _, tables in plain.values())  # downloads come back with them
    stored.clear()
    # the next build, nothing new
    again = _pages(fns, cached=True, monkeypatch=monkeypatch)
    assert again == plain and stored == []


def test_one_more_host_renders_them_as_a_build_without_the_cache(
    fleet, monkeypatch, tmp_path
):
    data, stored, fns = fleet
    before = _pages(fns, cached=True, monkeypatch=monkeypatch)
    two_hosts.add_host(data, tmp_path / "more")
    stored.clear()
    after = _pages(fns, cached=True, monkeypatch=monkeypatch)
    assert after == _pages(fns, cached=False, monkeypatch=monkeypatch)
    # the new host shows on Home and the Leaderboard: a key that missed it would give back the old page
    for name in ("home_summary", "leaderboard", "hosts_page"):
        assert after[name] != before[name]
        assert NEW_HOST in after[name][0] and NEW_HOST not in before[name][0]
    assert len([n for n in stored if n.startswith("m-")]) == len(PAGES)


def test_a_changed_input_renders_them_again(fleet, monkeypatch):
    data, stored, fns = fleet
    _pages(fns, cached=True, monkeypatch=monkeypatch)

    def rendered_again() -> int:
        stored.clear()
        _pages(fns, cached=True, monkeypatch=monkeypatch)
        return len([n for n in stored if n.startswith("m-")])

    assert rendered_again() == 0
    # one run's file, other bytes (the same artifact)
    path = sorted((data / "runs" / HOSTS[1]).rglob("*.json"))[0]
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1) + "\n")
    assert rendered_again() == len(PAGES)
    # a registry the data folder holds
    (data / "roles.yaml").write_text((data / "roles.yaml").read_text() + "\n# edited\n")
    assert rendered_again() == len(PAGES)
    # the host that builds the site (marked on Home and the Leaderboard): those two again, as without the cache
    monkeypatch.setenv("ALMANAC_THIS_HOST", HOSTS[0])
    assert rendered_again() == len(PAGES)
    marked = _pages(fns, cached=True, monkeypatch=monkeypatch)
    plain = _pages(fns, cached=False, monkeypatch=monkeypatch)
    assert marked == plain and "this host" in marked["leaderboard"][0]


def test_a_kept_value_is_figured_again_only_when_the_set_changed(fleet, tmp_path):
    """What per-host pages' keys read across hosts and the check's groups (set_macros.kept)."""
    from pipelines.site import set_macros

    data, stored, fns = fleet
    figured: list[int] = []

    def value() -> list[str]:
        figured.append(1)
        return sorted({p.parent.name for p in (data / "runs").glob("*/*")})

    def build() -> list[str]:
        page_cache.reset()
        try:
            return set_macros.kept("hosts", value)
        finally:
            page_cache.prune()
            page_cache.finish()

    first = build()
    assert build() == first and len(figured) == 1
    two_hosts.add_host(data, tmp_path / "more")
    assert NEW_HOST in build() and len(figured) == 2


def test_the_key_reads_none_of_the_projects_own_measurements(
    fleet, tmp_path, monkeypatch
):
    """The runs a user measured into the project's data/ (``invoke all``) are no input of another set's pages:
    the key neither reads nor hashes them (it read every file there, so the test command after the main
    command opened the user's runs), only the registries a set without its own falls back on."""
    from pipelines.site import set_macros

    proj = tmp_path / "proj"
    own = proj / "data" / "hosts" / "someone"
    own.mkdir(parents=True)
    (own / "bandwidth-1.json").write_text("{}")
    monkeypatch.setenv("ALMANAC_ROOT", str(proj))  # core.paths.project_root
    page_cache.reset()
    before = set_macros._set_digest()
    (own / "bandwidth-1.json").write_text('{"changed": 1}')
    (own / "bandwidth-2.json").write_text("{}")
    page_cache.reset()
    assert set_macros._set_digest() == before
    page_cache.finish()
