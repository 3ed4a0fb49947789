"""`invoke import.*`: results measured by other tools, stored as our artifacts."""

from __future__ import annotations

from invoke import Collection, Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(
    help={
        "file": "llama-bench output (-o json or -o jsonl).",
        "host_name": "Host the results were measured on (default: this machine; its CPU must match cpu_info).",
        "model": "The model file (or registry name) llama-bench ran, when model_filename is not found as recorded.",
    },
    auto_shortflags=False,
)  # -h stays help
@user_errors
def llama_bench(
    c: Context, file: str, host_name: str | None = None, model: str | None = None
) -> None:
    """Import a llama-bench JSON file as run artifacts (every record, or nothing on bad input)."""
    from core.paths import relpath
    from runtime.importers import llama_bench as importer

    report = importer.import_file(file, host_name=host_name, model=model)
    for p in report.written:
        say(f"imported: {relpath(p)}")
    for p in report.skipped:
        say(f"already imported: {relpath(p)}")
    say(
        f"{report.source}: {len(report.written)} imported, {len(report.skipped)} already there"
    )


ns = Collection("import", llama_bench)
