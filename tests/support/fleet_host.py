"""A fixture host (no second machine here): a fresh host's reference rows as today's runner writes
them (core.records.run.new_run with the reference matrix's test and settings as they are now: a
precision block, extra_bufts), its figures those of a committed CPU row, on a host of its own."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import artifacts
from core.records import run as record
from runtime.execution import matrix
from tests.support.committed import committed_data, committed_runs

NEW_HOST = {
    "id": "vm-fixture0001",
    "name": "vm-fixture",
    "gpus": [],
    "cpu": {
        "model": "Fixture CPU (a fixture host: no second machine here)",
        "physical_cores": 2,
        "logical_cores": 2,
        "flags": [],
    },
    "memory_bytes": 24 << 30,
    "numa_nodes": 1,
    "os": {},
}


def committed_reference(
    model: str = "synthetic-llama-1b-q8_0", test: str = "pp512"
) -> record.RunRecord:
    rows = [
        r
        for r in committed_runs()
        if r.ok
        and r.matrix_name == "reference"
        and not r.gpu_names
        and r.model_name == model
        and r.test_name == test
        and r.build_label is None
    ]
    if not rows:
        pytest.skip("no committed CPU reference row")
    return rows[0]


def new_row(
    old: record.RunRecord, host: dict = NEW_HOST, **changes
) -> record.RunRecord:
    """The same model and test as ``old``, as today's runner writes it: the reference matrix's test
    (with its precision block) and settings (with extra_bufts), another host, its own effective
    settings (use_extra_bufts, as runtime.backends.llama_cpp.lib_policy reports it)."""
    cfg = next(
        c
        for c in matrix.load("reference").configurations()
        if c.model == old.model_name and c.test.name == old.test_name
    )
    test = cfg.test.to_dict()
    test.update(changes.pop("test", {}))
    requested = cfg.settings.model_dump(mode="json")
    effective = {
        **old.reported,
        "n_threads": 4,
        "n_threads_batch": 4,
        "use_extra_bufts": False,
        "use_extra_bufts_reason": "fixture",
        **changes.pop("effective", {}),
    }
    model = {**copy.deepcopy(old.model), **changes.pop("model", {})}
    build = {**copy.deepcopy(old.build), "almanac": "9.9.9", **changes.pop("build", {})}
    build.pop("backend", None), build.pop("method_version", None)
    build.update(changes.pop("build_extra", {}))
    assert not changes, changes
    key = record.config_key(
        old.backend,
        model["identity"],
        requested,
        test,
        host["id"],
        build["backend_version"],
    )
    doc = record.new_run(
        key=key,
        created=datetime(
            2026, 11, 27, tzinfo=UTC
        ),  # a fixed past date: never ahead of a clock
        status="ok",
        backend=old.backend,
        test=test,
        requested=requested,
        effective=effective,
        model=model,
        host=host,
        build=build,
        matrix={"name": "reference", "file": "data/matrices/reference.yaml"},
        samples=old["samples"],
        summary=old.doc["summary"],
        details={},
        resources={"wall_s": 1.0, "exit_code": 0},
    )
    artifacts.validate(doc)
    return record.RunRecord(doc, f"data/runs/{host['id']}/{doc['id']}.json")


def fixture_host_runs(host: dict = NEW_HOST) -> list[record.RunRecord]:
    """The fixture host's reference rows: one per committed CPU reference configuration that the
    reference matrix still asks for."""
    old = committed_reference()
    wanted = {(c.model, c.test.name) for c in matrix.load("reference").configurations()}
    rows = [
        r
        for r in committed_runs()
        if r.ok
        and r.matrix_name == "reference"
        and r.host_id == old.host_id
        and r.build_label is None
        and (r.model_name, r.test_name) in wanted
    ]
    return [new_row(r, host) for r in record.latest_per_key(rows)]


def fleet_data(dest: Path, host: dict = NEW_HOST) -> Path:
    """A data dir: the project's inputs, the committed artifacts and the fixture host's reference rows."""
    data = committed_data(dest)
    for r in fixture_host_runs(host):
        record.write(r.stored, data / "runs")
    return data
