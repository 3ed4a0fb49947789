"""Artifact types declared once, as models (issue 28, Build item 1): core.models.

For each converted type (``decision``, ``projection``, ``host``, ``noise``, ``run``, ``quality``,
``perplexity``): the committed
schema file is what the model generates; it accepts every committed artifact and rejects what the
hand-written schema it replaced rejected (kept in tests/fixtures/handwritten_schemas/); the writer
builds the same bytes as the old dict-building writer did (its code is kept below as the
reference); reading a committed artifact through the model and dumping it gives the file back byte
for byte; and a model that rejects a document says so in one line naming the file, the field path
and what is wrong.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from core import artifacts, schema
from core.errors import ArtifactError
from core.models import MODELS, model_for
from core.records.decision import DecisionRecord, new_decision
from core.records.projection import ProjectionRecord, new_projection
from tests.conftest import FIXTURES
from tests.support.committed import committed_paths

CONVERTED = ("decision", "projection", "host", "noise", "run", "quality", "perplexity")
FOLDERS = {
    "decision": "decisions",
    "projection": "projections",
    "host": "hosts",
    "noise": "hosts",
    "run": "runs",
    "quality": "quality",
    "perplexity": "perplexity",
}
#: types whose fixture folders (tests/fixtures/**/<folder>/) are checked beside data/
WITH_FIXTURES = ("quality", "perplexity")
HANDWRITTEN = FIXTURES / "handwritten_schemas"


def _committed(artifact: str) -> list[Path]:
    candidates = committed_paths(FOLDERS[artifact])
    if artifact in WITH_FIXTURES:
        candidates += sorted(FIXTURES.glob(f"**/{FOLDERS[artifact]}/**/*.json"))
    paths = [
        p
        for p in candidates
        if p.suffix == ".json" and json.loads(p.read_text()).get("artifact") == artifact
    ]
    assert paths, f"no committed {artifact} artifact to test on"
    return paths


def _old_validator(artifact: str) -> jsonschema.protocols.Validator:
    version = artifacts.ARTIFACT_TYPES[artifact].version
    s = json.loads((HANDWRITTEN / f"{artifact}.v{version}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(s)
    return cls(s, format_checker=cls.FORMAT_CHECKER)


def _new_validator(artifact: str) -> jsonschema.protocols.Validator:
    s = json.loads(artifacts.ARTIFACT_TYPES[artifact].schema_path().read_text())
    cls = jsonschema.validators.validator_for(s)
    return cls(s, format_checker=cls.FORMAT_CHECKER)


def test_the_committed_schemas_are_what_the_models_generate():
    assert set(CONVERTED) == set(MODELS)
    for path, text in schema.model_schemas().items():
        assert path.read_text() == text, (
            f"{path} is out of date with core.models: run `python -m core.schema`"
        )
    # fastjsonschema stays the load-time validator: every generated schema compiles
    for name in CONVERTED:
        version = artifacts.ARTIFACT_TYPES[name].version
        assert artifacts._fast_validator(name, version) is not None, name


@pytest.mark.parametrize("artifact", CONVERTED)
def test_every_committed_artifact_is_accepted_and_read_back_byte_for_byte(artifact):
    model = model_for(artifact)
    assert model is not None
    old, new = _old_validator(artifact), _new_validator(artifact)
    for path in _committed(artifact):
        text = path.read_text()
        doc = artifacts.load(
            path
        )  # the load path (migration, fastjsonschema, jsonschema)
        if doc != json.loads(text):  # an older version, migrated: its current form
            text = artifacts.dumps(doc)
        assert not list(old.iter_errors(doc)) and not list(new.iter_errors(doc))
        assert artifacts.dumps(model.check(doc, str(path)).dump()) == text, path


def _integers_as_floats(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _integers_as_floats(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_integers_as_floats(v) for v in node]
    if isinstance(node, int) and not isinstance(node, bool):
        return float(node)
    return node


def _integer_paths(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _integer_paths(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _integer_paths(v, f"{path}.{i}")]
    return [path] if isinstance(node, int) and not isinstance(node, bool) else []


@pytest.mark.parametrize("artifact", CONVERTED)
def test_an_integer_written_as_8_0_is_valid_to_the_validator_and_the_model_alike(
    artifact,
):
    """JSON Schema's integer includes 8.0 (fastjsonschema, the load-time validator, accepts it), so
    the model must read it too, as the integer 8: one notion of valid. CI found a host artifact with
    ``conditions.logical_cores: 1e12`` that validate accepted and the Hosts page's model refused."""
    model = model_for(artifact)
    assert model is not None
    checked = 0
    for path in _committed(artifact)[:5]:
        doc = artifacts.load(path)
        floats = _integers_as_floats(doc)
        assert _integer_paths(doc) and not _integer_paths(floats), path
        artifacts.validate(floats, str(path))  # the validator accepts every 8.0
        read = model.check(floats, str(path)).dump()
        # the same values; every field the model declares an integer reads back as an int
        assert read == floats, path
        fields = [p for p in _integer_paths(read) if p != ".schema_version"]
        if fields:
            checked += 1
            with pytest.raises(ArtifactError, match="valid integer"):
                model.check(_set_path(floats, fields[0], 0.5), "half.json")
    assert checked, f"no integer field of the {artifact} model read 8.0 as 8"


def _set_path(doc: dict[str, Any], path: str, value: float) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *parents, last = path.strip(".").split(".")
    node: Any = out
    for q in parents:
        node = node[int(q)] if isinstance(node, list) else node[q]
    node[int(last) if isinstance(node, list) else last] = value
    return out


@pytest.mark.parametrize(
    "created, valid",
    [
        ("2026-11-28T10:00:00Z", True),
        ("2026-11-28T10:00:00.123456789Z", True),
        ("2026-11-28T10:00:00+01:00", True),
        ("2026-11-28T10:00:00+0100", True),
        ("2028-02-29T10:00:00Z", True),
        (
            "2026-11-28t10:00:00z",
            False,
        ),  # fastjsonschema's own format took it; the model did not
        ("2026-11-28T10:00:60Z", False),  # a leap second: fromisoformat cannot read it
        ("2026-02-29T10:00:00Z", False),
        ("2026-11-28 10:00:00Z", False),
        ("2026-11-28", False),
    ],
)
def test_a_date_time_is_valid_to_the_validator_and_the_model_alike(created, valid):
    doc = dict(artifacts.load(_committed("host")[0]), created=created)
    outcomes = []
    for check in (artifacts.validate, model_for("host").check):
        try:
            check(doc, "h.json")
            outcomes.append(True)
        except ArtifactError as exc:
            assert str(exc).startswith("h.json: created: "), exc
            outcomes.append(False)
    assert outcomes == [valid, valid]


def _set(path: str, value: Any):
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return mutate


_DELETE = object()

INVALID = {
    "decision": [
        ("gates.0.target", "1.0", "a number as a string"),
        ("gates.0.target", True, "a bool for a number"),
        ("gates.0.verdict", "MAYBE", "a verdict outside the enum"),
        ("gates.0.concern", "latency", "a concern outside the enum"),
        ("gates.0.exact", _DELETE, "a required gate field left out"),
        ("gates.0.surprise", 1, "an undeclared gate field"),
        ("gates.0.n", [1.5], "a non-integer n"),
        ("catalogue.sha256", "abc", "a digest not of 64 hex digits"),
        ("optimization.extra", "x", "an undeclared optimization field"),
        ("id", "Not An Id", "an id off the pattern"),
        ("host_id", "Host_1", "a host id off the pattern"),
        ("schema_version", 2, "another schema version"),
        ("decision", None, "a null decision"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "projection": [
        ("entries.0.status", "DONE", "a status outside the enum"),
        ("entries.0.scenario", _DELETE, "a required nullable field left out"),
        ("entries.0.projected", {"low": 1, "mid": 2}, "a range without its high"),
        (
            "entries.0.projected",
            {"low": 1, "mid": 2, "high": 3, "x": 4},
            "a range with more",
        ),
        (
            "entries.0.baseline",
            {"run_id": "r", "created": "c"},
            "a baseline without its value",
        ),
        ("entries.0.optimizations", "kv", "a string for a list"),
        ("entries.0.note", 5, "a number for a note"),
        ("weighted.0.current", "1", "a string for a number"),
        ("weighted.0.surprise", 1, "an undeclared weighted field"),
        ("mix.sha256", "XYZ", "a digest not of 64 hex digits"),
        ("mix.file", _DELETE, "a file reference without its file"),
        ("inputs", [1], "a number among the inputs"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "host": [
        ("bandwidth", [], "no bandwidth row"),
        ("bandwidth.0.samples_gbs", [], "a row without samples"),
        ("bandwidth.0.samples_gbs", [0], "a sample of 0 GB/s"),
        ("bandwidth.0.threads", 0, "0 threads"),
        ("bandwidth.0.surprise", 1, "an undeclared row field"),
        ("bandwidth.0.summary.n", -1, "a negative count"),
        ("bandwidth.0.summary.mean", _DELETE, "a summary without its mean"),
        ("bandwidth.0.summary.outliers", [-1], "a negative outlier index"),
        ("probe.kind", "disk_bandwidth", "a probe kind outside the enum"),
        ("probe.repetitions", 0, "no repetitions"),
        ("probe.warmup", "yes", "a string for a bool"),
        ("host.id", "Bad Host", "a host id off the pattern"),
        ("host.cpu.flags", "avx2", "a string for the flag list"),
        ("host.cpu.signature", {"family": "6"}, "a signature value not an integer"),
        ("host.gpus", [{"memory_bytes": 1}], "a GPU without its name"),
        ("host.memory_bytes", -1, "a negative memory size"),
        ("conditions.logical_cores", 1.5, "a fractional core count"),
        ("read_bandwidth", [], "an empty read pass"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "noise": [
        ("runs.0.class", _DELETE, "a run without its class"),
        ("runs.0.mean", 0, "a mean of 0"),
        ("runs.0.n", 0, "a run of no samples"),
        ("runs.0.warmup", _DELETE, "a run without its warm-up flag"),
        ("runs.0.round", 0, "round 0"),
        ("runs.0.surprise", 1, "an undeclared run field"),
        ("stopping.reason", "tired", "a reason outside the enum"),
        ("stopping.useful_factor", 1, "a useful factor of 1"),
        ("stopping.max_runs", 0, "no runs allowed"),
        ("stopping.surprise", 1, "an undeclared stopping field"),
        ("host.cpu", _DELETE, "a host without its CPU"),
        ("matrix.file", _DELETE, "a matrix without its file"),
        ("schema_version", 1, "an older version, unmigrated"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "run": [
        ("id", "-bad id", "an id off the pattern"),
        ("key", "abc", "a key not of 64 hex digits"),
        ("status", "maybe", "a status outside the enum"),
        ("error", {"kind": "crash", "message": "x"}, "an ok run with an error"),
        ("matrix.file", _DELETE, "a matrix without its file"),
        ("matrix.baseline_key", "xyz", "a baseline key not of 64 hex digits"),
        ("backend", "", "an empty backend"),
        ("test.name", "a/b", "a test name off the pattern"),
        ("test.repetitions", 0, "no repetitions"),
        ("settings.requested.n_threads", "4", "a thread count as a string"),
        ("settings.effective.n_gpu_layers", -2, "a GPU layer count below -1"),
        ("settings.surprise", {}, "an undeclared settings part"),
        ("model.kind", "url", "a model kind outside the enum"),
        ("model.sha256", "abc", "a digest not of 64 hex digits"),
        ("model.sha256", None, "an ok run's model without its sha256"),
        ("model.gguf.block_count", 5000, "an implausible layer count"),
        ("model.gguf.sliding_window_pattern", "all", "a window pattern as text"),
        ("host.numa_nodes", 0, "no NUMA node"),
        ("host.cpu.flags", "avx2", "a string for the flag list"),
        ("build.in_process", _DELETE, "a build without in_process"),
        ("build.stats_method", 0, "stats method 0"),
        ("summary.x", {"n": 1}, "a summary without its statistics"),
        ("resources.wall_s", -1, "a negative wall time"),
        ("resources.peak_rss_bytes", 1.5, "a fractional byte count"),
        ("resources.exit_code", _DELETE, "resources without the exit code"),
        ("log_tail", None, "a null log tail"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "quality": [
        ("id", "-bad id", "an id off the pattern"),
        ("key", "abc", "a key not of 64 hex digits"),
        ("status", "maybe", "a status outside the enum"),
        (
            "error",
            {"kind": "refused", "message": "x"},
            "an error kind outside the enum",
        ),
        ("error", {"kind": "crash"}, "an error without its message"),
        ("matrix.file", _DELETE, "a matrix without its file"),
        ("backend", "", "an empty backend"),
        ("suite.version", 0, "suite version 0"),
        ("suite.content_sha256", "abc", "a digest not of 64 hex digits"),
        ("suite.n_items_in_suite", 0, "a suite of no items"),
        ("suite.sample.seed", "1", "a seed as a string"),
        ("suite.sample.ids", _DELETE, "a sample without its ids"),
        ("suite.prompt_styles", ["speech"], "a prompt style outside the enum"),
        ("generation.max_tokens", 0, "no tokens to generate"),
        ("generation.temperature", -0.5, "a negative temperature"),
        ("settings.requested.n_threads", "4", "a thread count as a string"),
        ("settings.surprise", {}, "an undeclared settings part"),
        ("model.sha256", None, "a model without its sha256"),
        ("model.size_bytes", -1, "a negative size"),
        ("model.gguf.block_count", 5000, "an implausible layer count"),
        ("host.numa_nodes", 0, "no NUMA node"),
        ("host.cpu.flags", "avx2", "a string for the flag list"),
        ("build.scorers", {"exact": "1"}, "a scorer version as a string"),
        ("build.method_version", _DELETE, "a build without its method version"),
        ("items.0.id", "", "an empty item id"),
        ("items.0.score", 1.5, "a score above 1"),
        ("items.0.scorer_version", 0, "scorer version 0"),
        ("items.0.passed", "yes", "a string for a bool"),
        (
            "items.0.degeneration.flags",
            ["loop"],
            "a degeneration flag outside the enum",
        ),
        ("items.0.timing.output_tokens", 1.5, "a fractional token count"),
        ("items.0.prompt_style", "speech", "an item's prompt style outside the enum"),
        ("items.0.output", _DELETE, "an item without its output"),
        ("summary.n", -1, "a negative count"),
        ("summary.pass_rate", 1.5, "a pass rate above 1"),
        ("summary.generation_errors", _DELETE, "a summary without its error count"),
        (
            "summary.by_tag.x",
            {
                "n": 1,
                "passed": 0,
                "pass_rate": 0,
                "ci95_low": 0,
                "ci95_high": 0,
                "y": 1,
            },
            "an undeclared field in a tag's rate",
        ),
        ("sandbox", {"isolation": "namespaces"}, "a string for the isolation layers"),
        ("resources.exit_code", _DELETE, "resources without the exit code"),
        ("resources.wall_s", "1", "a wall time as a string"),
        ("prompt_style", "speech", "a prompt style outside the enum"),
        ("log_tail", None, "a null log tail"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
    "perplexity": [
        ("id", "run-20261126T062744Z", "an id off the pattern"),
        ("key", "abc", "a key not of 64 hex digits"),
        ("status", "maybe", "a status outside the enum"),
        ("error", {"kind": "crash"}, "an error without its message"),
        ("model.sha256", "abc", "a digest not of 64 hex digits"),
        ("model.size_bytes", -1, "a negative size"),
        ("model.quantization", _DELETE, "a model without its quantization"),
        ("model.name", "", "an empty model name"),
        ("reference", {"name": "x"}, "a reference without its sha256"),
        ("text.licence", "", "an empty licence"),
        ("text.source", _DELETE, "a text without its source"),
        ("method.n_ctx", 4, "a context below 8"),
        ("method.n_chunk", _DELETE, "a method without its chunk count"),
        ("method.rope_scaling", "ntk", "a RoPE scaling outside the enum"),
        ("method.rope_factor", 1, "a RoPE factor below 2"),
        ("host.id", "Bad Host", "a host id off the pattern"),
        ("host.cpu.flags", "avx2", "a string for the flag list"),
        ("host.memory_bytes", -1, "a negative memory size"),
        ("results.n_scored_tokens", -1, "a negative token count"),
        ("results.ppl", "12", "a perplexity as a string"),
        ("results.nll_se", _DELETE, "results without the NLL's standard error"),
        ("chunks.0.ppl", _DELETE, "a chunk without its perplexity"),
        ("chunks", {}, "an object for the chunk list"),
        ("settings", [], "a list for the settings"),
        ("build", "llama.cpp", "a string for the build"),
        ("resources", None, "null resources"),
        ("log_tail", 5, "a number for the log tail"),
        ("surprise", 1, "an undeclared top-level field"),
    ],
}


@pytest.mark.parametrize(
    "artifact,field,value,what",
    [(a, f, v, w) for a, rows in INVALID.items() for f, v, w in rows],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_what_the_handwritten_schema_rejected_is_still_rejected(
    artifact, field, value, what
):
    """Each invalid document is rejected by the old hand-written schema, by the generated one (both
    through jsonschema and through the load path) and by the model, in one line naming the file and
    the field."""
    path = next(
        p
        for p in _committed(artifact)
        if json.loads(p.read_text()).get(
            {
                "projection": "entries",
                "decision": "gates",
                "host": "bandwidth",
                "noise": "runs",
                "run": "summary",
                "quality": "items",
                "perplexity": "results",
            }[artifact]
        )
    )
    doc = json.loads(artifacts.dumps(artifacts.load(path)))  # migrated where older
    if artifact == "projection":  # an entry with a projection and a baseline to mutate
        doc["entries"].sort(key=lambda e: e.get("projected") is None)
        assert doc["entries"][0]["projected"] and doc["entries"][0]["baseline"]
    bad = copy.deepcopy(doc)
    _set(field, value)(bad)
    assert list(_old_validator(artifact).iter_errors(bad)), (
        f"old schema accepted {what}"
    )
    assert list(_new_validator(artifact).iter_errors(bad)), (
        f"new schema accepted {what}"
    )
    with pytest.raises(ArtifactError) as load_err:
        artifacts.validate(bad, "bad.json")
    assert "\n" not in str(load_err.value)
    model = model_for(artifact)
    assert model is not None
    with pytest.raises(ArtifactError) as model_err:
        model.check(bad, "data/x/bad.json")
    line = str(model_err.value)
    assert "\n" not in line and line.startswith("data/x/bad.json: "), line
    top = field.split(".")[0]
    assert model_err.value.field and model_err.value.field.startswith(top), line


def test_a_model_rejection_names_file_field_path_and_what():
    doc = json.loads(_committed("decision")[0].read_text())
    doc["gates"][0]["target"] = "high"
    model = model_for("decision")
    assert model is not None
    with pytest.raises(ArtifactError) as err:
        model.check(doc, "data/decisions/h/d.json")
    assert (
        str(err.value)
        == "data/decisions/h/d.json: gates.0.target: Input should be a number"
    )
    doc = json.loads(_committed("decision")[0].read_text())
    doc["created"] = "noon"
    with pytest.raises(ArtifactError) as err:
        model.check(doc, "d.json")
    assert str(err.value) == "d.json: created: 'noon' is not a date-time"


# --- the writers, against the dict-building writers they replaced (kept here as the reference) ----


def _old_new_decision(*, host_id, created, optimization, catalogue, decision, gates):
    from core.records.decision import RULE

    return {
        "artifact": "decision",
        "schema_version": 1,
        "id": f"{optimization['id']}-{host_id}-{created.strftime('%Y%m%dT%H%M%SZ')}",
        "created": created.isoformat(timespec="seconds"),
        "host_id": host_id,
        "optimization": {
            "id": optimization["id"],
            "name": optimization["name"],
            "settings": dict(optimization.get("settings") or {}),
        },
        "catalogue": dict(catalogue),
        "decision": decision,
        "rule": RULE,
        "gates": [dict(g) for g in gates],
    }


def _old_new_projection(
    *,
    host_id,
    created,
    mix,
    catalogue,
    composition_rule,
    weighting_rule,
    inputs,
    entries,
    weighted,
):
    return {
        "artifact": "projection",
        "schema_version": 1,
        "id": f"{host_id}-{created.strftime('%Y%m%dT%H%M%SZ')}",
        "created": created.isoformat(timespec="seconds"),
        "host_id": host_id,
        "mix": dict(mix),
        "catalogue": dict(catalogue),
        "composition_rule": composition_rule,
        "weighting_rule": weighting_rule,
        "inputs": sorted(inputs),
        "entries": list(entries),
        "weighted": list(weighted),
    }


def _old_new_host(
    *, fingerprint, created, probe, bandwidth, read_bandwidth=None, conditions=None
):
    if isinstance(created, datetime):
        stamp, created_s = (
            created.strftime("%Y%m%dT%H%M%SZ"),
            created.isoformat(timespec="seconds"),
        )
    else:
        stamp, created_s = created.replace("-", "").replace(":", "")[:15] + "Z", created
    doc = {
        "artifact": "host",
        "schema_version": 1,
        "id": f"{fingerprint['id']}-{stamp}",
        "created": created_s,
        "host": fingerprint,
        "probe": dict(probe),
        "bandwidth": list(bandwidth),
        "conditions": dict(conditions or {}),
    }
    if read_bandwidth:
        doc["read_bandwidth"] = list(read_bandwidth)
    return doc


def test_the_host_writer_writes_the_same_bytes_as_before():
    from core.records.host import bandwidth_entry, new_host

    for path in _committed("host"):
        doc = json.loads(path.read_text())
        for created in (doc["created"], datetime.fromisoformat(doc["created"])):
            args = {
                "fingerprint": doc["host"],
                "created": created,
                "probe": doc["probe"],
                "bandwidth": doc["bandwidth"],
                "read_bandwidth": doc.get("read_bandwidth"),
                "conditions": doc["conditions"],
            }
            assert artifacts.dumps(new_host(**copy.deepcopy(args))) == artifacts.dumps(
                _old_new_host(**args)
            )
    # a row as the probe builds it: the summary core.stats computes, kept as computed
    from core import stats

    samples = [10.5, 11.0, 10.75, 10.9, 11.2, 10.6]
    assert bandwidth_entry(2, samples) == {
        "threads": 2,
        "samples_gbs": samples,
        "summary": stats.summarize(samples),
    }


def _old_new_noise(*, host, matrix, runs, conditions, stopping=None, created=None):
    from core import noise
    from core.records.noise import METHOD, STOP_WORDS, fixed_stopping

    runs = [{**r, "warmup": bool(r.get("warmup", False))} for r in runs]
    groups: dict[str, dict[str, list[float]]] = {}
    dropped: dict[str, int] = {}
    for r in runs:
        if r["warmup"]:
            dropped[r["class"]] = dropped.get(r["class"], 0) + 1
        else:
            groups.setdefault(r["class"], {}).setdefault(r["group"], []).append(
                r["mean"]
            )
    stopping = (
        dict(stopping)
        if stopping
        else fixed_stopping(
            max((len(m) for g in groups.values() for m in g.values()), default=0)
        )
    )
    est = {}
    for c, e in noise.estimates(
        {c: list(g.values()) for c, g in groups.items()}
    ).items():
        if e["why"]:
            e["why"] += (
                f" after {e['runs']} counted runs "
                f"({STOP_WORDS.get(stopping['reason'], stopping['reason'])})"
            )
        est[c] = {**e, "warmup_dropped": dropped.get(c, 0)}
    return {
        "artifact": "noise",
        "schema_version": 2,
        "id": f"{host['id']}-noise-{created.strftime('%Y%m%dT%H%M%SZ')}",
        "created": created.isoformat(timespec="seconds"),
        "host": host,
        "matrix": matrix,
        "method": METHOD,
        "conditions": conditions,
        "runs": runs,
        "estimates": est,
        "stopping": stopping,
    }


def test_the_noise_writer_writes_the_same_bytes_as_before():
    from core.records.noise import new_noise

    for path in _committed("noise"):
        doc = artifacts.load(path)  # a version 1 file, migrated
        for stopping in (doc["stopping"], None):
            for runs in (
                doc["runs"],
                [{**doc["runs"][0], "warmup": True}] + doc["runs"],
            ):
                args = {
                    "host": doc["host"],
                    "matrix": doc["matrix"],
                    "runs": runs,
                    "conditions": doc["conditions"],
                    "stopping": stopping,
                    "created": datetime.fromisoformat(doc["created"]),
                }
                assert artifacts.dumps(
                    new_noise(**copy.deepcopy(args))
                ) == artifacts.dumps(_old_new_noise(**copy.deepcopy(args)))


def _inputs(doc: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {
        "host_id": doc["host_id"],
        "created": datetime.fromisoformat(doc["created"]),
        **{k: copy.deepcopy(doc[k]) for k in names},
    }


def test_the_decision_writer_writes_the_same_bytes_as_before():
    names = ("optimization", "catalogue", "decision", "gates")
    for path in _committed("decision"):
        args = _inputs(json.loads(path.read_text()), names)
        assert artifacts.dumps(new_decision(**copy.deepcopy(args))) == artifacts.dumps(
            _old_new_decision(**args)
        )
    # a gate without its optional metric and n stays without them; an integer stays an integer
    args = _inputs(json.loads(_committed("decision")[0].read_text()), names)
    for g in args["gates"]:
        g.pop("metric", None), g.pop("n", None)
        g["target"] = 1
    assert artifacts.dumps(new_decision(**copy.deepcopy(args))) == artifacts.dumps(
        _old_new_decision(**args)
    )


def test_the_projection_writer_writes_the_same_bytes_as_before():
    names = (
        "mix",
        "catalogue",
        "composition_rule",
        "weighting_rule",
        "inputs",
        "entries",
        "weighted",
    )
    for path in _committed("projection"):
        args = _inputs(json.loads(path.read_text()), names)
        args["inputs"] = list(reversed(args["inputs"]))
        assert artifacts.dumps(
            new_projection(**copy.deepcopy(args))
        ) == artifacts.dumps(_old_new_projection(**args))


def _old_new_run(
    *,
    key,
    created,
    status,
    backend,
    test,
    requested,
    model,
    host,
    build,
    matrix,
    swept=None,
    effective=None,
    error=None,
    samples=None,
    summary=None,
    details=None,
    resources=None,
    log_tail="",
    run_id_=None,
):
    from core import __version__
    from core.records.run import METHOD_VERSION, STATS_METHOD, run_id
    from core.summary import Summary

    b = {
        "backend": backend,
        "almanac": __version__,
        "method_version": METHOD_VERSION,
        "stats_method": STATS_METHOD,
        **build,
    }
    model = dict(model)
    model.setdefault("kind", "file")
    if model["kind"] == "file":
        model.setdefault("identity", model.get("sha256") or model.get("name"))
    res = {
        "peak_rss_bytes": None,
        "peak_vram_bytes": None,
        "wall_s": 0.0,
        "exit_code": None,
        "signal": None,
        **(resources or {}),
    }
    return {
        "artifact": "run",
        "schema_version": 2,
        "id": run_id_ or run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error if status != "ok" else None,
        "matrix": dict(matrix),
        "backend": backend,
        "test": dict(test),
        "settings": {
            "requested": dict(requested),
            "swept": dict(swept or {}),
            "effective": dict(effective or {}),
        },
        "model": dict(model),
        "host": dict(host),
        "build": b,
        "samples": samples or {},
        "summary": {
            k: v.to_dict() if isinstance(v, Summary) else dict(v)
            for k, v in (summary or {}).items()
        },
        "details": details or {},
        "resources": res,
        "log_tail": log_tail,
    }


def _run_args(doc: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "key": doc["key"],
            "created": datetime.fromisoformat(doc["created"]),
            "status": doc["status"],
            "backend": doc["backend"],
            "test": doc["test"],
            "requested": doc["settings"]["requested"],
            "swept": doc["settings"]["swept"],
            "effective": doc["settings"]["effective"],
            "model": doc["model"],
            "host": doc["host"],
            "build": doc["build"],
            "matrix": doc["matrix"],
            "error": doc["error"],
            "samples": doc["samples"],
            "summary": doc["summary"],
            "details": doc["details"],
            "resources": doc["resources"],
            "log_tail": doc["log_tail"],
        }
    )


def test_the_run_writer_writes_the_same_bytes_as_before():
    from core.records.run import new_run
    from core.summary import Summary

    paths = _committed("run")
    for path in paths:
        doc = artifacts.load(path)  # a version 1 file, migrated
        args = _run_args(doc)
        assert artifacts.dumps(new_run(**copy.deepcopy(args))) == artifacts.dumps(
            _old_new_run(**args)
        ), path
    # as the runner calls it: a Summary, resources with only the required keys, tuples for lists,
    # the model's kind and identity left to the writer, no build stamp, an integer wall time
    doc = artifacts.load(paths[0])
    args = _run_args(doc)
    args["summary"] = {k: Summary.from_dict(v) for k, v in args["summary"].items()}
    args["resources"] = {"wall_s": 3}
    args["host"]["cpu"]["flags"] = tuple(args["host"]["cpu"]["flags"])
    args["model"].pop("identity")
    args["model"].pop("kind")
    for k in ("almanac", "method_version", "stats_method", "backend"):
        args["build"].pop(k, None)
    assert artifacts.dumps(new_run(**copy.deepcopy(args))) == artifacts.dumps(
        _old_new_run(**args)
    )


def test_the_run_writer_refuses_in_one_line_naming_the_file_and_field():
    from core.records.run import new_run

    args = _run_args(artifacts.load(_committed("run")[0]))
    args["resources"]["wall_s"] = -1.0
    with pytest.raises(ArtifactError) as err:
        new_run(**args)
    line = str(err.value)
    assert "\n" not in line and "/runs/" in line, (
        line
    )  # the file it would be written to
    assert ".json: resources.wall_s: " in line and err.value.field == "resources.wall_s"
    assert line.endswith("Input should be greater than or equal to 0"), line


@pytest.mark.parametrize(
    "precision,valid",
    [
        (None, True),  # exactly the count asked for
        ({"target": 0.05, "metric": None, "min_repetitions": 3}, True),
        # an open object: later fields kept
        ({"target": 0.05, "a_later_field": 1}, True),
        # the property test's find (stop 44's CI): the leaderboard called .get on it
        (True, False),
        ("2%", False),
        ({"target": -0.1}, False),
        ({"target": "0.02"}, False),
        ({"min_repetitions": 0}, False),
    ],
)
def test_a_run_s_precision_is_an_object_or_null(precision, valid):
    """``test.precision`` is the matrix's repeat-to-a-precision (an object whose target is a positive
    number) or null; anything else is refused in one line naming the field, so no page meets it."""
    path = next(
        p
        for p in _committed("run")
        if isinstance(json.loads(p.read_text())["test"].get("precision"), dict)
    )
    doc = json.loads(artifacts.dumps(artifacts.load(path)))
    doc["test"]["precision"] = precision
    if valid:
        artifacts.validate(doc, "p.json")
        return
    with pytest.raises(ArtifactError) as err:
        artifacts.validate(doc, "p.json")
    line = str(err.value)
    assert (
        "\n" not in line and line.startswith("p.json: ") and "test.precision" in line
    ), line


def test_a_writer_refuses_what_the_schema_would_refuse():
    args = _inputs(
        json.loads(_committed("decision")[0].read_text()),
        ("optimization", "catalogue", "decision", "gates"),
    )
    with pytest.raises(ValidationError, match="surprise"):
        new_decision(**args, surprise=1)  # an optional field the model does not declare
    args["gates"][0]["verdict"] = "PERHAPS"
    with pytest.raises(ValidationError, match="verdict"):
        new_decision(**args)


def test_records_read_the_models_fields():
    path = _committed("decision")[0]
    doc = json.loads(path.read_text())
    rec = DecisionRecord(doc, path=str(path))
    assert rec.decision == doc["decision"] and rec.host_id == doc["host_id"]
    assert rec.optimization_settings == doc["optimization"]["settings"]
    g, raw = rec.gates[0], doc["gates"][0]
    assert (g.id, g.verdict, g.value, g.n, g.evidence) == (
        raw["id"],
        raw["verdict"],
        raw["value"],
        tuple(raw["n"]) if raw.get("n") else None,
        raw["evidence"],
    )
    from core.records.host import HostRecord

    for hpath in _committed("host"):
        hdoc = json.loads(hpath.read_text())
        hrec = HostRecord(hdoc, path=str(hpath))
        assert hrec.probe_kind == hdoc["probe"]["kind"]
        assert hrec.probe.get("device") == hdoc["probe"].get("device")
        for row, raw in zip(hrec.bandwidth, hdoc["bandwidth"], strict=True):
            assert row.threads == raw["threads"] and row.best == max(raw["samples_gbs"])
            assert (row.summary.mean, row.summary.n) == (
                raw["summary"]["mean"],
                raw["summary"]["n"],
            )
        assert len(hrec.read_bandwidth) == len(hdoc.get("read_bandwidth") or [])
        assert hrec.loadavg_before == hdoc["conditions"].get("loadavg_1m_before")
    ppath = _committed("projection")[0]
    pdoc = json.loads(ppath.read_text())
    prec = ProjectionRecord(pdoc, path=str(ppath))
    assert prec.mix == pdoc["mix"] and prec.weighted == pdoc["weighted"]
    for e, raw in zip(prec.entries, pdoc["entries"], strict=True):
        assert e.role == raw["role"] and e.status == raw["status"]
        # nested objects read like the document's dicts (what pipelines.projections reads)
        for key in ("baseline", "projected", "verification"):
            part = getattr(e, key)
            if raw[key] is None:
                assert part is None
                continue
            for k, v in raw[key].items():
                assert part[k] == v and part.get(k) == v
            assert part.get("not-there") is None
            with pytest.raises(KeyError):
                part["not-there"]


def test_the_run_record_reads_the_models_fields():
    from core.models.run import Resources, Run
    from core.records.run import RunRecord

    for path in _committed("run"):
        doc = artifacts.load(path)
        rec = RunRecord(doc, path=str(path))
        assert isinstance(rec.envelope, Run) and rec.envelope.id == doc["id"]
        assert isinstance(rec.resources, Resources)
        for name, value in doc["resources"].items():
            got = getattr(rec.resources, name, rec.resources.get(name))
            if isinstance(value, dict | list) and value:
                assert rec.resources[name] is not None
            else:
                assert got == value, (path, name)
        q = doc["resources"].get("quiet")
        assert rec.disturbed == bool(q and q.get("disturbed") is True)
    # a document read without validation (a partial one a test builds) reads what it has
    partial = RunRecord({"resources": {"wall_s": 2.5, "quiet": {"disturbed": True}}})
    assert partial.resources.wall_s == 2.5 and partial.resources.peak_rss_bytes is None
    assert partial.disturbed
    with pytest.raises(ArtifactError) as err:
        _ = RunRecord({**doc, "key": "x"}, path="data/runs/x.json").envelope
    assert str(err.value).startswith("data/runs/x.json: key: ")


def test_the_oldest_committed_artifact_of_every_type_still_loads():
    """Migration keeps working beside the models: of each artifact type, the committed files of the
    oldest schema version there is load (migrated to the current version) and validate."""
    oldest: dict[str, tuple[int, list[Path]]] = {}
    for path in committed_paths(""):
        if path.suffix != ".json" or path.parts[-3:-2] == ("schema",):
            continue
        doc = json.loads(path.read_text())
        if (
            not isinstance(doc, dict)
            or doc.get("artifact") not in artifacts.ARTIFACT_TYPES
        ):
            continue
        v, paths = oldest.get(doc["artifact"], (10**9, []))
        if doc["schema_version"] < v:
            oldest[doc["artifact"]] = (doc["schema_version"], [path])
        elif doc["schema_version"] == v and len(paths) < 3:
            paths.append(path)
    assert set(CONVERTED) <= set(oldest)
    for name, (_version, paths) in oldest.items():
        for path in paths:
            doc = artifacts.load(path)
            assert doc["schema_version"] == artifacts.ARTIFACT_TYPES[name].version, path
            model = model_for(name)
            if model is not None:
                model.check(doc, str(path))


def _old_new_quality(
    *,
    key,
    created,
    status,
    error,
    matrix,
    backend,
    prompt_style,
    suite,
    generation,
    requested,
    swept,
    effective,
    model,
    host,
    build,
    items,
    sandbox,
    resources,
    log_tail,
):
    from core.records.quality import summarize_items
    from core.records.run import run_id

    return {
        "artifact": "quality",
        "schema_version": 1,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "matrix": dict(matrix),
        "backend": backend,
        "prompt_style": prompt_style,
        "suite": dict(suite),
        "generation": dict(generation),
        "settings": {
            "requested": dict(requested),
            "swept": dict(swept),
            "effective": dict(effective),
        },
        "model": dict(model),
        "host": host,
        "build": dict(build),
        "items": items,
        "summary": summarize_items(items),
        "sandbox": sandbox,
        "resources": dict(resources),
        "log_tail": log_tail,
    }


def _quality_args(doc: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "key": doc["key"],
            "created": datetime.fromisoformat(doc["created"]),
            "status": doc["status"],
            "error": doc["error"],
            "matrix": doc["matrix"],
            "backend": doc["backend"],
            "prompt_style": doc.get("prompt_style", "chat"),
            "suite": doc["suite"],
            "generation": doc["generation"],
            "requested": doc["settings"]["requested"],
            "swept": doc["settings"]["swept"],
            "effective": doc["settings"]["effective"],
            "model": doc["model"],
            "host": doc["host"],
            "build": doc["build"],
            "items": doc["items"],
            "sandbox": doc["sandbox"],
            "resources": doc["resources"],
            "log_tail": doc["log_tail"],
        }
    )


def test_the_quality_writer_writes_the_same_bytes_as_before():
    from core.records.quality import new_quality

    paths = _committed("quality")
    for path in paths:
        args = _quality_args(json.loads(path.read_text()))
        assert artifacts.dumps(new_quality(**copy.deepcopy(args))) == artifacts.dumps(
            _old_new_quality(**args)
        ), path
    # as the suite runner calls it: tuples for lists, an integer wall time, a failed run
    args = _quality_args(json.loads(paths[0].read_text()))
    args["suite"]["includes"] = tuple(args["suite"]["includes"])
    args["host"]["cpu"]["flags"] = tuple(args["host"]["cpu"]["flags"])
    args["resources"]["wall_s"] = 3
    args["status"] = "failed"
    args["error"] = {"kind": "crash", "message": "x", "signal": None, "exit_code": 1}
    old = json.loads(json.dumps(_old_new_quality(**copy.deepcopy(args))))
    assert artifacts.dumps(new_quality(**args)) == artifacts.dumps(old)


def _old_new_perplexity(
    *,
    key,
    created,
    status,
    error,
    model,
    reference,
    text,
    method,
    settings,
    host,
    build,
    results,
    chunks,
    resources,
    log_tail,
):
    from core.records.run import run_id

    return {
        "artifact": "perplexity",
        "schema_version": 1,
        "id": run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error,
        "model": dict(model),
        "reference": dict(reference) if reference else None,
        "text": dict(text),
        "method": dict(method),
        "settings": dict(settings),
        "host": host,
        "build": dict(build),
        "results": results,
        "chunks": list(chunks),
        "resources": dict(resources),
        "log_tail": log_tail,
    }


def _perplexity_args(doc: dict[str, Any]) -> dict[str, Any]:
    names = (
        *("key", "status", "error", "model", "reference", "text", "method"),
        *("settings", "host", "build", "results", "chunks", "resources", "log_tail"),
    )
    return copy.deepcopy(
        {
            **{k: doc[k] for k in names},
            "created": datetime.fromisoformat(doc["created"]),
        }
    )


def test_the_perplexity_writer_writes_the_same_bytes_as_before():
    from core.records.perplexity import new_perplexity

    paths = _committed("perplexity")
    for path in paths:
        args = _perplexity_args(json.loads(path.read_text()))
        assert artifacts.dumps(
            new_perplexity(**copy.deepcopy(args))
        ) == artifacts.dumps(_old_new_perplexity(**args)), path
    # a failed measurement: no figures, no reference, an integer wall time
    args = _perplexity_args(json.loads(paths[0].read_text()))
    args.update(status="failed", results=None, reference=None, chunks=[])
    args["error"] = {"kind": "timeout", "message": "child exited"}
    args["resources"]["wall_s"] = 7
    assert artifacts.dumps(new_perplexity(**copy.deepcopy(args))) == artifacts.dumps(
        _old_new_perplexity(**args)
    )


def test_the_quality_and_perplexity_writers_refuse_in_one_line():
    from core.records.perplexity import new_perplexity
    from core.records.quality import new_quality

    args = _quality_args(json.loads(_committed("quality")[0].read_text()))
    args["generation"]["temperature"] = -1
    with pytest.raises(ArtifactError) as err:
        new_quality(**args)
    line = str(err.value)
    assert "\n" not in line and err.value.field == "generation.temperature", line
    assert line.endswith(
        ": generation.temperature: Input should be greater than or equal to 0"
    )
    pargs = _perplexity_args(json.loads(_committed("perplexity")[0].read_text()))
    pargs["method"]["n_ctx"] = 4
    with pytest.raises(ArtifactError) as err:
        new_perplexity(**pargs)
    assert "\n" not in str(err.value) and err.value.field == "method.n_ctx"


def test_the_quality_and_perplexity_records_read_the_models_fields():
    from core.models.perplexity import Perplexity
    from core.models.quality import Quality
    from core.records.perplexity import PerplexityRecord
    from core.records.quality import QualityRecord

    for path in _committed("quality"):
        doc = json.loads(path.read_text())
        q = QualityRecord(doc, path=str(path))
        assert isinstance(q.envelope, Quality) and q.envelope.id == doc["id"]
        assert q.suite.name == doc["suite"]["name"]
        assert q.suite.sample.get("ids") == doc["suite"]["sample"]["ids"]
        assert [(i.id, i.passed, i.degenerate) for i in q.items] == [
            (i["id"], i["passed"], i["degeneration"]["degenerate"])
            for i in doc["items"]
        ]
        assert q.summary.rate.to_dict() == {
            k: doc["summary"][k]
            for k in ("n", "passed", "pass_rate", "ci95_low", "ci95_high")
        }
        assert {t: r.to_dict() for t, r in q.summary.by_tag.items()} == doc["summary"][
            "by_tag"
        ]
        assert q.summary.chance == doc["summary"].get("chance")
        for item, raw in zip(q.items, doc["items"], strict=True):
            assert item.timing.get("e2e_ms") == raw["timing"].get("e2e_ms")
    for path in _committed("perplexity"):
        doc = json.loads(path.read_text())
        p = PerplexityRecord(doc, path=str(path))
        assert isinstance(p.envelope, Perplexity)
        assert (p.model.name, p.model.sha256, p.text.name) == (
            doc["model"]["name"],
            doc["model"]["sha256"],
            doc["text"]["name"],
        )
        assert (p.reference.name if p.reference else None) == (
            (doc["reference"] or {}).get("name")
        )
        assert p.results is not None
        assert p.results.ppl == doc["results"]["ppl"]
        assert p.results.kld_mean == doc["results"].get("kld_mean")
    with pytest.raises(ArtifactError) as err:
        _ = QualityRecord({**doc, "artifact": "quality"}, path="data/q/x.json").envelope
    assert str(err.value).startswith("data/q/x.json: ")
