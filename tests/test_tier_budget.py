"""Issue 33, seed 001's "Memory Budget" (Tier | RAM | Status): the roles' tiers on a host, each at the
measured peak memory of the configuration it keeps resident, against the host's memory (fixture
artifacts of tests/support/quality_fixtures)."""

from __future__ import annotations

import pytest

from core.records.quality import QualityRecord
from pipelines import roles, tiers
from pipelines.site import quality_pages
from tests.support.quality_fixtures import HOST, quality_doc, speed_doc

pytestmark = pytest.mark.fast

MIB = 1 << 20

ROLES_YAML = """
schema_version: 1
roles:
  front:
    tier: HOT
    quality: [{suite: ip, min: 0.5}]
    speed: [{test: tg128, metric: tokens_per_second, min: 20}]
  helper:
    tier: HOT
    speed: [{test: tg128, metric: tokens_per_second, min: 20}]
  archive:
    tier: WARM
    quality: [{suite: ip, min: 0.99}]
  lonely:
    tier: WARM
    quality: [{suite: never-run, min: 0.5}]
    speed: [{test: tg128, metric: tokens_per_second, min: 1000}]
"""


def _budget(tmp_path, host_memory=1024 * MIB):
    p = tmp_path / "roles.yaml"
    p.write_text(ROLES_YAML)
    reg = roles.load_roles(p)
    runs = [
        speed_doc("small", mean=60, peak_rss=300 * MIB),
        speed_doc("big", mean=10, peak_rss=500 * MIB),
    ]
    quality = [
        quality_doc("small", "ip", [True] * 9 + [False]),
        quality_doc("big", "ip", [True] * 8 + [False] * 2),
    ]
    out = roles.recommend(reg, [QualityRecord(q) for q in quality], runs, {})
    return reg, out, tiers.budget(HOST, out, host_memory, "fp-run")


def test_tiers_sum_resident_configurations_once(tmp_path):
    _, _, b = _budget(tmp_path)
    hot, warm = b.tiers
    # front and helper both keep "small" resident (assigned): counted once
    assert [r.role for r in hot.residents] == ["front", "helper"]
    assert all(r.assigned and r.label.startswith("small") for r in hot.residents)
    assert hot.bytes == 300 * MIB
    # archive: nothing meets 99% -> its closest candidate (the most requirements met, then the smallest);
    # lonely meets nothing anywhere: its closest measured candidate too
    assert [r.role for r in warm.residents] == ["archive", "lonely"]
    assert not any(r.assigned for r in warm.residents)
    # both closest candidates are "small", already resident in HOT: nothing more to hold
    assert all(
        r.label.startswith("small") and r.shared_with == "HOT" for r in warm.residents
    )
    assert warm.bytes == 0
    assert b.headroom == 1024 * MIB - hot.bytes - warm.bytes
    assert b.fits is True


def test_tiers_that_do_not_fit_say_by_how_much(tmp_path):
    _, out, b = _budget(tmp_path, host_memory=200 * MIB)
    assert b.fits is False and b.headroom is not None and b.headroom < 0
    md = "\n".join(quality_pages.tier_budget_section(b))
    assert "### Memory budget on" in md and "does not fit" in md and "short by" in md
    assert "always resident" in md and "200.0 MiB" in md
    # every tier row links the runs its peaks come from
    ids = {r.run_id for t in b.tiers for r in t.residents}
    assert all(f"runs/run.md?id={i}" in md for i in ids)
    # the headroom and the total link the run whose host fingerprint gave the memory
    assert md.count("runs/run.md?id=fp-run") == 2


def test_roles_page_shows_the_budget_per_host(tmp_path):
    reg, out, _ = _budget(tmp_path)
    md = quality_pages.roles_page(reg, out, {HOST: (1024 * MIB, "fp-run")})
    assert "### Memory budget on" in md and "**fits**" in md
    # without the host's memory (no fingerprint gives it) no budget is claimed
    assert "Memory budget" not in quality_pages.roles_page(reg, out, {})
