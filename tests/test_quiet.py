"""The quiet-machine policy (core.quiet): the rule on recorded intervals, the retry loop, and the runner
re-measuring a real run beside a real CPU hog (issue 32)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from core import quiet
from core.records.run import Resources


def snap(t: float, busy: int, nice: int = 0, load: float = 0.5) -> quiet.Snapshot:
    return quiet.Snapshot(t, busy, load, nice)


def test_share_counts_others_at_nice_0_minus_the_run_itself():
    hz = quiet._hz()
    # 10 s on 2 cores: 12 s busy outside nice, 8 s of it the run's own -> others 4 s of 20 = 0.2
    a, b = snap(0.0, 0, 0), snap(10.0, 12 * hz, 15 * hz)
    assert quiet.others_share(a, b, 8.0, 2, niced=False) == pytest.approx(0.2)
    # niced work (the nice column) does not count for a nice-0 run, and does for a niced one
    assert quiet.others_share(a, b, 12.0, 2, niced=False) == 0.0
    assert quiet.others_share(a, b, 12.0, 2, niced=True) == pytest.approx(0.75)
    assert quiet.others_share(a, snap(10.0, None), 0.0, 2) is None  # type: ignore[arg-type]


def test_niced_work_counts_where_it_competes(monkeypatch):
    monkeypatch.setattr(quiet, "own_nice", lambda: 0)
    monkeypatch.setattr(quiet, "autogroup_enabled", lambda: True)
    assert (
        quiet.counts_nice(None) is True
    )  # autogroup, session not protected: niced work competes
    assert quiet.counts_nice(quiet.PROTECT_NICE) is False
    monkeypatch.setattr(quiet, "autogroup_enabled", lambda: False)
    assert quiet.counts_nice(None) is False
    monkeypatch.setattr(quiet, "own_nice", lambda: 19)
    assert quiet.counts_nice(None) is True  # a niced run competes with niced work


def test_rule_thresholds_and_load_fallback():
    assert (
        quiet.is_disturbed(0.15, 9.0, 2) is False
    )  # at the threshold; the load is not read
    assert quiet.is_disturbed(0.16, 0.0, 2) is True
    assert quiet.is_disturbed(None, 2.0, 2) is False  # no /proc/stat: 1 per core
    assert quiet.is_disturbed(None, 2.1, 2) is True
    assert quiet.is_disturbed(None, None, 2) is None
    assert quiet.row_usable(None, None, 2) is False


def _attempts(shares):
    it = iter(shares)
    return lambda: next(it)


def test_measure_keeps_first_quiet_attempt_else_least_disturbed_marked():
    off = quiet.Policy(probe_s=0.0, wait_max_s=0.0, max_attempts=3)

    def judge(share):
        return quiet.Attempt(share, 1.0, 1.0, 1.0, 1.0, quiet.is_disturbed(share, None))

    kept, rec = quiet.measure(_attempts([0.5, 0.05, 0.0]), judge, off)
    assert (kept, rec["kept"], rec["disturbed"], len(rec["attempts"])) == (
        0.05,
        1,
        False,
        2,
    )
    kept, rec = quiet.measure(_attempts([0.5, 0.3, 0.9]), judge, off)
    assert (kept, rec["kept"], rec["disturbed"], len(rec["attempts"])) == (
        0.3,
        1,
        True,
        3,
    )
    assert [a["share"] for a in rec["attempts"]] == [0.5, 0.3, 0.9]
    # a failed outcome is not measured again; a disabled policy measures once
    _, rec = quiet.measure(_attempts([0.5, 0.0]), judge, off, retry=lambda o: False)
    assert len(rec["attempts"]) == 1 and rec["disturbed"] is True
    _, rec = quiet.measure(_attempts([0.5, 0.0]), judge, quiet.Policy(enabled=False))
    assert len(rec["attempts"]) == 1 and rec["enabled"] is False
    # off: the share is recorded, the run is judged by nobody and counts
    assert rec["attempts"][0]["share"] == 0.5 and rec["disturbed"] is None
    assert Resources.from_dict({"quiet": rec}).disturbed is False
    assert Resources.from_dict({}).disturbed is False  # measured before the policy


# -- the runner beside a real CPU hog -----------------------------------------------------------
def _pp64_job():
    from runtime.execution import matrix as matrix_mod
    from runtime.execution import runner
    from runtime.models import registry as models

    cfg = next(
        c for c in matrix_mod.load("noise").configurations() if c.test.name == "pp64"
    )
    ref = models.resolve(cfg.model)
    settings = runner.merged_settings(cfg, ref)
    return {
        "backend": cfg.backend,
        "model": ref.to_dict(),
        "settings": settings.model_dump(mode="json"),
        "test": cfg.test.model_dump(mode="json"),
    }, cfg.timeout_s


def _hog(nice: int, session: bool = False) -> subprocess.Popen:
    def lower() -> None:  # as root a hog may run at nice 0 beside a niced test process
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass

    p = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        preexec_fn=lower,
        start_new_session=session,  # as another suite's worker: its own autogroup
    )
    time.sleep(0.5)
    return p


def _run_beside(nice: int, embedded_model, session: bool = False):
    from runtime.execution import runner

    job, timeout_s = _pp64_job()
    hog = _hog(nice, session)
    try:
        policy = quiet.Policy(wait_max_s=3.0, max_attempts=2)
        return runner.run_quietly(job, timeout_s, policy=policy)
    finally:
        hog.kill()
        hog.wait()


@pytest.mark.timing
def test_nice0_hog_makes_the_runner_measure_again(embedded_model):
    out = _run_beside(0, embedded_model)
    rec = out.quiet_record
    assert out.exit_code == 0 and rec is not None
    assert len(rec["attempts"]) == 2  # disturbed, measured again, still disturbed
    assert rec["disturbed"] is True
    # one core of two busy with the hog: about half the host's CPU was others'
    assert all(a["share"] > 0.3 for a in rec["attempts"])
    assert all(
        a["waited_s"] >= 2.0 for a in rec["attempts"]
    )  # it waited for a quiet slot first


@pytest.mark.timing
@pytest.mark.parametrize("session", [False, True], ids=["same-session", "own-session"])
def test_nice19_hog_does_not(embedded_model, session):
    """A nice-19 hog yields to a nice-0 run: in the same session by nice, in its own session (autogroup)
    because the runner gives the measuring child's session PROTECT_NICE. Where that cannot be set under
    autogroup, the hog does take CPU from the run, and the runner must measure again (counts_nice)."""
    if quiet.own_nice() >= 19:
        pytest.skip(
            "the test runs at nice 19: a nice-19 hog shares the measurement's priority (run it at nice 0)"
        )
    out = _run_beside(19, embedded_model, session)
    rec = out.quiet_record
    assert out.exit_code == 0 and rec is not None
    if quiet.autogroup_enabled() and rec["attempts"][0]["autogroup_nice"] is None:
        assert rec["disturbed"] is True  # unprotected under autogroup: it must
        return
    assert len(rec["attempts"]) == 1, rec["attempts"]
    assert rec["disturbed"] is False
