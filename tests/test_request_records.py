"""Per-request records bounded in the artifact (core.reservoir, core.request_records): the seeded
reservoir's values, determinism and uniformity; a level's records bounded with every statistic still
over all requests; the full records beside the artifact, checked when loaded; a run against the real
llama-server on loopback through the runner (skipped, with the reason, where it is not built)."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import pytest

from core import artifacts, request_records, reservoir
from core.errors import ArtifactError, ConfigError

ROOT = Path(__file__).resolve().parents[1]


# -- the reservoir ------------------------------------------------------------------------------
def test_reservoir_keeps_known_positions_for_a_seed():
    assert reservoir.sample_indices(20, 5, seed=0) == [1, 2, 5, 8, 9]
    assert reservoir.sample_indices(20, 5, seed=1) == [2, 8, 9, 16, 18]
    assert reservoir.sample(list("abcdefghij"), 3, seed=7) == ["d", "h", "i"]


def test_reservoir_is_deterministic_and_keeps_order():
    items = [{"i": i} for i in range(1000)]
    a = reservoir.sample(items, 50, seed=123)
    b = reservoir.sample(iter(items), 50, seed=123)  # a stream: one pass, no len()
    assert a == b and len(a) == 50
    assert [x["i"] for x in a] == sorted(x["i"] for x in a)
    assert reservoir.sample(items, 50, seed=124) != a


def test_reservoir_keeps_everything_when_k_is_at_least_n():
    assert reservoir.sample_indices(7, 7, seed=3) == list(range(7))
    assert reservoir.sample_indices(7, 100, seed=3) == list(range(7))
    assert reservoir.sample([], 5, seed=0) == []
    assert reservoir.sample_indices(5, 0, seed=0) == []
    with pytest.raises(ValueError, match="k must be >= 0"):
        reservoir.sample_indices(5, -1, seed=0)


def test_reservoir_is_uniform_over_seeds():
    # each of n positions is kept with probability k/n: over 20,000 seeds, 5,000 times each
    n, k, trials = 20, 5, 20_000
    counts = [0] * n
    for seed in range(trials):
        for i in reservoir.sample_indices(n, k, seed):
            counts[i] += 1
    expected = trials * k / n
    assert sum(counts) == trials * k
    assert counts[0] == 4884 and counts[-1] == 4970  # the values this seed range gives
    sd = math.sqrt(trials * (k / n) * (1 - k / n))
    assert max(abs(c - expected) for c in counts) < 4 * sd
    chi2 = sum((c - expected) ** 2 / expected for c in counts)
    assert round(chi2, 2) == 15.68  # 19 degrees of freedom: p ≈ 0.68
    assert chi2 < 43.8  # the 0.999 quantile of chi-square(19)


# -- bounding an artifact's levels ---------------------------------------------------------------
def _doc(n_per_level: list[int], kind: str = "load", seed: int = 4) -> dict:
    levels = [
        {
            "level": float(i + 1),
            "index": i,
            "wall_s": 1.0,
            "requests": [
                {"ok": True, "index": j, "e2e_ms": float(j), "level": float(i + 1)}
                for j in range(n)
            ],
        }
        for i, n in enumerate(n_per_level)
    ]
    return {
        "test": {"kind": kind, "name": "t", "seed": seed},
        "samples": {"levels": levels, "warmup": []},
        "details": {"summary": {"requests": sum(n_per_level)}},
    }


def test_bound_keeps_k_of_n_per_level_and_says_so():
    doc = _doc([30, 4])
    new, data = request_records.bound(doc, request_records.RecordPolicy(kept=10))
    assert data is None  # nothing asked beyond the sample
    assert (
        len(doc["samples"]["levels"][0]["requests"]) == 30
    )  # the input is not changed
    lv0, lv1 = new["samples"]["levels"]
    assert [r["index"] for r in lv0["requests"]] == [
        j for j in reservoir.sample_indices(30, 10, seed=4)
    ]
    assert lv0["sampled"] == {
        "kept": 10,
        "of": 30,
        "seed": 4,
        "method": reservoir.METHOD,
    }
    assert "sampled" not in lv1 and len(lv1["requests"]) == 4
    assert new["details"]["request_records"] == {
        "limit": 10,
        "kept": 14,
        "of": 34,
        "sampled": True,
        "full": None,
    }
    assert (
        new["details"]["summary"] == doc["details"]["summary"]
    )  # computed before, from all


def test_bound_leaves_other_kinds_and_small_levels_alone():
    doc = _doc([30], kind="serve")
    assert request_records.bound(doc, request_records.RecordPolicy(kept=5)) == (
        doc,
        None,
    )
    small = _doc([3])
    new, data = request_records.bound(
        small, request_records.RecordPolicy(kept=5, keep_all=True)
    )
    assert data is None and new["details"]["request_records"]["sampled"] is False


def test_a_bad_limit_is_one_line():
    with pytest.raises(ConfigError, match=r"requests_kept: must be a whole number"):
        request_records.RecordPolicy(kept=0)


def _write(tmp_path: Path, doc: dict, policy) -> Path:
    """What runtime.execution.runner.write_run writes, without the artifact schema (a bare document)."""
    path = tmp_path / "runs" / "h" / "m" / "t--abc-20260101.json"
    new, data = request_records.prepare(path, doc, policy)
    assert data is not None
    artifacts.atomic_write_bytes(request_records.sidecar_path(path), data)
    path.write_text(json.dumps(new))
    return path


def test_full_records_beside_the_artifact_are_every_request_and_checked(tmp_path):
    doc = _doc([30, 12])
    policy = request_records.RecordPolicy(kept=10, keep_all=True)
    _, data = request_records.bound(doc, policy)
    _, again = request_records.bound(doc, policy)
    # no timestamp in the gzip header: the same records, the same bytes
    assert data is not None and data == again
    lines = gzip.decompress(data).decode().splitlines()
    assert len(lines) == 42 and json.loads(lines[0])["level_index"] == 0
    path = _write(tmp_path, doc, policy)
    new = json.loads(path.read_text())
    assert request_records.problem(path, new) is None
    full = request_records.load_full(path, new)
    assert [len(x) for x in full] == [30, 12]
    assert full[0] == doc["samples"]["levels"][0]["requests"]
    assert request_records.sidecar_rel("runs/h/m/t--abc-20260101.json", new) == (
        "runs/h/m/t--abc-20260101.requests.jsonl.gz"
    )
    # edited after the run: one line naming the artifact and the field
    side = request_records.sidecar_path(path)
    side.write_bytes(gzip.compress(b'{"level_index": 0}\n', mtime=0))
    why = request_records.problem(path, new)
    assert why and "\n" not in why
    assert (
        "t--abc-20260101.json" in why and "details.request_records.full.sha256" in why
    )
    with pytest.raises(ArtifactError, match="the file changed after the run"):
        request_records.load_full(path, new)
    side.unlink()
    why = request_records.problem(path, new)
    assert why and "no such file" in why and "details.request_records.full.file" in why
    # a link in its place is refused, whatever it points at
    os.symlink(os.devnull, side)
    assert "symbolic link" in (request_records.problem(path, new) or "")
    side.unlink()
    # an artifact naming another file than the one beside it
    new["details"]["request_records"]["full"]["file"] = "other.requests.jsonl.gz"
    assert "not the file beside it" in (request_records.problem(path, new) or "")


def test_records_brought_home_with_their_artifact_are_checked(tmp_path):
    # what the SSH and Slurm fetches do with a run that kept every record beside it
    doc = _doc([30])
    src = _write(
        tmp_path / "remote", doc, request_records.RecordPolicy(kept=10, keep_all=True)
    )
    new = json.loads(src.read_text())
    dest = tmp_path / "home" / "runs" / "h" / "m" / src.name
    side = request_records.carry(src, new, dest)
    assert side == request_records.sidecar_path(dest)
    assert side.read_bytes() == request_records.sidecar_path(src).read_bytes()
    dest.write_text(json.dumps(new))
    assert request_records.problem(dest, new) is None
    assert request_records.carry(src, doc, dest) is None  # names none: nothing to bring
    # edited on the remote side: refused, one line, nothing written beside the new place
    request_records.sidecar_path(src).write_bytes(b"forged")
    other = tmp_path / "home2" / src.name
    with pytest.raises(ArtifactError, match="details.request_records.full.sha256"):
        request_records.carry(src, new, other)
    assert not other.parent.exists() or not any(other.parent.iterdir())


def _workflow():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_workflow", ROOT / ".ci" / "bench_workflow.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


LOAD_RUN = "runs/vm-d4bbc016/gemma3-270m-q4-k-m/repeats-varied--b3e8a136a9c6c0ba-20261128T104707.133Z.json"


@pytest.mark.parametrize("forge", [None, "edited", "stray"])
def test_the_self_hosted_merge_brings_the_records_or_refuses(tmp_path, forge):
    from tests.support.committed import committed_root

    src = committed_root() / LOAD_RUN
    doc = artifacts.load(
        src
    )  # a committed load run of 12 requests, bounded here to 5 and kept
    rel = Path(*Path(LOAD_RUN).parts[1:])
    up = tmp_path / "incoming" / "runs-almanac-cpu" / rel
    new, data = request_records.prepare(
        up, doc, request_records.RecordPolicy(kept=5, keep_all=True)
    )
    assert data is not None
    artifacts.write(up, new)
    artifacts.atomic_write_bytes(request_records.sidecar_path(up), data)
    if forge == "edited":
        request_records.sidecar_path(up).write_bytes(data[:-1])
    if forge == "stray":
        (up.parent / "x.requests.jsonl.gz").write_bytes(data)
    out = tmp_path / "data"
    todo, refused = _workflow().merge(tmp_path / "incoming", out)
    if forge is None:
        assert refused == [] and [d.name for _, d in todo] == [
            request_records.sidecar_path(rel).name,  # written before the artifact
            rel.name,
        ]
        return
    assert len(refused) == 1 and refused[0].startswith("runs-almanac-cpu/")
    assert (
        "details.request_records.full.sha256" in refused[0]
        if forge == "edited"
        else refused[0].endswith(
            "x.requests.jsonl.gz: refused (request records no artifact names)"
        )
    )


def test_an_artifact_without_the_field_is_not_sampled(tmp_path):
    doc = _doc(
        [30]
    )  # as every artifact written before the bound: no request_records, no sampled
    assert request_records.full_file(doc) is None
    assert request_records.problem(tmp_path / "x.json", doc) is None
    assert [len(x) for x in request_records.load_full(tmp_path / "x.json", doc)] == [30]


def test_pages_say_what_they_show():
    from pipelines.site.traffic import stored_line

    assert stored_line({"sampled": None}) == ""
    line = stored_line({"sampled": {"kept": 1000, "of": 25000, "seed": 3}})
    assert line == (
        "1,000 of 25,000 requests shown (a reservoir sample, seed 3); "
        "the level's figures are over all 25,000."
    )


# -- the real llama-server on loopback, through the runner ----------------------------------------
MATRIX = """schema_version: 1
name: bounded
backend: openai_http
models: [gemma3-270m-q4_k_m]
precision: null
timeout_s: 600
requests_kept: 5
keep_all_requests: true
settings: {server: llama-server, parallel: 2, n_ctx: 1024, n_threads: 1, retries: 0}
tests:
  - kind: load
    id: bounded-load
    profile: concurrent
    levels: [1, 2]
    requests: 12
    seed: 7
    warmup_requests: 0
    telemetry_interval_s: null
    steady_state: 0.5
    workload: {prompt_tokens: 24, output_tokens: 4, seed: 1}
    slo: {percentile: 50, ttft_ms: 10000, tpot_ms: null}
"""


def _built() -> bool:
    from runtime.backends.openai_http import llama_server

    return bool(os.environ.get(llama_server.ENV) or llama_server.cached_builds())


@pytest.mark.model
@pytest.mark.skipif(
    not _built(),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` "
    "(or set ALMANAC_LLAMA_SERVER)",
)
def test_llama_server_load_run_stores_a_sample_and_every_record_beside_it(
    data_env, monkeypatch, tmp_path
):
    from core.kinds import load_stats
    from pipelines import serving
    from pipelines.dataset import load as load_set
    from runtime.execution import runner
    from tests.conftest import write_matrix

    write_matrix(data_env, "bounded", MATRIX)
    report = runner.run_matrix("bounded")
    assert not report.failed, [artifacts.load(p)["error"] for p in report.failed]
    (path,) = report.measured
    count, problems = artifacts.validate_tree(data_env)
    assert count == 1 and not problems
    doc = artifacts.load(path)
    levels = doc["samples"]["levels"]
    assert [len(lv["requests"]) for lv in levels] == [5, 5]
    assert [lv["sampled"]["of"] for lv in levels] == [12, 12]
    assert [lv["sampled"]["seed"] for lv in levels] == [
        7,
        8,
    ]  # the test's seed + the level's index
    rr = doc["details"]["request_records"]
    assert (rr["kept"], rr["of"], rr["sampled"], rr["full"]["records"]) == (
        10,
        24,
        True,
        24,
    )
    # every statistic is over all 12 requests of a level, not over the 5 stored
    summary = doc["details"]["summary"]
    assert [s["requests"] for s in summary["levels"]] == [12, 12]
    assert doc["summary"]["requests_sent"]["mean"] == 24.0
    full = request_records.load_full(path, doc)
    assert [len(x) for x in full] == [12, 12]
    assert all(r in full[i] for i, lv in enumerate(levels) for r in lv["requests"])
    assert (
        summary["levels"][1]["percentiles"]["e2e_ms"]["p50"]
        == (
            load_stats.sweep_summary(
                [{**levels[1], "requests": full[1]}],
                load_stats.Slo(**summary["slo"]),
                "concurrent",
            )["levels"][0]["percentiles"]["e2e_ms"]["p50"]
        )
    )
    # the Real traffic section says what its charts of single requests show, and links every record
    from pipelines import traffic
    from pipelines.site import hooks
    from pipelines.site.traffic import traffic_section

    ds = load_set(data_env)
    (run,) = traffic.traffic_runs(ds.runs)
    rel = request_records.sidecar_rel(ds.runs[0].data_path, doc)
    assert rel and run["records_file"] == rel
    md = "\n".join(traffic_section([run]))
    assert "5 of 12 requests shown (a reservoir sample, seed 7)" in md
    assert "5 stored of 12 requests (reservoir, seed 8)" in md  # the swim lanes
    assert rel in md
    # published beside the artifact's JSON on Open data
    site = tmp_path / "site"
    hooks.publish(site, ds)
    assert (site / "data" / rel).read_bytes() == request_records.sidecar_path(
        path
    ).read_bytes()
    # a stored summary of another arithmetic is recomputed from the full records, never the sample
    monkeypatch.setattr(load_stats, "LOAD_STATS_VERSION", 999)
    (row,) = serving.load_results(load_set(data_env).runs)
    assert row["stats"]["version"] == 999 and row["requests"] == 24
    # the sidecar edited after the run: the set does not load (one line naming the artifact)
    side = request_records.sidecar_path(path)
    side.write_bytes(side.read_bytes() + b"\0")
    count, problems = artifacts.validate_tree(data_env)
    assert len(problems) == 1 and "details.request_records.full.sha256" in problems[0]


@pytest.mark.integration
def test_the_cli_options_are_one_line_where_they_cannot_apply(data_env):
    import subprocess
    import sys

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "bench",
            "--host",
            "h1",
            "--keep-all-requests",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "error: --requests-kept/--keep-all-requests: set requests_kept / keep_all_requests in "
        "the matrix for a run on other machines (the options apply to a run here)"
    ]
    assert not (data_env / "runs").exists()
