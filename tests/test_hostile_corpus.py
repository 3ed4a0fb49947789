"""The hostile input corpus (tests/hostile/corpus.py): every input ends in one line naming
the file, a non-zero exit, no traceback, nothing under data/ touched, within 60 s and 1 GiB."""

from __future__ import annotations

import pytest

from tests.hostile.corpus import CASES, MAX_RSS_BYTES, MAX_WALL_S, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_one_clean_line(case, tmp_path):
    o = run_case(case, tmp_path)
    text = o.stdout + o.stderr
    assert "Traceback" not in text, text[-3000:]
    assert o.rc == case.rc, (o.rc, text[-2000:])
    assert len(o.error_lines) == 1, o.stderr[-2000:]
    line = o.error_lines[0]
    assert case.expect in line and len(line) <= 400, line[:600]
    assert o.changed == [], o.changed
    assert o.wall_s < MAX_WALL_S and o.peak_rss_bytes < MAX_RSS_BYTES, (o.wall_s, o.peak_rss_bytes)
