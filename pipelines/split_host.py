"""Split host: the model server on another host than the controller and its tools (seed 004, "Internal vs
External Routing Split-Host Matrix"), from ``agent_loop`` run artifacts alone.

A run whose HTTP backend started its server in a network namespace (``server_netns``: a second network
stack, reached over a veth link) is the split run; its co-located twin is the newest run of the same host,
matrix, model and test with the server on the controller's host. Per fault profile of the split run: the
seed's columns (episode latency with tools internal and external, their ratio, the error rates, tool
retries per episode). Between the two runs: the model hop (each model turn's end-to-end time, the HTTP
round trip to the server included), its ratio split/co-located with CI95 (``core.stats.compare``) and the
difference of the means, and the controller's own time per episode (the episode less its model turns and
tool steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import stats
from core.kinds import agent as agent_kind
from pipelines.agents import AgentRun


def netns(run: AgentRun) -> str | None:
    v = run.record.requested.get("server_netns")
    return str(v) if v else None


def model_turn_ms(episodes: list[agent_kind.Episode]) -> list[float]:
    return [
        float(t.model.e2e_ms)
        for e in episodes
        for t in e.turns
        if t.model is not None and t.model.ok and t.model.e2e_ms is not None
    ]


def controller_ms(episodes: list[agent_kind.Episode]) -> list[float]:
    """The controller's own time per episode: the episode less its model turns and tool steps."""
    return [
        max(0.0, e.loop_ms - (e.model_ms or 0.0) - e.tool_ms)
        for e in episodes
        if e.model_ms is not None
    ]


ERROR_ENDS = ("model_error", "server_lost")


def error_rate(episodes: list[agent_kind.Episode]) -> float | None:
    """Share of episodes an error ended or broke (the model call failed, the server was lost, or a tool step
    failed every attempt): the seed's Int/Ext Error, apart from wrong answers (success is its own column)."""
    if not episodes:
        return None
    bad = sum(1 for e in episodes if e.end_reason in ERROR_ENDS or e.tool_failures)
    return bad / len(episodes)


@dataclass
class SplitPair:
    split: AgentRun
    colocated: AgentRun | None

    @property
    def host(self) -> str:
        return self.split.record.host_id

    def hop(self) -> dict[str, Any] | None:
        """The model turn split against co-located: ratio of means (CI95) and the difference of means."""
        if self.colocated is None:
            return None
        a, b = (
            model_turn_ms(self.colocated.episodes),
            model_turn_ms(self.split.episodes),
        )
        if not a or not b:
            return None
        c = stats.compare(a, b, False).to_dict()
        c["diff_ms"] = sum(b) / len(b) - sum(a) / len(a)
        c["colocated_ms"] = stats.summarize(a)
        c["split_ms"] = stats.summarize(b)
        return c


def split_pairs(runs: list[AgentRun]) -> list[SplitPair]:
    out = []
    for s in runs:
        if not netns(s):
            continue
        r = s.record
        twins = [
            c
            for c in runs
            if not netns(c)
            and c.record.host_id == r.host_id
            and c.record.matrix_name == r.matrix_name
            and c.record.model_name == r.model_name
            and c.record.test_name == r.test_name
        ]
        out.append(
            SplitPair(
                s,
                max(twins, key=lambda c: (c.record.created, c.record.id))
                if twins
                else None,
            )
        )
    return out


def in_pairs(pairs: list[SplitPair]) -> set[str]:
    """Ids of the runs a split-host table shows (left out of the per-run sections)."""
    return {x.record.id for p in pairs for x in (p.split, p.colocated) if x is not None}
