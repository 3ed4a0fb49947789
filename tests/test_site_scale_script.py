"""benchmarks/site_scale.py run as issue 30's figures are measured: a fleet generated, its site built cold, warm
and after one more host's reference run, each build timed with the site check's verdict beside it (a fast build
of a site that contradicts itself, or has a page over 1 MB, is not a result). The timings themselves are the
machine's; only what the script records is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import site_scale
from core import artifacts

ROOT = Path(__file__).resolve().parents[1]


def test_the_scale_benchmark_times_a_fleets_builds_with_their_site_check(tmp_path):
    scratch, out = tmp_path / "scratch", tmp_path / "out.json"
    args = [
        "--mode",
        "fleet",
        "--hosts",
        "6",
        "--sizes",
        "60",
        "--scratch",
        str(scratch),
    ]
    proc = subprocess.run(
        [sys.executable, "benchmarks/site_scale.py", *args]
        + ["--builds", "cold,warm", "--incremental", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["mode"] == "fleet" and res["hosts"] == 6
    (row,) = res["sizes"]
    assert row["artifacts"] == 60
    for kind in ("cold", "warm", "incremental"):
        b = row[kind]
        assert b["site_check"] == [], (kind, b["site_check"])
        assert b["seconds"] > 0 and b["cpu_s"] > 0 and b["peak_pss_mib"] > 0, b
    assert row["html_pages"] > 20 and row["largest_pages"][0]["bytes"] < 1_000_000
    assert "site check found" not in proc.stdout
    # the data folder as it was (the new host's run taken out again): the next --reuse measures the same set
    assert sum(1 for _ in artifacts.iter_files(scratch / "data-60")) == 60


def test_the_site_checks_verdict_is_read_from_a_builds_output():
    clean = "site built: site/index.html\nsite check: every figure reads the same on every page; no rank ..."
    assert site_scale.site_check(clean) == []
    found = (
        "site built: x\nsite check: 2 contradiction(s) between pages:\n"
        "  regressions/index.html: 9.21 MB of HTML (9,206,284 bytes), over the 1 MB a page may weigh\n"
        "  host h1 has 2 names: 'A' on a.html; 'B' on b.html\n"
        "WARNING - something else the build said\n"
    )
    assert site_scale.site_check(found) == [
        "regressions/index.html: 9.21 MB of HTML (9,206,284 bytes), over the 1 MB a page may weigh",
        "host h1 has 2 names: 'A' on a.html; 'B' on b.html",
    ]
    with pytest.raises(SystemExit, match="no site check"):
        site_scale.site_check("site built: x\n")


def test_a_build_failed_by_its_site_check_is_measured_any_other_failure_stops_the_script():
    found = "site built: x\nsite check: 1 contradiction(s) between pages:\n  host h1 has 2 names\n"
    failed = subprocess.CompletedProcess(
        [], 1, found, "error: the site in x was built but 1 ...\n"
    )
    assert site_scale.build_verdict(failed, Path("d")) == ["host h1 has 2 names"]
    clean = subprocess.CompletedProcess(
        [], 0, "site check: every figure reads the same on every page", ""
    )
    assert site_scale.build_verdict(clean, Path("d")) == []
    for rc, out in ((1, "site built: x\n"), (2, found)):
        broken = subprocess.CompletedProcess(
            [], rc, out, "error: data/a.json: field id ..."
        )
        with pytest.raises(
            SystemExit, match="site build failed at d:\nerror: data/a.json"
        ):
            site_scale.build_verdict(broken, Path("d"))
