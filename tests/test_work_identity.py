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

import pytest

from core.records import run as record
from pipelines import compare as cmp
from pipelines.site import history_pages
from tests.support.committed import committed_runs
from tests.support.fleet_host import (
    NEW_HOST,
    fixture_host_runs,
    new_row,
)
from tests.support.fleet_host import (
    committed_reference as _committed_reference,
)


def test_a_committed_row_and_a_new_one_share_work_apart_from_method_and_environment():
    old = _committed_reference()
    new = new_row(old)
    # what made the new host share nothing: a precision block, extra_bufts, use_extra_bufts
    assert "precision" in new.test and "precision" not in old.test
    assert "extra_bufts" in new.requested and "extra_bufts" not in old.requested
    assert (
        old.comparability_key() != new.comparability_key()
    )  # other host, other threads: other rows
    # ... and yet the same work
    assert new.work_key == old.work_key and new.work == old.work
    assert old.work["test"] == {
        "kind": "rate",
        "n_prompt": 512,
        "n_gen": 0,
        "n_depth": 0,
    }
    assert old.work["class"] == "in process" and old.work["model"] == old.model_sha256
    # the method says how each was measured, the environment where and with what
    assert old.method["repetitions"] == 5 and "precision" not in old.method
    assert new.method["precision"]["target"] == new.test["precision"]["target"]
    assert old.environment["host"] != new.environment["host"]
    assert new.environment["settings"]["use_extra_bufts"] is False


@pytest.mark.parametrize(
    "change",
    [
        {"test": {"n_prompt": 256}},  # other tokens
        {"test": {"n_depth": 512}},  # other depth
        {"model": {"identity": "cd" * 32, "sha256": "cd" * 32}},  # another file
        {
            "build_extra": {"in_process": False, "server": "llama-server"}
        },  # another backend class
        {
            "build_extra": {"method_version": record.METHOD_VERSION + 1}
        },  # a measurement that means something else
    ],
)
def test_other_work_is_other_work(change):
    old = _committed_reference()
    assert new_row(old, **change).work_key != old.work_key


@pytest.mark.parametrize(
    "change",
    [
        {"test": {"repetitions": 30, "warmup": False, "precision": None}},  # method
        {
            "effective": {
                "n_gpu_layers": 17,
                "flash_attn": "off",
                "use_extra_bufts": True,
            }
        },  # environment
        {
            "build": {
                "backend_version": "llama-cpp-python 9.9",
                "llama_cpp_commit": "fffffff",
            }
        },  # another build
    ],
)
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
    new_rows = fixture_host_runs()
    recs = committed + new_rows
    res = cmp.compare(
        recs,
        cmp.parse_selection(f"host={NEW_HOST['id']}"),
        cmp.parse_selection("host=lent-h100"),
    )
    shared = {(row.model, row.test) for row in res.rows}
    assert ("synthetic-llama-1b-q8_0", "pp512") in shared and (
        "synthetic-llama-1b-q8_0",
        "tg128",
    ) in shared
    page = history_pages.host_vs_host_page(recs)
    # on Host vs host, the new host stands in the same workload tables as the H100 (each host against the fleet)
    blocks = [
        b
        for b in page.split('<details class="almanac-workload"')[1:]
        if f"<code>{NEW_HOST['id']}</code>" in b and "<code>lent-h100-" in b
    ]
    q8 = [r for r in new_rows if r.model_name == "synthetic-llama-1b-q8_0"]
    assert q8 and all(any(f"runs/run.md?id={r.id}" in b for b in blocks) for r in q8)


def test_every_setting_added_since_the_committed_rows_is_neutral_at_its_default():
    """A backend setting the committed reference rows do not name must be listed with its default in
    NEUTRAL_SETTINGS, or every new row would silently be another configuration than theirs."""
    from runtime import backends

    old = _committed_reference()
    defaults = backends.settings_class(old.backend)().model_dump(mode="json")
    added = set(defaults) - set(old.requested)
    for k in added:
        assert (
            k in record.NEUTRAL_SETTINGS and defaults[k] == record.NEUTRAL_SETTINGS[k]
        ), k
    assert new_row(old, host={**old.host}).requested_explicit == old.requested_explicit
