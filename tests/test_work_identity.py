"""Issue 19, item 1: work identity apart from method and environment.

Two results ran the same *work* when the model identity, the test's work parameters and the
backend class match (core.records.run.RunRecord.work_key). How precisely each was measured
(repetitions, precision target, warm-up) is its *method*; host, backend, build and effective
settings (threads, GPU layers, extra buffer types ...) are its *environment*.

The case the issue found: a committed reference row (measured with ``repetitions: 5``, before
the ``precision`` block and the ``extra_bufts`` setting existed) beside a row written today by
the runner's own path (core.records.run.new_run with the reference matrix's test and settings
as they are now) on another host. They must share work, and Host vs host must pair them.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest

from core import artifacts
from core.records import run as record
from pipelines import compare as cmp
from pipelines.site import history_pages
from runtime.execution import matrix
from tests.support.committed import committed_runs

NEW_HOST = {"id": "vm-fixture0001", "name": "vm-fixture", "gpus": [],
            "cpu": {"model": "Fixture CPU (a fixture host: no second machine here)", "physical_cores": 2,
                    "logical_cores": 2, "flags": []},
            "memory_bytes": 24 << 30, "numa_nodes": 1, "os": {}}


def _committed_reference(model: str = "synthetic-llama-1b-q8_0", test: str = "pp512") -> record.RunRecord:
    rows = [r for r in committed_runs() if r.ok and r.matrix_name == "reference" and not r.gpu_names
            and r.model_name == model and r.test_name == test and r.build_label is None]
    if not rows:
        pytest.skip("no committed CPU reference row")
    return rows[0]


def new_row(old: record.RunRecord, host: dict = NEW_HOST, **changes) -> record.RunRecord:
    """The same model and test as ``old``, as today's runner writes it: the reference matrix's test
    (with its precision block) and settings (with extra_bufts), another host, its own effective
    settings (use_extra_bufts, as runtime.backends.llama_cpp.lib_policy reports it)."""
    cfg = next(c for c in matrix.load("reference").configurations()
               if c.model == old.model_name and c.test.name == old.test_name)
    test = cfg.test.to_dict()
    test.update(changes.pop("test", {}))
    requested = cfg.settings.model_dump(mode="json")
    effective = {**old.reported, "n_threads": 4, "n_threads_batch": 4, "use_extra_bufts": False,
                 "use_extra_bufts_reason": "fixture", **changes.pop("effective", {})}
    model = {**copy.deepcopy(old.model), **changes.pop("model", {})}
    build = {**copy.deepcopy(old.build), "almanac": "9.9.9", **changes.pop("build", {})}
    build.pop("backend", None), build.pop("method_version", None)
    build.update(changes.pop("build_extra", {}))
    assert not changes, changes
    key = record.config_key(old.backend, model["identity"], requested, test, host["id"], build["backend_version"])
    doc = record.new_run(key=key, created=datetime(2026, 12, 1, tzinfo=timezone.utc), status="ok", backend=old.backend,
                         test=test, requested=requested, effective=effective, model=model, host=host, build=build,
                         matrix={"name": "reference", "file": "data/matrices/reference.yaml"},
                         samples=old.doc["samples"], summary=old.doc["summary"], details={},
                         resources={"wall_s": 1.0, "exit_code": 0})
    artifacts.validate(doc)
    return record.RunRecord(doc, f"data/runs/{host['id']}/{doc['id']}.json")


def test_a_committed_row_and_a_new_one_share_work_apart_from_method_and_environment():
    old = _committed_reference()
    new = new_row(old)
    # what made the new host share nothing: a precision block, extra_bufts, use_extra_bufts
    assert "precision" in new.test and "precision" not in old.test
    assert "extra_bufts" in new.requested and "extra_bufts" not in old.requested
    assert old.comparability_key() != new.comparability_key()  # other host, other threads: other rows
    # ... and yet the same work
    assert new.work_key == old.work_key and new.work == old.work
    assert old.work["test"] == {"kind": "rate", "n_prompt": 512, "n_gen": 0, "n_depth": 0}
    assert old.work["class"] == "in process" and old.work["model"] == old.model_sha256
    # the method says how each was measured, the environment where and with what
    assert old.method["repetitions"] == 5 and "precision" not in old.method
    assert new.method["precision"]["target"] == new.test["precision"]["target"]
    assert old.environment["host"] != new.environment["host"]
    assert new.environment["settings"]["use_extra_bufts"] is False


@pytest.mark.parametrize("change", [
    {"test": {"n_prompt": 256}},  # other tokens
    {"test": {"n_depth": 512}},  # other depth
    {"model": {"identity": "cd" * 32, "sha256": "cd" * 32}},  # another file
    {"build_extra": {"in_process": False, "server": "llama-server"}},  # another backend class
    {"build_extra": {"method_version": record.METHOD_VERSION + 1}},  # a measurement that means something else
])
def test_other_work_is_other_work(change):
    old = _committed_reference()
    assert new_row(old, **change).work_key != old.work_key


@pytest.mark.parametrize("change", [
    {"test": {"repetitions": 30, "warmup": False, "precision": None}},  # method
    {"effective": {"n_gpu_layers": 17, "flash_attn": "off", "use_extra_bufts": True}},  # environment
    {"build": {"backend_version": "llama-cpp-python 9.9", "llama_cpp_commit": "fffffff"}},  # another build
])
def test_method_and_environment_never_change_the_work(change):
    old = _committed_reference()
    assert new_row(old, **change).work_key == old.work_key


def test_history_follows_a_configuration_across_methods_and_a_setting_added_later():
    """Same host and requested settings: one series, whether the test was repeated 5 times or to a
    precision, and whether the settings name extra_bufts (null: the backend's default) or not."""
    old = _committed_reference()
    same_host = new_row(old, host={**old.host})
    assert same_host.history_key == old.history_key
    asked_otherwise = new_row(old, host={**old.host})
    asked_otherwise.doc["settings"]["requested"]["n_threads"] = 1
    assert record.RunRecord(asked_otherwise.doc).history_key != old.history_key


def test_host_vs_host_pairs_a_new_host_with_the_committed_ones():
    committed = [r for r in committed_runs() if r.ok]
    old = _committed_reference()
    new_rows = [new_row(r) for r in committed if r.matrix_name == "reference" and r.host_id == old.host_id and r.ok
                and r.build_label is None]
    recs = committed + new_rows
    res = cmp.compare(recs, cmp.parse_selection(f"host={NEW_HOST['id']}"), cmp.parse_selection("host=lent-h100"))
    shared = {(row.model, row.test) for row in res.rows}
    assert ("synthetic-llama-1b-q8_0", "pp512") in shared and ("synthetic-llama-1b-q8_0", "tg128") in shared
    page = history_pages.host_vs_host_page(recs)
    section = page.split(f"## <code>{NEW_HOST['id']}</code> vs <code>lent-h100-")[1].split("\n## ")[0]
    q8 = [r for r in new_rows if r.model_name == "synthetic-llama-1b-q8_0"]
    assert q8 and all(f"runs/run.md?id={r.id}" in section for r in q8)
