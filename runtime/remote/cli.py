"""`invoke bench --host NAME` / `--label LABEL`: progress lines and a summary per host."""

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
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from runtime.remote.controller import run_hosts

    path = Path(inventory) if inventory else hosts_mod.inventory_path()
    inv = hosts_mod.load_inventory(path)
    chosen = hosts_mod.select(inv, hosts, labels, source=relpath(path))
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
        tasks = {
            h.name: bar.add_task("waiting", total=None, host=escape(h.name))
            for h in chosen
        }

        def progress(name: str, event: str, info: dict[str, Any]) -> None:
            with lock:
                t = tasks[name]
                if event == "connect":
                    bar.update(t, description="connecting")
                elif event == "prepare":
                    bar.update(t, description="preparing Python")
                elif event == "run":
                    if "total" in info and "index" not in info:
                        bar.update(t, total=info["total"], description="running")
                    else:
                        bar.update(
                            t,
                            description=escape(
                                f"{info.get('model')} · {info.get('test')}"
                            ),
                        )
                elif event in ("done", "skip"):
                    bar.advance(t)
                    status = info.get("status")
                    bar.update(
                        t,
                        description=escape(
                            f"{info.get('model')} · {info.get('test')}: {status}"
                        ),
                    )
                elif event == "finished":
                    desc = (
                        "[green]ok"
                        if info.get("status") == "ok"
                        else f"[red]failed[/]: {escape(str(info.get('message')))}"
                    )
                    bar.update(t, description=desc)

        outcomes = run_hosts(
            chosen, matrix, force=force, retry_failed=retry_failed, progress=progress
        )
    all_ok = True
    for o in outcomes:
        line = (
            f"{o.host}: {o.status}"
            + (f" ({o.error_kind})" if o.error_kind else "")
            + f", {len(o.measured)} measured, {len(o.failed)} failed, {len(o.fetched)} artifacts fetched"
            + (f", {len(o.invalid)} invalid refused" if o.invalid else "")
            + f"; log {o.log}"
        )
        console.print(line, markup=False)
        if o.status != "ok" or o.invalid:
            all_ok = False
    return all_ok
