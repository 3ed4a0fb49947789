"""The self-hosted bench workflow's own code runs here, as the workflow runs it: the plan step
that turns runner labels into the measure job's matrix, and the propose job's merge and
validate steps (bash, from the checkout's root, `python3` on PATH) over what two runners
uploaded. Only the GitHub actions themselves (checkout, up/download, create-pull-request) and
the self-hosted measuring are not run (they need GitHub)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.committed import committed_paths

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "bench-self-hosted.yml"


def _wf() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _step(job: str, name_start: str) -> dict:
    steps = [
        s
        for s in _wf()["jobs"][job]["steps"]
        if str(s.get("name", "")).startswith(name_start)
    ]
    assert len(steps) == 1, [s.get("name") for s in _wf()["jobs"][job]["steps"]]
    return steps[0]


def _checkout(tmp_path: Path) -> Path:
    """A checkout as the propose job sees it: the code (linked), data/ without runs."""
    co = tmp_path / "checkout"
    co.mkdir()
    for name in ("core", ".ci", "pyproject.toml"):
        (co / name).symlink_to(ROOT / name)
    (co / "data" / "runs").mkdir(parents=True)
    shim = tmp_path / "bin"
    shim.mkdir()
    # a script, not a link: a venv's python is known by the path it is started from (pyvenv.cfg beside
    # it); started through a link elsewhere it is the base interpreter, without the project's packages
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    return co


def _run(
    step: dict, cwd: Path, tmp_path: Path, env: dict | None = None
) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    e.update(
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", PYTHONPATH="", **(env or {})
    )
    for k, v in (step.get("env") or {}).items():
        e.setdefault(k, str(v))
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=cwd,
        env=e,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_measure_fans_out_over_the_planned_labels_and_propose_takes_every_runner():
    wf = _wf()
    measure = wf["jobs"]["measure"]
    assert measure["needs"] == "plan"
    assert (
        measure["strategy"]["matrix"]["label"]
        == "${{ fromJSON(needs.plan.outputs.labels) }}"
    )
    assert measure["runs-on"] == ["self-hosted", "${{ matrix.label }}"]
    upload = next(s for s in measure["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["name"] == "runs-${{ matrix.label }}"
    download = next(
        s
        for s in wf["jobs"]["propose"]["steps"]
        if "download-artifact" in s.get("uses", "")
    )
    assert download["with"] == {"pattern": "runs-*", "path": "incoming/"}
    # the propose job no longer imports a module that moved (runtime.artifacts is core.artifacts)
    assert "from runtime import artifacts" not in WORKFLOW.read_text()


@pytest.mark.integration
def test_plan_step_writes_the_label_matrix(tmp_path):
    co = _checkout(tmp_path)
    step = _step("plan", "Runner labels")
    out = tmp_path / "github_output"
    res = _run(
        step,
        co,
        tmp_path,
        {"GITHUB_OUTPUT": str(out), "LABELS": "almanac-cpu, almanac-gpu"},
    )
    assert res.returncode == 0, res.stderr
    assert out.read_text() == 'labels=["almanac-cpu","almanac-gpu"]\n'
    bad = _run(
        step,
        co,
        tmp_path,
        {"GITHUB_OUTPUT": str(out), "LABELS": "almanac-cpu, $(reboot)"},
    )
    assert bad.returncode != 0
    assert (
        bad.stderr.strip()
        == "runner_labels: '$(reboot)' is not a runner label (letters, digits, '.', '_', '-')"
    )


def _upload(incoming: Path, label: str, files: list[Path]) -> None:
    """What upload-artifact of data/runs/ then download-artifact (pattern) leave: runs-<label>/<host>/..."""
    for f in files:
        rel = f.relative_to(f.parents[2])
        dest = incoming / f"runs-{label}" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)


@pytest.mark.integration
def test_propose_merges_every_runners_artifacts_and_validates(tmp_path):
    co = _checkout(tmp_path)
    runs = committed_paths("runs")
    hosts = sorted({p.parents[1].name for p in runs})
    assert len(hosts) >= 2
    a = [p for p in runs if p.parents[1].name == hosts[0]][:3]
    b = [p for p in runs if p.parents[1].name == hosts[1]][:2]
    _upload(co / "incoming", "almanac-cpu", a)
    _upload(co / "incoming", "almanac-gpu", b)
    merge = _step("propose", "Merge every runner")
    res = _run(merge, co, tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        res.stdout.strip()
        == f"merged 5 new artifacts from 2 runners into {Path('data') / 'runs'}"
    )
    merged = sorted(
        p.relative_to(co / "data" / "runs")
        for p in (co / "data" / "runs").rglob("*.json")
    )
    assert merged == sorted(p.relative_to(p.parents[2]) for p in a + b)
    validate = _step("propose", "Validate before proposing")
    res = _run(validate, co, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "5 artifacts"
    # run again with the same uploads: nothing new, nothing refused
    _upload(co / "incoming", "almanac-cpu", a)
    again = _run(merge, co, tmp_path)
    assert again.returncode == 0 and again.stdout.strip().startswith(
        "merged 0 new artifacts"
    )


@pytest.mark.integration
@pytest.mark.parametrize("forge", ["moved", "edited", "invalid", "symlink"])
def test_propose_refuses_a_forged_or_invalid_upload_and_merges_nothing(tmp_path, forge):
    co = _checkout(tmp_path)
    runs = committed_paths("runs")
    good = runs[:2]
    _upload(co / "incoming", "almanac-cpu", good)
    bad_dir = co / "incoming" / "runs-almanac-gpu"
    src = runs[-1]
    rel = src.relative_to(src.parents[2])
    target = bad_dir / rel
    target.parent.mkdir(parents=True)
    doc = json.loads(src.read_text())
    if forge == "moved":  # a valid artifact under another host's folder
        target = bad_dir / "someone-else-00000000" / rel.parts[1] / rel.parts[2]
        target.parent.mkdir(parents=True)
        target.write_text(src.read_text())
    elif (
        forge == "edited"
    ):  # its host changed after the fact: the path no longer matches
        doc["host"]["id"] = "someone-else-00000000"
        target.write_text(json.dumps(doc))
    elif forge == "invalid":
        del doc["status"]
        target.write_text(json.dumps(doc))
    else:
        target.symlink_to("/etc/hostname")
    res = _run(_step("propose", "Merge every runner"), co, tmp_path)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[-1] == "merge: 1 files refused; nothing merged", (
        res.stderr
    )
    assert lines[0].startswith("runs-almanac-gpu/")
    assert list((co / "data" / "runs").rglob("*")) == []
