"""The fleet-scale scripts of benchmarks/ run as their docstrings say (a script no test runs rots):
one_more_host.py adds one more fleet host's reference run to a data folder and takes it away again,
page_times.py times a build page by page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts
from tests.support.committed import ROOT, committed_data

pytestmark = pytest.mark.integration  # subprocesses; page_times builds a site


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            DISABLE_MKDOCS_2_WARNING="true",
            NO_MKDOCS_2_WARNING="1",
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )


def _artifact_files(data: Path) -> set[str]:
    return {
        str(p.relative_to(data))
        for sub in ("hosts", "runs")
        if (data / sub).is_dir()
        for p in (data / sub).rglob("*.json")
    }


def test_one_more_host_adds_a_valid_reference_run_and_takes_it_away(tmp_path):
    data = committed_data(tmp_path / "data", artifacts=False)
    before = _artifact_files(data)
    proc = _run(["benchmarks/one_more_host.py", str(data), "--host", "7"])
    assert proc.returncode == 0, proc.stderr
    added = _artifact_files(data) - before
    # the host's probe and the reference matrix's configurations, each a valid artifact of one new host
    reported = re.match(r"added (\d+) artifacts: (.*)$", proc.stdout.strip())
    assert reported, proc.stdout
    assert int(reported[1]) == len(added) and set(reported[2].split(", ")) == added
    assert any(p.startswith("hosts/") for p in added)
    runs = [p for p in added if p.startswith("runs/")]
    assert len(runs) >= 2
    hosts = set()
    for rel in added:
        doc = artifacts.load(data / rel)
        hosts.add(doc["host"]["id"])
    assert len(hosts) == 1
    proc = _run(["benchmarks/one_more_host.py", str(data), "--host", "7", "--remove"])
    assert proc.returncode == 0, proc.stderr
    assert _artifact_files(data) == before


def test_one_more_host_refuses_a_folder_that_is_not_there(tmp_path):
    missing = tmp_path / "nowhere"
    proc = _run(["benchmarks/one_more_host.py", str(missing)])
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{missing}: not a data folder"
    assert not missing.exists()


def test_page_times_lists_every_page_and_the_build_total(tmp_path):
    data = committed_data(tmp_path / "data", only=["models.yaml"])
    proc = _run(
        [
            "benchmarks/page_times.py",
            "--site-dir",
            str(tmp_path / "site"),
            "--top",
            "3",
        ],
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    head = re.match(
        r"build ([\d.]+) s: pages ([\d.]+) s over (\d+) pages \(Markdown ([\d.]+) s, HTML ([\d.]+) s\), "
        r"outside pages (-?[\d.]+) s",
        proc.stdout,
    )
    assert head, proc.stdout[:500]
    total, pages, n, md, html = (float(head[i]) for i in range(1, 6))
    built = list((tmp_path / "site").rglob("index.html"))
    assert n >= 10 and len(built) >= n  # every page timed is a page of the site
    assert abs(md + html - pages) <= 0.15 and pages <= total
    rows = proc.stdout.split("\n\n")[1].splitlines()
    assert rows[0].split() == ["page", "Markdown", "s", "HTML", "s"]
    assert len(rows) == 1 + 3  # --top 3
    assert (tmp_path / "site" / "index.html").is_file()
