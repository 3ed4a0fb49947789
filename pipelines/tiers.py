"""The memory budget of the roles' tiers on a host (seed 001, "Memory Budget": Tier | RAM | Status,
HOT always resident, WARM loaded on demand, the headroom left for context and KV cache against the
host's memory).

Each role of data/roles.yaml names its tier. On a host, the model a role keeps resident is the
configuration the recommender assigned it (pipelines.roles); a role with no assignment is counted at
its closest candidate measured there (the one meeting the most requirements, then the smallest), and
the row says so. A configuration's memory is the highest peak memory its runs on the host measured
(``roles.measured_peak``: RSS, or VRAM on a GPU host). A configuration serving several roles (of one
tier or of both) is resident once, counted in the first tier that keeps it; a role with no candidate
measured on the host is named, not counted. A tier's RAM is the sum over its configurations, every
WARM model counted as loaded at once (the worst case the seed's "load 2-3 at a time" bounds); the
headroom is the host's memory (its fingerprint) less HOT and WARM. Artifacts alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.records.run import RunRecord
from pipelines import roles as roles_mod

TIERS = ("HOT", "WARM")
TIER_STATUS = {
    "HOT": "always resident",
    "WARM": "loaded on demand (all counted at once)",
}


@dataclass
class Resident:
    """What one role keeps resident on the host: its configuration and that configuration's peak."""

    role: str
    tier: str
    label: str  # model · settings
    identity: str  # the configuration (one identity resident once per tier)
    peak_bytes: int | None
    run_id: str | None
    assigned: bool
    shared_with: str = ""  # the tier it is already counted in (resident once, whichever roles share it)


@dataclass
class TierRow:
    tier: str
    residents: list[Resident] = field(default_factory=list)
    bytes: int = 0  # the measured peaks of its configurations, each once
    unmeasured: list[str] = field(
        default_factory=list
    )  # roles with no measured model here: not counted

    @property
    def run_ids(self) -> list[str]:
        return sorted({r.run_id for r in self.residents if r.run_id})


@dataclass
class Budget:
    host_id: str
    host_memory: int | None
    tiers: list[TierRow]
    memory_run: str | None = (
        None  # the run whose host fingerprint gave the host's memory
    )

    @property
    def resident_bytes(self) -> int:
        return sum(t.bytes for t in self.tiers)

    @property
    def unmeasured(self) -> list[str]:
        return [r for t in self.tiers for r in t.unmeasured]

    @property
    def headroom(self) -> int | None:
        if self.host_memory is None:
            return None
        return self.host_memory - self.resident_bytes

    @property
    def fits(self) -> bool | None:
        h = self.headroom
        return None if h is None else h >= 0


def _met(c: roles_mod.Candidate) -> int:
    return sum(1 for e in c.evidence if e.ok is True)


def resident(a: roles_mod.Assignment) -> Resident | None:
    """The configuration the role keeps resident on its host: the assigned one, else its closest
    measured candidate (most requirements met, then the smallest peak, then name); None when no
    candidate was measured there."""
    if a.chosen is not None:
        c, assigned = a.chosen, True
    else:
        measured = [c for c in a.rejected if c.peak_bytes]
        if not measured:
            return None
        c = min(measured, key=lambda c: (-_met(c), c.peak_bytes or 0, c.label))
        assigned = False
    return Resident(
        a.role, a.spec.tier, c.label, c.identity, c.peak_bytes, c.peak_run, assigned
    )


def budget(
    host_id: str,
    assignments: list[roles_mod.Assignment],
    host_memory: int | None,
    memory_run: str | None = None,
) -> Budget:
    """The tiers' budget on one host from its assignments (roles without a tier are left out)."""
    rows = []
    seen: dict[str, str] = {}  # configuration -> the tier it is first resident in
    for tier in TIERS:
        row = TierRow(tier)
        total = 0
        for a in assignments:
            if a.host_id != host_id or a.spec.tier.upper() != tier:
                continue
            r = resident(a)
            if r is None or r.peak_bytes is None:
                row.unmeasured.append(a.role)
                continue
            if r.identity in seen:
                r.shared_with = seen[r.identity]
            else:
                seen[r.identity] = tier
                total += r.peak_bytes
            row.residents.append(r)
        row.bytes = total
        rows.append(row)
    return Budget(host_id, host_memory, rows, memory_run)


def host_memory(run_docs: list[RunRecord]) -> dict[str, tuple[int, str]]:
    """Each host's memory as its runs' fingerprints give it: (bytes, the newest such run's id)."""
    out: dict[str, tuple[str, int, str]] = {}
    for r in list(run_docs):
        mem = r.memory_bytes
        if mem and (r.host_id not in out or r.created > out[r.host_id][0]):
            out[r.host_id] = (r.created, int(mem), r.id)
    return {h: (m, i) for h, (_, m, i) in out.items()}
