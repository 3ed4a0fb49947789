"""The identity keys declared once (issue 28, Build item 1): core.identity composes the work,
comparability and history keys that core.records.run.RunRecord reads; every committed run keeps
the keys the record's own formulas gave before they moved (kept below as the reference)."""

from __future__ import annotations

import json
from typing import Any

from core import artifacts, identity
from core.records.run import RunRecord, digest, latest_per_key
from tests.support.committed import committed_paths, committed_runs


def _old_keys(r: RunRecord) -> dict[str, Any]:
    work = {
        "model": r.model_identity,
        "test": r.work_test,
        "class": r.backend_class,
        "method_version": r.method_version,
    }
    parts: dict[str, Any] = {
        "test": r.work_test,
        "class": r.backend_class,
        "backend": r.backend_name,
        "build": r.build_identity,
        "model": r.model_identity,
        "host": r.host_id,
        "method": r.method_version,
        "settings": r.effective,
    }
    if r.stats_method != 1:
        parts["build"] = {**parts["build"], "stats_method": r.stats_method}
    no_host = {k: v for k, v in parts.items() if k != "host"}
    no_threads = {
        **parts,
        "settings": {k: v for k, v in parts["settings"].items() if k != "n_threads"},
    }
    requested = {
        k: v
        for k, v in r.requested.items()
        if v is not None
        and not (k in identity.NEUTRAL_SETTINGS and v == identity.NEUTRAL_SETTINGS[k])
    }
    history = {
        "work": work,
        "backend": r.backend_name,
        "host": r.host_id,
        "requested": requested,
    }
    return {
        "work": digest(work)[:16],
        "comparability": digest(parts)[:16],
        "no_host": digest(no_host)[:16],
        "no_threads": digest(no_threads)[:16],
        "history": digest(history)[:16],
    }


def test_every_committed_run_keeps_its_keys():
    current = artifacts.ARTIFACT_TYPES["run"].version
    n = 0
    for path in committed_paths("runs"):
        doc = json.loads(path.read_text()) if path.suffix == ".json" else {}
        if doc.get("artifact") != "run":
            continue
        if doc["schema_version"] != current:  # an older file, migrated as it is read
            doc = artifacts.load(path)
        n += 1
        r = RunRecord(doc, path=str(path))
        assert {
            "work": r.work_key,
            "comparability": r.comparability_key(),
            "no_host": r.comparability_key(("host",)),
            "no_threads": r.comparability_key(("settings.n_threads",)),
            "history": r.history_key,
        } == _old_keys(r), path
        assert r.work == identity.work(r) and r.work_key == identity.work_key(r)
    assert n > 100


def test_a_setting_at_its_neutral_value_is_no_part_of_the_history():
    asked = {"n_threads": 2, "split_mode": "layer", "lora_adapters": [], "seed": None}
    assert identity.requested_explicit(asked) == {"n_threads": 2}
    assert identity.requested_explicit({"split_mode": "row"}) == {"split_mode": "row"}


# -- a run written by an older version and its rerun: one configuration ---------------------------
# On vm-0372cd29, chat-serving was measured before the chat kind gained ``precision`` (07:33) and
# again after (09:51), with everything else the same: two stored keys, one configuration.
OLD = "data/runs/vm-0372cd29/gemma3-270m-q4-k-m/chat-serving--394346b7445fb0ca-20261126T073303.592Z.json"
NEW = "data/runs/vm-0372cd29/gemma3-270m-q4-k-m/chat-serving--2704dc910e7022b6-20261126T095157.560Z.json"


def test_a_run_written_before_its_test_gained_a_field_and_its_rerun_are_one_configuration():
    runs = {r.path: r for r in committed_runs()}
    old, new = runs[OLD], runs[NEW]
    assert "precision" not in old.test and new.test["precision"] is None
    assert old.stored_key != new.stored_key  # what each version wrote
    # today's key of the older run is the key today's writer gave the rerun
    assert old.key == new.key == new.stored_key
    assert old.test_today == new.test
    assert old.work_key == new.work_key and old.history_key == new.history_key
    assert latest_per_key([old, new]) == [new]
    assert latest_per_key([new, old]) == [new]


def test_a_run_written_with_todays_test_keeps_its_stored_key():
    runs = committed_runs()
    same = [r for r in runs if r.test_today is r.test]
    assert len(same) > 100
    assert all(r.key == r.stored_key for r in same)
    # a run no recipe reproduces (an imported one, a failure keyed otherwise) keeps it too
    kept = [r for r in runs if identity.key_recipe(r) is None]
    assert kept and all(r.key == r.stored_key for r in kept)


def test_an_older_sweep_finds_its_baseline_under_todays_key():
    runs = committed_runs()
    by_stored = {r.stored_key: r for r in runs}
    keys = {r.key for r in runs}
    named = [r for r in runs if r.doc["matrix"].get("baseline_key")]
    assert all(r.baseline_key in keys for r in named)
    moved = [r for r in named if r.baseline_key != r.doc["matrix"]["baseline_key"]]
    assert len(moved) >= 10
    for r in moved:
        base = by_stored[r.doc["matrix"]["baseline_key"]]
        assert r.baseline_key == base.key != base.stored_key
    # a baseline point names itself, under its own key as today's writer makes it
    own = [r for r in named if r.doc["matrix"]["baseline_key"] == r.stored_key]
    assert own and all(r.baseline_key == r.key for r in own)
    # a record read alone (no set to resolve against) keeps the stored name of another run
    other = next(r for r in moved if r.doc["matrix"]["baseline_key"] != r.stored_key)
    alone = RunRecord(other.doc)
    assert (
        alone.baseline_key == other.doc["matrix"]["baseline_key"] != other.baseline_key
    )
