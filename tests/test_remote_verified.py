"""Issue 34 items 7 and 8, on a real sshd on loopback: what a host returns is checked against the
job before it counts. An inventory host returned another host's artifact (the H100's id, another
model and test, rate x100) and it was counted as "1 measured"; a fingerprint without ``id`` gave a
KeyError traceback, one with the id ``../../etc`` named a path outside data/. Now each is refused
with one line, the host's configurations become failed artifacts under its inventory id, the other
hosts go on, and ``invoke bench --host`` ends with a per-host summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts
from runtime.hosts import inventory as hosts
from tests.conftest import ROOT
from tests.test_remote import _data, _host_entry, sshd_env, tiny_model  # noqa: F401 - fixtures

LIAR = ROOT / "tests" / "support" / "lying_agent.py"
FIXTURE = (
    ROOT
    / "tests/fixtures/data/runs/golden-host-55ecea05/gemma3-270m-q4-k-m/tg16--40fd4754f2e2ec5c-20261126T023404Z.json"
)


def _liar(tmp_path: Path, lie: str) -> str:
    """A "python" for the inventory entry: the real one for ``prepare``, the lying agent for ``run``."""
    path = tmp_path / f"python-{lie}"
    path.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *" run "*) ALMANAC_LIE={lie} ALMANAC_LIE_FIXTURE={FIXTURE} '
        f'exec {sys.executable} {LIAR} "$@";; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


LIES = ("other-host", "other-config", "other-path", "huge", "no-id", "path-id")


@pytest.fixture(scope="module")
def outcomes(sshd_env, tiny_model, tmp_path_factory):  # noqa: F811
    from runtime.remote import controller

    tmp = tmp_path_factory.mktemp("liars")
    data = _data(tmp, tiny_model)
    mp = pytest.MonkeyPatch()
    mp.setenv("ALMANAC_DATA", str(data))
    mp.setenv("ALMANAC_CACHE", str(tmp / "cache"))
    mp.setattr(controller, "MAX_REMOTE_ARTIFACT_BYTES", 100_000)
    body = "schema_version: 1\nhosts:\n" + "".join(
        _host_entry(
            sshd_env, lie, workdir=tmp / f"remote-{lie}", python=_liar(tmp, lie)
        )
        for lie in LIES
    )
    body += _host_entry(sshd_env, "good", workdir=tmp / "remote-good")
    (data / "hosts.yaml").write_text(body)
    inv = hosts.load_inventory(data / "hosts.yaml")
    try:
        outs = controller.run_hosts(
            list(inv.hosts.values()),
            str(data / "matrices" / "tiny.yaml"),
            log_dir=tmp / "logs",
        )
    finally:
        mp.undo()
    yield {o.host: o for o in outs}, data


@pytest.mark.parametrize(
    ("lie", "says"),
    [
        (
            "other-host",
            "names host 'h100-0123abcd', not this host's fingerprint other-host-",
        ),
        (
            "other-config",
            "model 'not-in-the-matrix', test 'tg16' is not a configuration of matrix tiny-remote",
        ),
        ("other-path", "refused: not in the host's own folder (other-path-"),
        ("huge", "more than 100000 bytes: refused unread"),
    ],
)
def test_an_artifact_that_is_not_this_hosts_result_of_this_job_is_refused(
    outcomes, lie, says
):
    outs, data = outcomes
    o = outs[lie]
    assert (o.status, o.error_kind) == ("failed", "error"), o.message
    assert not o.measured and not o.fetched
    assert len(o.invalid) == 1 and says in o.invalid[0] and "\n" not in o.invalid[0]
    assert "returned artifact(s) refused" in o.message
    # its configuration is a failed artifact of this host (its own fingerprint), nothing else was written
    assert len(o.failed) == 1
    doc = artifacts.load(o.failed[0])
    assert (
        doc["status"] == "failed"
        and doc["host"]["id"] == o.host_id
        and doc["host"]["name"] == lie
    )
    assert o.failed[0].is_relative_to(data / "runs" / o.host_id)
    assert not (data / "runs" / "h100-0123abcd").exists()


@pytest.mark.parametrize(
    ("lie", "says"),
    [("no-id", "has no id"), ("path-id", "has the id '../../etc', not a host id")],
)
def test_a_fingerprint_without_a_valid_id_fails_the_host_under_its_inventory_id(
    outcomes, lie, says
):
    outs, data = outcomes
    o = outs[lie]
    assert (o.status, o.error_kind) == ("failed", "error")
    assert says in o.message and "nothing it returned is taken" in o.message
    assert len(o.failed) == 1
    doc = artifacts.load(o.failed[0])
    assert (
        doc["host"]["id"] == f"{lie}-inventory" and doc["host"]["source"] == "inventory"
    )
    assert o.failed[0].is_relative_to(data / "runs" / f"{lie}-inventory")


def test_the_honest_host_goes_on_and_nothing_lands_outside_data_runs(outcomes):
    outs, data = outcomes
    good = outs["good"]
    assert good.status == "ok" and len(good.measured) == 1 and not good.invalid
    for p in data.parent.rglob("*"):
        assert "etc" not in p.relative_to(data.parent).parts[:1]
    folders = {p.name for p in (data / "runs").iterdir()}
    assert folders == {
        outs[n].host_id
        for n in ("other-host", "other-config", "other-path", "huge", "good")
    } | {
        "no-id-inventory",
        "path-id-inventory",
    }


def test_cli_ends_with_a_per_host_summary_not_a_traceback(
    sshd_env,  # noqa: F811 - the fixture, imported
    tiny_model,  # noqa: F811
    tmp_path,
):
    data = _data(tmp_path, tiny_model)
    (data / "hosts.yaml").write_text(
        "schema_version: 1\nhosts:\n"
        + _host_entry(
            sshd_env, "noid", workdir=tmp_path / "r1", python=_liar(tmp_path, "no-id")
        )
        + _host_entry(
            sshd_env,
            "forger",
            workdir=tmp_path / "r2",
            python=_liar(tmp_path, "other-host"),
        )
    )
    env = dict(
        os.environ,
        ALMANAC_DATA=str(data),
        ALMANAC_CACHE=str(tmp_path / "cache"),
        COLUMNS="200",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "bench",
            "--host",
            "noid",
            "--host",
            "forger",
            "--matrix",
            "tiny",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    noid = [
        ln
        for ln in lines
        if ln.startswith("noid: failed (error), 0 measured, 1 failed")
    ]
    forger = [
        ln
        for ln in lines
        if ln.startswith(
            "forger: failed (error), 0 measured, 1 failed, 0 artifacts fetched, 1 invalid refused"
        )
    ]
    assert noid and forger, lines[-10:]


def test_a_host_printing_without_end_is_cut_not_held():
    from runtime.remote.controller import MAX_LINE_CHARS, _Lines

    got: list[str] = []
    lines = _Lines(got.append)
    for _ in range(5):
        lines.write("x" * (MAX_LINE_CHARS // 2 + 1))
    lines.write("\nnext\n")
    assert all(len(g) <= MAX_LINE_CHARS + 20 for g in got) and got[-1] == "next"
    assert len(lines.buf) == 0
