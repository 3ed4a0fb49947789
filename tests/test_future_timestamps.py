"""Issue 34 item 14: a run stamped 2099 (a measuring host's clock ahead) was accepted silently,
became its configuration's newest run until 2099 and was pooled on the Leaderboard. Now a
``created`` beyond the reader's clock plus a tolerance is an invalid artifact: ``invoke validate``
names it, and no page, comparison or pooling ever reads it."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import artifacts
from core.errors import ArtifactErrors
from tests.conftest import FIXTURES

GOLDEN = FIXTURES / "data" / "runs" / "golden-host-55ecea05" / "gemma3-270m-q4-k-m"
PP64 = GOLDEN / "pp64--2ed2e379a91d1880-20261126T023419Z.json"


def _runs(tmp_path: Path, created: str) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(FIXTURES / "data" / "runs", root)
    doc = json.loads(PP64.read_text())
    doc["created"] = created
    doc["id"] = doc["id"][:-8] + "ahead" + doc["id"][-3:]
    doc["summary"]["tokens_per_second"]["mean"] *= (
        10  # a forged rate, as in the report (28.2 and 282 t/s)
    )
    dest = (
        root
        / PP64.parent.relative_to(FIXTURES / "data" / "runs")
        / "pp64--2ed2e379a91d1880-20990101T000000Z.json"
    )
    dest.write_text(json.dumps(doc, indent=1))
    return root


def test_a_run_from_2099_is_refused_naming_the_file_and_field(tmp_path):
    root = _runs(tmp_path, "2099-01-01T00:00:00+00:00")
    loaded, problems = artifacts.load_tree(root)
    assert len(problems) == 1
    line = problems[0]
    assert (
        "20990101T000000Z.json: created: '2099-01-01T00:00:00+00:00' is 72 years after"
        in line
    )
    assert "\n" not in line
    assert all(
        d["created"] < "2099" for _, d in loaded
    )  # never loaded, so never newest, never pooled
    with pytest.raises(ArtifactErrors) as exc:
        artifacts.load_all(root)
    # the same line, but the reader's clock it names, read again by the second load (a second later on a
    # slow machine: a fresh clone failed here when the clock ticked between the two loads)
    assert [_clock_read(p) for p in exc.value.problems] == [
        _clock_read(p) for p in problems
    ]
    assert "this reader's clock (…;" in _clock_read(problems[0])


def _clock_read(line: str) -> str:
    return re.sub(r"this reader's clock \([^;]+;", "this reader's clock (…;", line)


def test_a_clock_within_the_tolerance_is_accepted(tmp_path):
    soon = (
        datetime.now(UTC) + timedelta(seconds=artifacts.FUTURE_TOLERANCE_S / 2)
    ).isoformat(timespec="seconds")
    root = _runs(tmp_path, soon)
    loaded, problems = artifacts.load_tree(root)
    assert problems == []
    assert any(d["created"] == soon for _, d in loaded)


@pytest.mark.parametrize(
    ("ahead_s", "words"),
    [
        (2 * 3600, "2.0 hours"),
        (5 * 86400, "5.0 days"),
        (100 * 365.25 * 86400, "100 years"),
    ],
)
def test_the_line_says_how_far_ahead(ahead_s, words):
    now = datetime(2026, 11, 28, tzinfo=UTC)
    why = artifacts.from_the_future(
        {"created": (now + timedelta(seconds=ahead_s)).isoformat()}, now
    )
    assert f"is {words} after this reader's clock" in why


def test_a_resume_does_not_take_a_run_from_2099_as_already_measured(tmp_path):
    from runtime.execution import runner

    root = _runs(tmp_path, "2099-01-01T00:00:00+00:00")
    doc = json.loads(PP64.read_text())
    events = []
    _path, got = runner.last_valid(doc["key"], root, lambda k, i: events.append((k, i)))
    assert got["created"] == doc["created"]  # the real run, not the one from 2099
    assert [k for k, _ in events] == ["corrupt"] and "is 72 years after" in events[0][
        1
    ]["error"]
    assert not list(
        root.rglob("*20990101T000000Z.json")
    )  # set aside, as a corrupt artifact is
