"""Kinds own their shapes (#18): the run schema's per-kind part is generated from each kind's
samples/details models (core/schema.py), every committed artifact validates against it, and a
run whose samples or details do not have its kind's shape is refused naming the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from core import artifacts, schema
from core.errors import ArtifactError
from core.kinds import all_kinds
from core.records import run as record
from tests.conftest import FIXTURES
from tests.support.committed import committed_paths


def test_committed_run_schema_is_what_the_kinds_generate():
    committed = json.loads(schema.run_schema_path().read_text())
    assert (
        schema.model_schemas()[schema.run_schema_path()]
        == schema.run_schema_path().read_text()
    ), (
        "data/schema/run.v2.schema.json is out of date with core.kinds and core.models.run: "
        "run `python -m core.schema`"
    )
    # one condition per built-in kind, naming its own models
    conds = {
        c["if"]["properties"]["test"]["properties"]["kind"].get("const"): c["then"][
            "properties"
        ]
        for c in committed["allOf"]
        if str(c.get("$comment", "")).startswith(schema.MARK)
    }
    for kind in schema.builtin_kinds():
        assert (
            conds[kind.name]["samples"]["$ref"]
            == f"#/$defs/kind.{kind.samples.__name__}"
        )
        assert (
            conds[kind.name]["details"]["$ref"]
            == f"#/$defs/kind.{kind.details.__name__}"
        )
        assert set(kind.samples.model_fields) <= set(
            committed["$defs"][f"kind.{kind.samples.__name__}"]["properties"]
        )


def _all_run_files() -> list[Path]:
    def is_run(p: Path) -> bool:
        doc = json.loads(p.read_text())
        return isinstance(doc, dict) and doc.get("artifact") == "run"

    return [
        p
        for p in committed_paths("") + list(artifacts.iter_files(FIXTURES))
        if is_run(p)
    ]


def test_every_committed_run_has_its_kinds_shape():
    files = _all_run_files()
    assert len(files) >= 150
    seen = set()
    for p in files:
        rec = record.RunRecord(
            artifacts.load(p), str(p)
        )  # the schema (per kind) passed; now the models
        kind = rec.kind
        assert kind is not None, p
        seen.add(kind.name)
        assert isinstance(rec.samples, kind.samples) and isinstance(
            rec.details, kind.details
        )
    assert seen == set(k.name for k in schema.builtin_kinds())


def _rate_doc() -> dict:
    p = next(
        p
        for p in _all_run_files()
        if "/pp" in str(p) and json.loads(p.read_text())["status"] == "ok"
    )
    return artifacts.load(p)


@pytest.mark.parametrize(
    "mutate, field, says",
    [
        (
            lambda d: d["samples"].__setitem__("ts", "fast"),
            "samples.ts",
            "not of type 'array', 'null'",
        ),
        (
            lambda d: d["samples"].__setitem__("ts", [1.0, "x"]),
            "samples.ts.1",
            "not of type 'number'",
        ),
        (
            lambda d: d["details"]["perf_counters"][0].__setitem__("n_eval", 1.5),
            "details.perf_counters.0.n_eval",
            "not of type 'integer'",
        ),
    ],
)
def test_a_run_of_the_wrong_shape_is_refused_naming_the_field(mutate, field, says):
    doc = copy.deepcopy(_rate_doc())
    mutate(doc)
    with pytest.raises(ArtifactError) as exc:
        artifacts.validate(doc, "x.json")
    assert f"x.json: {field}: " in str(exc.value) and says in str(exc.value)


def test_each_kind_reads_the_values_behind_its_headline():
    doc = _rate_doc()
    rec = record.RunRecord(doc)
    assert rec.values("tokens_per_second") == doc["samples"]["ts"]
    assert rec.headline.mean == pytest.approx(
        sum(doc["samples"]["ts"]) / len(doc["samples"]["ts"])
    )
    for kind in (
        all_kinds().values()
    ):  # an empty (failed) run's samples read as nothing, for every metric
        assert all(kind.values(kind.samples(), m) == [] for m in kind.metrics)


def test_validation_leaves_the_document_as_written(tmp_path):
    """The generated part carries no ``default`` annotations: the fast validator would fill them into
    the document it checks, and an artifact must read back exactly as it was written."""
    assert '"default"' not in schema.run_schema_path().read_text()
    doc = copy.deepcopy(_rate_doc())
    doc["details"] = {"method": "m"}  # most optional fields absent
    path = artifacts.write(tmp_path / "run.json", doc)
    assert artifacts.load(path) == json.loads(path.read_text()) == doc
