"""Roles over a fleet: what does not depend on the host is judged once per role and configuration
(pipelines.roles.Pool.host_free) and shared by every host's assignments, which equal a fresh judgement."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines import roles
from pipelines.site import quality_pages
from tests.support.quality_fixtures import quality_doc
from tests.test_quality_roles import CAPS, ROLES_YAML, fixture_docs


@pytest.fixture
def reg(tmp_path):
    p = tmp_path / "roles.yaml"
    p.write_text(ROLES_YAML)
    return roles.load_roles(p)


def _fleet(n_hosts: int) -> tuple[list[RunRecord], list[QualityRecord]]:
    """The fixture's configurations measured on ``n_hosts`` hosts each, plus a quality-only configuration
    and two quality reruns of fast-good made on other hosts (pooled with the first, newest per item)."""
    runs, quality = fixture_docs()
    fleet = []
    for i in range(n_hosts):
        for r in runs:
            d = json.loads(json.dumps(r.doc))
            d["host"] = {**d["host"], "id": f"host-{i}"}
            d["key"] = hashlib.sha256(f"{i}{r.key}".encode()).hexdigest()
            d["id"] = f"{d['key'][:12]}-{r.id.split('-', 1)[1]}"
            fleet.append(RunRecord(d))
    reruns = []
    for i, stamp in enumerate(("20260102T000000Z", "20260103T000000Z")):
        q = quality_doc("fast-good", "ip", [True] * 8 + [False] * (2 + i), stamp=stamp)
        d = json.loads(json.dumps(q.doc))
        d["host"] = {**d["host"], "id": f"host-{i}"}
        reruns.append(QualityRecord(d))
    return fleet, quality + reruns + [quality_doc("quality-only", "ip", [True] * 10)]


FLEET_CAPS = {**CAPS, "quality-only": ["chat"]}


def _candidates(a: roles.Assignment) -> dict[str, roles.Candidate]:
    every = ([a.chosen] if a.chosen else []) + a.fallbacks + a.rejected
    return {c.identity: c for c in every}


def test_every_hosts_assignments_equal_a_fresh_evaluation_of_each_candidate(reg):
    """The host-independent part of a judgement (capabilities, quality, degeneration) is figured once per
    role and configuration and shared by every host: each host's assignments equal those of a Pool that
    judges every candidate afresh for that one assignment, field by field and as rendered; the shared
    evidence is one object, each host's candidates and evidence lists their own, and what ``assign``
    changes on one host's candidate (a registry-only model's label) reaches no other host's."""
    runs, quality = _fleet(3)
    names = sorted(FLEET_CAPS) + ["registered-only"]
    pool = roles.prepare(reg, quality, runs, FLEET_CAPS, names)
    hosts = sorted(pool.on_host)
    assert hosts == ["host-0", "host-1", "host-2"] and len(pool.unmeasured) == 2
    fast_good = next(c for c in pool.configs.values() if c.model == "fast-good")
    assert len(fast_good.quality) == 3  # the first run and two reruns on other hosts
    shared = [roles.assign(pool, name, h) for h in hosts for name in reg.roles]
    fresh = [
        roles.assign(roles.prepare(reg, quality, runs, FLEET_CAPS, names), name, h)
        for h in hosts
        for name in reg.roles
    ]
    assert shared == fresh  # every Assignment, Candidate and Evidence field
    assert [quality_pages.roles_page(reg, [a]) for a in shared] == [
        quality_pages.roles_page(reg, [b]) for b in fresh
    ]
    by = {(a.role, a.host_id): a for a in shared}
    # the reruns, pooled newest per item, put fast-good's pass rate on the floor: second is picked
    assert by[("frontdoor", "host-0")].chosen.model == "second"
    one = _candidates(by[("frontdoor", "host-0")])
    two = _candidates(by[("frontdoor", "host-1")])
    assert (
        set(one) == set(two) and len(one) == 8
    )  # 6 measured, quality-only, registry-only
    for ident in one:
        a, b = one[ident], two[ident]
        assert [e.kind for e in a.evidence[:3]] == [
            "capability",
            "quality",
            "degeneration",
        ]
        assert all(x is y for x, y in zip(a.evidence[:3], b.evidence[:3]))
        assert a is not b and a.evidence is not b.evidence and a.items is not b.items
        assert a.items == b.items
        assert (
            a.evidence[3].kind == "speed"
            and a.evidence[3].requirement != b.evidence[3].requirement
        )
    assert one["registry:registered-only"].config_label == "no artifacts"
    free = pool.host_free("frontdoor", pool.configs["registry:registered-only"])
    # assign relabels its own candidate, not the shared judgement
    assert free.config_label == "defaults"
    before = len(two[fast_good.identity].evidence)
    one[fast_good.identity].evidence.append(roles.Evidence("speed", "x", False))
    one[fast_good.identity].items[("x", "y", "z")] = False
    assert len(two[fast_good.identity].evidence) == before
    assert ("x", "y", "z") not in pool.host_free("frontdoor", fast_good).items


def test_quality_is_judged_once_per_role_and_configuration_however_many_hosts(
    reg, monkeypatch
):
    """A fleet that grows in hosts reads a configuration's quality artifacts (every host's reruns) once per
    role, not once per role and host: as many quality judgements on 1 host as on 5, one per role's quality
    requirement and configuration."""
    real = roles._quality_evidence
    calls: list[str] = []

    def counted(req, cfg, min_items):
        calls.append(cfg.identity)
        return real(req, cfg, min_items)

    monkeypatch.setattr(roles, "_quality_evidence", counted)
    seen = {}
    for n in (1, 5):
        runs, quality = _fleet(n)
        calls.clear()
        pool = roles.prepare(reg, quality, runs, FLEET_CAPS, sorted(FLEET_CAPS))
        out = [
            roles.assign(pool, name, h)
            for h in sorted(pool.on_host)
            for name in reg.roles
        ]
        assert len(out) == n * len(reg.roles) and len(pool.configs) == 7
        seen[n] = len(calls)
    assert seen == {1: 4 * 7, 5: 4 * 7}  # 4 roles with one quality requirement each
