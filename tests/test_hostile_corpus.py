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
        f"wall {o.wall_s:.1f} s, peak RSS {o.peak_rss_bytes / 2**20:.0f} MiB",
    )


def test_a_case_is_measured_apart_from_this_test_process(tmp_path):
    """A case's peak RSS is its command's own: a test session grown past the 1 GiB limit (every page
    and dataset it built) must not count against every case (fork keeps the parent's mark)."""
    big = bytearray(1100 * 2**20)
    big[::4096] = b"\x01" * len(big[::4096])  # touched: resident
    case = next(c for c in CASES if c.name == "alias-bomb-in-used-value")
    o = run_case(case, tmp_path)
    assert o.rc == 2 and 10 * 2**20 < o.peak_rss_bytes < 512 * 2**20
    assert problems(case, o) == []
    del big
