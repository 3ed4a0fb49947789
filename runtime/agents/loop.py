"""The agent loop: a controller that asks the model for one action at a time, runs the tool with
retries, hands back the result, and stops at an answer or the step limit.

One ``agent_loop`` test (core/kinds/agent.py) runs every fault profile x scenario x episode in
both placements - tools in this process (*internal*) and the same tool service over HTTP on
loopback (*external*, a process this run starts, or ``tool_service_url``) - one placement's
episodes of a (profile, scenario) and then the other's, the first placement alternating, so
slow drift of the host hits both and both meet the same prompt-cache state.

The loop is the kind's; the backend hands it one primitive, a model turn (:class:`Endpoint`: the
OpenAI-compatible endpoint and the streamed client the serving tests use), and what starts the
tool service as a process (:class:`Processes`: the backend's ``ManagedServer``, passed in, so
this package never imports a backend). The tasks and the protocol the model is asked to follow
are the kind's too, and pure (core/kinds/agent_protocol.py).

A tool call attempt ends at the profile's ``tool_timeout_s`` whatever the tool does (a service
that never answers included); a failed or timed-out attempt is retried ``retries`` times with
back-off, and a step whose attempts all failed hands the model a tool error (a failed step). An
episode succeeds when the model's answer equals the task's expected value.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from core.kinds import agent as agent_kind
from core.kinds import agent_protocol as protocol
from core.kinds.agent import AgentLoopTest, FaultProfile
from core.kinds.agent_protocol import ESCALATE, REASK
from runtime.agents.tools import ToolError, ToolFault, ToolService

TEXT_KEPT = 500  # characters of each model turn kept in the artifact


def confidence(logprobs: list[float] | None) -> float | None:
    """A turn's confidence: the probability of its least likely sampled token (null: none reported)."""
    import math

    return math.exp(min(logprobs)) if logprobs else None


@dataclass
class Endpoint:
    """The primitive the loop takes from a backend, one model turn: where and how to send one
    streamed chat request (the OpenAI HTTP backend's ``client.stream_chat``)."""

    url: str
    model: str
    client: Callable[[], httpx.AsyncClient]
    stream_chat: Callable[..., Awaitable[dict[str, Any]]]
    policy: Any
    alive: Callable[[], bool]
    seed: int


class Service(Protocol):
    """A started process the loop can stop (runtime.backends.openai_http.server.ManagedServer)."""

    command: list[str]
    startup_ms: float | None

    def start(self) -> float: ...

    def stop(self) -> dict[str, Any]: ...

    def log_tail(self, n: int = 40) -> str: ...


class ServiceFactory(Protocol):
    def __call__(
        self,
        command: list[str],
        health_url: str,
        log_path: Path,
        *,
        startup_timeout_s: float,
        stop_timeout_s: float,
    ) -> Service: ...


@dataclass(frozen=True)
class Processes:
    """What the loop needs to start the external placement's tool service as a process: a server
    process started from a command line and watched until healthy at a URL, and a free loopback
    port for it (the backend's ``ManagedServer`` and ``free_port``)."""

    server: ServiceFactory
    free_port: Callable[[], int]


# -- tool callers -------------------------------------------------------------------------------
class InternalTools:
    """The tool service as a function call in this process (run in a thread, so a hang still ends
    at the controller's timeout)."""

    placement = "internal"

    def __init__(self, service: ToolService):
        self.service = service

    async def attempt(
        self,
        tool: str,
        args: Any,
        *,
        stream: str,
        faults: dict[str, Any],
        timeout_s: float,
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                out = await asyncio.to_thread(
                    self.service.call, tool, args, stream=stream, faults=faults
                )
            return _attempt(t0, ok=True, result=out["result"])
        except TimeoutError:
            return _attempt(
                t0, error="timeout", message=f"no answer within {timeout_s:g} s"
            )
        except ToolFault as exc:
            return _attempt(t0, error="injected_failure", message=str(exc))
        except ToolError as exc:
            return _attempt(t0, error="tool_error", message=str(exc))


class ExternalTools:
    """The tool service behind an HTTP hop (POST {url}/call)."""

    placement = "external"

    def __init__(self, url: str, client: httpx.AsyncClient):
        self.url = url
        self.client = client

    async def attempt(
        self,
        tool: str,
        args: Any,
        *,
        stream: str,
        faults: dict[str, Any],
        timeout_s: float,
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        body = {"stream": stream, "tool": tool, "args": args, "faults": faults}
        try:
            async with asyncio.timeout(timeout_s):
                r = await self.client.post(
                    f"{self.url}/call", json=body, timeout=timeout_s
                )
        except (TimeoutError, httpx.TimeoutException):
            return _attempt(
                t0, error="timeout", message=f"no answer within {timeout_s:g} s"
            )
        except httpx.HTTPError as exc:
            return _attempt(
                t0, error="connect_error", message=f"{type(exc).__name__}: {exc}"[:200]
            )
        try:
            doc = r.json()
        except ValueError:
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        if r.status_code == 200 and "result" in doc:
            return _attempt(t0, ok=True, result=doc["result"])
        message = str(doc.get("error") or f"HTTP {r.status_code}")[:200]
        if r.status_code == 500 and doc.get("injected") == "fail":
            return _attempt(t0, error="injected_failure", message=message)
        if r.status_code == 400:
            return _attempt(t0, error="tool_error", message=message)
        return _attempt(t0, error=f"http_{r.status_code}", message=message)


def _attempt(
    t0: float,
    *,
    ok: bool = False,
    result: Any = None,
    error: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "ok": ok,
        "ms": (time.perf_counter() - t0) * 1000.0,
        "error": error,
    }
    if ok:
        rec["result"] = result
    if message:
        rec["message"] = message
    return rec


async def tool_step(
    caller: Any, tool: str, args: Any, *, stream: str, profile: FaultProfile
) -> dict[str, Any]:
    """One tool call with the profile's retries: every attempt, the time of the whole step."""
    faults = {
        "fail_every": profile.fail_every,
        "timeout_every": profile.timeout_every,
        "hang_s": profile.hang_s,
    }
    t0 = time.perf_counter()
    attempts: list[dict[str, Any]] = []
    for i in range(profile.retries + 1):
        a = await caller.attempt(
            tool, args, stream=stream, faults=faults, timeout_s=profile.tool_timeout_s
        )
        attempts.append(a)
        if (
            a["ok"] or a["error"] == "tool_error"
        ):  # an answer, or a refusal the tool would repeat
            break
        if i < profile.retries:
            await asyncio.sleep(profile.backoff_s * 2**i)
    last = attempts[-1]
    return {
        "name": tool,
        "args": args,
        "attempts": attempts,
        "ok": last["ok"],
        "ms": (time.perf_counter() - t0) * 1000.0,
        "failed": not last["ok"] and last["error"] != "tool_error",
        "result": last.get("result"),
        "error": None if last["ok"] else last.get("message") or last["error"],
    }


# -- one episode --------------------------------------------------------------------------------
def _body(
    ep: Endpoint, test: AgentLoopTest, messages: list[dict[str, str]], turn: int
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": ep.model,
        "messages": messages,
        "max_tokens": test.max_tokens,
        "temperature": test.temperature,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "seed": ep.seed + turn,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if test.uncertainty_threshold is not None:
        body["logprobs"] = True  # llama-server streams choices[0].logprobs.content
    if test.constrained:
        body["response_format"] = {
            "type": "json_object",
            "schema": protocol.ACTION_SCHEMA,
        }
    return body


def _tool_message(step: dict[str, Any]) -> str:
    if step["ok"]:
        return f"Tool result: {json.dumps(step['result'])}"
    return f"Tool error: {step['error']}"


async def episode(
    ep: Endpoint,
    client: httpx.AsyncClient,
    caller: Any,
    task: protocol.Task,
    *,
    test: AgentLoopTest,
    profile: FaultProfile,
    stream: str,
    origin_ns: int,
) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": protocol.SYSTEM},
        *protocol.EXAMPLE,
        {"role": "user", "content": task.prompt},
    ]
    turns: list[dict[str, Any]] = []
    answer = None
    end_reason = "max_steps"
    model_ms = tool_ms = 0.0
    escalated_at: set[int] = set()
    t0 = time.perf_counter()
    step = 0
    while step < test.max_steps:
        step += 1
        if not ep.alive():
            end_reason = "server_lost"
            break
        rec = await ep.stream_chat(
            client,
            ep.url,
            _body(ep, test, messages, step),
            ep.policy,
            origin_ns=origin_ns,
            server_alive=ep.alive,
        )
        model_ms += rec["e2e_ms"] if rec["ok"] else rec.get("elapsed_ms") or 0.0
        turn: dict[str, Any] = {
            "step": step,
            "model": {
                "ok": rec["ok"],
                "e2e_ms": rec["e2e_ms"],
                "ttft_ms": rec["ttft_ms"],
                "output_tokens": rec["output_tokens"],
                "finish_reason": rec["finish_reason"],
                "text": (rec["text"] or "")[:TEXT_KEPT],
                "error": rec["error"],
            },
        }
        turns.append(turn)
        if not rec["ok"]:
            end_reason = "model_error"
            break
        action = protocol.parse_action(rec["text"] or "")
        turn["action"] = action
        gate = test.uncertainty_threshold
        if gate is not None:
            conf = confidence(rec.get("logprobs"))
            turn["confidence"] = conf
            turn["escalated"] = False
            # escalate once per step: the model is asked again, told it was unsure; that turn counts
            if (
                conf is not None
                and conf < gate
                and len(escalated_at) < test.max_steps
                and step not in escalated_at
            ):
                escalated_at.add(step)
                turn["escalated"] = True
                messages += [
                    {
                        "role": "assistant",
                        "content": (rec["text"] or "").strip()[:TEXT_KEPT],
                    },
                    {"role": "user", "content": ESCALATE},
                ]
                step -= 1  # the same step again (its turn is recorded; the step limit counts answers, not asks)
                if len(turns) >= 2 * test.max_steps:
                    break
                continue
        if action is None:
            messages += [
                {
                    "role": "assistant",
                    "content": (rec["text"] or "").strip()[:TEXT_KEPT],
                },
                {"role": "user", "content": REASK},
            ]
            continue
        messages.append(
            {"role": "assistant", "content": json.dumps(action)}
        )  # the action, not the junk around it
        if "answer" in action:
            answer = action["answer"]
            end_reason = "answer"
            break
        step_rec = await tool_step(
            caller,
            action["tool"],
            action.get("args", {}),
            stream=stream,
            profile=profile,
        )
        tool_ms += step_rec["ms"]
        turn["tool"] = step_rec
        messages.append({"role": "user", "content": _tool_message(step_rec)})
    loop_ms = (time.perf_counter() - t0) * 1000.0
    tool_turns = [t["tool"] for t in turns if "tool" in t]
    attempts = [a for s in tool_turns for a in s["attempts"]]
    success = answer is not None and protocol.normalise(answer) == protocol.normalise(
        task.expected
    )
    return {
        "profile": profile.name,
        "placement": caller.placement,
        "scenario": task.scenario,
        "episode": task.episode,
        "task": task.prompt,
        "expected": task.expected,
        "answer": None if answer is None else str(answer)[:200],
        "success": success,
        "end_reason": end_reason,
        "steps": len(turns),
        "loop_ms": loop_ms,
        "model_ms": model_ms,
        "tool_ms": tool_ms,
        "tool_steps": len(tool_turns),
        "tool_calls": len(attempts),
        "tool_retries": len(attempts) - len(tool_turns),
        "tool_failures": sum(1 for s in tool_turns if s["failed"]),
        "tool_refusals": sum(1 for s in tool_turns if not s["ok"] and not s["failed"]),
        "invalid_actions": sum(
            1 for t in turns if t["model"]["ok"] and t.get("action") is None
        ),
        "escalations": sum(1 for t in turns if t.get("escalated")),
        "injected": {
            "fail": sum(1 for a in attempts if a["error"] == "injected_failure"),
            "timeout": sum(1 for a in attempts if a["error"] == "timeout"),
        },
        "turns": turns,
    }


# -- the whole test -----------------------------------------------------------------------------
def start_tool_service(
    seed: int, workdir: Path, procs: Processes
) -> tuple[Service, str]:
    """The external placement's tool service: a process on a free loopback port, healthy."""
    port = procs.free_port()
    cmd = [
        sys.executable,
        "-m",
        "runtime.agents.tool_server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--seed",
        str(seed),
    ]
    server = procs.server(
        cmd,
        f"http://127.0.0.1:{port}/health",
        workdir / "tool-service.log",
        startup_timeout_s=30.0,
        stop_timeout_s=5.0,
    )
    server.start()
    return server, f"http://127.0.0.1:{port}"


async def _all(
    ep: Endpoint,
    test: AgentLoopTest,
    service: ToolService,
    url: str | None,
    on_episode: Callable[[dict[str, Any]], None],
) -> None:
    nonce = f"{time.time_ns():x}"
    origin = time.perf_counter_ns()
    async with ep.client() as client, httpx.AsyncClient(trust_env=False) as tool_client:
        callers = {
            "internal": InternalTools(service),
            "external": ExternalTools(url, tool_client) if url else None,
        }
        for p, profile in enumerate(test.profiles):
            for s, scenario in enumerate(test.scenarios):
                # one placement's episodes, then the other's, the first placement alternating: each
                # episode follows another task (the same prompt-cache state for both placements),
                # and both placements call their tools in the same order (the same injected faults)
                order = (
                    list(test.placements)
                    if (p + s) % 2 == 0
                    else list(reversed(test.placements))
                )
                for placement in order:
                    for i in range(test.episodes):
                        task = protocol.task(scenario, i, test.seed)
                        on_episode(
                            await episode(
                                ep,
                                client,
                                callers[placement],
                                task,
                                test=test,
                                profile=profile,
                                stream=f"{nonce}/{profile.name}/{placement}",
                                origin_ns=origin,
                            )
                        )


def run(
    ep: Endpoint, test: AgentLoopTest, procs: Processes
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every episode of the test, and the facts of the tool service (managed or given)."""
    service = ToolService(test.seed)
    episodes: list[dict[str, Any]] = []
    managed: Service | None = None
    url = test.tool_service_url
    facts: dict[str, Any] = {"managed": False, "url": url}
    with tempfile.TemporaryDirectory(prefix="almanac-tools-") as tmp:
        try:
            if "external" in test.placements and url is None:
                managed, url = start_tool_service(test.seed, Path(tmp), procs)
                facts = {
                    "managed": True,
                    "url": url,
                    "command": managed.command,
                    "startup_ms": managed.startup_ms,
                }
            asyncio.run(_all(ep, test, service, url, episodes.append))
        finally:
            if managed is not None:
                facts["stop"] = managed.stop()
                facts["log_tail"] = managed.log_tail(10)
    return episodes, facts


def details(
    test: AgentLoopTest, episodes: list[dict[str, Any]], facts: dict[str, Any]
) -> dict[str, Any]:
    return {
        "matrix": agent_kind.matrix_stats(episodes, [p.name for p in test.profiles]),
        "tool_service": facts,
        "protocol": {
            "system": protocol.SYSTEM,
            "example": protocol.EXAMPLE,
            "schema": protocol.ACTION_SCHEMA if test.constrained else None,
            "reask": REASK,
            **(
                {
                    "escalate": ESCALATE,
                    "uncertainty_threshold": test.uncertainty_threshold,
                }
                if test.uncertainty_threshold is not None
                else {}
            ),
        },
        "method": "controller: one model turn per step (streamed chat completion), one tool call per tool action "
        "with retries; internal and external placements of an episode back to back, alternating order",
    }
