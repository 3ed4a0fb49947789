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
    episodes: list[dict[str, Any]]
    stats: dict[str, Any]
    profiles: dict[str, dict[str, Any]]  # name -> the profile's definition (faults, timeout, retries)

    @property
    def endpoint(self) -> str:
        return self.record.server or self.record.backend

    @property
    def label(self) -> str:
        return f"{self.record.model_name} · {self.endpoint} · {self.record.host_id}"


def agent_runs(docs: list[Any]) -> list[AgentRun]:
    """Every current agent_loop artifact with episodes (a failed run shows what it measured)."""
    out = []
    for rec in latest_per_key(docs):
        if rec.test_kind != KIND:
            continue
        episodes = list(rec.samples.get("episodes") or [])
        if not episodes:
            continue
        defined = rec.test_definition.get("profiles") or []
        profiles = {p["name"]: p for p in defined if isinstance(p, dict) and "name" in p}
        order = [p for p in profiles] or None
        out.append(AgentRun(rec, episodes, agent_kind.matrix_stats(episodes, order), profiles))
    return sorted(out, key=lambda r: (r.record.host_id, r.record.model_name, r.endpoint, r.record.test_name))


def scenario_cells(run: AgentRun) -> list[dict[str, Any]]:
    """Success per scenario and placement, every profile pooled (which tasks the model can do at all)."""
    rows = []
    for scenario in dict.fromkeys(e["scenario"] for e in run.episodes):
        for placement in agent_kind.PLACEMENTS:
            eps = [e for e in run.episodes if e["scenario"] == scenario and e["placement"] == placement]
            if eps:
                rows.append({"scenario": scenario, "placement": placement, **agent_kind.cell_stats(eps)})
    return rows


def fault_label(profile: dict[str, Any] | None) -> str:
    if not profile:
        return "—"
    parts = []
    if profile.get("fail_every"):
        parts.append(f"fail every {profile['fail_every']}")
    if profile.get("timeout_every"):
        parts.append(f"hang every {profile['timeout_every']} ({profile.get('hang_s', 0.9):g} s)")
    parts.append(f"timeout {profile.get('tool_timeout_s', 0.25):g} s, retries {profile.get('retries', 1)}")
    return "; ".join(parts) if len(parts) > 1 else "no faults; " + parts[0]
