"""The fleet pages' shortcuts (issue 30: a rebuild recomputes the pages that summarise the fleet) give
what the plain computation gives: the adapter track's sweeps alone, a board's standing from its index,
a setup value written without json's encoder, a request read without getattr, select_runs from the
latest runs by (model, test). Over the committed runs, in process."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from pipelines import facts, overhead, whatif
from pipelines import optimization as opt
from pipelines.runs import latest_per_key, load_runs
from pipelines.site.leaderboard_page import _setting


@pytest.fixture(scope="module")
def runs():
    return load_runs()


def _sweep_view(sw: opt.Sweep) -> tuple[Any, ...]:
    return (
        sw.host_id,
        sw.matrix,
        sw.name,
        sw.track,
        [(p.doc.id, p.is_baseline, p.swept) for p in sw.points],
    )


def test_the_adapter_track_alone_is_the_adapter_sweeps_of_all(runs):
    every = [_sweep_view(s) for s in opt.sweeps(runs) if s.track == "adapters"]
    alone = [_sweep_view(s) for s in opt.sweeps(runs, track="adapters")]
    assert every and alone == every
    assert opt.sweeps(runs, track="no such track") == []


def test_a_board_standing_is_the_first_standing_of_its_host(runs):
    fx = facts.of(runs)
    checked = 0
    for b in fx.boards:
        for t in b.tests:
            for h in [*b.hosts, "no-such-host"]:
                scan = next((s for s in b.standings.get(t, []) if s.host_id == h), None)
                assert b.standing(t, h) is scan
                checked += scan is not None
        assert b.standing("no-such-test", b.hosts[0]) is None
    assert checked > 10


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        -7,
        10**30,
        1.0,
        0.1,
        -0.0,
        1e-7,
        1e22,
        2.5e-5,
        math.nan,
        math.inf,
        -math.inf,
    ]
    + [True, False, None, [1, "a"], {"b": 1, "a": [2]}, "q8_0", ""],
)
def test_a_setting_reads_as_json_writes_it(value):
    want = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    assert _setting(value) == want


class _Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    e2e_ms: float | None = None

    @property
    def ok(self) -> bool:
        return False


def test_a_request_reads_as_getattr_reads_it(runs):
    keys = overhead._KEYS
    seen = 0
    for r in latest_per_key(runs):
        for q in overhead._requests(r):
            get = overhead._getter(q)
            assert [get(k) for k in keys] == [getattr(q, k, None) for k in keys]
            seen += 1
    assert seen > 100
    q = _Extra(
        e2e_ms=3.0, client_parse_ms=1.0
    )  # an extra field, a property, a missing one
    get = overhead._getter(q)
    assert [get(k) for k in keys] == [getattr(q, k, None) for k in keys]
    assert (
        get("ok") is False
        and get("client_parse_ms") == 1.0
        and get("server_timings") is None
    )
    assert overhead._split(q) is None
    d = {"client_serialize_ms": 1.0}
    assert overhead._getter(d)("client_serialize_ms") == 1.0


def test_select_runs_is_the_scan_of_the_latest_runs(runs):
    latest = latest_per_key(runs)
    asked = {(r.model_name, r.test_name, r.host_id) for r in latest}
    assert asked
    for model, test, host in sorted(asked):
        for host_id in (None, host):
            scan = sorted(
                (
                    r
                    for r in latest
                    if r.ok
                    and r.model_name == model
                    and r.test_name == test
                    and (not host_id or r.host_id == host_id)
                ),
                key=lambda r: (r.created, r.id),
                reverse=True,
            )
            got = whatif.select_runs(runs, model=model, test=test, host_id=host_id)
            assert [r.id for r in got] == [r.id for r in scan]
    assert whatif.select_runs(runs, model="no such model", test="tg128") == []
