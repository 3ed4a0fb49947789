"""`invoke bench --host NAME` / `--label LABEL` / `--scheduler slurm`: a progress line per host or
node (queued, running, each configuration, finished) and a summary line each."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from core.paths import relpath
from runtime.hosts import inventory as hosts_mod


def bench_remote(
    matrix: str,
    *,
    hosts: list[str],
    labels: list[str],
    inventory: str | None = None,
    force: bool = False,
    retry_failed: bool = False,
) -> bool:
    """Run ``matrix`` on the selected hosts; True when every host finished its run."""
    from runtime.remote.controller import SshScheduler

    path = Path(inventory) if inventory else hosts_mod.inventory_path()
    inv = hosts_mod.load_inventory(path)
    chosen = hosts_mod.select(inv, hosts, labels, source=relpath(path))
    return bench_on(
        SshScheduler(chosen), matrix, force=force, retry_failed=retry_failed
    )


def bench_on(
    scheduler: Any, matrix: str, *, force: bool = False, retry_failed: bool = False
) -> bool:
    """Run ``matrix`` through a scheduler (runtime.remote.schedulers); True when every target finished."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    names = scheduler.targets()
    console = Console(stderr=True, highlight=False)
    lock = threading.Lock()
    with Progress(
        TextColumn("[bold]{task.fields[host]:<16}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks = {n: bar.add_task("waiting", total=None, host=n) for n in names}

        def progress(name: str, event: str, info: dict[str, Any]) -> None:
            with lock:
                t = tasks[name]
                if event == "queued":
                    why = f" ({info['reason']})" if info.get("reason") else ""
                    bar.update(t, description=f"queued: job {info.get('job')}{why}")
                elif event == "running":
                    bar.update(
                        t,
                        total=info.get("total"),
                        description=f"running: job {info.get('job')}",
                    )
                elif event == "connect":
                    bar.update(t, description="connecting")
                elif event == "prepare":
                    bar.update(t, description="preparing Python")
                elif event == "run":
                    if "total" in info and "index" not in info:
                        bar.update(t, total=info["total"], description="running")
                    else:
                        bar.update(
                            t, description=f"{info.get('model')} · {info.get('test')}"
                        )
                elif event in ("done", "skip"):
                    bar.advance(t)
                    status = info.get("status")
                    bar.update(
                        t,
                        description=f"{info.get('model')} · {info.get('test')}: {status}",
                    )
                elif event == "finished":
                    desc = (
                        "[green]ok"
                        if info.get("status") == "ok"
                        else f"[red]failed[/]: {info.get('message')}"
                    )
                    bar.update(t, description=desc)

        outcomes = scheduler.run(
            matrix, force=force, retry_failed=retry_failed, progress=progress
        )
    all_ok = True
    for o in outcomes:
        line = (
            f"{o.host}: {o.status}"
            + (f" ({o.error_kind})" if o.error_kind else "")
            + f", {len(o.measured)} measured, {len(o.failed)} failed, {len(o.fetched)} artifacts fetched"
            + (f", {len(o.invalid)} invalid refused" if o.invalid else "")
            + (f"; log {o.log}" if o.log else "")
            + (f"; job {o.job['job_id']} ({o.job.get('state')})" if o.job else "")
        )
        console.print(line, markup=False)
        for bad in o.invalid:
            console.print(f"  refused: {bad}", markup=False)
        if o.status != "ok" or o.invalid:
            all_ok = False
    return all_ok
