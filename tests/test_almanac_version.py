"""The almanac's version and stats method as environment (issue 32): a result measured by an older almanac
(the committed fixture host golden-host-55ecea05, measured by almanac 0.1.0 before the stats method was
recorded) is never pooled with the same configuration measured by this one (stats method 2: runs kept
from a quiet machine), and History, the boards and `invoke compare` show which almanac measured each."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from pathlib import Path

from core import __version__, artifacts
from core.records import run as record
from pipelines import compare as cmp
from pipelines import facts, history, host_boards

ROOT = Path(__file__).resolve().parents[1]
OLD = (
    ROOT
    / "tests/fixtures/data/runs/golden-host-55ecea05/gemma3-270m-q4-k-m"
    / "pp64--688032f1cc1e51e0-20261126T023400Z.json"
)


def _remeasured(old: record.RunRecord, factor: float) -> record.RunRecord:
    """The same configuration measured again by this almanac (stats method 2), a day later, ``factor`` x."""
    doc = copy.deepcopy(old.stored)
    created = datetime.fromisoformat(doc["created"]) + timedelta(days=1)
    doc["created"] = created.isoformat()
    doc["id"] = record.run_id(doc["key"], created)
    doc["build"].update(almanac=__version__, stats_method=record.STATS_METHOD)
    for s in doc["summary"].values():
        for k in ("mean", "median", "ci95_low", "ci95_high", "min", "max"):
            if isinstance(s.get(k), (int, float)):
                s[k] *= factor
    doc["resources"]["quiet"] = {
        "policy": 1,
        "attempts": [{"share": 0.01, "disturbed": False}],
        "kept": 0,
        "disturbed": False,
    }
    artifacts.validate(doc)
    return record.RunRecord(doc, f"data/runs/{doc['id']}.json")


def test_an_older_almanacs_result_is_not_pooled_and_shows_its_version():
    old = record.read(OLD)
    assert (
        old.almanac_version == "0.1.0" and old.stats_method == 1
    )  # recorded before the field existed
    new = _remeasured(old, 1.0)
    assert new.stats_method == 2 and new.almanac_version == __version__ != "0.1.0"
    assert old.history_key == new.history_key  # the same configuration ...
    assert (
        old.comparability_key() != new.comparability_key()
    )  # ... never pooled into one figure
    fx = facts.of([old, new])
    assert fx.group_of(old) is not fx.group_of(new)

    # History: one series, the almanac change a boundary of its own, each side labelled
    (ser,) = [s for s in history.series([old, new]) if s.key == old.history_key]
    assert [p.build_label for p in ser.points] == [
        f"{old.backend_build} · almanac 0.1.0",
        f"{new.backend_build} · almanac {__version__} (stats method 2)",
    ]
    # the boards: two rows of one board, their builds told apart by the almanac that measured them
    (board,) = [b for b in host_boards.of([old, new]) if b.test == "pp64"]
    labels = sorted(board.rows["backend_build"])
    assert labels == [
        f"{old.backend_build} · almanac=0.1.0 (stats method 1)",
        f"{old.backend_build} · almanac={__version__} (stats method 2)",
    ]
    # invoke compare between the two almanacs names each side's
    res = cmp.compare(
        [old, new],
        cmp.parse_selection("build=almanac 0.1.0"),
        cmp.parse_selection(f"build=almanac {__version__}"),
    )
    (row,) = res.rows
    assert row.build_a.endswith("almanac 0.1.0 (stats method 1)")
    assert row.build_b.endswith(f"almanac {__version__} (stats method 2)")


def test_same_almanac_shows_no_almanac_column():
    old = record.read(OLD)
    (board,) = [b for b in host_boards.of([old]) if b.test == "pp64"]
    assert "almanac" not in board.rows["backend_build"][0]


def test_a_disturbed_run_is_in_no_figure():
    old = record.read(OLD)
    new = _remeasured(old, 0.5)
    new.doc["resources"]["quiet"]["disturbed"] = True
    fx = facts.of([old, new])
    assert fx.group_of(new) is None and [r.id for r in fx.disturbed] == [new.id]
