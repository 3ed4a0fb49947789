"""`invoke serve.*`: serving matrices (in process, llama_cpp.server, llama-server on
loopback) and capacity at SLO."""

from __future__ import annotations

from invoke import Collection, Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.progress import bench_printer
from almanac_tasks.report import matrix_done, say


@task(
    name="bench",
    help={
        "force": "Measure again even when artifacts for the same configurations exist.",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
        "matrices": "Comma-separated matrices to run in order (default: "
        "serving-inprocess,serving,serving-llama-server).",
    },
)
@user_errors
def serve_bench(
    c: Context,
    force: bool = False,
    retry_failed: bool = False,
    matrices: str = "serving-inprocess,serving,serving-llama-server",
) -> None:
    (
        """Serving: in process, then llama_cpp.server and llama-server on loopback """
        """(the same requests; cold/warm, concurrency)."""
    )
    from runtime.execution import runner

    for name in [m.strip() for m in matrices.split(",") if m.strip()]:
        report = runner.run_matrix(
            name, force=force, retry_failed=retry_failed, on_event=bench_printer()
        )
        matrix_done(report)


CAPACITY_MATRICES = (
    "serving-capacity,serving-capacity-poisson,serving-capacity-probe,serving-capacity-np1,"
    "serving-capacity-llama-cpp-server"
)


@task(
    name="capacity",
    help={
        "matrices": f"Comma-separated matrices to run in order (default: {CAPACITY_MATRICES}; "
        "serving-capacity-sweep and serving-capacity-sweep-high are the exhaustive "
        "Poisson sweep the search is checked against).",
        "force": "Measure again even when artifacts for the same configurations exist (an A/A "
        "repeat: the new artifact supersedes on the pages, the older one stays on disk).",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
    },
)
@user_errors
def serve_capacity(
    c: Context,
    matrices: str = CAPACITY_MATRICES,
    force: bool = False,
    retry_failed: bool = False,
) -> None:
    (
        """Capacity at SLO: the highest users / request rate whose p95 latencies meet """
        """the SLOs, with its interval; the endpoint probe."""
    )
    from pipelines.serving import capacity_lines
    from runtime.execution import runner

    for name in [m.strip() for m in matrices.split(",") if m.strip()]:
        report = runner.run_matrix(
            name, force=force, retry_failed=retry_failed, on_event=bench_printer()
        )
        for line in capacity_lines(report.measured + report.failed + report.skipped):
            say("  " + line)
        matrix_done(report)


ns = Collection("serve", serve_bench, serve_capacity)
