"""One interface for every way a matrix reaches other machines: a scheduler.

A scheduler names its targets (hosts, nodes) before anything runs, so bad input is refused
while nothing is written, then runs a matrix on each and brings the artifacts home, one
:class:`~runtime.remote.controller.HostOutcome` per target. Registered by name and imported
lazily (``invoke bench --scheduler NAME``):

* ``ssh``: inventory hosts over SSH, a thread per host (runtime.remote.controller.run_hosts);
* ``slurm``: one exclusive batch job per (node, matrix) (runtime.remote.slurm);
* ``k8s``: one Kubernetes Job manifest per (node, matrix), generated only (runtime.remote.kubernetes;
  untested against a cluster here).

"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any, Protocol

from core.errors import UserError

ProgressFn = Callable[[str, str, dict[str, Any]], None]

SCHEDULERS = {
    "ssh": "runtime.remote.schedulers:SshScheduler",
    "slurm": "runtime.remote.slurm:SlurmScheduler",
    "k8s": "runtime.remote.kubernetes:K8sScheduler",
}


class Scheduler(Protocol):
    name: str

    def targets(self) -> list[str]:
        """The hosts or nodes the matrix will run on (UserError for bad input; nothing written)."""
        ...

    def run(
        self, matrix: str, *, force: bool, retry_failed: bool, progress: ProgressFn
    ) -> list[Any]:
        """Run ``matrix`` on every target; one HostOutcome each, in the order of ``targets()``."""
        ...


def scheduler_class(name: str) -> type:
    spec = SCHEDULERS.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, SCHEDULERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(
            f"--scheduler: unknown scheduler {name!r}{hint}; known: {', '.join(SCHEDULERS)}"
        )
    module, _, cls = spec.partition(":")
    return getattr(importlib.import_module(module), cls)


class SshScheduler:
    """Inventory hosts over SSH (the ``ssh`` scheduler): runtime.remote.controller.run_hosts."""

    name = "ssh"

    def __init__(self, hosts: list[Any], log_dir: Any = None):
        self.hosts = hosts
        self.log_dir = log_dir

    def targets(self) -> list[str]:
        return [h.name for h in self.hosts]

    def run(
        self,
        matrix: str,
        *,
        force: bool = False,
        retry_failed: bool = False,
        progress: ProgressFn | None = None,
    ) -> list[Any]:
        from runtime.remote.controller import run_hosts

        return run_hosts(
            self.hosts,
            matrix,
            force=force,
            retry_failed=retry_failed,
            log_dir=self.log_dir,
            progress=progress,
        )
