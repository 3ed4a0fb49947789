"""Tests read committed data only (issue 28): a user's own measurements in data/ (what `invoke all`
adds on a new host) reach no test. A temporary project (a git checkout of the committed data) gets a
user's runs and probes planted, valid and untracked (tests/support/user_run.py): the committed copy
leaves them out, the guard refuses to open them, and the session reads the committed copy."""

from __future__ import annotations

import os
import subprocess

import pytest

from core import artifacts
from core.paths import data_dir
from pipelines.runs import load_runs
from tests.conftest import ROOT
from tests.support import committed
from tests.support.user_run import HOSTILE, USER_HOST, plant_user_measurements


def _git(root, *args):
    subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A checkout whose data/ holds the committed data, committed, and then a user's measurements."""
    root = tmp_path_factory.mktemp("project")
    committed.committed_data(root / "data")
    _git(root, "init", "-q")
    _git(root, "add", "data")
    _git(root, "commit", "-qm", "the committed data")
    planted = plant_user_measurements(root / "data", root / "data")
    return root, planted


def test_the_planted_measurements_are_a_user_s_valid_untracked_artifacts(project):
    root, planted = project
    assert len(planted["runs"]) >= 2 and planted["hosts"]
    count, problems = artifacts.validate_tree(root / "data")
    assert problems == [] and count == len(committed.committed_files()) + len(
        planted["runs"]
    ) + len(planted["hosts"])
    runs = load_runs(root / "data" / "runs")
    mine = [r for r in runs if r["host"]["id"] == USER_HOST]
    assert len(mine) == len(planted["runs"]) and any(
        r["settings"]["requested"].get("chat_format") == HOSTILE for r in mine
    )
    status = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", "data"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        f"?? data/hosts/{USER_HOST}/" in status
        and f"?? data/runs/{USER_HOST}/" in status
    )


def test_the_committed_copy_leaves_a_user_s_measurements_out(
    project, tmp_path, monkeypatch
):
    root, planted = project
    rels = {
        p.relative_to(root / "data").as_posix() for ps in planted.values() for p in ps
    }
    tracked = committed.tracked_files(root)
    assert not rels & set(tracked)
    assert (
        committed.committed_files(root) == committed.committed_files()
    )  # exactly the project's committed artifacts
    copy = committed.committed_data(tmp_path / "data", root=root)
    assert sorted(
        p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()
    ) == list(tracked)
    assert (
        not (copy / "runs" / USER_HOST).exists()
        and not (copy / "hosts" / USER_HOST).exists()
    )
    want = sorted(r.id for r in committed.committed_runs())
    assert sorted(r["id"] for r in load_runs(copy / "runs")) == want
    # what a pipeline reads through ALMANAC_DATA: the user's host with the live folder, not with the copy
    monkeypatch.setenv("ALMANAC_DATA", str(root / "data"))
    assert USER_HOST in {r["host"]["id"] for r in load_runs()}
    monkeypatch.setenv("ALMANAC_DATA", str(copy))
    assert (
        USER_HOST not in {r["host"]["id"] for r in load_runs()}
        and sorted(r["id"] for r in load_runs()) == want
    )
    # an artifact asked for by name must be committed
    with pytest.raises(committed.NoCommittedData, match=USER_HOST):
        committed.committed_data(tmp_path / "other", only=sorted(rels), root=root)


def test_the_guard_refuses_to_open_a_user_s_artifact(project):
    root, planted = project
    guard = committed.LiveDataGuard(
        root / "data", frozenset(committed.tracked_files(root))
    )
    for p in planted["runs"] + planted["hosts"]:
        for path in (str(p), p, os.fsencode(p)):
            with pytest.raises(committed.UntrackedDataRead, match=USER_HOST):
                guard("open", (path, "r", 0))
        with pytest.raises(committed.UntrackedDataRead):
            guard("open", (p, "w", 0))  # nor write beside them
    first = root / "data" / committed.committed_files()[0]
    guard("open", (str(first), "r", 0))  # a committed artifact
    guard("open", (str(root / "data" / "models.yaml"), "r", 0))  # an input
    guard(
        "open", (str(root / "data" / "schema" / "new.v9.schema.json"), "r", 0)
    )  # a schema, not an artifact
    guard(
        "os.listdir", (str(root / "data" / "runs" / USER_HOST),)
    )  # listing is not reading
    with guard.paused():  # packing the tree as bytes (the live_tree fixture)
        guard("open", (str(planted["runs"][0]), "r", 0))
    with pytest.raises(committed.UntrackedDataRead):
        guard("open", (str(planted["runs"][0]), "r", 0))


def test_this_session_reads_the_committed_copy_and_guards_the_live_folder(session_data):
    assert (
        os.environ["ALMANAC_DATA"] == str(session_data)
        and data_dir() == session_data.resolve()
    )
    assert data_dir() != (ROOT / "data").resolve()
    assert sorted(r["id"] for r in load_runs()) == sorted(
        r.id for r in committed.committed_runs()
    )
    with pytest.raises(committed.UntrackedDataRead, match=USER_HOST):
        open(
            ROOT / "data" / "runs" / USER_HOST / "m" / "pp512--0-x.json"
        )  # raised before the file is looked for
    with pytest.raises(committed.UntrackedDataRead):
        (ROOT / "data" / "hosts" / USER_HOST / "bandwidth-x.json").read_text()
    assert (
        ROOT / "data" / committed.committed_files()[0]
    ).read_text()  # committed: readable


def test_outside_a_git_checkout_the_tests_refuse_naming_the_way_out(
    tmp_path, monkeypatch
):
    bare = tmp_path / "unpacked"
    (bare / "data" / "runs").mkdir(parents=True)
    (bare / "data" / "models.yaml").write_text("x: 1\n")
    monkeypatch.delenv(committed.OVERRIDE_ENV, raising=False)
    with pytest.raises(committed.NoCommittedData) as exc:
        committed.tracked_files(bare)
    assert committed.OVERRIDE_ENV in str(exc.value) and "git" in str(exc.value)
    monkeypatch.setenv(
        committed.OVERRIDE_ENV, str(bare / "data")
    )  # a folder of committed files, taken whole
    assert committed.tracked_files(bare / "data") == ("models.yaml",)


def test_committed_runs_are_read_once_and_every_call_gets_records_of_its_own():
    """committed_runs() keeps its first read (pickled) for the session; a test that changes a record
    it was handed changes nothing that another call returns."""
    first, second = committed.committed_runs(), committed.committed_runs()
    assert [r.id for r in first] == [r.id for r in second] and len(first) > 100
    assert first[0] is not second[0] and dict(first[0]) == dict(second[0])
    host = first[0]["host"]
    host["id"] = "changed by a test"
    assert second[0]["host"]["id"] != "changed by a test"
    assert committed.committed_runs()[0]["host"]["id"] != "changed by a test"
