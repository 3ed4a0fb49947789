"""`invoke all`, the README's main command: fetch the embedded model, measure it and the
reference workload, give a new host its noise estimate and bandwidth once, validate, build
the site, and say where this host stands."""

from __future__ import annotations

from invoke import Context, task

from almanac_tasks.ab import noise_task
from almanac_tasks.bench import bench
from almanac_tasks.data import validate
from almanac_tasks.errors import user_errors
from almanac_tasks.host import host_probe
from almanac_tasks.model import fetch
from almanac_tasks.report import say
from almanac_tasks.site import build_site

# What `invoke all` measures on this host: the default matrix, then the reference workload
# every host runs (data/matrices/reference.yaml), whose rows the cross-host pages compare.
ALL_MATRICES = "default,reference"


@task(
    name="all",
    help={
        "matrix": f"Comma-separated matrices to run in order (default: {ALL_MATRICES}: the embedded model, then "
        "the reference workload every host runs)."
    },
)
@user_errors
def all_(c: Context, matrix: str = ALL_MATRICES) -> None:
    (
        """Fetch the embedded model, benchmark it and the reference workload on this """
        """host, validate, build the site (if an input changed)."""
    )
    fetch(c)
    for name in [m.strip() for m in matrix.split(",") if m.strip()]:
        bench(c, matrix=name)
    _ensure_noise(c)
    _ensure_bandwidth(c)
    validate(c)
    build_site(
        c, "site", if_changed=True
    )  # nothing new (no input changed): the site already built stays
    _where_this_host_stands()


# The A/A `invoke all` runs once on a host with no run-to-run noise estimate: the same rule as `invoke noise`
# (warm-up dropped, until useful), with a budget that keeps it to about 3 minutes on a 2-core VM.
NOISE_FIRST_MAX_RUNS = 20


NOISE_FIRST_BUDGET_S = 150.0


def _ensure_noise(c: Context) -> None:
    """A fresh host has one run of everything, so no spread between runs: its single runs would have no
    interval and no rank beside the fleet. Once per host, an A/A by the noise rule (`invoke noise` with
    at most NOISE_FIRST_MAX_RUNS runs and NOISE_FIRST_BUDGET_S seconds) gives it one, or says the host
    is too noisy to rank."""
    from pipelines import noise as noise_mod
    from pipelines.runs import load_runs
    from runtime.hosts import fingerprint

    hid = fingerprint.host_id(fingerprint.fingerprint())
    missing = noise_mod.missing_classes(load_runs(), hid, ("rate:pp", "rate:tg"))
    if missing:
        say(
            f"no run-to-run noise estimate for this host yet ({', '.join(missing)}): an A/A until the estimate is "
            f"useful (at most {NOISE_FIRST_MAX_RUNS} runs and {NOISE_FIRST_BUDGET_S:.0f} "
            "s; `invoke noise` allows more)",
            flush=True,
        )
        noise_task.body(c, runs=NOISE_FIRST_MAX_RUNS, budget=NOISE_FIRST_BUDGET_S)


def _ensure_bandwidth(c: Context) -> bool:
    """The Roofline page's bound needs this host's memory bandwidth: measure it once (`invoke host.probe`)
    when this host has no bandwidth artifact yet (data/hosts/<host>/bandwidth-*.json). True when it ran."""
    from runtime.hosts import fingerprint
    from runtime.hosts import probe as hostprobe

    hid = fingerprint.host_id(fingerprint.fingerprint())
    if hostprobe.has_probe(hid):
        return False
    say(
        "no memory bandwidth measured on this host yet: `invoke host.probe` (for the Roofline page's bound)",
        flush=True,
    )
    host_probe.body(c)
    return True


def _where_this_host_stands() -> None:
    """The last lines of `invoke all`: this host on the Leaderboard's reference boards, beside whom."""
    from pipelines import facts, hostnames
    from pipelines.runs import load_runs
    from runtime.hosts import fingerprint

    hid = fingerprint.host_id(fingerprint.fingerprint())
    runs = load_runs()
    lines = facts.host_summary(facts.of(runs), hid)
    say(f"this host: {hostnames.label(runs, hid)} ({hid})")
    for line in lines or [
        "not on a reference board yet (no reference row measured here)"
    ]:
        say("  " + line)
