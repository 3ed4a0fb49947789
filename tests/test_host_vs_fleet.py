"""Host vs host at fleet scale: each host against the fleet, and any two hosts in the browser.

A small fleet (8 hosts) is made from the committed reference runs of the CPU host, varied as
benchmarks/site_scale.py's fleet mode varies them (fingerprint, speed, noise); two hosts ran part
of the workload only, and share nothing with each other. The page's ranks and ratios are checked
against values computed here from the artifacts' JSON (scipy's t quantile, not core.stats), the
picker against `invoke compare`'s code in headless Chromium, and the page's size against the
number of hosts.
"""

from __future__ import annotations

from typing import Any

import html
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from pipelines import host_vs_fleet as fleet
from scipy import stats as sps

from benchmarks.site_scale import committed, fleet_artifacts
from core import artifacts
from core.records.run import read
from pipelines import compare as cmp
from pipelines.site import history_pages
from tests.conftest import ARTIFACT_DIRS, ROOT, build_site

ONLY = {6: {0}, 7: {1}}  # host index -> the reference configurations it ran (the others ran all)


def _skip(i: int, t: int) -> bool:
    return i in ONLY and t not in ONLY[i]


def write_fleet(data: Path, hosts: int, rounds: int = 2, skip=_skip) -> list[dict]:
    """``hosts`` fleet hosts (a probe each, ``rounds`` nightly rounds of the reference workload) in ``data``."""
    base = committed()
    n_refs = sum(1 for d in base if d["artifact"] == "run" and (d.get("matrix") or {}).get("name") == "reference"
                 and d["status"] == "ok" and not d["host"].get("gpus") and d["host"]["id"] == _cpu(base))
    per_round = sum(1 for i in range(hosts) for t in range(n_refs) if not skip(i, t))
    docs = []
    for k, (rel, doc) in enumerate(fleet_artifacts(base, hosts, skip)):
        if k >= hosts + rounds * per_round:
            break
        artifacts.write(data / rel, doc)
        if doc["artifact"] == "run":
            docs.append(json.loads((data / rel).read_text()))
    return docs


def _cpu(base):
    return next(d["host"]["id"] for d in base if d["artifact"] == "run" and (d.get("matrix") or {}).get("name") == "reference"
                and d["status"] == "ok" and not d["host"].get("gpus"))


def _inputs(dest: Path) -> Path:
    shutil.copytree(ROOT / "data", dest, ignore=lambda d, names: [n for n in names if Path(d) == ROOT / "data" and n in ARTIFACT_DIRS])
    return dest


# -- the expected standings, computed from the JSON alone ------------------------------------
def _welch(a: dict, b: dict) -> tuple[float, float, float]:
    """b / a with its CI95 on the log scale (Welch-Satterthwaite), from the summaries' n, mean, stddev."""
    ra = a["stddev"] ** 2 / a["n"] / a["mean"] ** 2
    rb = b["stddev"] ** 2 / b["n"] / b["mean"] ** 2
    se = math.sqrt(ra + rb)
    df = (ra + rb) ** 2 / (ra ** 2 / (a["n"] - 1) + rb ** 2 / (b["n"] - 1))
    t = sps.t.ppf(0.975, df)
    ratio = b["mean"] / a["mean"]
    return ratio, ratio * math.exp(-t * se), ratio * math.exp(t * se)


def expected(docs: list[dict]) -> dict[tuple[str, str], dict[str, tuple[str, str, str]]]:
    """(model, test) -> host -> (rank label, ratio text, verdict) as the page must show them."""
    newest: dict[tuple[str, str], dict[str, dict]] = {}
    for d in docs:
        per = newest.setdefault((d["model"]["name"], d["test"]["name"]), {})
        cur = per.get(d["host"]["id"])
        if cur is None or d["created"] > cur["created"]:
            per[d["host"]["id"]] = d
    out = {}
    for w, per in newest.items():
        if len(per) < 2:
            continue
        s = {h: d["summary"]["tokens_per_second"] for h, d in per.items()}
        order = sorted(s, key=lambda h: s[h]["mean"])  # slowest first (higher is better)
        med = order[(len(order) - 1) // 2]
        ranks = {h: 1 + sum(1 for o in s if s[o]["ci95_low"] > s[h]["ci95_high"]) for h in s}
        rows = {}
        for h in s:
            label = ("=" if list(ranks.values()).count(ranks[h]) > 1 else "") + str(ranks[h])
            if h == med:
                rows[h] = (label, "1 (median host)", "median host")
                continue
            ratio, lo, hi = _welch(s[med], s[h])
            verdict = "win" if lo > 1 else ("loss" if hi < 1 else "within noise")
            rows[h] = (label, f"{ratio:,.3f} [{lo:,.3f}, {hi:,.3f}]", verdict)
        out[w] = rows
    return out


_DETAILS = re.compile(r"<details class=\"almanac-workload\"[^>]*>\s*<summary>(.*?)</summary>(.*?)</details>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_TD = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
_TAG = re.compile(r"<[^>]+>")


def page_standings(page_html: str) -> dict[tuple[str, str], dict[str, tuple[str, str, str]]]:
    out = {}
    for summary, body in _DETAILS.findall(page_html):
        label = html.unescape(_TAG.sub("", summary)).split(" · ")
        rows = {}
        for tr in _ROW.findall(body):
            cells = [html.unescape(_TAG.sub("", c)).strip() for c in _TD.findall(tr)]
            if cells:
                rows[cells[1]] = (cells[0], cells[4], cells[5])
        out[(label[0], label[1])] = rows
    return out


@pytest.fixture(scope="module")
def fleet_site(tmp_path_factory):
    data = _inputs(tmp_path_factory.mktemp("fleet") / "data")
    docs = write_fleet(data, 8)
    site = tmp_path_factory.mktemp("fleet-site")
    proc = build_site(data, site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return data, docs, site


def test_each_host_against_the_fleet_matches_an_independent_computation(fleet_site):
    data, docs, site = fleet_site
    want = expected(docs)
    got = page_standings((site / "host-vs-host" / "index.html").read_text())
    assert len(want) == 6 and set(got) == set(want)
    for w in want:
        assert got[w] == want[w], w
    # every verdict kind the fleet produces is on the page, and ranks are not all tied
    verdicts = {v for rows in want.values() for _, _, v in rows.values()}
    assert {"win", "loss", "median host"} <= verdicts
    assert any(r[0] == "1" for rows in want.values() for r in rows.values())
    # no heading per pair of hosts: the page's headings do not grow with pairs
    page = (site / "host-vs-host" / "index.html").read_text()
    assert " vs <code>" not in page and page.count("<h2") <= 2


def test_picker_compares_any_two_hosts_in_chromium(fleet_site):
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (invoke test installs it when run as root)")
    from playwright.sync_api import sync_playwright

    from tests.support.browser import open_page, serve_site

    data, docs, site = fleet_site
    recs = [read(p) for p in artifacts.iter_files(data / "runs")]
    hosts = sorted({r.host_id for r in recs})
    a, b = hosts[0], hosts[4]  # hosts[4] has GPUs (every fifth fleet host)
    # what the picker states it does: each host's newest run of each shared workload, B ÷ A by
    # core.stats.compare_summaries (its repetitions; `invoke compare` takes every run as the unit instead)
    from core import stats

    newest: dict[tuple[str, str], Any] = {}
    for r in recs:
        if r.ok and r.headline is not None:
            k = (r.host_id, fleet.work_key(r))
            if k not in newest or (r.created, r.id) > (newest[k].created, newest[k].id):
                newest[k] = r
    want = []
    for (h, w), ra in newest.items():
        rb = newest.get((b, w))
        if h != a or rb is None:
            continue
        m = ra.headline_metric
        c = stats.compare_summaries(ra.headline, rb.headline, m.higher_is_better)
        want.append([f"{ra.model_name} · {ra.test_name} · {ra.backend_name}",
                     f"{c.ratio:,.3f} [{c.ci95_low:,.3f}, {c.ci95_high:,.3f}]", c.verdict])
    want.sort()
    assert want
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site) as served, sync_playwright() as p:
        for width in (1280, 390):
            browser, page = open_page(p, served, errors, outside, viewport={"width": width, "height": 900})
            page.goto(f"{served}/host-vs-host/#a={a}&b={b}", wait_until="load")
            page.wait_for_selector(".almanac-fleet-table table tbody tr")
            rows = page.eval_on_selector_all(".almanac-fleet-table table tbody tr",
                                             "trs => trs.map(tr => [...tr.cells].map(td => td.firstChild.textContent))")
            assert sorted([r[0], r[3], r[4]] for r in rows) == want
            assert f"{len(want)} shared workload(s)" in page.text_content(".almanac-fleet [role=status]")
            # B against the fleet: each workload's median host as A gives the page's own standing of B
            page.select_option("select[name=a]", value="median")
            rows = page.eval_on_selector_all(".almanac-fleet-table table tbody tr",
                                             "trs => trs.map(tr => [...tr.cells].map(td => td.firstChild.textContent))")
            standings = expected(docs)
            fleet_rows = sorted([r[0].split(" · ")[0], r[0].split(" · ")[1], r[3], r[4], r[5].split(" of ")[0]] for r in rows)
            assert fleet_rows == sorted([m, t, want_b[1], want_b[2], want_b[0]] for (m, t), per in standings.items()
                                        for h, want_b in per.items() if h == b)
            page.select_option("select[name=a]", label=_option(page, "a", a))
            # the values link to their artifacts in the runs viewer
            href = page.eval_on_selector(".almanac-fleet-table table tbody a", "a => a.getAttribute('href')")
            assert re.fullmatch(r"\.\./runs/run/\?id=[0-9a-f]{12}-\d{8}T\d{6}\.\d{3}Z", href)
            # two hosts that ran different parts of the workload: the picker says they share nothing
            six, seven = (next(h for h in hosts if h.startswith(f"fleet-00{i}-")) for i in (6, 7))
            page.select_option("select[name=a]", label=_option(page, "a", six))
            page.select_option("select[name=b]", label=_option(page, "b", seven))
            assert "share no workload" in page.text_content(".almanac-fleet [role=status]")
            assert page.locator(".almanac-fleet-table table").count() == 0
            assert f"a={six}&b={seven}" in page.url  # the comparison is a link
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            browser.close()
    assert errors == [] and outside == []


def _option(page, name: str, host: str) -> str:
    return next(o for o in page.eval_on_selector_all(f"select[name={name}] option", "os => os.map(o => o.textContent)")
                if o.startswith(host + " "))


def test_page_grows_linearly_in_hosts(tmp_path):
    """Twice the hosts, about twice the page: never the pairs of hosts (quadratic)."""
    sizes = {}
    for n in (4, 8, 16, 32):
        data = tmp_path / f"d{n}"
        write_fleet(data, n, rounds=1, skip=lambda i, t: False)
        recs = [read(p) for p in artifacts.iter_files(data / "runs")]
        sizes[n] = len(history_pages.host_vs_host_page(recs).encode())
    steps = [sizes[16] - sizes[8], sizes[32] - sizes[16]]
    per_host = [steps[0] / 8, steps[1] / 16]
    assert all(s > 0 for s in steps)
    assert max(per_host) / min(per_host) < 1.25, sizes  # quadratic would double the bytes per host
