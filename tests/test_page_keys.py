"""A per-host page's cache key holds what the page reads across hosts, by its inputs
(pipelines/site/page_inputs.py), and nothing it does not read.

The committed set (every committed artifact, eight hosts). For one host's six per-host pages:

* another host's quality score changes: the Roles page's key changes (and so does the page);
* another host's runs that make the fleet's pooled run-to-run noise go: the keys of the pages that figure
  a run by it (per-host boards, roles) change, and so do those pages; the keys of the pages that read
  their host's runs only (hosts, serving, comparisons, optimization) stay, and so do those pages; a host
  with its own noise for every kind of test it ran keeps every key and page;
* one more host's first reference run (benchmarks/site_scale.py's ``new_host_reference``: configurations
  the fleet already measured, once each): no key of the host's pages changes, and no page either.

Rendered in process (the pages' own functions, the page cache off for the renders)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.site_scale import new_host_reference
from core import artifacts
from core.noise import noise_class
from pipelines import dataset, facts
from pipelines.site import (
    markdown,
    page_cache,
    page_inputs,
    per_host,
    split_pages,  # noqa: F401 - registers the per-host pages
)
from tests.support.committed import (
    ARTIFACT_DIRS,
    committed_data,
    committed_paths,
    committed_root,
)

HOST = "vm-55ecea05"  # a host without run-to-run noise of its own for some kinds: its figures use the fleet's
SELF = "gpu-2x-h200-872ccffb"  # a host with its own noise for every kind of test it ran: it reads none of the fleet's
CROSS = ("boards", "roles")  # the pages that read across hosts
OWN = ("hosts", "serving", "comparisons", "optimization")
# the committed set's six pages rendered three times a test (about 20 s each on a quiet 2-core machine)
pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    data = committed_data(tmp_path / "data")
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ALMANAC_PAGE_CACHE", "0")  # the renders: never from the cache
    yield data
    page_cache.finish()
    markdown.reset_tables()


def _keys(host: str = HOST) -> dict[str, str]:
    """The key of each of the host's pages, as a build computes it (a new build: nothing remembered)."""
    page_cache.reset()
    try:
        return {
            name: page_cache.key((name,), host, per_host._reads(name, host))
            for name in (*CROSS, *OWN)
        }
    finally:
        page_cache.finish()


def _pages(host: str = HOST) -> dict[str, str]:
    out = {}
    for name in (*CROSS, *OWN):
        markdown.reset_tables()
        out[name] = per_host.render(name, host)
    return out


def _base() -> list[dict]:
    root = committed_root()
    return [
        {**artifacts.load(p), "_file": p.relative_to(root).as_posix()}
        for p in sorted(p for under in ARTIFACT_DIRS for p in committed_paths(under))
    ]


def test_another_hosts_quality_score_changes_the_roles_key(fleet: Path) -> None:
    keys, pages = _keys(), _pages()
    other = sorted((fleet / "quality" / "vm-fafe2774").rglob("*.json"))
    doc = next(
        d
        for d in map(artifacts.load, other)
        if d["status"] == "ok" and not d["items"][0]["passed"]
    )
    path = next(p for p in other if artifacts.load(p)["id"] == doc["id"])
    doc["items"][0]["passed"], doc["items"][0]["score"] = True, 1.0
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    after = _keys()
    assert after["roles"] != keys["roles"]
    assert _pages()["roles"] != pages["roles"]  # a real input: the page changed with it


def test_another_hosts_runs_behind_the_fleet_noise_change_the_keys_that_read_it(
    fleet: Path,
) -> None:
    keys, pages = _keys(), _pages()
    noise = page_inputs.fleet_noise(HOST)
    # a host (not HOST) whose runs give the fleet's pooled noise of a kind of test HOST ran and has no
    # estimate of its own for some of its degrees of freedom
    fx = facts.of_loaded()
    kinds = {noise_class(r.test) for r in dataset.load().runs if r.host_id == HOST}
    fallback = {c for c in kinds if (HOST, c) not in fx.noise}
    assert fallback
    other = sorted({h for h, c in fx.noise if h not in (HOST, SELF) and c in fallback})[
        0
    ]
    own, own_pages = _keys(SELF), _pages(SELF)
    for p in (fleet / "runs" / other).rglob("*.json"):
        p.unlink()
    dataset.load()
    assert page_inputs.fleet_noise(HOST) != noise
    after, shown = _keys(), _pages()
    for name in CROSS:
        assert after[name] != keys[name], name
    assert shown["boards"] != pages["boards"]  # a run figured by the fleet's noise
    for name in OWN:
        assert after[name] == keys[name], name
        # the key did not change: nor did the page
        assert shown[name] == pages[name], name
    assert _keys(SELF) == own and _pages(SELF) == own_pages  # it reads no fleet noise


def test_one_more_hosts_reference_run_leaves_every_key_of_another_host(
    fleet: Path,
) -> None:
    keys, pages = _keys(), _pages()
    added = new_host_reference(_base(), 900)
    for rel, doc in added:
        artifacts.write(fleet / rel, doc)
    new = added[0][1]["host"]["id"]
    assert new in {r.host_id for r in dataset.load().runs}
    assert _keys() == keys
    assert _pages() == pages
