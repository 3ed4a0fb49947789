"""`invoke validate` and `invoke index`: the artifacts under data/, checked and indexed."""

from __future__ import annotations

from invoke import Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import note, say


@task
@user_errors
def validate(c: Context) -> None:
    """Check every artifact under data/ against its JSON Schema and version, and what servers
    reported against what can be."""
    from core import artifacts
    from core.errors import ArtifactErrors
    from core.paths import data_dir

    count, problems = artifacts.validate_tree(data_dir())
    if not problems:  # rates against the host's measured bandwidth (typed records: once every file is valid)
        from pipelines.plausible_rates import beyond_bound

        problems = beyond_bound(data_dir())
    for p in problems:
        note(p)
    if problems:  # every bad file one line (two copies of one artifact: one line naming both), the count last
        raise Exit(str(ArtifactErrors(problems, count)), code=1)
    say(f"{count} artifacts valid")


@task(
    name="index",
    help={
        "rebuild": "Delete the index first and build it again from the artifact files."
    },
)
@user_errors
def index_task(c: Context, rebuild: bool = False) -> None:
    """Bring the columnar index over data/'s artifacts up to date (Parquet in the cache; pipelines.index)."""
    import shutil

    from pipelines import index

    if rebuild:
        shutil.rmtree(index.index_dir(), ignore_errors=True)
    _, done = index.update()
    for line in done.messages:
        note(line)
    say(
        f"index {index.index_dir()}: {done.rows} artifacts ({done.added} added, {done.changed} changed, "
        f"{done.removed} removed, {done.kept} unchanged)"
    )
