"""The one serialization path: canonical text, atomic writes, validation, versions, migration."""

from __future__ import annotations

import json

import pytest

from core import artifacts
from core.artifacts import ArtifactType
from core.errors import ArtifactError
from tests.conftest import GOLDEN


def golden_doc() -> dict:
    path = next(GOLDEN.rglob("tg16--*.json"))
    return artifacts.load(path)


def test_roundtrip_is_canonical(tmp_path):
    doc = golden_doc()
    p = artifacts.write(tmp_path / "a.json", doc)
    text = p.read_text()
    assert text == artifacts.dumps(doc)
    assert text.endswith("\n") and '\n  "artifact": "run"' in text
    keys = list(json.loads(text))
    assert keys == sorted(keys)
    assert artifacts.load(p) == doc
    assert [x.name for x in tmp_path.iterdir()] == [
        "a.json"
    ]  # no temp file left behind


def test_validation_names_file_and_field(tmp_path):
    doc = golden_doc()
    doc["summary"]["tokens_per_second"]["n"] = -1
    with pytest.raises(ArtifactError) as exc:
        artifacts.write(tmp_path / "bad.json", doc)
    msg = str(exc.value)
    assert "bad.json" in msg and "summary.tokens_per_second.n" in msg
    assert not (tmp_path / "bad.json").exists()


def test_failed_write_keeps_old_file(tmp_path):
    doc = golden_doc()
    p = artifacts.write(tmp_path / "a.json", doc)
    before = p.read_text()
    doc["status"] = "exploded"
    with pytest.raises(ArtifactError):
        artifacts.write(p, doc)
    assert p.read_text() == before


def test_newer_version_refused_with_action(tmp_path):
    doc = golden_doc()
    doc["schema_version"] = 99
    p = tmp_path / "new.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(
        ArtifactError, match=r"newer than this almanac understands .*upgrade"
    ):
        artifacts.load(p)


def test_invalid_json_reports_position(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"artifact": "run",')
    with pytest.raises(ArtifactError, match=r"broken.json: invalid JSON at line 1"):
        artifacts.load(p)


def test_unknown_type_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"artifact": "banana", "schema_version": 1}))
    with pytest.raises(ArtifactError, match="unknown artifact type 'banana'"):
        artifacts.load(p)


def test_migration_steps_run_in_order(monkeypatch):
    calls = []

    def to2(d):
        calls.append(2)
        d["b"] = d.pop("a")
        return d

    def to3(d):
        calls.append(3)
        d["c"] = d["b"] * 2
        return d

    monkeypatch.setitem(
        artifacts.ARTIFACT_TYPES, "toy", ArtifactType("toy", 3, "toy", {2: to2, 3: to3})
    )
    out = artifacts.upgrade({"artifact": "toy", "schema_version": 1, "a": 5})
    assert out == {"artifact": "toy", "schema_version": 3, "b": 5, "c": 10}
    assert calls == [2, 3]


def test_validate_tree_reports_each_bad_file(tmp_path):
    good = golden_doc()
    artifacts.write(tmp_path / "runs" / "good.json", good)
    (tmp_path / "runs" / "bad.json").write_text("{}")
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "whatever.json").write_text(
        "{}"
    )  # schema folders are not artifacts
    count, problems = artifacts.validate_tree(tmp_path)
    assert count == 2
    assert len(problems) == 1 and "bad.json" in problems[0]


def test_golden_artifacts_are_valid():
    count, problems = artifacts.validate_tree(GOLDEN)
    assert count >= 7 and problems == []


def test_every_schema_is_valid_against_its_metaschema():
    # the loader checks documents with the fast validator and builds the jsonschema one only for a
    # document it rejects, so the schemas themselves are checked here, every type and every version
    import jsonschema

    checked = 0
    for atype in artifacts.ARTIFACT_TYPES.values():
        for version in range(1, atype.version + 1):
            path = atype.schema_path(version)
            if not path.exists():
                continue
            schema = json.loads(path.read_text())
            jsonschema.validators.validator_for(schema).check_schema(schema)
            checked += 1
    assert checked >= len(artifacts.ARTIFACT_TYPES)
