"""Agent loops under injected tool faults: the kind and its statistics, the tool service and its
fault injector (in process and as a real HTTP process), the controller's retries and timeouts
(a tool service that never answers), and the whole kind through the runner with the embedded
model behind a real llama_cpp.server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest

from core import artifacts, stats
from core.errors import ConfigError
from core.kinds import agent as agent_kind
from core.kinds import agent_protocol as protocol
from core.kinds import parse_test
from core.records.run import RunRecord
from runtime.agents import loop, tools
from runtime.backends.openai_http.server import ManagedServer, free_port
from tests.conftest import write_matrix


# -- the kind ---------------------------------------------------------------------------------
def test_agent_loop_kind_parses_with_the_six_default_profiles():
    t = parse_test({"kind": "agent_loop", "id": "a", "episodes": 2})
    assert (
        t.kind == "agent_loop"
        and t.name == "a"
        and t.scenarios == ["lookup", "add", "chain"]
    )
    assert [p.name for p in t.profiles][0] == "p00-baseline" and len(t.profiles) == 6
    agg = t.profiles[4]
    assert (
        agg.fail_every,
        agg.timeout_every,
        agg.retries,
        agg.tool_timeout_s,
        agg.hang_s,
    ) == (2, 3, 1, 0.25, 0.9)
    assert t.profiles[5].retries == 2


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"profiles": [{"name": "a"}, {"name": "a"}]}, "distinct"),
        ({"profiles": [{"name": "a", "fail_every": 0}]}, "fail_every"),
        ({"scenarios": ["lookup", "teleport"]}, "scenarios"),
        ({"tool_service_url": "localhost:9"}, "http://"),
        ({"placements": []}, "at least one"),
    ],
)
def test_agent_loop_bad_input_is_one_line(raw, field):
    with pytest.raises(ConfigError) as e:
        parse_test({"kind": "agent_loop", **raw}, file="m.yaml")
    assert field in str(e.value) and "\n" not in str(e.value)


def _ep(
    profile, placement, scenario, i, success, loop_ms, attempts=(), steps=2, failures=0
):
    att = [{"ok": err is None, "ms": ms, "error": err} for ms, err in attempts]
    turns = (
        [{"step": 1, "model": {"ok": True}, "tool": {"attempts": att}}]
        if att
        else [{"step": 1, "model": {"ok": True}}]
    )
    return {
        "profile": profile,
        "placement": placement,
        "scenario": scenario,
        "episode": i,
        "success": success,
        "loop_ms": loop_ms,
        "tool_ms": sum(ms for ms, _ in attempts),
        "steps": steps,
        "tool_steps": 1 if att else 0,
        "tool_calls": len(att),
        "tool_retries": max(0, len(att) - 1),
        "tool_failures": failures,
        "injected": {
            "fail": sum(1 for _, e in attempts if e == "injected_failure"),
            "timeout": sum(1 for _, e in attempts if e == "timeout"),
        },
        "end_reason": "answer",
        "turns": turns,
    }


def test_matrix_stats_from_episodes():
    eps = []
    for i in range(6):
        eps.append(_ep("p0", "internal", "lookup", i, i < 4, 100.0 + i, [(0.1, None)]))
        eps.append(
            _ep("p0", "external", "lookup", i, i < 2, 110.0 + i, [(1.0 + i / 10, None)])
        )
    eps.append(
        _ep(
            "p1",
            "internal",
            "lookup",
            0,
            False,
            400.0,
            [(250.0, "timeout"), (0.2, "injected_failure")],
            failures=1,
        )
    )
    m = agent_kind.matrix_stats(eps, ["p0", "p1"])
    cells = {(c["profile"], c["placement"]): c for c in m["cells"]}
    c = cells[("p0", "internal")]
    assert (c["episodes"], c["successes"], c["success_rate"]) == (6, 4, 4 / 6)
    assert c["success_ci95"] == list(stats.wilson_interval(4, 6))
    assert c["steps"]["n"] == 4 and c["steps"]["mean"] == 2
    assert cells[("p1", "internal")]["injected"] == {"fail": 1, "timeout": 1}
    assert (
        cells[("p1", "internal")]["tool_error_rate"] == 1.0
        and cells[("p1", "internal")]["retries"]["mean"] == 1
    )
    comp = {x["profile"]: x for x in m["comparisons"]}
    assert set(comp) == {"p0"}  # p1 ran internal only: no pair to compare
    s = comp["p0"]["success"]
    assert (s["pairs"], s["internal_only"], s["external_only"]) == (6, 2, 0)
    assert s["p_value"] == stats.mcnemar_exact(2, 0) and s["delta"] == pytest.approx(
        -2 / 6
    )
    lat = comp["p0"]["loop_ms"]
    assert (
        lat["ratio"] == pytest.approx(112.5 / 102.5)
        and lat["ci95_low"] < lat["ratio"] < lat["ci95_high"]
    )
    hop = comp["p0"]["tool_attempt_ms"]
    assert (
        hop["ratio"] == pytest.approx(1.25 / 0.1) and hop["verdict"] == "loss"
    )  # slower: a loss for latency
    assert set(m["pooled"]) == {"internal", "external"}
    # pooled over profiles, an episode is paired with the same task of the same profile
    both = eps + [
        _ep(
            "p1",
            "external",
            "lookup",
            0,
            False,
            410.0,
            [(250.0, "timeout")],
            failures=1,
        )
    ]
    over = agent_kind.matrix_stats(both, ["p0", "p1"])["overall"]["success"]
    assert (over["pairs"], over["internal_only"], over["external_only"]) == (7, 2, 0)
    metrics = agent_kind.metrics(eps)
    assert len(metrics["agent_success"]) == 13 and sum(metrics["agent_success"]) == 6
    assert len(metrics["agent_tool_ms"]) == 14


def test_episodes_are_typed_and_a_bad_record_is_refused():
    """The kind's samples model types every episode (the statistics read attributes); a record the
    controller could not have written (no success verdict) is refused, not read as a failure."""
    from pydantic import ValidationError

    typed = agent_kind.episodes_of(
        [
            _ep(
                "p0",
                "internal",
                "lookup",
                0,
                True,
                10.0,
                [(0.5, None), (0.25, "timeout")],
            )
        ]
    )
    e = typed[0]
    assert (
        isinstance(e, agent_kind.Episode)
        and e.success
        and [a.ms for a in e.attempts()] == [0.5, 0.25]
    )
    assert e.turns[0].tool.attempts[1].error == "timeout" and e.injected.timeout == 1
    samples = agent_kind.AgentSamples.model_validate(
        {"episodes": [_ep("p0", "external", "add", 1, False, 9.0)]}
    )
    assert agent_kind.KIND.values(samples, "agent_success") == [0.0]
    assert agent_kind.KIND.values(samples, "agent_loop_ms") == [9.0]
    bad = _ep("p0", "internal", "lookup", 0, True, 10.0)
    del bad["success"]
    with pytest.raises(ValidationError):
        agent_kind.episodes_of([bad])


def test_headline_answers_per_task_first():
    from pipelines import agents
    from pipelines.site import agent_pages

    eps = agent_kind.episodes_of(
        [
            _ep("p0", pl, "lookup", i, i < 3, 100.0, [(0.2, None)])
            for pl in ("internal", "external")
            for i in range(4)
        ]
        + [
            _ep("p0", pl, "add", i, False, 80.0, steps=1)
            for pl in ("internal", "external")
            for i in range(2)
        ]
    )
    run = agents.AgentRun(None, eps, agent_kind.matrix_stats(eps, ["p0"]), {})
    text = agent_pages.headline(run)
    assert text.startswith(
        "Success internal 50% of 6 episodes, external 50% of 6 episodes."
    )
    assert "By task: lookup 75%, add 0% (every profile and placement pooled)." in text
    assert "Success is identical in both placements on every episode pair." in text
    assert "The model made 8 tool call attempts in 20 turns." in text


# -- the tools and the fault injector ------------------------------------------------------------
def test_store_and_tasks_are_fixed_by_the_seed():
    assert protocol.store(0) == protocol.store(0) and protocol.store(
        0
    ) != protocol.store(1)
    t = protocol.task("chain", 2, seed=0)
    data = protocol.store(0)
    ptr = t.prompt.split('"')[1]
    assert data[data[ptr]] == t.expected and t.tool_steps == 2
    a = protocol.task("add", 0, seed=0)
    x, y = (int(w) for w in a.prompt.split() if w.isdigit())
    assert a.expected == str(x + y)


def test_fault_injection_counts_calls_per_stream():
    svc = tools.ToolService(0)
    faults = {"fail_every": 2, "timeout_every": 3, "hang_s": 0.01}
    seen = []
    for _ in range(6):
        try:
            seen.append(
                svc.call("lookup", {"key": "alpha"}, stream="s", faults=faults)[
                    "injected"
                ]
            )
        except tools.ToolFault:
            seen.append("fail")
    assert seen == [
        None,
        "fail",
        "timeout",
        "fail",
        None,
        "timeout",
    ]  # the 6th is 2nd and 3rd: it hangs
    assert (
        svc.call("lookup", {"key": "alpha"}, stream="other", faults=faults)["n"] == 1
    )  # streams count apart
    with pytest.raises(tools.ToolError, match="no value stored"):
        svc.run("lookup", {"key": "nope"})
    with pytest.raises(tools.ToolError, match="two numbers"):
        svc.run("add", {"a": "x", "b": 1})
    assert svc.run("add", {"a": "17", "b": 25}) == 42


def test_parse_action():
    assert protocol.parse_action(
        '{"tool": "lookup", "args": {"key": "a"}} trailing junk'
    ) == {"tool": "lookup", "args": {"key": "a"}}
    assert protocol.parse_action('noise {"x": 1} then {"answer": "Oslo"}') == {
        "answer": "Oslo"
    }
    assert protocol.parse_action("no json here {") is None
    assert (
        protocol.parse_action('{"answer": NaN}') is None
    )  # not JSON: an artifact could not hold it
    assert protocol.normalise(' "Oslo". ') == protocol.normalise("oslo")


@pytest.fixture
def tool_service(tmp_path):
    server, url = loop.start_tool_service(
        0, tmp_path, loop.Processes(server=ManagedServer, free_port=free_port)
    )
    try:
        yield url
    finally:
        server.stop()


def test_real_tool_service_over_http(tool_service):
    faults = {"fail_every": 2, "hang_s": 0.01}
    r1 = httpx.post(
        f"{tool_service}/call",
        json={
            "stream": "s",
            "tool": "lookup",
            "args": {"key": "alpha"},
            "faults": faults,
        },
    )
    r2 = httpx.post(
        f"{tool_service}/call",
        json={
            "stream": "s",
            "tool": "lookup",
            "args": {"key": "alpha"},
            "faults": faults,
        },
    )
    r3 = httpx.post(
        f"{tool_service}/call", json={"stream": "s", "tool": "teleport", "args": {}}
    )
    assert r1.status_code == 200 and r1.json()["result"] == protocol.store(0)["alpha"]
    assert r2.status_code == 500 and r2.json()["injected"] == "fail"
    assert r3.status_code == 400 and "unknown tool" in r3.json()["error"]
    assert httpx.post(f"{tool_service}/call", content=b"[not json").status_code == 400


def test_tool_step_retries_and_times_out_in_both_placements(tool_service):
    profile = agent_kind.FaultProfile(
        name="p",
        fail_every=2,
        timeout_every=3,
        hang_s=0.6,
        tool_timeout_s=0.15,
        retries=1,
        backoff_s=0.01,
    )

    async def both():
        async with httpx.AsyncClient(trust_env=False) as client:
            callers = [
                loop.InternalTools(tools.ToolService(0)),
                loop.ExternalTools(tool_service, client),
            ]
            out = {}
            for c in callers:
                steps = [
                    await loop.tool_step(
                        c,
                        "lookup",
                        {"key": "alpha"},
                        stream=f"t-{c.placement}",
                        profile=profile,
                    )
                    for _ in range(2)
                ]
                out[c.placement] = steps
            return out

    out = asyncio.run(both())
    for placement, (first, second) in out.items():
        assert first["ok"] and len(first["attempts"]) == 1, placement  # call 1
        # call 2 fails (injected), the retry is call 3 and hangs past the timeout: the step fails
        assert [a["error"] for a in second["attempts"]] == [
            "injected_failure",
            "timeout",
        ], placement
        assert second["failed"] and not second["ok"]
        assert 150 <= second["attempts"][1]["ms"] < 450, (
            placement
        )  # ended at the controller's timeout, not the hang
    assert (
        out["internal"][0]["result"]
        == out["external"][0]["result"]
        == protocol.store(0)["alpha"]
    )


@pytest.fixture
def silent_service():
    """A real TCP service that accepts connections and never answers (bad input)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        th.join(2)
        for c in held:
            c.close()
        srv.close()


def test_a_tool_service_that_never_answers_ends_each_attempt_at_the_timeout(
    silent_service,
):
    profile = agent_kind.FaultProfile(
        name="p", tool_timeout_s=0.2, retries=2, backoff_s=0.01
    )

    async def go():
        async with httpx.AsyncClient(trust_env=False) as client:
            return await loop.tool_step(
                loop.ExternalTools(silent_service, client),
                "lookup",
                {"key": "alpha"},
                stream="s",
                profile=profile,
            )

    t0 = time.perf_counter()
    step = asyncio.run(go())
    wall = time.perf_counter() - t0
    assert [a["error"] for a in step["attempts"]] == ["timeout"] * 3 and step["failed"]
    assert all(190 <= a["ms"] < 600 for a in step["attempts"])
    assert (
        wall < 3 * 0.2 + 0.03 + 1.0
    )  # three attempts at the timeout plus back-off, never longer
    assert "no answer within 0.2 s" in step["error"]


# -- the whole kind, for real ------------------------------------------------------------------------
MATRIX = """schema_version: 1
name: al
backend: openai_http
models: [gemma3-270m-q4_k_m]
repetitions: 1
warmup: false
timeout_s: 600
settings: {{n_threads: 1, n_ctx: 1024}}
tests:
  - kind: agent_loop
    id: al
    scenarios: [lookup]
    episodes: 2
    max_steps: 3
    max_tokens: 24
    profiles: [{{name: p-fail2, fail_every: 2, retries: 0}}]
{extra}"""


@pytest.mark.model
def test_agent_loop_through_the_runner_with_the_embedded_model(data_env):
    """llama_cpp.server with the embedded model (its gemma format drops the system message, and
    the model then calls the lookup tool); fail every 2nd call without retries: the second episode
    of each placement meets the injected failure at the same call. Greedy: both placements see
    the same first turns. A valid artifact, and the page built from it."""
    from runtime.execution import runner

    write_matrix(data_env, "al", MATRIX.format(extra=""))
    report = runner.run_matrix("al")
    assert not report.failed, [artifacts.load(p).get("error") for p in report.failed]
    count, problems = artifacts.validate_tree(data_env)
    assert count == 1 and not problems
    doc = artifacts.load(report.measured[0])
    eps = doc["samples"]["episodes"]
    assert len(eps) == 4 and {e["placement"] for e in eps} == {"internal", "external"}
    by = {(e["placement"], e["episode"]): e for e in eps}
    for i in range(2):
        assert (
            by[("internal", i)]["turns"][0]["model"]["text"]
            == by[("external", i)]["turns"][0]["model"]["text"]
        )
    calls = {
        pl: [
            a
            for e in eps
            if e["placement"] == pl
            for t in e["turns"]
            for a in (t.get("tool") or {}).get("attempts", [])
        ]
        for pl in ("internal", "external")
    }
    assert calls["internal"] and [a["error"] for a in calls["internal"]] == [
        a["error"] for a in calls["external"]
    ]
    if len(calls["internal"]) >= 2:
        assert calls["internal"][1]["error"] == "injected_failure"
    m = doc["details"]["agent"]["matrix"]
    assert m == json.loads(
        json.dumps(agent_kind.matrix_stats(eps, ["p-fail2"]))
    )  # the page recomputes the same
    assert doc["summary"]["agent_success"]["n"] == 4
    assert (
        doc["details"]["agent"]["tool_service"]["managed"]
        and doc["details"]["agent"]["tool_service"]["stop"]["exit"]
    )

    from pipelines.site import agent_pages

    md = agent_pages.agents_page([RunRecord(doc)])
    assert (
        "## What the runs show" in md.splitlines()[0]
        and "p-fail2" in md
        and "ext/int tool call" in md
    )


@pytest.mark.model
def test_agent_loop_with_a_tool_service_that_never_answers(data_env, silent_service):
    """Bad input: every tool step ends at the controller's timeout and counts as a failure; the run
    itself completes (the model turns succeeded) and records why."""
    from runtime.execution import runner

    extra = f"    placements: [external]\n    tool_service_url: {silent_service}\n"
    write_matrix(
        data_env,
        "al",
        MATRIX.format(extra=extra).replace(
            "retries: 0", "retries: 1, tool_timeout_s: 0.2"
        ),
    )
    report = runner.run_matrix("al")
    assert not report.failed
    doc = artifacts.load(report.measured[0])
    eps = doc["samples"]["episodes"]
    steps = [t["tool"] for e in eps for t in e["turns"] if "tool" in t]
    assert steps, "the model made no tool call"
    assert all(
        s["failed"] and [a["error"] for a in s["attempts"]] == ["timeout", "timeout"]
        for s in steps
    )
    assert all(a["ms"] < 700 for s in steps for a in s["attempts"])
    assert not any(e["success"] for e in eps)
    cell = doc["details"]["agent"]["matrix"]["cells"][0]
    assert cell["tool_error_rate"] == 1.0 and cell["placement"] == "external"
