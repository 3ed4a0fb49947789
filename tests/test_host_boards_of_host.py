"""One host's boards made from its own runs (pipelines.host_boards.of_host) are the boards the whole set's
(``of``) gives that host: same boards in the same order, same rows, figures and ranks, and the same page.

The committed set's runs (eight hosts, some of them figured by the fleet's pooled run-to-run noise where
they have none of their own: what of_host reads from the whole set's fact layer)."""

from __future__ import annotations

from dataclasses import fields

import pandas as pd
import pytest

from pipelines import facts, host_boards
from pipelines.site import host_boards_page
from tests.support.committed import committed_runs

# a host without run-to-run noise of its own for some kinds of test: its one-run figures are widened by the
# fleet's (tests/test_page_keys.py)
FALLBACK = "vm-55ecea05"


def _same(a: host_boards.HostBoard, b: host_boards.HostBoard) -> None:
    for f in fields(host_boards.HostBoard):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "rows":
            # every value, the figures (dataclasses) included; NaN equal to NaN
            pd.testing.assert_frame_equal(x, y)
        else:
            assert x == y, f.name


@pytest.fixture(scope="module")
def runs():
    return committed_runs()


def test_one_hosts_boards_from_its_runs_are_the_whole_sets_boards_of_it(runs) -> None:
    fleet = host_boards.of(runs)
    hosts = sorted({r.host_id for r in runs})
    assert len(hosts) >= 2 and FALLBACK in hosts
    seen = 0
    for host in hosts:
        own = [r for r in runs if r.host_id == host]
        expected = [b for b in fleet if b.host_id == host]
        got = host_boards.of_host(own, runs)
        assert [b.key for b in got] == [b.key for b in expected], host
        for a, b in zip(got, expected, strict=True):
            _same(a, b)
        assert host_boards_page.host_boards_page(own, got) == (
            host_boards_page.host_boards_page(own, expected)
        )
        seen += len(got)
    assert seen == len(fleet)  # every board is one host's


def test_the_fleets_noise_reaches_one_hosts_boards(runs) -> None:
    """Made from the host's runs alone (its own fact layer) FALLBACK's one-run figures would lose the fleet's
    pooled noise: of_host reads the whole set's, and a board's interval shows it."""
    own = [r for r in runs if r.host_id == FALLBACK]
    with_fleet = host_boards.of_host(own, runs)
    alone = host_boards.of_host(own, own)
    assert facts.of(runs).fleet_noise
    differ = [
        (a.key, list(a.rows["s_ci95_low"]), list(b.rows["s_ci95_low"]))
        for a, b in zip(with_fleet, alone, strict=True)
        if list(a.rows["s_ci95_low"].fillna(-1))
        != list(b.rows["s_ci95_low"].fillna(-1))
    ]
    assert differ, (
        "no board of the host reads the fleet's noise: the test proves nothing"
    )
