"""When a measurement may be trusted: the quiet-machine policy, one owner for the runner and the analyses.

A shared machine's *load average* is a poor signal of interference: processes running under
``nice 19`` (tests, site builds) raise it by one each, yet take almost no CPU from a measurement at
nice 0 (CFS weights 15 against 1024). What does take CPU from it is other work at its own priority.
So the signal is **others' CPU share at the measurement's priority**, read from ``/proc/stat``
over an interval: the host's busy time outside the ``nice`` column (user, system, irq, softirq,
steal), minus the CPU time the measuring process itself used in that interval (``wait4``'s rusage),
divided by the interval's wall time × the logical cores. The load average is recorded beside it and
decides only where ``/proc/stat`` cannot be read.

The rule (:data:`RULE`, shown on Methodology):

* **before a run**, wait (at most ``wait_max_s``) until a ``probe_s`` window shows others' share at
  most ``max_share``; past the bound, run anyway (the run is then judged like any other);
* **after it**, the run was *disturbed* when others' share over its own interval exceeded
  ``max_share``: it is measured again, at most ``max_attempts`` attempts in all;
* the artifact records every attempt (its wait, share, load averages, wall time) and which one was
  kept: the first quiet one, else the least disturbed, and then the run is kept **marked disturbed**.

A disturbed run is excluded from every figure and verdict (pipelines.facts, as a failed run is) and
counted where its page says how many runs it rests on; the run stays on disk and in the Runs list.

**Autogroup** (Linux ``sched_autogroup``, on by default in many kernels, and on this project's VM): CFS then
shares the CPU between *sessions* first, and ``nice`` orders processes only within one session; a ``nice 19``
process in another session (a test suite's worker started with ``setsid``) competes with a measurement as an
equal (found here: a nice-19 test worker took half the CPU from a nice-0 measurement in another session). So
the runner gives the measuring child's session the priority nice was meant to give it
(:func:`protect`: autogroup nice ``PROTECT_NICE`` for a run at nice 0, the runner's own nice for a niced run,
so a niced test's children yield as nice intends); where it cannot (not permitted), niced work counts as
others' CPU. A measurement that itself runs niced (the runner under ``nice``) competes with niced work too: then the
``nice`` column counts as well. Known blind spots, stated: time of processes at a small positive nice
(1–9, e.g. a compile at nice 5, which still takes a quarter of a core from nice 0) sits in the ``nice``
column and is not counted; the kernel time of niced processes sits in ``system`` and is.
``ALMANAC_QUIET=off`` turns the waiting, the re-measuring and the verdict off (one attempt, its share still
recorded, the run judged by nobody: ``disturbed`` is null and the run counts), for tests and for hosts where
nothing else runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

#: Bump when the rule below changes what a kept run means (recorded with every attempt record).
POLICY_VERSION = (
    2  # 2: autogroup-aware (the measuring session protected, else niced work counted)
)
PROTECT_NICE = (
    -19
)  # the autogroup nice a nice-0 measurement's session gets (where permitted)
AUTOGROUP_SYSCTL = "/proc/sys/kernel/sched_autogroup_enabled"
ENV = "ALMANAC_QUIET"
PROC_STAT = "/proc/stat"


@dataclass(frozen=True)
class Policy:
    """The thresholds of the quiet-machine rule."""

    max_share: float = 0.15  # others' CPU at nice <= 0, as a share of all logical cores
    max_load_per_core: float = (
        1.0  # fallback only (no /proc/stat): 1-minute load average per core
    )
    probe_s: float = 1.0  # the window a before-run check reads
    wait_max_s: float = 120.0  # the longest wait for a quiet slot before a run
    max_attempts: int = 3  # runs in all, the first included
    enabled: bool = (
        True  # off: one attempt, no wait, no verdict (the share still recorded)
    )

    @classmethod
    def from_env(cls) -> Policy:
        off = os.environ.get(ENV, "").strip().lower() in ("0", "off", "no", "false")
        return cls(enabled=not off)


DEFAULT = Policy()
RULE = (
    f"a run is quiet when others' CPU share at the measurement's priority stayed at most "
    f"{100 * DEFAULT.max_share:g}% of the host's logical cores over the run: /proc/stat's busy time outside "
    "the nice column (user, system, irq, softirq, steal) minus the run's own CPU time (wait4), over its wall "
    "time × cores; processes under nice 1–19 are not counted (they yield to a nice-0 run; a niced run counts "
    "them too; under Linux autogroup, where nice orders processes only within a session, the runner gives the "
    f"measuring child's session autogroup nice {PROTECT_NICE}, and where it cannot, niced work counts too), the "
    "load average "
    f"is recorded and decides only where /proc/stat is unreadable (quiet at ≤ {DEFAULT.max_load_per_core:g} "
    f"per core). Before each run the runner waits up to {DEFAULT.wait_max_s:g} s for a {DEFAULT.probe_s:g}-s "
    f"window that is quiet; a disturbed run is measured again, {DEFAULT.max_attempts} attempts at most; the "
    "first quiet attempt is kept, else the least disturbed one, marked disturbed and left out of every "
    "figure and verdict"
)


@dataclass(frozen=True)
class Snapshot:
    """The host's CPU clock at one instant: busy ticks outside ``nice``, all ticks, the time, the load."""

    t: float
    busy: (
        int | None
    )  # user + system + irq + softirq + steal (USER_HZ ticks), None: unreadable
    loadavg_1m: float | None
    nice_ticks: int | None = None  # the nice column: niced processes' user time


def _hz() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def snapshot() -> Snapshot:
    busy: int | None = None
    nice: int | None = None
    try:
        with open(PROC_STAT, encoding="ascii") as fh:
            f = [int(x) for x in fh.readline().split()[1:9]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = f + [0] * (8 - len(f))
        busy = user + system + irq + softirq + steal
    except (OSError, ValueError):
        pass
    try:
        load: float | None = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = None
    return Snapshot(time.monotonic(), busy, load, nice)


def own_nice() -> int:
    """This process's nice value (a child measures at its parent's)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0)
    except (OSError, AttributeError):
        return 0


def cores() -> int:
    return os.cpu_count() or 1


def autogroup_enabled() -> bool:
    try:
        with open(AUTOGROUP_SYSCTL, encoding="ascii") as fh:
            return fh.read().strip() == "1"
    except OSError:
        return False


def protect(pid: int) -> int | None:
    """Give a measuring child's session (autogroup) the priority nice means it to have: PROTECT_NICE for a
    run at nice 0, the runner's own nice for a niced run (so it yields). The autogroup nice set, or None where
    autogroup is off or the kernel refused (then niced work counts as others', :func:`others_share`)."""
    if not autogroup_enabled():
        return None
    mine = own_nice()
    target = mine if mine > 0 else PROTECT_NICE
    try:
        with open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as fh:
            fh.write(str(target))
        return target
    except OSError:
        return None


def others_share(
    before: Snapshot,
    after: Snapshot,
    own_cpu_s: float = 0.0,
    n_cores: int | None = None,
    niced: bool | None = None,
) -> float | None:
    """Others' CPU at the measurement's priority over [before, after] as a share of all cores (0..1);
    None when unreadable. A measurement at nice 0 does not count the nice column; one that is itself
    niced (``niced``, default: this process is) counts it too, since niced work then competes with it."""
    wall = after.t - before.t
    if before.busy is None or after.busy is None or wall <= 0:
        return None
    ticks = after.busy - before.busy
    if (
        niced is None
    ):  # niced work competes with a niced run, and under unprotected autogroup with any
        niced = own_nice() > 0 or autogroup_enabled()
    if niced and None not in (
        before.nice_ticks,
        after.nice_ticks,
    ):
        ticks += after.nice_ticks - before.nice_ticks  # type: ignore[operator]
    other_s = ticks / _hz() - max(own_cpu_s, 0.0)
    return round(min(max(other_s / (wall * (n_cores or cores())), 0.0), 1.0), 4)


def is_disturbed(
    share: float | None,
    loadavg_1m: float | None,
    n_cores: int | None = None,
    policy: Policy = DEFAULT,
) -> bool | None:
    """The rule on one interval: others' share above ``max_share`` (or, without a share, the load average
    per core above ``max_load_per_core``); None when neither was recorded."""
    if share is not None:
        return share > policy.max_share
    if loadavg_1m is not None:
        return loadavg_1m / (n_cores or cores()) > policy.max_load_per_core
    return None


def _expected_protection() -> int | None:
    """The autogroup nice a child will likely get (root may set it), for the before-run probe."""
    if not autogroup_enabled() or os.geteuid() != 0:
        return None
    return own_nice() if own_nice() > 0 else PROTECT_NICE


def wait_for_quiet(policy: Policy = DEFAULT) -> dict[str, Any]:
    """Probe ``probe_s`` windows until one is quiet or ``wait_max_s`` has passed: how long it waited, the
    last window's share and whether it was quiet."""
    t0 = time.monotonic()
    while True:
        a = snapshot()
        time.sleep(policy.probe_s)
        b = snapshot()
        share = others_share(a, b, niced=counts_nice(_expected_protection()))
        quiet = not is_disturbed(share, b.loadavg_1m, policy=policy)
        waited = time.monotonic() - t0
        if quiet or waited + policy.probe_s > policy.wait_max_s:
            return {
                "waited_s": round(waited, 2),
                "share_before": share,
                "quiet_before": quiet,
            }


Out = TypeVar("Out")


@dataclass
class Attempt:
    """One attempt's interference, as the artifact records it."""

    share: float | None
    loadavg_1m_before: float | None
    loadavg_1m_after: float | None
    wall_s: float
    own_cpu_s: float | None
    disturbed: bool | None
    waited_s: float = 0.0
    share_before: float | None = None
    autogroup_nice: int | None = (
        None  # the measuring session's autogroup nice (protect), None: not set
    )


def counts_nice(autogroup_nice: int | None) -> bool:
    """Whether niced work competes with the measurement: it is niced itself, or autogroup is on and its
    session was not protected."""
    return own_nice() > 0 or (autogroup_enabled() and autogroup_nice is None)


def attempt_of(
    before: Snapshot,
    after: Snapshot,
    own_cpu_s: float | None,
    policy: Policy = DEFAULT,
    autogroup_nice: int | None = None,
) -> Attempt:
    """Judge the interval of one child process (called by the runner around it)."""
    share = others_share(
        before, after, own_cpu_s or 0.0, niced=counts_nice(autogroup_nice)
    )
    return Attempt(
        share,
        before.loadavg_1m,
        after.loadavg_1m,
        round(after.t - before.t, 3),
        None if own_cpu_s is None else round(own_cpu_s, 3),
        is_disturbed(share, before.loadavg_1m, policy=policy),
        autogroup_nice=autogroup_nice,
    )


def measure(
    run: Callable[[], Out],
    judge: Callable[[Out], Attempt | None],
    policy: Policy | None = None,
    retry: Callable[[Out], bool] = lambda o: True,
) -> tuple[Out, dict[str, Any]]:
    """Run ``run`` until an attempt is quiet (``judge`` reads its Attempt), at most ``max_attempts``;
    ``retry`` says whether an outcome may be measured again at all (a failed run is not). Returns the
    kept outcome and the record the artifact stores (``resources.quiet``)."""
    policy = policy or Policy.from_env()
    outcomes: list[Out] = []
    attempts: list[Attempt] = []
    for _ in range(policy.max_attempts if policy.enabled else 1):
        wait = wait_for_quiet(policy) if policy.enabled else {}
        out = run()
        a = judge(out) or Attempt(None, None, None, 0.0, None, None)
        a.waited_s = wait.get("waited_s", 0.0)
        a.share_before = wait.get("share_before")
        outcomes.append(out)
        attempts.append(a)
        if not a.disturbed or not retry(out):
            break
    quiet = [i for i, a in enumerate(attempts) if a.disturbed is False]
    if quiet:
        kept = quiet[0]
    else:  # none quiet: the least disturbed (unknown shares last)
        kept = min(
            range(len(attempts)),
            key=lambda i: (attempts[i].share is None, attempts[i].share or 0.0),
        )
    return outcomes[kept], {
        "policy": POLICY_VERSION,
        "enabled": policy.enabled,
        "nice": own_nice(),
        "max_share": policy.max_share,
        "attempts": [asdict(a) for a in attempts],
        "kept": kept,
        # off: the user vouches for the host; the run is not judged (a verdict would make what counts
        # depend on whatever else ran, the very thing turning the policy off says not to look at)
        "disturbed": attempts[kept].disturbed if policy.enabled else None,
    }


def record_disturbed(q: Mapping[str, Any] | None) -> bool:
    """Whether an artifact's ``resources.quiet`` record says its kept run was disturbed (False when absent:
    runs measured before the policy carry only their load average, judged by :func:`row_usable`)."""
    return bool(q) and q.get("disturbed") is True  # type: ignore[union-attr]


def row_usable(
    share: float | None,
    loadavg_1m: float | None,
    n_cores: int,
    policy: Policy = DEFAULT,
) -> bool:
    """A pooled run (benchmarks/fleet_aa.py) counts when the rule calls its interval quiet; a run with
    neither signal recorded does not."""
    return is_disturbed(share, loadavg_1m, n_cores, policy) is False
