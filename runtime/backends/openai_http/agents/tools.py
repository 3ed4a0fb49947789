"""The agent loop's tools, its tasks and its fault injector.

One :class:`ToolService` serves both placements: the controller calls it as a function
(internal) or through ``tool_server`` over HTTP on loopback (external). Faults are injected by
the service itself, counted per *stream* (a profile and placement of one run): the n-th call of
a stream fails when ``n % fail_every == 0`` and hangs for ``hang_s`` when ``n % timeout_every ==
0`` (a hang wins when both hold). Retries are calls too, so a retry can meet the next fault.

The data the tools read is fixed by a seed (``store``), and the tasks of a run are drawn from
the same seed (``task``), so every host and both placements answer the same questions.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

KEYS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
)
VALUES = (
    "Lisbon",
    "otter",
    "violet",
    "granite",
    "Oslo",
    "walnut",
    "heron",
    "copper",
    "Quito",
    "maple",
    "amber",
    "falcon",
    "Dakar",
    "cedar",
    "indigo",
    "lynx",
    "Hanoi",
    "basalt",
    "plum",
    "Tunis",
)
POINTERS = tuple(f"pointer-{k}" for k in KEYS[:10])


def store(seed: int) -> dict[str, str]:
    """The key-value store the lookup tool reads: every key a value, and pointer keys whose value
    is the name of another key (the chain task)."""
    rng = random.Random(f"agent-store-{seed}")
    values = list(VALUES)
    rng.shuffle(values)
    out = dict(zip(KEYS, values))
    for p in POINTERS:
        out[p] = rng.choice(KEYS)
    return out


@dataclass(frozen=True)
class Task:
    scenario: str
    episode: int
    prompt: str
    expected: str
    tool_steps: int  # tool calls a perfect agent makes


def task(scenario: str, episode: int, seed: int) -> Task:
    """The episode-th task of a scenario, drawn from the seed."""
    rng = random.Random(f"agent-task-{seed}-{scenario}-{episode}")
    data = store(seed)
    if scenario == "lookup":
        key = rng.choice(KEYS)
        return Task(
            scenario,
            episode,
            f'Task: find the value stored under key "{key}".',
            data[key],
            1,
        )
    if scenario == "add":
        a, b = rng.randint(11, 99), rng.randint(11, 99)
        return Task(
            scenario,
            episode,
            f"Task: add {a} and {b} with the add tool.",
            str(a + b),
            1,
        )
    if scenario == "chain":
        ptr = rng.choice(POINTERS)
        return Task(
            scenario,
            episode,
            f'Task: the value stored under key "{ptr}" is the name of another key. '
            "Find the value stored under that other key.",
            data[data[ptr]],
            2,
        )
    raise ValueError(f"unknown scenario {scenario!r}")


# -- the protocol the model is asked to follow --------------------------------------------------
SYSTEM = (
    "You solve tasks by calling tools. Reply with one JSON object and nothing else. To call a tool: "
    '{"tool": NAME, "args": {...}}. When a tool result gives you the answer: {"answer": VALUE}. '
    "Tools: lookup(key) returns the value stored under key; add(a, b) returns a + b."
)

# one solved episode in front of every task (the model is shown the protocol, not told only)
EXAMPLE = [
    {"role": "user", "content": 'Task: find the value stored under key "colour".'},
    {"role": "assistant", "content": '{"tool": "lookup", "args": {"key": "colour"}}'},
    {"role": "user", "content": 'Tool result: "green"'},
    {"role": "assistant", "content": '{"answer": "green"}'},
]

ACTION_SCHEMA = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": ["lookup", "add"]},
                "args": {"type": "object"},
            },
            "required": ["tool", "args"],
        },
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    ]
}


def parse_action(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model turn, as an action ({tool, args} or {answer}); None when
    there is none (the controller then asks again, and the turn counts as a step)."""
    decoder = json.JSONDecoder(
        parse_constant=_no_constant
    )  # NaN / Infinity: not JSON an artifact can hold
    start = text.find("{")
    while start >= 0:
        try:
            obj, _ = decoder.raw_decode(text[start:])
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict) and (
            "answer" in obj or isinstance(obj.get("tool"), str)
        ):
            return obj
        start = text.find("{", start + 1)
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def normalise(answer: Any) -> str:
    return " ".join(str(answer).split()).strip().strip(".\"'").casefold()


# -- the tool service -------------------------------------------------------------------------
class ToolFault(Exception):
    """An injected failure (HTTP 500 over the network)."""


class ToolError(Exception):
    """A call the tool itself refuses (unknown tool, bad arguments: HTTP 400 over the network)."""


class ToolService:
    """The tools and the fault injector, shared by both placements."""

    def __init__(self, seed: int = 0):
        self.data = store(seed)
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def _count(self, stream: str) -> int:
        with self._lock:
            self._counts[stream] = self._counts.get(stream, 0) + 1
            return self._counts[stream]

    def call(
        self, tool: str, args: Any, *, stream: str, faults: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Run one call: {'result': ..., 'n': call number, 'injected': None | 'fail' | 'timeout'}.
        A hang sleeps ``hang_s`` and then answers (late); a failure raises ToolFault."""
        faults = faults or {}
        n = self._count(stream)
        t_every, f_every = faults.get("timeout_every"), faults.get("fail_every")
        injected = None
        if t_every and n % int(t_every) == 0:
            injected = "timeout"
            time.sleep(float(faults.get("hang_s", 0.9)))
        elif f_every and n % int(f_every) == 0:
            raise ToolFault(f"injected failure (call {n} of stream {stream})")
        return {"result": self.run(tool, args), "n": n, "injected": injected}

    def run(self, tool: str, args: Any) -> Any:
        if not isinstance(args, dict):
            raise ToolError(f"args must be an object, got {type(args).__name__}")
        if tool == "lookup":
            key = args.get("key")
            if not isinstance(key, str):
                raise ToolError("lookup needs a string key")
            if key not in self.data:
                raise ToolError(f"no value stored under key {json.dumps(key)[:80]}")
            return self.data[key]
        if tool == "add":
            try:
                return _number(args.get("a")) + _number(args.get("b"))
            except (TypeError, ValueError):
                raise ToolError("add needs two numbers a and b") from None
        raise ToolError(f"unknown tool {json.dumps(tool)[:40]}")


def _number(v: Any) -> int | float:
    if isinstance(v, bool) or v is None:
        raise TypeError("not a number")
    x = float(v)
    return int(x) if x.is_integer() else x
