"""Every GitHub Actions workflow validates against check-jsonschema's built-in
GitHub-workflows schema and has no high- or medium-severity finding in `zizmor --offline`
(both from PyPI, the dev extra; both run offline)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def test_there_are_workflows():
    names = {p.name for p in WORKFLOWS}
    assert "bench-self-hosted.yml" in names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_github_schema(workflow):
    res = subprocess.run(
        [
            _tool("check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            str(workflow),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_has_no_high_or_medium_zizmor_finding(workflow):
    res = subprocess.run(
        [_tool("zizmor"), "--offline", "--format", "json", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode in (0, 10, 11, 12, 13, 14), (
        res.stderr
    )  # zizmor exits >= 10 when it has findings
    findings = json.loads(res.stdout or "[]")
    serious = [
        f"{f['ident']} ({f['determinations']['severity']}): {f.get('desc', '')}"
        for f in findings
        if f["determinations"]["severity"] in ("High", "Medium")
    ]
    assert not serious, serious


def test_checks_catch_a_bad_workflow(tmp_path):
    """The two checks are not vacuous: a malformed workflow fails the schema, an unsafe one
    (a pull request's title expanded into a shell script, unpinned action) fails zizmor."""
    malformed = tmp_path / "malformed.yml"
    malformed.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    timeout-minutes: soon\n"
        "    steps:\n      - run: echo hi\n"
    )
    res = subprocess.run(
        [
            _tool("check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            str(malformed),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0
    unsafe = tmp_path / "unsafe.yml"
    unsafe.write_text(
        "on: pull_request_target\npermissions: write-all\njobs:\n  x:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    res = subprocess.run(
        [_tool("zizmor"), "--offline", "--format", "json", str(unsafe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    sev = {f["determinations"]["severity"] for f in json.loads(res.stdout or "[]")}
    assert sev & {"High", "Medium"}, res.stdout[-500:] + res.stderr[-500:]
