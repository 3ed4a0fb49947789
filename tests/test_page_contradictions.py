"""Claims a reader met on the built site that its own pages contradicted, each checked on values from
committed fixtures (tests/fixtures), never the live data/ folder:

1. the best configuration per model never picks a point the Failed approaches section lists;
2. a kind without a headline (agent loops) makes no optimization sweep;
3. a role is filled only by a configuration with evidence of its own for the role's requirements;
4. the memory planner (llama.cpp's memory) is not scored against other backends' runs;
5. no two rows of a Leaderboard board read alike: every setting that differs has a column;
6. energy per token is on the cross-hardware Leaderboard where recorded, "not measured" elsewhere.
"""

from __future__ import annotations

import copy
import html
import re

import pytest

from core.metrics import METRICS
from core.records.run import RunRecord
from pipelines import facts
from pipelines import memory as mem
from pipelines import optimization as opt
from pipelines.runs import load_runs
from pipelines.site import leaderboard_page, memory_accuracy
from pipelines.site import optimization as opt_page
from tests.conftest import FIXTURES

OPT = FIXTURES / "optimization" / "runs"
H200 = FIXTURES / "h200-backends"


def _raw(root) -> list[dict]:
    return [copy.deepcopy(r.stored) for r in load_runs(root)]


def _set_rates(doc: dict, metric: str, values: list[float]) -> None:
    """A generate run's per-repetition rates (what the comparison reads) and its summary's mean."""
    for rep, v in zip(doc["samples"]["repetitions"], values):
        rep[metric] = v
    doc["summary"][metric]["mean"] = sum(values) / len(values)


# -- 1. the best configuration and the failed approaches: one rule -----------------------------------
def test_the_best_configuration_never_picks_a_point_listed_as_a_failed_approach():
    raw = _raw(OPT)
    # the expert sweep's free test on the synthetic MoE: every output is degenerate, the baseline's too.
    # Make one point a clear win (3x, tight repetitions).
    point = next(
        d
        for d in raw
        if d["matrix"].get("sweep") == "moe-experts"
        and d["test"]["kind"] == "generate"
        and d["settings"]["swept"].get("n_expert_used") == 1
    )
    base = next(d for d in raw if d["key"] == point["matrix"]["baseline_key"])
    _set_rates(base, "generation_tps", [3000.0, 3010.0])
    _set_rates(point, "generation_tps", [9000.0, 9030.0])

    def pick(raw_docs):
        sweeps = opt.sweeps([RunRecord(d) for d in raw_docs])
        p = next(p for sw in sweeps for p in sw.points if p.id == point["id"])
        failed = {(f["point"].id, f["kind"]) for f in opt.failures(sweeps)}
        (row,) = [
            b
            for b in opt.best_per_model(sweeps)
            if b["model"] == point["model"]["name"]
            and b["test_name"] == point["test"]["name"]
        ]
        picked = {
            b["best"].id for b in opt.best_per_model(sweeps) if b["best"] is not None
        }
        assert not picked & {
            pid for pid, _ in failed
        }  # no best point anywhere is a failed approach
        return sweeps, p, failed, row

    # 1. both texts degenerate (random weights): the text judges nothing, so the win is the pick, said so
    sweeps, p, failed, row = pick(raw)
    assert p.verdict == "win" and p.comparison["ratio"] == pytest.approx(3.0)
    assert p.degeneration["degenerate"] and p.baseline_degeneration["degenerate"]
    assert (point["id"], "degenerate") not in failed and row["best"].id == point["id"]
    md = opt_page.best_table(sweeps)
    assert (
        "text not judged: the baseline's is degenerate too"
        in md.split("### Reproducing settings")[0]
    )

    # 2. the baseline's text is fine and the point's is degenerate: a failed approach, never the pick
    for d in raw:
        if d["key"] == base["key"]:
            for o in d["details"]["outputs"]:
                o["text"] = (
                    "The sky looks blue because air scatters short wavelengths of sunlight more than long ones."
                )
    sweeps, p, failed, row = pick(raw)
    assert not p.baseline_degeneration["degenerate"]
    assert (point["id"], "degenerate") in failed
    assert row["best"] is None or row["best"].id != point["id"]
    assert (point["id"], ["degenerate"]) in [
        (x.id, kinds) for x, kinds in row["excluded"]
    ]
    md = opt_page.best_table(sweeps)
    assert (
        f"({point['id']})" not in md.split("### Reproducing settings")[0]
    )  # not linked as a best point
    assert "n\\_expert\\_used=1 (degenerate)" in md


# -- 2. only kinds with a headline make sweeps ----------------------------------------------------------
def _agent_loop(doc: dict, server: str, n: int) -> dict:
    """A run of kind agent_loop (no headline: success, steps, latency per fault profile) in a sweep over
    the server, built from a fixture run's provenance."""
    d = copy.deepcopy(doc)
    d["id"] = f"agentloop{n:03d}-20261126T171448.295Z"
    d["key"] = f"{n:064x}"
    d["test"] = {
        "kind": "agent_loop",
        "id": "agent-loops",
        "name": "agent-loops",
        "episodes": 1,
    }
    d["matrix"] = {
        "name": "agent-loops",
        "file": "data/matrices/agent-loops.yaml",
        "sweep": "agent-loops",
        "baseline_key": None,
    }
    d["settings"]["swept"] = {"server": server}
    d["samples"], d["details"] = {}, {}
    d["summary"] = {"agent_success": d["summary"]["generation_tps"] | {"mean": 1.0}}
    return d


def test_a_kind_without_a_headline_makes_no_optimization_sweep():
    raw = _raw(OPT)
    template = next(d for d in raw if d["test"]["kind"] == "generate")
    agents = [
        _agent_loop(template, "llama-server", 1),
        _agent_loop(template, "llama_cpp.server", 2),
    ]
    recs = [RunRecord(d) for d in raw + agents]
    assert all(not opt.compared_on_headline(RunRecord(d)) for d in agents)
    assert all(
        opt.compared_on_headline(r)
        for r in recs
        if r.sweep and r.test_kind in ("rate", "generate")
    )
    names = {sw.name for sw in opt.sweeps(recs)}
    assert "agent-loops" not in names and "prompt-lookup" in names
    assert "agent-loops" not in {
        b["test_name"] for b in opt.best_per_model(opt.sweeps(recs))
    }
    md = opt_page.optimization_page(recs, [])
    assert "agent-loops" not in md and "agent_loop" not in md
    # the page of sweeps shows for a host with swept rate/generate runs, not for one with agent loops only
    from pipelines.site import split_pages  # noqa: F401 - registers the split pages
    from pipelines.site.per_host import PAGES

    shows = PAGES["optimization"].shows
    assert shows(recs) and not shows([RunRecord(d) for d in agents])


# -- 3. a role is filled only with the configuration's own evidence ---------------------------------------
def test_a_server_capacity_does_not_fill_a_role_for_an_in_process_configuration(
    tmp_path,
):
    from pipelines import roles
    from pipelines.site.quality_pages import roles_page
    from tests.test_load_pages import write_load_runs
    from tests.test_serving import WORKLOAD, _artifact, _chat_records

    root = tmp_path / "runs"
    write_load_runs(
        root
    )  # llama-server behind HTTP: a capacity search (2 users) and a probe (chat 3/3)
    # the same model file in process, with prompt lookup: a chat run, no capacity search, no probe
    _artifact(
        root,
        backend="llama_cpp",
        test={"kind": "chat", "id": "chat-x", "requests": 3, **WORKLOAD},
        settings={"speculative": "prompt_lookup", "draft_max": 16},
        samples={"requests": _chat_records([90, 95, 100])},
        metrics={"ttft_ms": [90, 95, 100]},
        details={},
        key_salt="inproc",
    )
    runs = load_runs(root)
    reg = roles.RolesFile.model_validate(
        {
            "roles": {
                "chat_endpoint": {
                    "description": "shared chat endpoint",
                    "capabilities": ["chat"],
                    "serving": {"users": 2, "probes": ["chat"]},
                }
            }
        }
    )
    (a,) = roles.recommend(reg, [], runs, {"fixture-model": ["chat"]})
    assert a.chosen is not None and "speculative" not in a.chosen.settings
    assert a.chosen.backend.startswith("openai_http")
    inproc = next(
        c
        for c in a.rejected + a.fallbacks
        if c.settings.get("speculative") == "prompt_lookup"
    )
    assert inproc in a.rejected and not inproc.eligible
    serving = [e for e in inproc.evidence if e.kind == "serving"]
    assert [(e.ok, e.reason) for e in serving] == [(None, "no data"), (None, "no data")]
    assert all("this configuration (llama_cpp)" in e.message for e in serving)
    # the pick rests on the server's own capacity search and probe, and the page says so
    cap = next(r for r in runs if r.test_kind == "capacity")
    probe = next(r for r in runs if r.test_kind == "probe")
    assert {aid for e in a.chosen.backing for _, aid in e.artifacts} == {
        cap.id,
        probe.id,
    }
    md = roles_page(reg, [a])
    line = next(x for x in md.splitlines() if x.startswith("**Backed by:**"))
    assert cap.id in line and probe.id in line and "openai\\_http" in line


# -- 4. the memory planner is scored on llama.cpp runs only -------------------------------------------------
def test_the_memory_planner_is_not_scored_against_other_backends():
    from tests.support.planning_fixtures import rate_test, run_doc

    MiB = 2**20
    h200 = load_runs(
        H200
    )  # llama.cpp and transformers on one H200, the same synthetic GGUF
    other = [r for r in h200 if not r.llama_cpp_based]
    assert {r.backend for r in other} == {"transformers"} and len(other) == 6
    assert all(
        r.in_process and r.resources.peak_rss_bytes for r in other
    )  # measured: only the backend keeps them out
    cpu = RunRecord(
        run_doc(
            test=rate_test(n_gen=16),
            metrics={"tokens_per_second": [40.0, 41.0]},
            effective={"n_ctx": 256, "n_ubatch": 16},
            resources={"peak_rss_bytes": 380 * MiB, "baseline_rss_bytes": 60 * MiB},
        )
    )
    runs = list(h200) + [cpu]
    known = mem.facts_by_sha(runs)
    assert all(
        mem.run_prediction(r, known) is None and mem.vram_prediction(r) is None
        for r in other
    )
    scored = [p for p in (mem.run_prediction(r, known) for r in runs) if p is not None]
    assert [p["id"] for p in scored] == [cpu.id]
    assert (
        mem.other_backends(runs)
        == {"transformers": 6}
        == mem.other_backends(runs, gpu=True)
    )
    md = memory_accuracy.predicted_vs_measured(runs)
    within = sum(p["within_10pct"] for p in scored)
    assert f"**{within} of 1** predictions are within 10%" in md
    assert "**6 runs of other backends not scored** (transformers: 6)" in md
    # the accuracy per run type: the one llama.cpp rate run; no serve row scored against transformers
    table = md.split("#### Accuracy per run type")[1].split("####")[0]
    assert re.findall(r"^\| ([a-z +\\]+) \| (\d+) \|", table, re.M) == [("rate", "1")]
    # the GPU table: llama.cpp's runs only, the transformers runs counted apart
    gpu = memory_accuracy.vram_vs_measured(runs)
    assert all(r.id not in gpu for r in other)
    assert "**6 runs of other backends not scored** (transformers: 6)" in gpu


def test_llama_cpp_based_reads_the_build():
    r = load_runs(H200)[0]

    def with_build(build: dict) -> RunRecord:
        d = copy.deepcopy(r.stored)
        d["build"] = build
        return RunRecord(d)

    assert with_build(
        {"backend": "x", "llama_cpp_commit": "0c1e57098", "in_process": True}
    ).llama_cpp_based
    assert with_build(
        {
            "backend": "x",
            "server": "llama_cpp.server",
            "server_package": "llama-cpp-python 0.3.36",
            "in_process": False,
        }
    ).llama_cpp_based
    assert not with_build(
        {"backend": "x", "backend_version": "transformers 5.17.0", "in_process": True}
    ).llama_cpp_based
    assert not with_build(
        {"backend": "x", "server": "vllm", "in_process": False}
    ).llama_cpp_based


# -- 5. no two rows of a board read alike --------------------------------------------------------------------
def _table_rows(md: str) -> tuple[list[str], list[list[str]]]:
    lines = [x for x in md.splitlines() if x.startswith("| ")]
    split = [[c.strip() for c in x.strip("|").split(" | ")] for x in lines]
    return split[0], split[2:]


def _shown_identities(board: facts.Board, bi: int) -> list[tuple[str, ...]]:
    """Each row of the rendered board as a reader tells it apart: its host cell, with its folded setup (backend,
    build, settings as resolved and as asked, method), the figures left out."""
    headers, rows = _table_rows(leaderboard_page.board_markdown(board, bi))
    return [
        # the row's filter marker (its board and row numbers, which differ on every row) taken out; the host's
        # name it wraps stays (pipelines.site.leaderboard_page._host_cell)
        (
            html.unescape(
                re.sub(r'<span class="almanac-r(?: almanac-host)?"[^>]*>', "", row[0])
            ),
        )
        for row in rows
    ]


def test_no_two_rows_of_a_leaderboard_board_read_alike():
    recs = load_runs(OPT)
    boards = [b for b in facts.of(recs).boards if not b.single]
    assert boards
    for bi, b in enumerate(boards):
        shown = _shown_identities(b, bi)
        assert len(shown) == len(b.rows) and len(set(shown)) == len(shown), (
            b.model,
            b.tests,
            shown,
        )
    # the prompt-lookup points of the edit workload differ in K and n-gram size: the setup says each, as asked
    edit = next(
        b for b in boards if b.tests == ["edit"] and b.model == "gemma3-270m-q4_k_m"
    )
    headers, rows = _table_rows(leaderboard_page.board_markdown(edit, 0))
    asked = {
        f"draft_max={r.any.requested['draft_max']}"
        for r in edit.rows
        if "draft_max" in r.any.requested
    }
    assert len(asked) >= 2
    shown = {
        m
        for row in rows
        for m in re.findall(r"draft_max=\d+", html.unescape(row[0]).split("asked:")[1])
    }
    assert shown == asked


def test_builds_that_read_alike_name_what_differs():
    from pipelines.host_boards import build_labels

    same = "llama-cpp-python 0.3.36 · llama.cpp 0c1e57098"
    labels = build_labels(
        [
            (same, {"libraries": "package"}),
            (same, {"libraries": "LLAMA_CPP_LIB_PATH"}),
            ("transformers 5.17.0", {"libraries": "torch 2.11.0"}),
        ]
    )
    assert labels[0] != labels[1] and labels[0].endswith("libraries=package")
    assert build_labels([(same, {"a": 1}), ("other", {"a": 2})]) == [
        same,
        "other",
    ]  # the words differ already


# -- 6. energy per token on the cross-hardware Leaderboard -----------------------------------------------------
def test_energy_per_token_is_on_the_leaderboard_where_recorded():
    raw = _raw(H200)
    # a second host without an energy meter: the llama.cpp rate runs again, nothing metered
    cpu = []
    for d in raw:
        if d["backend"] == "llama_cpp" and d["test"]["kind"] == "rate":
            x = copy.deepcopy(d)
            x["host"]["id"] = "fixture-cpu-host"
            x["id"] = "cpu" + x["id"][3:]
            for m in ("prefill_j_per_token", "decode_j_per_token"):
                x["summary"].pop(m, None)
            x["details"].pop("energy", None)
            cpu.append(x)
    recs = [RunRecord(d) for d in raw + cpu]
    (board,) = [b for b in facts.of(recs).boards if b.tests == ["pp512", "tg128"]]
    assert [(t, m.name) for t, m in leaderboard_page.energy_columns(board)] == [
        ("pp512", "prefill_j_per_token"),
        ("tg128", "decode_j_per_token"),
    ]
    md = leaderboard_page.board_markdown(board, 0)
    headers, rows = _table_rows(md)
    pre = headers.index("Prefill energy <code>pp512</code> (J/token)")
    dec = headers.index("Decode energy <code>tg128</code> (J/token)")
    for row, brow in zip(rows, board.rows):
        for col, test, metric in (
            (pre, "pp512", "prefill_j_per_token"),
            (dec, "tg128", "decode_j_per_token"),
        ):
            run = brow.groups[test].newest
            s = run.stat(metric)
            if brow.host_id == "fixture-cpu-host":
                assert s is None and row[col] == "not measured"
            else:
                m = METRICS[metric]
                assert (
                    f"[{s.mean:,.{m.decimals}f}](runs/run.md?id={run.id})" in row[col]
                )
                assert (
                    f"{s.ci95_low:,.{m.decimals}f} – {s.ci95_high:,.{m.decimals}f} · n {s.n}"
                    in row[col]
                )
