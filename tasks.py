"""Inference Almanac tasks: `invoke --list` is the manual.

The root collection, built here and only here; the tasks live in ``almanac_tasks``, one
module per area, each namespaced area a collection of its own (``almanac_tasks/__init__.py``
says how they are laid out). A new task goes in its area's module; a new area is a module
and one line below.
"""

from __future__ import annotations

from invoke import Collection

from almanac_tasks import (
    ab,
    bench,
    compare,
    data,
    host,
    importers,
    model,
    optimizations,
    plan,
    quality,
    roles,
    serve,
    site,
    test,
    workflow,
)

ns = Collection(
    # typed at the root: `invoke all`, `invoke test`, ...
    workflow.all_,
    test.test,
    data.validate,
    data.index_task,
    optimizations.project_task,
    optimizations.gates_task,
    roles.roles_task,
    compare.compare,
    ab.noise_task,
    ab.ab_task,
    ab.bisect_task,
    # namespaced: `invoke site.build`, `invoke bench` (its default task), ...
    model.ns,
    bench.ns,
    site.ns,
    importers.ns,
    serve.ns,
    host.ns,
    plan.ns,
    quality.ns,
)
