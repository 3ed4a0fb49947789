"""The hostile input corpus (tests/hostile/corpus.py): every input ends in its expected lines (one
naming the file, or every bad file and the count), its exit code, no traceback, nothing under
data/ touched, within 60 s and 1 GiB; inputs that must simply work do, and their site holds no
live markup from artifact text. Storage faults (real tmpfs, read-only bind mount, no DAC override)
need root and are skipped with the reason otherwise."""

from __future__ import annotations

import pytest

from tests.hostile.corpus import CASES, mount_skip, problems, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_handled_cleanly(case, tmp_path):
    skip = mount_skip(case)
    if skip:
        pytest.skip(skip)
    o = run_case(case, tmp_path)
    assert problems(case, o) == [], (
        o.rc,
        o.stderr[-2000:],
        o.stdout[-1000:],
        o.changed,
        o.live,
    )
