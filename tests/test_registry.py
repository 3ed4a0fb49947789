"""One registry helper, one rule (issue 28): a name registered twice is an error naming both
places; every table of named things in the packages is such a registry."""

from __future__ import annotations

import pytest

from core.registry import DuplicateName, Registry


def _first(reg: Registry[int]) -> None:
    reg.add("a", 1)


def test_a_duplicate_name_names_both_places():
    reg: Registry[int] = Registry("widget")
    _first(reg)
    with pytest.raises(DuplicateName) as err:
        reg.add("a", 2)
    msg = str(err.value)
    assert msg.startswith("widget 'a' registered twice: at tests/test_registry.py:")
    first_line = _first.__code__.co_firstlineno + 1
    assert f"tests/test_registry.py:{first_line} and at tests/test_registry.py:" in msg
    assert reg["a"] == 1  # the first registration stands


def test_the_same_thing_again_is_no_conflict_and_where_can_be_given():
    reg: Registry[tuple[str, str]] = Registry("backend")
    reg.add("x", ("m:A", "m:B"), where="entry point x")
    assert reg.add("x", ("m:A", "m:B")) == ("m:A", "m:B")
    with pytest.raises(DuplicateName, match="at entry point x and at ALMANAC_BACKENDS"):
        reg.add("x", ("m:C", "m:D"), where="ALMANAC_BACKENDS")


def test_it_reads_like_a_dict_and_a_test_can_take_a_name_out(monkeypatch):
    reg: Registry[int] = Registry("widget")
    reg["a"] = 1
    monkeypatch.setitem(reg, "b", 2)
    assert dict(reg) == {"a": 1, "b": 2} and "b" in reg and reg.get("c") is None
    with pytest.raises(DuplicateName):
        reg["a"] = 3
    monkeypatch.undo()
    assert list(reg) == ["a"]
    assert reg.pop("a") == 1 and len(reg) == 0
    reg["a"] = 5  # gone means free again
    assert reg["a"] == 5


def test_every_table_of_named_things_is_a_registry():
    import core.artifacts
    import core.kinds
    import core.metrics
    import pipelines.site.kinds
    import pipelines.site.per_host
    import runtime.backends
    import runtime.models.synth
    import runtime.quality.ifbench_checks
    import runtime.quality.scorers

    tables = {
        "test kind": core.kinds._KINDS,
        "artifact type": core.artifacts.ARTIFACT_TYPES,
        "write check": core.artifacts.WRITE_CHECKS,
        "metric": core.metrics.METRICS,
        "backend": runtime.backends.BACKENDS,
        "scorer": runtime.quality.scorers.SCORERS,
        "IFBench checker": runtime.quality.ifbench_checks.CHECKERS,
        "synthetic shape": runtime.models.synth.SHAPES,
        "kind site": pipelines.site.kinds.SITES,
        "per-host page": pipelines.site.per_host.PAGES,
    }
    assert all(isinstance(t, Registry) for t in tables.values()), [
        name for name, t in tables.items() if not isinstance(t, Registry)
    ]


def test_a_second_metric_of_a_name_is_refused():
    from dataclasses import replace

    from core.metrics import METRICS, register_metric

    m = METRICS["tokens_per_second"]
    with pytest.raises(
        DuplicateName,
        match=r"metric 'tokens_per_second' registered twice: at core/metrics\.py:\d+",
    ):
        register_metric(replace(m, unit="other"))
