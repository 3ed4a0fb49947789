"""`invoke project` and `invoke gates`: the optimizations of data/optimizations.yaml,
projected for every role of data/usage_mix.yaml and decided by their go/no-go gates."""

from __future__ import annotations

from invoke import Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(name="project")
@user_errors
def project_task(c: Context) -> None:
    """Project every role of data/usage_mix.yaml with data/optimizations.yaml; record it in data/projections/."""
    from core import artifacts
    from core.paths import relpath
    from pipelines import dataset, projections
    from pipelines.runs import load_runs

    paths = projections.write_records(
        load_runs(), quality_docs=list(dataset.load().quality)
    )
    if not paths:
        raise Exit(
            "no host has a measured baseline for data/usage_mix.yaml: run `invoke bench` first",
            code=1,
        )
    for p in paths:
        doc = artifacts.load(p)
        counts = projections.entry_statuses(
            doc
        )  # from the figures, never the stored word
        say(
            f"{relpath(p)}: {counts['PROJECTED']} projected, {counts['VERIFIED']} verified, "
            f"{counts['MISSED']} missed, {counts['NO DATA']} roles without data"
        )


@task(name="gates")
@user_errors
def gates_task(c: Context) -> None:
    (
        """Check the go/no-go gates of data/optimizations.yaml on every host; record """
        """changed decisions in data/decisions/."""
    )
    from core.paths import relpath
    from pipelines import gates, projections
    from pipelines.quality import load_quality
    from pipelines.runs import load_runs

    catalogue = projections.load_catalogue()
    runs, quality = load_runs(), load_quality()
    hosts = gates.gate_hosts(catalogue, runs, quality)
    if not hosts:
        raise Exit(
            "no host has measurements for any gate of data/optimizations.yaml", code=1
        )
    for host in hosts:
        for og in gates.evaluate(catalogue, runs, quality, host):
            say(
                f"{host} {og.opt.id}: {og.decision} ("
                + ", ".join(f"{r.gate.id} {r.verdict}" for r in og.results)
                + ")"
            )
    paths = gates.write_decisions(
        catalogue, runs, quality, catalogue_file=projections.catalogue_path()
    )
    for p in paths:
        say(f"recorded {relpath(p)}")
    if not paths:
        say("no decision changed since the last record")
