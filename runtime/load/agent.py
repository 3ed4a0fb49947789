"""Agent sessions (the ``agent`` workload): what an agent framework sends a model, turn by turn.

A session starts with a system prompt and a task, sent with the tool definitions below; each later
turn appends the model's answer as an assistant turn that carries a tool call, then the tool's
result, and asks the model again, so the prompt grows by an answer and a tool result a turn and a
server with a prefix cache can reuse everything before them.

The tool call is the model's own where the server parsed one from its answer (``finish_reason``
``tool_calls``, the call streamed in ``delta.tool_calls``), else a scripted call of the session's
next tool (a small model rarely calls a tool, and a chat template without tool support never
parses one): each record says which (``tool_call``: model or scripted). The session's shape, its
growing context, is the workload either way; the server's template decides how a call is rendered.
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM = (
    "You are a coding agent working in a software repository. Call one tool at a time, read its "
    "result, and continue until the task is done."
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string", "description": arg_desc}},
                "required": [arg],
            },
        },
    }
    for name, desc, arg, arg_desc in (
        ("search_code", "Search the repository for a text.", "query", "The text."),
        ("read_file", "Read a file of the repository.", "path", "The file's path."),
        ("run_tests", "Run the tests of a module.", "module", "The module."),
    )
]

_ARGS = {"search_code": "query", "read_file": "path", "run_tests": "module"}


def request_fields(tool_choice: str) -> dict[str, Any]:
    """What every turn of a session sends beside its messages."""
    return {"tools": TOOLS, "tool_choice": tool_choice}


def first_messages(task: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def tool_result(result: str) -> list[dict[str, Any]]:
    """A turn's new messages: the tool's result (its call id is set when the turn is sent)."""
    return [{"role": "tool", "tool_call_id": "", "content": result}]


def scripted_call(session: str, turn: int) -> dict[str, Any]:
    """The call a session makes at ``turn`` when the model made none: the tools in turn."""
    name = TOOLS[turn % len(TOOLS)]["function"]["name"]
    value = {"search_code": "def main", "read_file": "src/app.py", "run_tests": "app"}[
        name
    ]
    return {
        "id": f"call_{session}_{turn}",
        "name": name,
        "arguments": json.dumps({_ARGS[name]: value}),
    }


def model_call(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The model's own first tool call in a streamed record, when the server parsed a whole one."""
    if rec.get("finish_reason") != "tool_calls":
        return None
    for c in rec.get("tool_calls") or []:
        if c.get("name"):
            return {
                "id": c.get("id") or "call_model",
                "name": c["name"],
                "arguments": c.get("arguments") or "{}",
            }
    return None


def next_history(
    history: list[dict[str, Any]],
    sent: list[dict[str, Any]],
    rec: dict[str, Any],
    answer: str,
    session: str,
    turn: int,
) -> tuple[list[dict[str, Any]], str]:
    """The session after a turn: what was sent, then the answer as an assistant turn with a tool call.
    Returns it and where the call came from (``model`` or ``scripted``)."""
    call = model_call(rec)
    source = "model" if call is not None else "scripted"
    call = call or scripted_call(session, turn)
    assistant = {
        "role": "assistant",
        "content": answer,
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
        ],
    }
    return history + sent + [assistant], source


def with_call_id(
    messages: list[dict[str, Any]], history: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A turn's tool-result messages answering the last call in the history."""
    last = next(
        (
            m
            for m in reversed(history)
            if m.get("role") == "assistant" and m.get("tool_calls")
        ),
        None,
    )
    if last is None:
        return messages
    cid = last["tool_calls"][0]["id"]
    return [
        {**m, "tool_call_id": cid} if m.get("role") == "tool" else m for m in messages
    ]
