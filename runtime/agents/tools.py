"""The agent loop's tools and their fault injector.

One :class:`ToolService` serves both placements: the controller calls it as a function
(internal) or through ``tool_server`` over HTTP on loopback (external). Faults are injected by
the service itself, counted per *stream* (a profile and placement of one run): the n-th call of
a stream fails when ``n % fail_every == 0`` and hangs for ``hang_s`` when ``n % timeout_every ==
0`` (a hang wins when both hold). Retries are calls too, so a retry can meet the next fault.

The data the tools read is the kind's (``core.kinds.agent_protocol.store``, fixed by a seed).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from core.kinds.agent_protocol import store


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
