"""The identity keys declared once (issue 28, Build item 1): core.identity composes the work,
comparability and history keys that core.records.run.RunRecord reads; every committed run keeps
the keys the record's own formulas gave before they moved (kept below as the reference)."""

from __future__ import annotations

import json
from typing import Any

from core import artifacts, identity
from core.records.run import RunRecord, digest
from tests.support.committed import committed_paths


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
