"""Commands a task runs in a shell (invoke's ``c.run``), warned rather than failing the task, so
the task decides what an exit status means."""

from __future__ import annotations

from typing import Any

from invoke import Context
from invoke.runners import Result


def run(c: Context, command: str, **kwargs: Any) -> Result:
    """Run ``command`` (never failing the task by itself, no pseudo-terminal) and return its result."""
    result = c.run(command, warn=True, pty=False, **kwargs)
    if result is None:  # only asynchronous or disowned runs return nothing
        raise RuntimeError(f"no result from {command!r}")
    return result


def exit_code(c: Context, command: str) -> int:
    """Run ``command`` and return its exit status."""
    return run(c, command).exited
