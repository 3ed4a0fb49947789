"""Issue 20, site-wide: the site built from the committed artifacts shows no negative bound of a time
or a rate, no projection with two statuses, and ranks that follow the stated rule on every board.

Every table on every page is published as JSON (tables/<digest>.json, all rows, plain text), so the
checks read those, and the pages' own text for intervals written outside tables.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from core.metrics import METRICS
from pipelines import ranking

NUM = r"[-−]?\d[\d,]*(?:\.\d+)?"
RANGE = re.compile(rf"({NUM})\s*[–]\s*({NUM})|\[({NUM}),\s*({NUM})\]")
# columns whose intervals may be negative by design: signed differences and errors
SIGNED = ("−", "change", "error", "difference", "B − A", "vs ")


def _f(s: str) -> float:
    return float(s.replace(",", "").replace("−", "-"))


@pytest.fixture(scope="module")
def site(committed_site):
    """The site built from the committed artifacts (tests/conftest.py, once for the suite), not the live data/."""
    return committed_site


@pytest.fixture(scope="module")
def tables(site):
    out = []
    for p in sorted((site / "tables").glob("*.json")):
        rows = json.loads(p.read_text())
        if rows:
            out.append((p.name, rows))
    assert out
    return out


def _intervals(text: str) -> list[tuple[float, float]]:
    out = []
    for m in RANGE.finditer(text):
        a, b = (
            (m.group(1), m.group(2))
            if m.group(1) is not None
            else (m.group(3), m.group(4))
        )
        out.append((_f(a), _f(b)))
    return out


def test_no_negative_time_or_rate_bound_anywhere(site, tables):
    checked = 0
    for name, rows in tables:
        for col in rows[0]:
            if "CI95" not in col or any(s in col for s in SIGNED):
                continue
            for row in rows:
                for lo, hi in _intervals(str(row[col])):
                    checked += 1
                    assert lo >= 0 and hi >= 0, f"{name} {col}: {row[col]}"
                    assert lo <= hi, f"{name} {col}: {row[col]}"
    # intervals written in running text ("CI95 12.3 – 14.5 ms")
    for page in site.rglob("index.html"):
        text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
        for m in re.finditer(rf"CI95\s*\(?\s*({NUM})\s*[–]\s*({NUM})", text):
            checked += 1
            assert _f(m.group(1)) >= 0, f"{page}: {m.group(0)}"
    assert checked > 50


def test_the_issue_cold_start_shows_no_interval_and_says_why(site):
    """The H100's cold start (n = 2, 703.1 ms) once showed -1,192.7 – 2,598.9 ms: now an interval in its domain
    (the run as the unit, on the log scale), saying what it rests on (on the H100's per-host boards)."""
    (board,) = [p for p in (site / "boards").glob("lent-h100-*/index.html")]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", board.read_text())).split())
    assert "1,192.7" not in text and "703.1" in text
    cell = text[text.index("703.1") :][:300]
    m = re.search(
        rf"^703\.1 ({NUM}) – ({NUM}) · n 2 · (1 run \+ (fleet|host) noise|no interval)",
        cell,
    )
    assert m, cell
    assert 0 < _f(m.group(1)) < 703.1 < _f(m.group(2))


def _stated_range(text: str) -> str:
    """A projection's stated range as "low – high" (a point range as its one value), from a cell's text."""
    nums = re.findall(NUM, text)
    if len(nums) >= 2 and nums[0] != nums[1]:
        return f"{nums[0]} – {nums[1]}"
    return nums[0] if nums else ""


def test_no_projection_shows_two_statuses(site):
    """Every cell or row with a VERIFIED / MISSED badge and the run that checked it: one status per
    (host section, scenario, stated range, run) on the page, live table and accuracy history alike. (A
    projection recorded earlier with another stated range, e.g. before its baseline had more runs or an
    interval, is another projection: its own range decides its status.)"""
    page = (site / "projections" / "index.html").read_text()
    seen: dict[tuple[str, str, str, str], set[str]] = {}
    for host_part in re.split(r"<h2[^>]*>", page)[1:]:
        host = re.sub(r"<[^>]+>", "", host_part.split("</h2>")[0])
        for tbl in re.findall(r"<table>.*?</table>", host_part, re.S):
            heads = [
                re.sub(r"<[^>]+>", "", h).strip()
                for h in re.findall(r"<th[^>]*>(.*?)</th>", tbl, re.S)
            ]
            for tr in re.findall(r"<tr>(.*?)</tr>", tbl, re.S):
                cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
                if not cells:
                    continue
                scenario_col = heads.index("scenario") if "scenario" in heads else None
                for i, c in enumerate(cells):
                    badge = re.search(r"almanac-badge (verified|missed)", c)
                    if not badge:
                        continue
                    runs = re.findall(
                        r"run(?:\.md|/)\?id=([\w.-]+)",
                        " ".join(cells) if scenario_col is not None else c,
                    )
                    if scenario_col is not None:
                        scenario = re.sub(r"<[^>]+>", "", cells[scenario_col]).strip()
                        col = (
                            heads.index("stated range")
                            if "stated range" in heads
                            else heads.index("range")
                        )
                        stated = _stated_range(re.sub(r"<[^>]+>", " ", cells[col]))
                    else:
                        scenario = heads[i].removeprefix("+ ").strip()
                        rng = re.match(r"\s*([^<]*)(?:<small>\(([^)]*)\)</small>)?", c)
                        stated = _stated_range(rng.group(2) or rng.group(1))
                    for rid in runs:
                        seen.setdefault((host, scenario, stated, rid), set()).add(
                            badge.group(1)
                        )
    assert seen, "no checked projection on the page"
    two = {k: v for k, v in seen.items() if len(v) > 1}
    assert not two, two


def _metric(headers: list[str]):
    for h in headers:
        for m in METRICS.values():
            if h.startswith(f"{m.label} ({m.unit})"):
                return m
    return None


def test_ranks_follow_the_stated_rule_on_every_board(tables):
    """rank = 1 + the rows significantly better (ranking.RULE: the verdicts' comparison), so at least 1 + the rows
    whose whole CI95 lies on the better side (intervals apart are always told apart); rows without an interval
    have no rank; a shared rank is marked =. Bounds equal at the shown precision could go either way: skipped.
    (That a rank never contradicts a verdict is the site-wide check's: tests/test_site_consistency.py.)"""
    boards = 0
    for name, rows in tables:
        heads = list(rows[0])
        fig_col = next((h for h in heads if h.endswith(": figure, CI95, n")), None)
        if "#" not in heads or ("CI95" not in heads and fig_col is None):
            continue
        m = _metric(heads)
        if m is None:
            continue  # not a metric's board (Home's score table)
        boards += 1
        parsed = []
        for r in rows:
            iv = _intervals(r[fig_col] if fig_col is not None else r["CI95"])
            parsed.append((r["#"], iv[0] if iv else None))
        for label, iv in parsed:
            if iv is None:
                assert label == "—", (name, label)
                continue
            better = ambiguous = 0
            for _other, ov in parsed:
                if ov is None or ov is iv:
                    continue
                edge = (ov[0], iv[1]) if m.higher_is_better else (iv[0], ov[1])
                if edge[0] > edge[1]:
                    better += 1
                elif edge[0] == edge[1]:
                    ambiguous += 1
            rank = int(label.lstrip("="))
            assert better + 1 <= rank, (name, label, iv, better)
        ranks = [int(lb.lstrip("=")) for lb, iv in parsed if iv is not None]
        for rk in set(ranks):
            marked = [
                lb for lb, iv in parsed if iv is not None and int(lb.lstrip("=")) == rk
            ]
            assert all(lb.startswith("=") for lb in marked) == (len(marked) > 1), (
                name,
                marked,
            )
    assert boards >= 5


def test_the_pages_state_the_rules_the_code_follows(site):
    lb = html.unescape(
        re.sub(r"<[^>]+>", " ", (site / "leaderboard" / "index.html").read_text())
    )
    assert (
        "significantly better" in lb
        and "results whose intervals overlap share a rank" not in lb
    )
    meth = html.unescape(
        re.sub(r"<[^>]+>", " ", (site / "methodology" / "index.html").read_text())
    )
    assert "The run is the unit" in meth and ranking.RULE.split(";")[0][
        :60
    ] in " ".join(meth.split())
    assert "run-to-run noise" in meth and "McNemar" in meth and "GiB" in meth
