"""`invoke bench`: run a benchmark matrix here, over SSH or through Slurm; `invoke
bench.fidelity`: our rates beside llama-bench's."""

from __future__ import annotations

import shlex
import sys

from invoke import Collection, Context, Exit, task

from almanac_tasks.errors import user_errors
from almanac_tasks.paths import ROOT
from almanac_tasks.progress import bench_printer
from almanac_tasks.report import matrix_done, say
from almanac_tasks.shell import run


@task(
    default=True,
    iterable=["host", "label", "nodelist", "node"],
    help={
        "matrix": "Matrix name in data/matrices/ or a path to a YAML file (default: default).",
        "force": "Measure again even when an artifact for the same configuration exists.",
        "retry_failed": "Measure again configurations whose last artifact is a failure.",
        "host": "Run on this inventory host over SSH instead of here (repeat for several; in parallel).",
        "label": "Run on every inventory host with this label (repeatable), e.g. --label gpu.",
        "inventory": "Hosts inventory (default: data/hosts.yaml).",
        "wait": "Seconds to wait for another run measuring on this host to finish (default 0: refuse at once).",
        "scheduler": "Run through a scheduler instead of here: "
        "slurm (one exclusive job per node), ssh (= --host/--label), "
        "k8s (one Kubernetes Job manifest per node, generated only).",
        "partition": "Slurm partition (default: the cluster's default partition).",
        "constraint": "Slurm node features (sbatch --constraint); a single feature also picks the nodes.",
        "nodelist": "Slurm node to run on (repeat for several; default: every node of the partition).",
        "time_limit": "Slurm time limit per job (sbatch --time: minutes or [D-]HH:MM:SS; default 60).",
        "account": "Slurm account to charge (sbatch --account).",
        "workdir": "Slurm: a folder every node sees (project snapshot, each node's data; default: the cache dir).",
        "python": "Slurm: the project's Python on the nodes (default: this Python); Kubernetes: in the image.",
        "requests_kept": "Load/capacity/concurrency tests: most request records an artifact stores per level "
        "(a seeded reservoir; default: the matrix's requests_kept, 1000).",
        "keep_all_requests": "Load/capacity/concurrency tests: write every request record of a sampled level "
        "beside the "
        "artifact (<artifact>.requests.jsonl.gz).",
        "emit_manifest": "Kubernetes (--scheduler k8s): write one Job manifest per (node, matrix) into this "
        "folder (generate only; the default when --scheduler k8s).",
        "namespace": "Kubernetes: the namespace of the Jobs (default: default).",
        "image": "Kubernetes: the container image with the project installed.",
        "node": "Kubernetes: a node to run on (repeat for several; required).",
        "known_nodes": "Kubernetes: a file of the cluster's nodes (`kubectl get nodes -o name`) to check "
        "--node against (default: ask kubectl where it answers).",
        "pvc": "Kubernetes: the PersistentVolumeClaim the artifacts are written to (default almanac-data).",
        "cpu": "Kubernetes: the node's allocatable CPU, requested = limit (exclusive use), e.g. 16.",
        "memory": "Kubernetes: the node's allocatable memory, requested = limit, e.g. 60Gi.",
        "gpus": "Kubernetes: the node's GPUs (nvidia.com/gpu), requested = limit.",
    },
)
@user_errors
def bench(
    c: Context,
    matrix: str = "default",
    force: bool = False,
    retry_failed: bool = False,
    host: list[str] | None = None,
    label: list[str] | None = None,
    inventory: str = "",
    wait: float = 0.0,
    scheduler: str = "",
    partition: str = "",
    constraint: str = "",
    nodelist: list[str] | None = None,
    time_limit: str = "60",
    account: str = "",
    workdir: str = "",
    python: str = "",
    requests_kept: int = 0,
    keep_all_requests: bool = False,
    emit_manifest: str = "",
    namespace: str = "default",
    image: str = "",
    node: list[str] | None = None,
    known_nodes: str = "",
    pvc: str = "almanac-data",
    cpu: str = "",
    memory: str = "",
    gpus: int = 0,
) -> None:
    """Run a benchmark matrix here (or on inventory hosts over SSH, or Slurm nodes): one artifact per configuration.

    Configurations already measured (same model hash, settings, test, host, backend version)
    are skipped, so an interrupted matrix resumes where it stopped."""
    from core.errors import UserError
    from runtime.execution import runner

    if (requests_kept or keep_all_requests) and (scheduler or host or label):
        raise UserError(
            "set requests_kept / keep_all_requests in the matrix for a run on other machines "
            "(the options apply to a run here)",
            field="--requests-kept/--keep-all-requests",
        )
    if scheduler == "k8s":
        from runtime.remote.kubernetes import K8sOptions, emit_manifests, read_node_file

        for line in emit_manifests(
            matrix,
            K8sOptions(
                nodes=list(node or []),
                namespace=namespace,
                image=image,
                python=python,
                time_limit=str(time_limit),
                cpu=str(cpu),
                memory=str(memory),
                gpus=int(gpus),
                pvc=pvc,
                known_nodes=read_node_file(known_nodes) if known_nodes else None,
                force=force,
                retry_failed=retry_failed,
            ),
            emit_manifest or "k8s-jobs",
        ):
            say(line)
        return
    if emit_manifest:
        raise UserError("goes with --scheduler k8s", field="--emit-manifest")
    if scheduler and scheduler != "ssh":
        from runtime.remote.fleet_cli import bench_on
        from runtime.remote.schedulers import scheduler_class
        from runtime.remote.slurm import SlurmOptions

        cls = scheduler_class(scheduler)
        opts = SlurmOptions(
            partition=partition,
            constraint=constraint,
            nodelist=list(nodelist or []),
            time_limit=str(time_limit),
            account=account,
            workdir=workdir,
            python=python,
        )
        if not bench_on(cls(opts), matrix, force=force, retry_failed=retry_failed):
            raise Exit(code=1)
        return
    if host or label:
        from runtime.remote.cli import bench_remote

        if not bench_remote(
            matrix,
            hosts=list(host or []),
            labels=list(label or []),
            inventory=inventory or None,
            force=force,
            retry_failed=retry_failed,
        ):
            raise Exit(code=1)
        return
    report = runner.run_matrix(
        matrix,
        force=force,
        retry_failed=retry_failed,
        on_event=bench_printer(),
        lock_wait_s=float(wait),
        keep_all_requests=bool(keep_all_requests),
        requests_kept=int(requests_kept) or None,
    )
    matrix_done(report)


@task(
    help={
        "model": "Registry name or .gguf path (default: the embedded model).",
        "reps": "Repetitions per invocation of each tool (llama-bench -r).",
        "rounds": "Alternating rounds (each tool runs reps x rounds repetitions).",
        "fa": "Flash attention: off, on or auto.",
        "threads": "Threads for both tools (default: physical cores).",
        "out": "Write the result JSON here.",
        "no_naive": "Skip the naive Llama.eval loop.",
        "check": "Exit 1 when a ratio ours/llama-bench lies outside 0.97-1.03.",
    }
)
def fidelity(
    c: Context,
    model: str = "gemma3-270m-q4_k_m",
    reps: int = 5,
    rounds: int = 3,
    fa: str = "auto",
    threads: int = 0,
    out: str = "",
    no_naive: bool = False,
    check: bool = False,
) -> None:
    """Our pp512/tg128 beside llama-bench's (built from the vendored llama.cpp) on this machine: the ratios."""
    args = (
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fidelity.py"),
            "--model",
            model,
            "--reps",
            str(reps),
            "--rounds",
            str(rounds),
            "--fa",
            fa,
        ]
        + (["--threads", str(threads)] if threads else [])
        + (["--out", out] if out else [])
        + (["--no-naive"] if no_naive else [])
        + (["--check"] if check else [])
    )
    result = run(c, " ".join(shlex.quote(a) for a in args))
    if result.exited:
        raise Exit(code=result.exited)


ns = Collection("bench", bench, fidelity)
