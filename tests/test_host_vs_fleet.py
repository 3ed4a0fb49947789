"""Host vs host at fleet scale: each host against the fleet, and any two hosts in the browser, with the
run as the unit, exactly as `invoke compare -b host=A -c host=B` compares them.

A small fleet (8 hosts) is made from the committed reference runs of the CPU host, varied as
benchmarks/site_scale.py's fleet mode varies them (fingerprint, speed, noise); two hosts ran part
of the workload only, and share nothing with each other; every host ran the workload twice and a few
three times. The page's ranks and ratios are checked against values computed here from the
artifacts' JSON (numpy and scipy's t quantile, not core.stats) and against pipelines.compare (what
`invoke compare` prints) for every host and its workload's median host; the picker's published
estimates against pipelines.compare for every pair of hosts, and the picker itself in headless
Chromium (its t quantile against scipy's). Fixture runs with chosen samples check a side of three
runs (the spread between them), of one run widened by the host's noise, and of one run without it.
The page's size grows linearly with the number of hosts.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks.site_scale import fleet_artifacts
from core import artifacts, stats
from core.records.run import read
from pipelines import compare as cmp
from pipelines import facts
from pipelines import host_vs_fleet as fleet
from pipelines.site import history_pages
from tests.conftest import build_site
from tests.support.committed import (
    ARTIFACT_DIRS,
    committed_data,
    committed_paths,
    committed_root,
    committed_runs,
)

ONLY = {
    6: {0},
    7: {1},
}  # host index -> the reference configurations it ran (the others ran all)
EXTRA = 3  # a third round of the first reference configuration on the first three hosts


def _skip(i: int, t: int) -> bool:
    return i in ONLY and t not in ONLY[i]


def _base() -> list[dict]:
    """The committed artifacts (git's, not whatever the live data/ folder holds now), as
    benchmarks/site_scale.py's ``committed()`` gives them (``_file``: the path under data/)."""
    root = committed_root()
    return [
        {**artifacts.load(p), "_file": p.relative_to(root).as_posix()}
        for p in sorted(p for under in ARTIFACT_DIRS for p in committed_paths(under))
    ]


def write_fleet(
    data: Path, hosts: int, rounds: int = 2, skip=_skip, extra: int = 0
) -> list[dict]:
    """``hosts`` fleet hosts (a probe each, ``rounds`` nightly rounds of the reference workload, then ``extra``
    runs of the next round) in ``data``."""
    base = _base()
    n_refs = sum(
        1
        for d in base
        if d["artifact"] == "run"
        and (d.get("matrix") or {}).get("name") == "reference"
        and d["status"] == "ok"
        and not d["host"].get("gpus")
        and d["host"]["id"] == _cpu(base)
    )
    per_round = sum(1 for i in range(hosts) for t in range(n_refs) if not skip(i, t))
    docs = []
    for k, (rel, doc) in enumerate(fleet_artifacts(base, hosts, skip)):
        if k >= hosts + rounds * per_round + extra:
            break
        artifacts.write(data / rel, doc)
        if doc["artifact"] == "run":
            docs.append(json.loads((data / rel).read_text()))
    return docs


def _cpu(base):
    return next(
        d["host"]["id"]
        for d in base
        if d["artifact"] == "run"
        and (d.get("matrix") or {}).get("name") == "reference"
        and d["status"] == "ok"
        and not d["host"].get("gpus")
    )


def _inputs(dest: Path) -> Path:
    return committed_data(dest, artifacts=False)


# -- the expected standings, computed from the JSON alone ------------------------------------
def _side(means: list[float]) -> tuple[float, float, float]:
    """(log of the geometric mean, variance of that log mean, df) of two or more runs: the spread between them."""
    logs = np.log(np.asarray(means, dtype=float))
    return float(logs.mean()), float(logs.var(ddof=1)) / logs.size, float(logs.size - 1)


def _welch(
    a: tuple[float, float, float], b: tuple[float, float, float]
) -> tuple[float, float, float]:
    """b / a with its CI95 on the log scale: variances added, Welch-Satterthwaite df, scipy's t."""
    (la, va, dfa), (lb, vb, dfb) = a, b
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / dfa + vb**2 / dfb)
    t = sps.t.ppf(0.975, df)
    ratio = math.exp(lb - la)
    return ratio, ratio * math.exp(-t * se), ratio * math.exp(t * se)


def _noise_class(test: str) -> str:
    return "rate:pp" if test.startswith("pp") else "rate:tg"


def expected(
    docs: list[dict],
) -> dict[tuple[str, str], dict[str, tuple[str, str, str]]]:
    """(model, test) -> host -> (rank label, ratio text, verdict) as the page must show them. Every run of a
    host on the workload is one run of its figure; the variance of the figure's log is the host's run-to-run
    noise for that kind of test over its runs (the noise pooled over every configuration the host ran more
    than once: sums of squares of the log run means about their own mean, over their degrees of freedom);
    ranks count the hosts that beat this one by the same Welch comparison as the verdicts."""
    means: dict[tuple[str, str], dict[str, list[float]]] = {}
    for d in docs:
        if d["status"] == "ok":
            means.setdefault((d["model"]["name"], d["test"]["name"]), {}).setdefault(
                d["host"]["id"], []
            ).append(d["summary"]["tokens_per_second"]["mean"])
    pooled: dict[
        tuple[str, str], list[float]
    ] = {}  # (host, class) -> [sum of squares, df]
    for (_model, test), per in means.items():
        for h, v in per.items():
            if len(v) < 2:
                continue
            logs = np.log(np.asarray(v, dtype=float))
            acc = pooled.setdefault((h, _noise_class(test)), [0.0, 0.0])
            acc[0] += float(((logs - logs.mean()) ** 2).sum())
            acc[1] += logs.size - 1
    out = {}
    for w, per in means.items():
        if len(per) < 2:
            continue
        assert all(len(v) >= 2 for v in per.values())
        sides = {}
        for h, v in per.items():
            ss, df = pooled[(h, _noise_class(w[1]))]
            sides[h] = (float(np.log(v).mean()), ss / df / len(v), df)
        order = sorted(
            sides, key=lambda h: sides[h][0]
        )  # slowest first (higher is better)
        med = order[(len(order) - 1) // 2]
        ranks = {
            h: 1 + sum(1 for o in sides if o != h and _welch(sides[h], sides[o])[1] > 1)
            for h in sides
        }
        rows = {}
        for h in sides:
            label = ("=" if list(ranks.values()).count(ranks[h]) > 1 else "") + str(
                ranks[h]
            )
            if h == med:
                rows[h] = (label, "1 (median host)", "median host")
                continue
            ratio, lo, hi = _welch(sides[med], sides[h])
            verdict = "win" if lo > 1 else ("loss" if hi < 1 else "within noise")
            rows[h] = (label, f"{ratio:,.3f} [{lo:,.3f}, {hi:,.3f}]", verdict)
        out[w] = rows
    return out


_DETAILS = re.compile(
    r"<details class=\"almanac-workload\"[^>]*>\s*<summary>(.*?)</summary>(.*?)</details>",
    re.S,
)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_TD = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
_TAG = re.compile(r"<[^>]+>")


_CODE = re.compile(r"<code>(.*?)</code>", re.S)


def page_standings(
    page_html: str,
) -> dict[tuple[str, str], dict[str, tuple[str, str, str]]]:
    out = {}
    for summary, body in _DETAILS.findall(page_html):
        label = html.unescape(_TAG.sub("", summary)).split(" · ")
        rows = {}
        for tr in _ROW.findall(body):
            raw = _TD.findall(tr)
            cells = [html.unescape(_TAG.sub("", c)).strip() for c in raw]
            if cells:
                host = html.unescape(_CODE.search(raw[1]).group(1))
                rows[host] = (cells[0], cells[3], cells[4])
        out[(label[0], label[1])] = rows
    return out


def _compare_rows(recs, a: str, b: str) -> dict[str, cmp.Row]:
    """`invoke compare -b host=a -c host=b`'s headline rows, by the workload label the page and picker use."""
    res = cmp.compare(
        recs, cmp.parse_selection(f"host={a}"), cmp.parse_selection(f"host={b}")
    )
    return {
        f"{r.model} · {r.test} · in process": r
        for r in res.rows
        if r.metric == "tokens_per_second"
    }


def _ratio_text(r) -> str:
    return f"{r.ratio:,.3f} [{r.ci95_low:,.3f}, {r.ci95_high:,.3f}]"


def _published(data: dict, wi: int, host: int) -> stats.SideEstimate:
    """A host's side estimate on a workload, from the picker's decoded data (fleet.decode_picker)."""
    f = {k: i for i, k in enumerate(data["fields"])}
    v = next(x for x in data["workloads"][wi]["values"] if x[f["host"]] == host)
    return stats.SideEstimate(
        v[f["log_mean"]],
        v[f["var"]],
        v[f["df"]],
        v[f["runs"]],
        v[f["method"]],
        v[f["why"]],
    )


def _picker(page: str) -> dict:
    """The picker's inline data on a Host vs host page, decoded."""
    return fleet.decode_picker(
        json.loads(re.search(r'id="almanac-fleet-data">(.*?)</script>', page).group(1))
    )


def _shown(ratio, low, high, verdict: str, method: str) -> tuple:
    """A combination as the picker shows it: ratio and interval to 3 decimals (its log means are rounded to
    fleet.LOG_DECIMALS, so their last bits are not Python's), verdict, method."""
    return (
        *(None if x is None else f"{x:,.3f}" for x in (ratio, low, high)),
        verdict,
        method,
    )


@pytest.fixture(scope="module")
def fleet_site(tmp_path_factory):
    data = _inputs(tmp_path_factory.mktemp("fleet") / "data")
    docs = write_fleet(data, 8, extra=EXTRA)
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
    # every run counts: the hosts with a third run show it
    assert page.count("· 3 runs</span>") == EXTRA and "· 2 runs</span>" in page


def test_page_and_picker_give_invoke_compares_verdicts(fleet_site, monkeypatch):
    """Each host against its workload's median host on the page, and any two hosts from the picker's data,
    are `invoke compare -b host=A -c host=B`'s rows: the same ratio, interval, verdict and method."""
    data, docs, site = fleet_site
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    recs = [read(p) for p in artifacts.iter_files(data / "runs")]
    wls = fleet.workloads(facts.of(recs))
    checked = 0
    for w in wls:
        for st in w.standings:
            if st.is_median:
                continue
            row = _compare_rows(recs, w.median.host_id, st.host_id)[w.label]
            assert (st.ratio, st.ratio_low, st.ratio_high) == (
                row.ratio,
                row.ci95_low,
                row.ci95_high,
            )
            # the same verdict, unless `invoke compare` held its family of rows (every configuration the
            # two hosts share) to the false discovery rate and says so in the row's note
            assert st.verdict == row.single_verdict and (
                row.verdict == row.single_verdict or "false discovery rate" in row.note
            ), (st.verdict, row.verdict, row.note)
            assert st.figure.runs == row.b_runs and w.median.figure.runs == row.a_runs
            checked += 1
    assert checked == sum(len(w.standings) - 1 for w in wls) > 30
    # the page shows those figures
    got = page_standings((site / "host-vs-host" / "index.html").read_text())
    for w in wls:
        for st in w.standings:
            if not st.is_median:
                row = _compare_rows(recs, w.median.host_id, st.host_id)[w.label]
                assert got[(w.model, w.test)][st.host_id][1:] == (
                    _ratio_text(row),
                    st.verdict,
                )
    # the picker: every pair of hosts, from the published side estimates, combined as compare_runs combines
    page = (site / "host-vs-host" / "index.html").read_text()
    pdata = _picker(page)
    ids = [h["id"] for h in pdata["hosts"]]
    pairs = 0
    for ia, ib in itertools.permutations(range(len(ids)), 2):
        rows = (
            _compare_rows(recs, ids[ia], ids[ib])
            if any(
                any(v[0] == ia for v in w["values"])
                and any(v[0] == ib for v in w["values"])
                for w in pdata["workloads"]
            )
            else {}
        )
        for wi, w in enumerate(pdata["workloads"]):
            hs = {v[0] for v in w["values"]}
            if ia not in hs or ib not in hs:
                continue
            c = stats.combine_sides(
                _published(pdata, wi, ia), _published(pdata, wi, ib), w["hib"]
            )
            row = rows[w["label"]]
            assert (
                _shown(c.ratio, c.ci95_low, c.ci95_high, c.verdict, c.method)
                == _shown(
                    row.ratio,
                    row.ci95_low,
                    row.ci95_high,
                    row.single_verdict,  # the picker compares one pair; compare also holds its family to the FDR
                    row.method,
                )
            )
            assert c.ratio == pytest.approx(row.ratio, rel=1e-8)
            pairs += 1
    assert pairs > 100


def _tcrit_grid() -> list[float]:
    return [
        1.0,
        1.001,
        1.2,
        1.5,
        1.9,
        2.0,
        2.37,
        3.0,
        4.5,
        5.0,
        7.77,
        10.0,
        15.3,
        29.9,
        30.0,
        60.0,
        123.4,
        1000.0,
        12345.6,
        1e5,
        1e6,
    ]


@pytest.mark.browser
def test_picker_compares_any_two_hosts_in_chromium(fleet_site, monkeypatch):
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    from tests.support.browser import open_page, serve_site

    data, docs, site = fleet_site
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    recs = [read(p) for p in artifacts.iter_files(data / "runs")]
    hosts = sorted({r.host_id for r in recs})
    a, b = (
        hosts[0],
        hosts[4],
    )  # hosts[4] has GPUs (every fifth fleet host); hosts[0] ran one workload three times
    # what the picker must show: `invoke compare -b host=a -c host=b`, row by row
    rows_ab = _compare_rows(recs, a, b)
    want = sorted(
        [label, _ratio_text(r), r.single_verdict] for label, r in rows_ab.items()
    )
    assert want and any(r.a_runs == 3 for r in rows_ab.values())
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site) as served, sync_playwright() as p:
        for width in (1280, 390):
            browser, page = open_page(
                p, served, errors, outside, viewport={"width": width, "height": 900}
            )
            page.goto(f"{served}/host-vs-host/#a={a}&b={b}", wait_until="load")
            page.wait_for_selector(".almanac-fleet-table table tbody tr")
            rows = page.eval_on_selector_all(
                ".almanac-fleet-table table tbody tr",
                "trs => trs.map(tr => [...tr.cells].map(td => td.firstChild.textContent))",
            )
            assert sorted([r[0], r[3], r[4]] for r in rows) == want
            # each side's value as `invoke compare` gives it (every run of the host: the geometric mean of its runs)
            by_label = {r[0]: r for r in rows}
            for label, r in rows_ab.items():
                assert by_label[label][1] == cmp._fmt(r.a_mean)
                assert by_label[label][2] == cmp._fmt(r.b_mean)
            assert f"{len(want)} shared workload(s)" in page.text_content(
                ".almanac-fleet [role=status]"
            )
            # B against the fleet: each workload's median host as A gives the page's own standing of B
            page.select_option("select[name=a]", value="median")
            rows = page.eval_on_selector_all(
                ".almanac-fleet-table table tbody tr",
                "trs => trs.map(tr => [...tr.cells].map(td => td.firstChild.textContent))",
            )
            standings = expected(docs)
            fleet_rows = sorted(
                [
                    r[0].split(" · ")[0],
                    r[0].split(" · ")[1],
                    r[3],
                    r[4],
                    r[5].split(" of ")[0],
                ]
                for r in rows
            )
            assert fleet_rows == sorted(
                [m, t, want_b[1], want_b[2], want_b[0]]
                for (m, t), per in standings.items()
                for h, want_b in per.items()
                if h == b
            )
            page.select_option("select[name=a]", label=_option(page, "a", a))
            # the values link to their artifacts in the runs viewer
            href = page.eval_on_selector(
                ".almanac-fleet-table table tbody a", "a => a.getAttribute('href')"
            )
            assert re.fullmatch(
                r"\.\./runs/run/\?id=[0-9a-f]{12}-\d{8}T\d{6}\.\d{3}Z", href
            )
            # two hosts that ran different parts of the workload: the picker says they share nothing
            six, seven = (
                next(h for h in hosts if h.startswith(f"fleet-00{i}-")) for i in (6, 7)
            )
            page.select_option("select[name=a]", label=_option(page, "a", six))
            page.select_option("select[name=b]", label=_option(page, "b", seven))
            assert "share no workload" in page.text_content(
                ".almanac-fleet [role=status]"
            )
            assert page.locator(".almanac-fleet-table table").count() == 0
            assert f"a={six}&b={seven}" in page.url  # the comparison is a link
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            browser.close()
    assert errors == [] and outside == []


@pytest.mark.browser
def test_the_pickers_arithmetic_is_pythons(fleet_site):
    """The browser's t quantile against scipy's for df >= 1 (fractional df included: Welch-Satterthwaite gives
    them), and its combination of two sides against core.stats.combine_sides (runs, host noise, no interval)."""
    if not shutil.which("chromium"):
        pytest.skip(
            "Debian's chromium is not installed (invoke test installs it when run as root)"
        )
    from playwright.sync_api import sync_playwright

    from tests.support.browser import open_page, serve_site

    data, docs, site = fleet_site
    grid = _tcrit_grid()
    noise = stats.RunNoise(0.03, 7, "fixture")
    sides = [
        stats.side_estimate([512.0, 530.5, 498.2]),
        stats.side_estimate([1930.7], rel_se=0.004, noise=noise),
        stats.side_estimate([100.0, 101.0]),
        stats.side_estimate([97.3], rel_se=0.05, noise=noise),
        stats.side_estimate([88.0]),
        stats.side_estimate([101.0, 99.0, 100.5, 100.2, 99.7]),
    ]
    errors: list[str] = []
    outside: list[str] = []
    with serve_site(site) as served, sync_playwright() as p:
        browser, page = open_page(p, served, errors, outside)
        page.goto(f"{served}/host-vs-host/", wait_until="load")
        page.wait_for_function("window.almanacFleet !== undefined")
        got = page.evaluate("g => g.map(df => window.almanacFleet.tCritical(df))", grid)
        for df, t in zip(grid, got):
            assert abs(t - sps.t.ppf(0.975, df)) < 1e-3 * 1e-3, (
                df,
                t,
            )  # far inside the 1e-3 asked of it
        js_sides = [
            {"lm": s.log_mean, "v": s.var, "df": s.df, "method": s.method, "why": s.why}
            for s in sides
        ]
        for (i, sa), (j, sb) in itertools.permutations(enumerate(sides), 2):
            for hib in (True, False):
                c = stats.combine_sides(sa, sb, hib)
                js = page.evaluate(
                    "([a, b, hib]) => window.almanacFleet.combine(a, b, hib)",
                    [js_sides[i], js_sides[j], hib],
                )
                assert (js["verdict"], js["method"]) == (c.verdict, c.method)
                assert js["ratio"] == pytest.approx(c.ratio, rel=1e-12)
                if c.ci95_low is None:
                    assert (
                        js["lo"] is None and js["hi"] is None and js["note"] == c.note
                    )
                else:
                    assert (js["lo"], js["hi"]) == (
                        pytest.approx(c.ci95_low, rel=1e-9),
                        pytest.approx(c.ci95_high, rel=1e-9),
                    )
        browser.close()
    assert errors == [] and outside == []


def test_a_hosts_side_is_every_run_of_it(monkeypatch, tmp_path):
    """Fixture runs with chosen samples: a host's figure is every run of it, its variance the host's run-to-run
    noise over its runs (from its history: here its own three runs, or another configuration run three times);
    a host with one run and no noise of its own is widened by the fleet's pooled noise and says so; the page
    and the picker's data give `invoke compare`'s verdicts for every pair."""
    from tests.test_comparable import CPU, GPU, TG, run

    monkeypatch.setenv(
        "ALMANAC_DATA", str(tmp_path)
    )  # no noise artifact but the history's
    mid = {**CPU, "id": "mid-box-0000cccc", "name": "mid-box"}
    lone = {**CPU, "id": "lone-box-0000dddd", "name": "lone-box"}
    base = [10.0, 11.0, 12.0]
    three = [
        run([x * f for x in base], test=TG, minutes=i)
        for i, f in enumerate((1.0, 1.3, 0.8))
    ]
    one = run([900, 910, 905], test=TG, host=GPU, minutes=10)
    history_n = [
        run(
            [x * f for x in (500, 505, 510)],
            test=TG,
            host=GPU,
            minutes=11 + i,
            model="n",
            sha="c" * 64,
        )
        for i, f in enumerate((1.0, 1.04, 0.97))
    ]
    two = [
        run([20, 21, 22], test=TG, host=mid, minutes=20),
        run([22, 23, 24], test=TG, host=mid, minutes=21),
    ]
    alone = run([5, 5.5, 6], test=TG, host=lone, minutes=30)
    docs = three + [one] + history_n + two + [alone]
    fx = facts.of(docs)
    (w,) = fleet.workloads(fx)
    by = {s.host_id: s for s in w.standings}
    # three runs: the host's noise is their own spread (its only history): sigma² / 3 at 2 df
    x = by[CPU["id"]]
    means = [r.headline.mean for r in three]
    assert (
        x.figure.side.method == "host noise"
        and x.figure.runs == 3
        and x.figure.side.df == 2
    )
    assert x.figure.side.var == pytest.approx(float(np.log(means).var(ddof=1)) / 3)
    half = sps.t.ppf(0.975, 2) * math.sqrt(x.figure.side.var)
    geo = math.exp(float(np.mean(np.log(means))))
    assert (x.figure.mean, x.figure.ci95_low, x.figure.ci95_high) == (
        pytest.approx(geo),
        pytest.approx(geo * math.exp(-half)),
        pytest.approx(geo * math.exp(half)),
    )
    newest = three[-1].headline
    assert (
        x.figure.ci95_high / x.figure.ci95_low > newest.ci95_high / newest.ci95_low
    )  # runs scatter more
    # one run: the host's run-to-run noise (its model-n runs: sd of their log means, 2 df), or its own error if larger
    y = by[GPU["id"]]
    sigma = float(np.std(np.log([r.headline.mean for r in history_n]), ddof=1))
    s1 = one.headline
    rel = s1.stddev / math.sqrt(s1.n) / s1.mean
    assert (
        y.figure.side.method == "host noise"
        and y.figure.runs == 1
        and y.figure.side.df == 2
    )
    assert y.figure.side.var == pytest.approx(max(sigma**2, rel**2))
    half = sps.t.ppf(0.975, 2) * math.sqrt(y.figure.side.var)
    assert (y.figure.ci95_low, y.figure.ci95_high) == (
        pytest.approx(s1.mean * math.exp(-half)),
        pytest.approx(s1.mean * math.exp(half)),
    )
    assert "host's run-to-run noise" in y.figure.note
    # one run, no noise of its own: the fleet's pooled noise (the three hosts' sums of squares over their df)
    q = by[lone["id"]]
    fleet_sigma = fx.fleet_noise["rate:tg"]
    assert (
        q.figure.side.method == "fleet noise"
        and q.figure.side.df == fleet_sigma.df == 2 + 2 + 1
    )
    assert (
        q.figure.side.var == pytest.approx(max(fleet_sigma.sigma**2, 0.0), rel=0.5)
        and q.rank_label != "—"
    )
    assert "fleet's pooled noise" in q.figure.note
    # the page and the picker: `invoke compare`'s rows for every pair of these hosts
    page = history_pages.host_vs_host_page(docs)
    flat = page.replace("\\", "")
    assert (
        "n 9 · 3 runs" in flat
        and "n 3 · 1 run + host noise" in flat
        and "1 run + fleet noise" in flat
    )
    pdata = _picker(page)
    ids = [h["id"] for h in pdata["hosts"]]
    for ia, ib in itertools.permutations(range(len(ids)), 2):
        row = _compare_rows(docs, ids[ia], ids[ib])[w.label]
        c = stats.combine_sides(
            _published(pdata, 0, ia), _published(pdata, 0, ib), True
        )
        assert _shown(c.ratio, c.ci95_low, c.ci95_high, c.verdict, c.method) == _shown(
            row.ratio,
            row.ci95_low,
            row.ci95_high,
            row.single_verdict,
            row.method,
        )
        assert c.ratio == pytest.approx(row.ratio, rel=1e-8)
        assert row.note.startswith(
            c.note
        )  # compare adds why the family's FDR changed a verdict
        if ids[ia] == w.median.host_id:  # against the median host: the page's row
            st = by[ids[ib]]
            assert (st.ratio, st.ratio_low, st.ratio_high, st.verdict) == (
                row.ratio,
                row.ci95_low,
                row.ci95_high,
                row.single_verdict,
            )


def _option(page, name: str, host: str) -> str:
    """A host's option in the picker: its label, its id in brackets (or the id alone where it has no label)."""
    return next(
        o
        for o in page.eval_on_selector_all(
            f"select[name={name}] option", "os => os.map(o => o.textContent)"
        )
        if o == host or o.endswith(f"({host})")
    )


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
    assert max(per_host) / min(per_host) < 1.25, (
        sizes
    )  # quadratic would double the bytes per host


def test_picker_data_is_compact_and_carries_every_figure():
    """Issue #30: the picker's inline data is columns with its strings and side tuples in tables, a bounded
    number of bytes per host (the committed fleet: 8 hosts, 67 host-workload values, 12,907 bytes before,
    8,421 now), and decoded it is every figure the records form carried: the same hosts, labels,
    workloads and, per host on a workload, side estimate, repetitions, newest run and rank."""
    recs = committed_runs()
    fx = facts.of(recs)
    host_docs = {r.host_id: r.host for r in fx.records if r.ok}
    wls = fleet.workloads(fx)
    data = fleet.picker_data(wls, host_docs, fx.labels)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    hosts, values = len(data["hosts"]), len(data["values"]["host"])
    assert (hosts, values) == (8, 67)
    assert len(text.encode()) == 8421  # the records form was 12,907 bytes
    assert (
        len(text.encode()) / hosts < 1100
        and len(json.dumps(data["values"], separators=(",", ":")).encode()) / values
        < 50
    )  # 1,613 bytes per host and 175 per value before
    # every column has one entry per host on a workload, nothing per pair of hosts
    assert {len(c) for c in data["values"].values()} == {values}
    got = fleet.decode_picker(data)
    want_hosts = sorted(
        {s.host_id for w in wls for s in w.standings},
        key=lambda h: (len(host_docs[h].get("gpus") or []), h),
    )
    assert got["hosts"] == [{"id": h, "label": fx.labels.get(h, h)} for h in want_hosts]
    index = {h: i for i, h in enumerate(want_hosts)}
    assert len(got["workloads"]) == len(wls)
    for w, gw in zip(wls, got["workloads"]):
        assert (gw["label"], gw["metric"], gw["unit"], gw["hib"], gw["decimals"]) == (
            w.label,
            w.metric.label,
            w.metric.unit,
            w.metric.higher_is_better,
            w.metric.decimals,
        )
        assert gw["median"] == index[w.median.host_id]
        assert len(gw["values"]) == len(w.standings)
        for s, v in zip(w.standings, gw["values"]):
            e, f = s.figure.side, s.figure
            row = dict(zip(got["fields"], v))
            assert row == {
                "host": index[s.host_id],
                "log_mean": row["log_mean"],
                "var": e.var,
                "df": e.df,
                "runs": e.runs,
                "method": e.method,
                "why": e.why,
                "n": f.n,
                "run_id": f.newest_id,
                "rank": s.rank_label,
            }
            assert abs(row["log_mean"] - e.log_mean) <= 0.5 * 10**-fleet.LOG_DECIMALS
            d = w.metric.decimals  # the value the picker shows is the full log mean's
            assert (
                f"{math.exp(row['log_mean']):,.{d}f}"
                == f"{math.exp(e.log_mean):,.{d}f}"
            )
    # the page carries exactly this data, escaped for the script element
    page = history_pages.host_vs_host_page(recs)
    assert (
        fleet.decode_picker(
            json.loads(
                re.search(r'id="almanac-fleet-data">(.*?)</script>', page).group(1)
            )
        )
        == got
    )
