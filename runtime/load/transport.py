"""What the load generator needs from a backend: send one request, and a few facts.

A backend that can serve load tests implements this protocol (the OpenAI HTTP backend does:
``runtime.backends.openai_http.transport``). Nothing in ``runtime.load`` imports a backend.
"""

from __future__ import annotations

from typing import Any, Protocol


class Transport(Protocol):
    """One endpoint, as the load generator sees it."""

    #: A name for tables (the server's label).
    label: str

    def client(self, connections: int) -> Any:
        """An async client (an async context manager) holding up to ``connections`` connections."""

    async def send(
        self, client: Any, body: dict[str, Any], origin_ns: int
    ) -> dict[str, Any]:
        """Send one streamed chat request; always return its record (never raise)."""

    async def request(
        self, client: Any, body: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        """Send one request without streaming: (its record, the parsed JSON answer or None)."""

    def alive(self) -> bool:
        """False once a server the run started is gone."""

    def not_sent(self, reason: str, message: str, origin_ns: int) -> dict[str, Any]:
        """The record of a planned request that was never sent (the server was already gone)."""

    def base_body(self) -> dict[str, Any]:
        """The fields every request carries (model, stream options, sampling, extra body)."""

    async def tokenize(self, client: Any, text: str) -> list[int] | None:
        """The server's token ids of ``text`` (None when it exposes no tokenizer)."""

    async def detokenize(self, client: Any, ids: list[int]) -> str | None:
        """The text of token ids (None when it cannot)."""

    def tool_calls(self, message: dict[str, Any] | None) -> list[dict[str, Any]]:
        """[{id, name, arguments (parsed), parse_error}] of a whole answer's message, in the server's dialect."""

    async def metrics(self, client: Any) -> dict[str, float] | None:
        """The server's Prometheus counters (None when it has no /metrics)."""

    async def reset_cache(self, client: Any, how: str) -> dict[str, Any]:
        """Empty the server's caches (``how``: erase or restart): {action, ok, error, ...}; never raises."""
