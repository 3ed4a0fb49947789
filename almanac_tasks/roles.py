"""`invoke roles`: a configuration recommended per role and host (data/roles.yaml), with reasons."""

from __future__ import annotations

from invoke import Context, task

from almanac_tasks.errors import user_errors
from almanac_tasks.report import say


@task(name="roles")
@user_errors
def roles_task(c: Context) -> None:
    """Recommend a configuration per role and host from the artifacts (data/roles.yaml), with reasons."""
    from pipelines import quality as quality_mod
    from pipelines import roles
    from pipelines.runs import load_runs

    reg = roles.load_roles()
    caps, names = roles.model_capabilities()
    for a in roles.recommend(reg, quality_mod.load_quality(), load_runs(), caps, names):
        chosen = a.chosen.label if a.chosen else "—"
        say(
            f"{a.role} on {a.host_id or '(no host with speed data)'}: {a.status}: {chosen}"
        )
        for c_ in a.fallbacks:
            say(f"    fallback: {c_.label}")
        for c_ in a.rejected:
            why = "; ".join(f"{e.reason}: {e.message}" for e in c_.evidence if e.reason)
            say(f"    rejected {c_.label}: {why}")
