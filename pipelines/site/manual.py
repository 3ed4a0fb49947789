"""The task manual: every invoke task with its help, read from tasks.py's collection."""

from __future__ import annotations

from typing import Any

from core.paths import project_root
from pipelines.site.markdown import code, prose, table


def load_collection() -> Any:
    from invoke import Collection
    from invoke.loader import FilesystemLoader

    module, _ = FilesystemLoader(start=str(project_root())).load("tasks")
    return Collection.from_module(module)


def task_rows(ns: Any | None = None) -> list[dict[str, Any]]:
    """One record per task: dotted name, first docstring line, and its options with help."""
    ns = ns or load_collection()
    rows = []
    for primary, aliases in sorted(ns.task_names.items()):
        task = ns[primary]
        name = min(
            [primary, *aliases], key=len
        )  # "bench" rather than "bench.bench" for a default task
        doc = (task.__doc__ or "").strip()
        opts = []
        for arg in task.get_arguments():
            opts.append(
                {
                    "flag": "--" + arg.name.replace("_", "-"),
                    "help": arg.help or "",
                    "default": arg.default,
                }
            )
        rows.append(
            {
                "name": name,
                "aliases": sorted({primary, *aliases} - {name}),
                "synopsis": doc.splitlines()[0] if doc else "",
                "options": opts,
            }
        )
    return rows


def manual() -> str:
    out = []
    for r in task_rows():
        opts = (
            "<br>".join(f"{code(o['flag'])} {prose(o['help'])}" for o in r["options"])
            or "—"
        )
        also = "".join(f"<br>also {code('invoke ' + a)}" for a in r["aliases"])
        out.append([code(f"invoke {r['name']}") + also, prose(r["synopsis"]), opts])
    return table(["task", "what it does", "options"], out)
