"""`invoke host.*`: this host's memory bandwidth probe, and host ids given anew from each
artifact's own fingerprint."""

from __future__ import annotations

from invoke import Collection, Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(
    name="probe",
    help={
        "size_mib": "Size of each buffer in MiB (default: 256 or twice the last-level cache, whichever is larger).",
        "repetitions": "Timed copies and reads per thread count (default 5).",
        "threads": "Comma-separated thread counts (default: 1, physical cores, logical cores).",
    },
)
@user_errors
def host_probe(
    c: Context, size_mib: int = 0, repetitions: int = 5, threads: str = ""
) -> None:
    (
        """Measure this host's memory bandwidth (large copy and read-only pass) and """
        """store it as a host artifact in data/hosts/."""
    )
    from core.errors import ConfigError
    from core.paths import relpath
    from runtime.hosts import probe as hostprobe

    try:
        counts = [int(x) for x in threads.split(",") if x.strip()] or None
    except ValueError:
        raise ConfigError(
            f"expected comma-separated integers, got {threads!r}", field="threads"
        ) from None
    path = hostprobe.run_probe(int(size_mib) or None, int(repetitions), counts)
    from core import artifacts
    from core.records.host import HostRecord

    rec = HostRecord(artifacts.load(path))
    for what, entries in (("copy", rec.bandwidth), ("read", rec.read_bandwidth)):
        for b in entries:
            say(
                f"{what} {b.threads:>3} thread(s): {b.summary.mean:.2f} GB/s mean (best {b.best:.2f}, n={b.summary.n})"
            )
    say(f"host probe: {relpath(path)}")


@task(name="reidentify", help={"dry_run": "Only print what would change."})
@user_errors
def host_reidentify(c: Context, dry_run: bool = False) -> None:
    (
        """Give every artifact under data/ the host id its own fingerprint gives """
        """(data of an older almanac, two machines under one id)."""
    )
    from core import rehost
    from core.paths import data_dir

    plan = rehost.reidentify(data_dir(), dry_run=dry_run)
    for line in plan.summary():
        say(line)
    if dry_run and plan.moves:
        say("dry run: nothing written")


ns = Collection("host", host_probe, host_reidentify)
