"""The uncertainty ablation (seed 004, "Phase 3 Uncertainty Ablation" and "Runtime-Native Uncertainty
Deltas"): agent loops with the uncertainty gate on (the controller asks for token log-probabilities and
escalates a turn whose least likely token is below the threshold) against the same loops with it off,
from ``agent_loop`` run artifacts alone.

The gated run pairs with the newest ungated run of the same host, matrix, model and endpoint; their
episodes pair by (profile, placement, scenario, episode): the same task, greedy, the same faults. Per
fault profile and placement: both success rates and the difference on minus off with the exact McNemar
verdict and the Agresti-Min CI95 (``core.stats.paired_rates``), and the external/internal episode
latency ratio of each arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.kinds import agent as agent_kind
from pipelines.agents import AgentRun


def threshold(run: AgentRun) -> float | None:
    spec = run.record.spec
    return (
        spec.uncertainty_threshold
        if isinstance(spec, agent_kind.AgentLoopTest)
        else None
    )


def _key(e: agent_kind.Episode) -> tuple[str, str, str, int]:
    return (e.profile, e.placement, e.scenario, e.episode)


@dataclass
class Ablation:
    on: AgentRun
    off: AgentRun

    @property
    def label(self) -> str:
        return f"{self.on.endpoint} · {self.on.record.model_name} · {self.on.record.host_id}"

    @property
    def profiles(self) -> list[str]:
        return [p for p in self.on.stats["profiles"] if p in self.off.stats["profiles"]]

    def delta(self, profile: str, placement: str) -> stats.PairedComparison:
        """Success with the gate on against off, on the episodes both ran."""
        off = {_key(e): e.success for e in self.off.episodes}
        on = {_key(e): e.success for e in self.on.episodes}
        keys = [k for k in on if k in off and k[0] == profile and k[1] == placement]
        return stats.paired_rates([off[k] for k in keys], [on[k] for k in keys])

    def escalations(self, profile: str) -> int:
        return sum(e.escalations for e in self.on.episodes if e.profile == profile)

    def turns(self, profile: str) -> int:
        return sum(e.steps for e in self.on.episodes if e.profile == profile)

    def ext_int_latency(self, run: AgentRun, profile: str) -> dict[str, Any] | None:
        comp = {c["profile"]: c for c in run.stats["comparisons"]}.get(profile) or {}
        return comp.get("loop_ms")


def ablations(runs: list[AgentRun]) -> list[Ablation]:
    out = []
    for on in runs:
        if threshold(on) is None:
            continue
        r = on.record
        offs = [
            x
            for x in runs
            if threshold(x) is None
            and x.record.host_id == r.host_id
            and x.record.matrix_name == r.matrix_name
            and x.record.model_name == r.model_name
            and x.endpoint == on.endpoint
        ]
        if offs:
            out.append(
                Ablation(on, max(offs, key=lambda x: (x.record.created, x.record.id)))
            )
    return out


def in_ablations(abls: list[Ablation]) -> set[str]:
    return {x.record.id for a in abls for x in (a.on, a.off)}
