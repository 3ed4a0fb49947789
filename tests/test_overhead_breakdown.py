"""Issue 33, seed 003's per-request overhead "Breakdown" (serialization, transport, deserialization,
beside the compute): each request split from the client's and the server's timestamps."""

from __future__ import annotations

import pytest

from pipelines import overhead

HOST = "vm-d4bbc016"  # the 2-core host the committed rows were measured on (issue 33)


@pytest.mark.fast
def test_a_request_splits_into_four_stages():
    rec = {
        "ok": True,
        "e2e_ms": 100.0,
        "client_serialize_ms": 0.5,
        "client_parse_ms": 1.5,
        "server_timings": {"prompt_ms": 30.0, "predicted_ms": 60.0},
    }
    split = overhead._split(rec)
    assert split == {
        "serialization": 0.5,
        "deserialization": 1.5,
        "compute": 90.0,
        "transport": 8.0,
    }
    assert sum(split.values()) == rec["e2e_ms"]
    # a failed request, or one from before the client timed its serialisation, is not split
    assert overhead._split({**rec, "ok": False}) is None
    assert (
        overhead._split({k: v for k, v in rec.items() if k != "client_serialize_ms"})
        is None
    )
    assert overhead._split({**rec, "server_timings": {}}) is None


@pytest.fixture(scope="module")
def runs():
    from pipelines.runs import load_runs

    return load_runs()


@pytest.mark.fast
def test_overhead_table_from_the_committed_runs(runs):
    from pipelines.site.overhead import overhead_section

    (b,) = [x for x in overhead.breakdowns(runs) if x.run.host_id == HOST]
    assert b.n >= 10 and b.run.matrix_name == "overhead-breakdown"
    stages = {s.name: s for s in b.stages}
    assert set(stages) == {"serialization", "transport", "deserialization", "compute"}
    assert abs(sum(s.share for s in b.stages) - 1.0) < 1e-9
    assert stages["compute"].share > stages["serialization"].share
    md = "\n".join(overhead_section(runs))
    assert "### Per-request overhead on" in md and f"runs/run.md?id={b.run.id}" in md
