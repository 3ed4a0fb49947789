"""`invoke plan.*`: plans from a model file alone (pipelines.memory)."""

from __future__ import annotations

from invoke import Collection, Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(
    name="memory",
    help={
        "model": "A .gguf path or a registry name (default: the embedded model).",
        "host_ram_gib": "Host RAM to check against, GiB (default: this machine's).",
    },
)
@user_errors
def plan_memory(
    c: Context, model: str = "gemma3-270m-q4_k_m", host_ram_gib: float = 0.0
) -> None:
    """Predict the memory of any GGUF (weights, KV cache per context and cache type, compute) and what fits where."""
    import psutil

    from pipelines import memory
    from runtime.models import registry as models

    if model.endswith(".gguf"):
        shape = memory.ModelShape.from_gguf(model)
    else:
        ref = models.resolve(model)
        shape = memory.ModelShape.from_facts(ref.facts, ref.name)
    ram = (
        int(float(host_ram_gib) * 2**30)
        if host_ram_gib
        else psutil.virtual_memory().total
    )
    say(memory.plan_text(shape, memory.load_planner_settings(), ram))


ns = Collection("plan", plan_memory)
