"""What keeps a rebuild at fleet scale short: the consistency check's per-page memo (a page or table
whose bytes did not change is not parsed again, and the memo never changes a verdict) and the site
swapped in whole (pipelines.site.buildlock.swap_in). Small hand-made sites: no build needed."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pipelines.site import consistency

PAGE = (
    '<html><body><p>Rate <span class="almanac-fact" data-fact="w|h|tokens_per_second" '
    'data-v="12.5">12.5</span> t/s</p>{extra}<script>None</script></body></html>'
)


def _site(root: Path, extra: str = "") -> Path:
    (root / "a").mkdir(parents=True, exist_ok=True)
    (root / "tables").mkdir(exist_ok=True)
    (root / "index.html").write_text(PAGE.format(extra=""))
    (root / "a" / "index.html").write_text(PAGE.format(extra=extra))
    (root / "tables" / "t1.json").write_text(
        json.dumps([{"host": "x", "value": "1.0"}])
    )
    return root


def test_the_memo_gives_the_same_verdicts_and_parses_only_what_changed(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    site = _site(tmp_path / "site")
    parsed: list[str] = []
    real_parse = consistency.parse

    def parse(page, body):
        parsed.append(page)
        return real_parse(page, body)

    monkeypatch.setattr(consistency, "parse", parse)
    assert consistency.check(site) == []
    assert sorted(parsed) == ["a/index.html", "index.html"]
    parsed.clear()
    assert (
        consistency.check(site) == [] and parsed == []
    )  # nothing changed: nothing parsed
    # one page changes and now says something wrong: only it is parsed, and the verdict is found
    (site / "a" / "index.html").write_text(
        PAGE.format(extra="<p>the value is None here</p>")
    )
    (site / "tables" / "t2.json").write_text(json.dumps([{"host": "None"}]))
    problems = consistency.check(site)
    assert parsed == ["a/index.html"]
    assert any(
        p.startswith("a/index.html: a Python None in the text") for p in problems
    )
    assert "tables/t2.json: row 1, column 'host' reads 'None'" in problems
    # the same page bytes under another name are another page (findings name their page)
    parsed.clear()
    (site / "b").mkdir()
    (site / "b" / "index.html").write_bytes((site / "a" / "index.html").read_bytes())
    again = consistency.check(site)
    assert parsed == ["b/index.html"]
    assert any(p.startswith("b/index.html: a Python None") for p in again)
    # a damaged memo costs time only
    memo = next((tmp_path / "cache" / "consistency").glob("*.json"))
    memo.write_text("{not json")
    assert consistency.check(site) == again


def test_a_rebuilt_site_is_swapped_in_whole(tmp_path):
    from pipelines.site.buildlock import swap_in

    site = _site(tmp_path / "site")
    (site / "old-only.html").write_text("old")
    fresh = _site(tmp_path / ".site.building-1")
    swap_in(fresh, site)
    assert not fresh.exists() and (site / "index.html").is_file()
    assert not (site / "old-only.html").exists()
    deadline = time.monotonic() + 30  # the old site goes in the background
    while (
        any(p.name.startswith(".site.old-") for p in tmp_path.iterdir())
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_the_check_takes_the_groups_the_build_left_once(tmp_path, monkeypatch):
    """The build leaves its fact layer's (work, host) pairs where ALMANAC_SITE_GROUPS says (nowhere
    unset); the check after it reads them once (the file removed), and an unreadable file is None (the
    check then figures them from the set)."""
    from pipelines.site import consistency, handoff

    where = tmp_path / ".site.building-1.groups.json"
    monkeypatch.delenv(handoff.GROUPS_ENV, raising=False)
    handoff.write_groups({("w1", "h1")})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(handoff.GROUPS_ENV, str(where))
    handoff.write_groups({("w1", "h1"), ("w2", "h1")})
    assert [p.name for p in tmp_path.iterdir()] == [where.name]  # no temporary left
    pairs = handoff.take_groups(where)
    assert pairs == {("w1", "h1"), ("w2", "h1")}
    missing = consistency.missing_from(pairs)
    assert not missing("w1", "h1") and not missing("w2", "h1") and missing("w1", "h2")
    assert not where.exists() and handoff.take_groups(where) is None
    where.write_text("{not json")
    assert handoff.take_groups(where) is None and not where.exists()
