"""The runner under attack: workers die with their runner whatever signal ends it, the
runner's timeout holds without it, job folders do not pile up, two runs do not measure at
once, a corrupt artifact does not stop a resume, and a configuration that cannot fit is a
failed artifact before anything loads."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from core import artifacts
from runtime import procs
from runtime.backends.openai_http.server import free_port
from runtime.execution import preflight as fit
from runtime.execution import runlock, runner
from tests.conftest import ROOT, write_matrix

FAULT = str(ROOT / "tests" / "fault_server.py")


@pytest.fixture(scope="module")
def trickle_url():
    """A server whose answers never end (a chunk every 200 ms): a worker talking to it runs until killed."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, FAULT, "--port", str(port), "--mode", "trickle"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait()


def _job(url: str) -> dict:
    return {
        "backend": "openai_http",
        "model": None,
        "settings": {
            "base_url": url,
            "api_model": "trickle",
            "request_timeout_s": 300,
            "read_timeout_s": 60,
            "retries": 0,
        },
        "test": {"kind": "chat", "requests": 1, "warmup_requests": 0, "max_tokens": 4},
    }


RUNNER = """
import json, sys
from runtime.execution.runner import run_child
run_child(json.loads(sys.argv[1]), float(sys.argv[2]))
"""


def _workers_of(pid: int, timeout: float = 30) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = [
                k
                for k in psutil.Process(pid).children(recursive=True)
                if "runtime.execution.worker" in " ".join(k.cmdline())
            ]
        except psutil.NoSuchProcess:
            return []
        if kids:
            return kids
        time.sleep(0.05)
    return []


def _job_dirs_of(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{procs.JOB_PREFIX}{pid}-*"))


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_worker_dies_with_its_runner_within_two_seconds(sig, trickle_url):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # the runner as a terminal starts it: SIGHUP at its default (a suite run under nohup would hand it on ignored)
    runner_proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(_job(trickle_url)), "60"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    try:
        workers = _workers_of(runner_proc.pid)
        assert workers, "no worker started"
        time.sleep(1.0)  # the worker is busy streaming now
        assert all(w.is_running() for w in workers)
        left = _job_dirs_of(runner_proc.pid)
        assert left
        runner_proc.send_signal(sig)
        t0 = time.monotonic()
        runner_proc.wait(10)
        gone, alive = psutil.wait_procs(workers, timeout=2.0)
        assert not alive, f"{len(alive)} workers outlived their runner by 2 s"
        assert time.monotonic() - t0 < 2.5
        # the runner could not clean up after itself: the next run does
        removed = procs.clean_stale_job_dirs()
        assert all(not p.exists() for p in left) and set(left) <= set(removed)
    finally:
        if runner_proc.poll() is None:
            runner_proc.kill()
            runner_proc.wait()


def test_the_runners_timeout_holds_without_the_runner(trickle_url, tmp_path):
    """A worker whose deadline passed kills itself even when no runner is left to do it."""
    (tmp_path / "job.json").write_text(json.dumps(_job(trickle_url)))
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        **{procs.DEADLINE_ENV: repr(time.time() + 2.0)},
    )
    env.pop(procs.PARENT_ENV, None)
    t0 = time.monotonic()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtime.execution.worker",
            str(tmp_path / "job.json"),
            str(tmp_path / "r.json"),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        p.wait(15)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -signal.SIGKILL and 1.5 < time.monotonic() - t0 < 6
    assert b"past the runner's deadline" in p.stderr.read()


def test_a_worker_whose_runner_is_already_gone_exits_at_once(tmp_path):
    job = tmp_path / "job.json"
    job.write_text("{}")
    env = dict(
        os.environ, PYTHONPATH=str(ROOT), **{procs.PARENT_ENV: "1"}
    )  # not our parent: "the runner is gone"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "runtime.execution.worker",
            str(job),
            str(tmp_path / "r.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=30,
        start_new_session=True,
    )
    assert p.returncode == -signal.SIGKILL and not (tmp_path / "r.json").exists()


def test_stale_job_folders_of_live_runners_are_kept(tmp_path):
    mine = tmp_path / f"{procs.JOB_PREFIX}{os.getpid()}-x"
    dead = tmp_path / f"{procs.JOB_PREFIX}999999999-x"
    other = tmp_path / "something-else"
    for d in (mine, dead, other):
        d.mkdir()
    assert procs.clean_stale_job_dirs(tmp_path) == [dead]
    assert mine.exists() and other.exists() and not dead.exists()


# -- one run per data folder and host ----------------------------------------------------------
HOLD = """
import sys, time
from pathlib import Path
from runtime.execution.runlock import run_lock
with run_lock(Path(sys.argv[1]), "h"):
    print("held", flush=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < float(sys.argv[2]) and not (Path(sys.argv[1]) / "release").exists():
        time.sleep(0.05)
"""


def test_a_second_run_refuses_naming_the_holder_or_waits(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path), "60"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(runlock.LockBusy) as exc:
            with runlock.run_lock(tmp_path, "h"):
                pass
        msg = str(exc.value)
        assert (
            f"pid {holder.pid}" in msg
            and "started" in msg
            and "run_lock" not in msg.split("(started")[0]
        )
        assert len(msg.splitlines()) == 1
        with runlock.run_lock(tmp_path, "other-host"):  # another host's folder is free
            pass
        threading.Timer(1.0, lambda: (tmp_path / "release").touch()).start()
        t0 = time.monotonic()
        with runlock.run_lock(
            tmp_path, "h", wait_s=30
        ):  # waits until the holder lets go (1 s from now)
            assert 0.9 < time.monotonic() - t0 < 30
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_releases_the_lock(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path), "60"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    with runlock.run_lock(tmp_path, "h"):
        pass


# -- resume over corrupt artifacts --------------------------------------------------------------
def test_a_corrupt_artifact_is_set_aside_and_counts_as_not_measured(tmp_path):
    root = tmp_path / "data" / "runs"
    shutil.copytree(ROOT / "tests" / "fixtures" / "data" / "runs", root)
    good = sorted(root.rglob("pp64--*.json"))[0]
    doc = artifacts.load(good)
    key = doc["key"]
    newer = good.with_name(good.name.rsplit("-", 1)[0] + "-20991231T000000Z.json")
    newer.write_text(good.read_text()[:200])  # a truncated newer copy of the same key
    events = []
    found = runner.last_valid(key, root, lambda kind, info: events.append((kind, info)))
    assert found is not None and found[0] == good
    assert [k for k, _ in events] == ["corrupt"] and "invalid JSON" in events[0][1][
        "error"
    ]
    assert not newer.exists()
    moved = runner.quarantine_dir(root) / newer.relative_to(root)
    assert (
        moved.exists()
        and runner.quarantine_dir(root) == tmp_path / "data" / "quarantine"
    )
    assert (
        artifacts.validate_tree(tmp_path / "data")[1] == []
    )  # what was set aside is no artifact any more
    good.write_bytes(
        b"\xff\xfe not even text"
    )  # the only copy now corrupt: not measured
    assert runner.last_valid(key, root, lambda *a: None) is None
    hidden = good.with_name("." + good.name)
    shutil.copy(moved, hidden)
    assert hidden not in runner.find_existing(
        key, root
    )  # a hidden file never counts as measured


# -- preflight: what cannot fit is a failed artifact, without loading -------------------------
def test_fit_check_names_needs_and_has():
    facts = {
        "context_length": 4096,
        "block_count": 32,
        "embedding_length": 4096,
        "head_count": 32,
        "head_count_kv": 8,
        "tensor_bytes_by_type": {"Q4_0": 4 << 30},
    }
    assert fit.check(facts, 2048, 64 << 30).ok
    assert fit.check(
        facts, 8192, 64 << 30
    ).ok  # beyond the trained context is llama.cpp's business, if it fits
    v = fit.check(facts, 10**9, 64 << 30)
    assert (
        not v.ok
        and v.message.startswith("does not fit: needs at least ")
        and "TiB" in v.message
    )
    assert (
        "1,000,000,000 tokens; the model was trained for 4,096" in v.message
        and "has 64.0 GiB" in v.message
    )
    # 4 GiB of weights + 4096 tokens x 32 layers x 8 KV heads x (128 + 128) values x 4.5 bits (0.14 GiB) = 4.1 GiB
    v = fit.check(facts, 4096, 1 << 30)
    assert (
        not v.ok
        and "needs at least 4.1 GiB" in v.message
        and "has 1.0 GiB" in v.message
    )
    assert fit.check(facts, None, 1).ok  # a backend that loads nothing here
    assert fit.check(
        dict(facts, sliding_window=512), 10**6, 64 << 30
    ).ok  # one full-attention layer only: 1.1 GiB of KV


@pytest.mark.model
def test_absurd_lengths_become_failed_artifacts_without_loading(
    data_env, embedded_model
):
    write_matrix(
        data_env,
        "absurd",
        "schema_version: 1\nname: absurd\nmodels: [gemma3-270m-q4_k_m]\n"
        "tests: [pp1000000000, tg1000000000]\n",
    )
    t0 = time.monotonic()
    peak = psutil.Process().memory_info().rss
    report = runner.run_matrix("absurd")
    assert (
        time.monotonic() - t0 < 30
        and psutil.Process().memory_info().rss - peak < 512 << 20
    )
    assert len(report.failed) == 2 and not report.measured
    for path in report.failed:
        doc = artifacts.load(path)
        assert doc["error"]["kind"] == "refused"
        msg = doc["error"]["message"]
        assert (
            msg.startswith("does not fit: needs at least ")
            and "1,000,000,000 tokens" in msg
            and "free memory" in msg
        )
        assert doc["resources"]["wall_s"] == 0.0  # no child process ran
