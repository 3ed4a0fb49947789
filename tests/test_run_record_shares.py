"""What a fleet's runs share in memory: one test spec object for every run of one test (a spec is
frozen), and whether a run was disturbed read from its stored block as the Resources model reads it."""

from __future__ import annotations

import copy

import pytest

from core import artifacts
from core.models.run import Resources
from core.records.run import RunRecord
from tests.support.committed import committed_paths


def _runs() -> list[dict]:
    docs = [artifacts.load(p) for p in committed_paths("runs") if p.suffix == ".json"]
    return [d for d in docs if d.get("artifact") == "run"]


def test_runs_of_one_test_share_one_spec_and_read_it_as_before():
    docs = _runs()
    by_test: dict[str, list[dict]] = {}
    for d in docs:
        by_test.setdefault(repr(sorted(d["test"].items())), []).append(d)
    doc = next(v for v in by_test.values() if len(v) > 1)[0]
    a, b = RunRecord(copy.deepcopy(doc)), RunRecord(copy.deepcopy(doc))
    assert a.spec is not None and a.spec is b.spec
    # what the model makes of the stored test, parsed for this run alone
    want = a.kind.spec.model_validate(
        {k: v for k, v in doc["test"].items() if k != "name"}
    )
    assert a.spec == want and a.spec.model_fields_set == want.model_fields_set
    # another test: another spec
    other = next(
        d
        for d in docs
        if d["test"]["kind"] == doc["test"]["kind"] and d["test"] != doc["test"]
    )
    assert RunRecord(copy.deepcopy(other)).spec != a.spec


def test_a_parameter_of_another_type_is_another_test():
    """1, 1.0, True and "1" are one or two keys to a dict; each is its own test to the cache, read as
    the spec reads it alone (equal values, or None where the spec refuses it)."""
    doc = next(
        d for d in _runs() if d["test"]["kind"] == "rate" and d["test"].get("n_gen")
    )
    specs = []
    for v in (1, True, 1.0, "1", 1.5, "x", 1):
        one = copy.deepcopy(doc)
        one["test"]["n_gen"] = v
        rec = RunRecord(one)
        alone = rec.kind.spec.model_validate
        try:
            want = alone({k: x for k, x in one["test"].items() if k != "name"})
        except ValueError:
            want = None
        assert rec.spec == want, v
        assert want is None or type(rec.spec.n_gen) is int
        specs.append(rec.spec)
    assert (
        specs[1] is not specs[0] and specs[2] is not specs[0]
    )  # not taken for the int's
    assert specs[-1] is specs[0]  # the int's again: shared
    assert specs[5] is None  # "x" is no count


def test_nested_parameters_are_part_of_the_test():
    doc = next(d for d in _runs() if isinstance(d["test"].get("precision"), dict))
    a = RunRecord(copy.deepcopy(doc))
    other = copy.deepcopy(doc)
    other["test"]["precision"]["target"] = doc["test"]["precision"]["target"] / 2
    b = RunRecord(other)
    assert a.spec is RunRecord(copy.deepcopy(doc)).spec  # shared, precision and all
    assert b.spec.precision.target == doc["test"]["precision"]["target"] / 2
    assert a.spec.precision.target == doc["test"]["precision"]["target"]
    bad = copy.deepcopy(doc)
    bad["test"]["not_a_field"] = [1, {"x": 2}]
    assert (
        RunRecord(bad).spec is None
    )  # the rate spec refuses unknown fields, as before


@pytest.mark.parametrize(
    "block, disturbed",
    [
        (None, False),
        ({"wall_s": 1.0}, False),
        ({"wall_s": 1.0, "quiet": None}, False),
        ({"wall_s": 1.0, "quiet": {"disturbed": False}}, False),
        ({"wall_s": 1.0, "quiet": {"disturbed": True}}, True),
        ({"wall_s": 1.0, "quiet": {"disturbed": 1}}, False),
    ],
)
def test_disturbed_reads_the_stored_block_as_the_model_does(block, disturbed):
    doc = copy.deepcopy(_runs()[0])
    if block is None:
        doc.pop("resources", None)
    else:
        doc["resources"] = block
    rec = RunRecord(doc)
    assert rec.disturbed is disturbed
    assert Resources.from_dict(block).disturbed is disturbed
