"""`invoke bench --scheduler NAME`: a progress line per host or node while a scheduler
(runtime.remote.schedulers) runs a matrix, then a summary line each.

Every event shows: queued (with the scheduler's reason), running, connecting and preparing (SSH),
each configuration as it finishes, and how the target finished. Anything a host or job sends is
escaped before Rich renders it (a name or message is never markup)."""

from __future__ import annotations

import threading
from typing import Any


def bench_on(
    scheduler: Any, matrix: str, *, force: bool = False, retry_failed: bool = False
) -> bool:
    """Run ``matrix`` through ``scheduler``; True when every target finished its run."""
    from rich.console import Console
    from rich.markup import escape
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
        tasks = {n: bar.add_task("waiting", total=None, host=escape(n)) for n in names}

        def progress(name: str, event: str, info: dict[str, Any]) -> None:
            with lock:
                t = tasks.get(name)
                if t is None:
                    return
                what = f"{info.get('model')} · {info.get('test')}"
                if event == "queued":
                    why = f" ({info['reason']})" if info.get("reason") else ""
                    bar.update(
                        t, description=escape(f"queued: job {info.get('job')}{why}")
                    )
                elif event == "running":
                    bar.update(
                        t,
                        total=info.get("total"),
                        description=escape(f"running: job {info.get('job')}"),
                    )
                elif event == "connect":
                    bar.update(t, description="connecting")
                elif event == "prepare":
                    bar.update(t, description="preparing Python")
                elif event == "run":
                    if "total" in info and "index" not in info:
                        bar.update(t, total=info["total"], description="running")
                    else:
                        bar.update(t, description=escape(what))
                elif event in ("done", "skip"):
                    bar.advance(t)
                    bar.update(t, description=escape(f"{what}: {info.get('status')}"))
                elif event == "finished":
                    ok = info.get("status") == "ok"
                    bar.update(
                        t,
                        description="[green]ok"
                        if ok
                        else f"[red]failed[/]: {escape(str(info.get('message')))}",
                    )

        outcomes = scheduler.run(
            matrix, force=force, retry_failed=retry_failed, progress=progress
        )
    all_ok = True
    for o in outcomes:
        job = getattr(o, "job", None)
        line = (
            f"{o.host}: {o.status}"
            + (f" ({o.error_kind})" if o.error_kind else "")
            + f", {len(o.measured)} measured, {len(o.failed)} failed, {len(o.fetched)} artifacts fetched"
            + (f", {len(o.invalid)} invalid refused" if o.invalid else "")
            + (f"; log {o.log}" if o.log else "")
            + (f"; job {job['job_id']} ({job.get('state')})" if job else "")
        )
        console.print(line, markup=False)
        for bad in o.invalid:
            console.print(f"  refused: {bad}", markup=False)
        if o.status != "ok" or o.invalid:
            all_ok = False
    return all_ok
