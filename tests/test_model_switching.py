"""Issue 33, seed 003's model-switching scenarios (10 and 100 switches, multi-tenant; without and with a
model cache), put together from measured load and request times (pipelines/switching.py)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from pipelines import switching as sw

HOST = "vm-d4bbc016"  # the 2-core host the committed rows were measured on (issue 33)


@pytest.mark.fast
def test_segments_and_the_lru_cache():
    s = sw.Scenario(name="x", models=["a", "b", "c"], requests=10, switches=3)
    assert sw.segments(s) == [("a", 3), ("b", 3), ("c", 2), ("a", 2)]
    order = [m for m, _ in sw.segments(s)]
    assert sw.lru_loaded(order, 3) == [
        "a",
        "b",
        "c",
    ]  # the cache holds all three: first loads only
    # round robin over five models with room for three: every switch misses
    five = [
        m
        for m, _ in sw.segments(
            sw.Scenario(name="y", models=list("abcde"), requests=10, switches=9)
        )
    ]
    assert len(sw.lru_loaded(five, 3)) == 10 and len(sw.lru_loaded(five, 5)) == 5


@pytest.mark.fast
def test_bad_scenarios_are_one_line(tmp_path):
    p = tmp_path / "switching.yaml"
    p.write_text(
        "schema_version: 1\ntest: t\nscenarios:\n  - {name: x, models: [a, b], requests: 5, switches: 5}\n"
    )
    with pytest.raises(ConfigError) as exc:
        sw.load_switching(p)
    assert "5 switches need more than 5 requests" in str(exc.value)
    assert str(p.name) in str(exc.value) or "switching.yaml" in str(exc.value)


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


@pytest.mark.fast
def test_switching_table_from_the_committed_runs(runs):
    from pipelines.site.switching import switching_section

    f = sw.load_switching()
    results, missing = sw.evaluate(f, runs, HOST)
    assert not missing
    by = {r.scenario.name: r for r in results}
    single = by["single model"]
    assert single.loads_without == single.loads_with == 1 and single.speedup[0] == 1.0
    ten = by["10 model switches"]
    assert ten.loads_without == 11 and ten.loads_with == 3 and ten.speedup[0] > 1
    hundred = by["100 model switches"]
    assert hundred.loads_without == 101 and hundred.speedup[0] > ten.speedup[0]
    lru = by["multi-tenant (5 models), cache of 3"]
    assert (
        lru.loads_with == lru.loads_without == 50
    )  # round robin defeats the LRU cache
    md = "\n".join(switching_section(runs))
    assert f"### Switching between models on <code>{HOST}</code>" in md
    for r in results:
        for p in r.parts.values():
            assert f"runs/run.md?id={p.run_ids[-1]}" in md
