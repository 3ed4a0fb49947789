"""Slurm as the fleet engine (runtime.remote.slurm) against a real single-node Slurm cluster on
loopback: Debian's slurm-wlm and munge, munged, slurmctld and slurmd started here
(tests/support/slurm.py), the node being this machine. A tiny synthetic model keeps each job
to seconds. Nothing is mocked: the jobs run the project's agent in a snapshot of the tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core import artifacts
from core.errors import UserError
from tests.support import slurm as slurm_support

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = slurm_support.ensure_slurm()
    if reason:
        pytest.skip(reason)
    c = slurm_support.start(tmp_path_factory.mktemp("slurm"))
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    yield c
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old
    c.stop()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from runtime.models import synth

    path = tmp_path_factory.mktemp("model") / "tiny-slurm.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path, seed=5)
    return path


def _data(tmp_path: Path, model: Path, monkeypatch) -> Path:
    data = tmp_path / "data"
    (data / "matrices").mkdir(parents=True)
    (data / "models.yaml").write_text(
        f"schema_version: 1\nmodels:\n  tiny-slurm:\n    path: {model}\n    description: synthetic tiny llama\n"
    )
    for name, tests in (("tiny", "[tg8]"), ("tiny2", "[pp16]")):
        (data / "matrices" / f"{name}.yaml").write_text(
            f"schema_version: 1\nname: {name}\nmodels: [tiny-slurm]\nrepetitions: 1\nwarmup: false\n"
            f"timeout_s: 120\nsettings: {{n_threads: 1}}\ntests: {tests}\n"
        )
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    return data


def _opts(tmp_path: Path, **kw):
    from runtime.remote.slurm import SlurmOptions

    return SlurmOptions(workdir=str(tmp_path / "shared"), time_limit="5", **kw)


def _wrapper(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_matrix_runs_as_an_exclusive_job_and_artifacts_come_back(
    cluster, tiny_model, tmp_path, monkeypatch, live_tree
):
    from runtime.remote.slurm import run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    events: list[tuple[str, str]] = []
    out = run_slurm(
        str(data / "matrices" / "tiny.yaml"),
        _opts(tmp_path, partition=cluster.partition),
        progress=lambda n, e, i: events.append((n, e)),
        poll_s=0.3,
    )
    o = out[0]
    assert o.host == cluster.node and o.status == "ok", o.message
    assert len(o.measured) == 1 and not o.failed and not o.invalid
    doc = artifacts.load(o.measured[0])
    assert o.measured[0].is_relative_to(data / "runs")
    assert doc["status"] == "ok" and doc["test"]["name"] == "tg8"
    # fingerprinted inside the job: Slurm's node name is the host's name, not its id
    assert (
        doc["host"]["name"] == cluster.node and doc["host"].get("source") != "inventory"
    )
    assert doc["host"]["id"] == o.host_id and not doc["host"]["id"].endswith(
        "-inventory"
    )
    job = doc["build"]["almanac_source"]["slurm"]
    assert (
        job["node"] == cluster.node
        and job["partition"] == cluster.partition
        and job["job_id"].isdigit()
    )
    assert (cluster.node, "queued") in events and (cluster.node, "host") in events
    assert events[-1] == (cluster.node, "finished")
    # resubmitted: the node resumes from its own data, nothing measured twice, nothing new here
    again = run_slurm(
        str(data / "matrices" / "tiny.yaml"),
        _opts(tmp_path, partition=cluster.partition),
        poll_s=0.3,
    )[0]
    assert again.status == "ok" and not again.fetched and not again.measured
    assert len(list((data / "runs").rglob("*.json"))) == 1


def test_two_jobs_queued_at_once_run_one_after_the_other(
    cluster, tiny_model, tmp_path, monkeypatch, live_tree
):
    from runtime.remote.slurm import run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    results: dict[str, list] = {}
    events: list[tuple[str, str, dict]] = []
    lock = threading.Lock()

    def go(name: str) -> None:
        def progress(n, e, i):
            with lock:
                events.append((name, e, dict(i)))

        results[name] = run_slurm(
            str(data / "matrices" / f"{name}.yaml"),
            _opts(tmp_path, nodelist=[cluster.node]),
            progress=progress,
            poll_s=0.3,
        )

    threads = [threading.Thread(target=go, args=(n,)) for n in ("tiny", "tiny2")]
    for t in threads:
        t.start()
        time.sleep(0.5)
    for t in threads:
        t.join(300)
    a, b = results["tiny"][0], results["tiny2"][0]
    assert a.status == b.status == "ok", (a.message, b.message)
    ja, jb = a.job, b.job
    assert ja["node"] == jb["node"] == cluster.node
    # exclusive: the second started only after the first ended (Slurm's own clock, seconds)
    first, second = sorted((ja, jb), key=lambda j: j["start"])
    assert second["start"] >= first["end"], (ja, jb)
    # and while the first ran, the second was seen waiting in the queue with Slurm's reason
    queued = [i for n, e, i in events if e == "queued" and i.get("reason")]
    assert queued and {i["reason"] for i in queued} & {
        "Resources",
        "Priority",
        "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions",
    }


def test_a_cancelled_job_becomes_failed_artifacts_naming_node_and_reason(
    cluster, tiny_model, tmp_path, monkeypatch, live_tree
):
    from runtime.remote.slurm import run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    hang = _wrapper(tmp_path / "hang.sh", "sleep 300\n")
    running = threading.Event()
    job: dict = {}

    def progress(n, e, i):
        if e == "running":
            job["id"] = i["job"]
            running.set()

    res: list = []
    t = threading.Thread(
        target=lambda: res.extend(
            run_slurm(
                str(data / "matrices" / "tiny.yaml"),
                _opts(tmp_path, partition=cluster.partition, python=hang),
                progress=progress,
                poll_s=0.3,
            )
        )
    )
    t.start()
    assert running.wait(120)
    subprocess.run(["scancel", job["id"]], check=True)
    t.join(120)
    o = res[0]
    assert o.status == "failed" and o.error_kind == "crash"
    assert (
        o.message == f"job {job['id']} on node {cluster.node} was cancelled (scancel)"
    )
    assert len(o.failed) == 1 and not o.measured
    doc = artifacts.load(o.failed[0])
    assert doc["status"] == "failed" and doc["error"]["message"] == o.message
    assert (
        doc["details"]["remote"]["job_id"] == job["id"]
        and doc["details"]["remote"]["state"] == "CANCELLED"
    )
    assert doc["host"]["name"] == cluster.node


# -- bad input ---------------------------------------------------------------------------------------
def _runs(data: Path) -> list[Path]:
    return sorted((data / "runs").rglob("*.json")) if (data / "runs").exists() else []


def test_no_slurm_or_a_silent_one_and_a_missing_partition_are_one_line(
    cluster, tiny_model, tmp_path, monkeypatch
):
    from runtime.remote.slurm import run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    m = str(data / "matrices" / "tiny.yaml")
    with pytest.raises(UserError) as e:
        run_slurm(m, _opts(tmp_path, partition="nope"))
    assert str(e.value) == "slurm: partition 'nope' does not exist (partitions: debug)"
    # a Slurm that does not answer: a config whose controller port nobody listens on
    dead = tmp_path / "dead.conf"
    text = cluster.conf.read_text()
    import re

    dead.write_text(
        re.sub(
            r"SlurmctldPort=\d+", f"SlurmctldPort={slurm_support._free_port()}", text
        )
    )
    monkeypatch.setenv("SLURM_CONF", str(dead))
    with pytest.raises(UserError) as e:
        run_slurm(m, _opts(tmp_path))
    msg = str(e.value)
    assert (
        msg.startswith("slurm: sinfo failed (is slurmctld running? SLURM_CONF?): ")
        and "\n" not in msg
    )
    # no Slurm at all
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UserError) as e:
        run_slurm(m, _opts(tmp_path))
    assert (
        str(e.value)
        == "slurm: sinfo is not installed (Debian: apt-get install slurm-client)"
    )
    assert _runs(data) == []


def test_cli_refuses_a_missing_partition_with_one_line(
    cluster, tiny_model, tmp_path, monkeypatch
):
    data = _data(tmp_path, tiny_model, monkeypatch)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "bench",
            "--scheduler",
            "slurm",
            "--partition",
            "nope",
            "--matrix",
            str(data / "matrices" / "tiny.yaml"),
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines == [
        "error: slurm: partition 'nope' does not exist (partitions: debug)"
    ], res.stderr
    assert _runs(data) == []


FORGER = r"""
import json, os, shutil, subprocess, sys
from pathlib import Path
PREFIX = "@@almanac "
mode = os.environ["FORGE"]
if mode == "empty":
    sys.exit(0)
if mode == "jobid":
    os.environ["ALMANAC_SOURCE"] = json.dumps({"digest": "x", "slurm": {"job_id": "999999"}})
p = subprocess.run([os.environ["REAL_PYTHON"], *sys.argv[1:]],
                   capture_output=True, text=True)
out = p.stdout
if mode in ("host", "path"):
    lines = out.splitlines()
    done = [json.loads(l[len(PREFIX):]) for l in lines if l.startswith(PREFIX) and '"done"' in l][0]
    runs = Path(os.environ["ALMANAC_DATA"]) / "runs"
    if mode == "host":
        art = runs / done["path"]
        doc = json.loads(art.read_text())
        doc["host"]["id"] = "someone-else-0000"
        art.write_text(json.dumps(doc))
    else:
        lines = [
            l.replace(done["path"], "../../../../../etc/hostname")
            if l.startswith(PREFIX) and '"done"' in l
            else l
            for l in lines
        ]
    out = "\n".join(lines) + "\n"
sys.stdout.write(out)
sys.stderr.write(p.stderr)
sys.exit(p.returncode)
"""


@pytest.mark.parametrize(
    "mode, why",
    [
        ("empty", "returned no artifact for this configuration"),
        ("jobid", "build.almanac_source.slurm.job_id '999999' is not job"),
        ("host", "host id 'someone-else-0000' is not the host job"),
        ("path", "refused (path outside the node's data/runs)"),
    ],
)
def test_a_job_that_returns_nothing_or_someone_elses_artifact_is_refused(
    cluster, tiny_model, tmp_path, monkeypatch, live_tree, mode, why
):
    from runtime.remote.slurm import run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    forge = tmp_path / "forge.py"
    forge.write_text(FORGER)
    py = _wrapper(
        tmp_path / "py.sh",
        f'FORGE={mode} REAL_PYTHON={sys.executable} exec {sys.executable} {forge} "$@"\n',
    )
    o = run_slurm(
        str(data / "matrices" / "tiny.yaml"),
        _opts(tmp_path, partition=cluster.partition, python=py),
        poll_s=0.3,
    )[0]
    assert o.status == "failed" and not o.measured
    if mode == "empty":
        assert o.message.endswith(why) and not o.invalid
    else:
        assert (
            len(o.invalid) == 1
            and why in o.invalid[0]
            and o.invalid[0].startswith("job ")
        )
        assert "\n" not in o.invalid[0]
    # nothing came in but valid failed artifacts, one for the configuration the job did not deliver
    runs = _runs(data)
    assert len(runs) == 1 and runs == o.failed
    doc = artifacts.load(runs[0])
    assert doc["status"] == "failed" and doc["host"]["name"] == cluster.node


def test_a_job_past_its_time_limit_becomes_failed_artifacts_saying_so(
    cluster, tiny_model, tmp_path, monkeypatch, live_tree
):
    """Slurm's smallest limit is a minute, and slurmctld looks every half minute: about 90 s."""
    from runtime.remote.slurm import SlurmOptions, run_slurm

    data = _data(tmp_path, tiny_model, monkeypatch)
    hang = _wrapper(tmp_path / "hang.sh", "sleep 600\n")
    states: list[str] = []
    o = run_slurm(
        str(data / "matrices" / "tiny.yaml"),
        SlurmOptions(workdir=str(tmp_path / "shared"), time_limit="1", python=hang),
        progress=lambda n, e, i: states.append(e),
        poll_s=1.0,
    )[0]
    assert "running" in states and states[-1] == "finished"
    assert o.status == "failed" and o.error_kind == "timeout"
    assert (
        o.message
        == f"job {o.job['job_id']} on node {cluster.node} reached its time limit (1)"
    )
    doc = artifacts.load(o.failed[0])
    assert (
        doc["error"]["kind"] == "timeout"
        and doc["details"]["remote"]["state"] == "TIMEOUT"
    )
