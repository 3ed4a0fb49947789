"""Agent loops under injected tool faults, from ``agent_loop`` run artifacts alone.

Every figure is computed again from the artifact's episode records with the functions the run
used (core.kinds.agent), so the page and the samples it links to cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.kinds import agent as agent_kind
from core.records.run import RunRecord
from pipelines.runs import latest_per_key

KIND = "agent_loop"


@dataclass
class AgentRun:
    """One agent_loop artifact, its episodes and the statistics computed from them."""

    record: RunRecord
    episodes: list[agent_kind.Episode]
    stats: dict[str, Any]
    profiles: dict[
        str, agent_kind.FaultProfile
    ]  # name -> the profile's definition (faults, timeout, retries)

    @property
    def endpoint(self) -> str:
        return self.record.server or self.record.backend

    @property
    def protocol(self) -> agent_kind.AgentProtocol | None:
        facts = getattr(self.record.details, "agent", None)
        return facts.protocol if facts is not None else None

    @property
    def label(self) -> str:
        return f"{self.record.model_name} · {self.endpoint} · {self.record.host_id}"


def agent_runs(docs: list[Any]) -> list[AgentRun]:
    """Every current agent_loop artifact with episodes (a failed run shows what it measured)."""
    out = []
    for rec in latest_per_key(docs):
        if rec.test_kind != KIND:
            continue
        episodes = list(getattr(rec.samples, "episodes", None) or [])
        if not episodes:
            continue
        spec = rec.spec
        profiles = (
            {p.name: p for p in spec.profiles}
            if isinstance(spec, agent_kind.AgentLoopTest)
            else {}
        )
        order = list(profiles) or None
        out.append(
            AgentRun(rec, episodes, agent_kind.matrix_stats(episodes, order), profiles)
        )
    return sorted(
        out,
        key=lambda r: (
            r.record.host_id,
            r.record.model_name,
            r.endpoint,
            r.record.test_name,
        ),
    )


def scenario_cells(run: AgentRun) -> list[dict[str, Any]]:
    """Success per scenario and placement, every profile pooled (which tasks the model can do at all)."""
    rows = []
    for scenario in dict.fromkeys(e.scenario for e in run.episodes):
        for placement in agent_kind.PLACEMENTS:
            eps = [
                e
                for e in run.episodes
                if e.scenario == scenario and e.placement == placement
            ]
            if eps:
                rows.append(
                    {
                        "scenario": scenario,
                        "placement": placement,
                        **agent_kind.cell_stats(eps),
                    }
                )
    return rows


def fault_label(profile: agent_kind.FaultProfile | None) -> str:
    if profile is None:
        return "—"
    parts = []
    if profile.fail_every:
        parts.append(f"fail every {profile.fail_every}")
    if profile.timeout_every:
        parts.append(f"hang every {profile.timeout_every} ({profile.hang_s:g} s)")
    parts.append(f"timeout {profile.tool_timeout_s:g} s, retries {profile.retries}")
    return "; ".join(parts) if len(parts) > 1 else "no faults; " + parts[0]
