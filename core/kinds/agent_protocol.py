"""The ``agent_loop`` kind's tasks and the protocol its model is asked to follow (pure: no I/O).

The data the tools read is fixed by a seed (:func:`store`), and the tasks of a run are drawn
from the same seed (:func:`task`), so every host and both placements answer the same questions.
The protocol - the system prompt, one solved example, the action schema, the words the
controller asks again with - and how a model turn is read as an action (:func:`parse_action`)
and an answer compared (:func:`normalise`) are the kind's; the controller that runs them, the
tools and the tool service are runtime/agents/'s.
"""

from __future__ import annotations

import json
import random
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


# what the controller says when a turn holds no action, and when the uncertainty gate asks again
REASK = (
    'Reply with one JSON object: {"tool": NAME, "args": {...}} or {"answer": VALUE}.'
)
ESCALATE = (
    "You were unsure of that reply. If the task needs a value you have not looked up, call the tool for it; "
    'then answer with the exact value. Reply with one JSON object: {"tool": NAME, "args": {...}} or '
    '{"answer": VALUE}.'
)


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
