"""The OpenAI HTTP backend as a load-generator transport (``runtime.load.transport.Transport``):
one request at a time, streamed or whole, and the server's tokenizer and counters where it has
them (llama-server's /tokenize, /detokenize and /metrics; vLLM's /tokenize and /detokenize)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from runtime.backends.openai_http import client as http
from runtime.backends.openai_http import dialects

# an answer of /tokenize, /detokenize or /metrics; a longer one is not used
MAX_INFO_BYTES = 4 << 20
MAX_METRICS = 2000  # counters kept of one /metrics answer


class HttpTransport:
    def __init__(
        self,
        *,
        base_url: str,
        label: str,
        body: dict[str, Any],
        policy: http.RequestPolicy,
        make_client: Callable[[int], httpx.AsyncClient],
        alive: Callable[[], bool],
        api_model: str,
        restart: Callable[[], tuple[str, float]] | None = None,
    ):
        self.label = label
        self._body = body
        self.policy = policy
        self._make_client = make_client
        self._alive = alive
        self.api_model = api_model
        self._restart = restart
        self._at(base_url)

    def _at(self, base_url: str) -> None:
        self.base_url = base_url
        parts = urlsplit(base_url)
        self.root = f"{parts.scheme}://{parts.netloc}"

    def client(self, connections: int) -> httpx.AsyncClient:
        return self._make_client(connections)

    def base_body(self) -> dict[str, Any]:
        return dict(self._body)

    def alive(self) -> bool:
        return self._alive()

    async def send(
        self, client: httpx.AsyncClient, body: dict[str, Any], origin_ns: int
    ) -> dict[str, Any]:
        return await http.stream_chat(
            client,
            f"{self.base_url}/chat/completions",
            body,
            self.policy,
            origin_ns=origin_ns,
            server_alive=self._alive,
        )

    async def request(
        self, client: httpx.AsyncClient, body: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        import time

        body = {k: v for k, v in body.items() if k != "stream_options"}
        body["stream"] = False
        return await http.post_json(
            client,
            f"{self.base_url}/chat/completions",
            body,
            self.policy,
            origin_ns=time.perf_counter_ns(),
        )

    def not_sent(self, reason: str, message: str, origin_ns: int) -> dict[str, Any]:
        return http.not_sent(reason, message, origin_ns)

    def tool_calls(self, message: dict[str, Any] | None) -> list[dict[str, Any]]:
        return dialects.tool_calls(message)

    async def _post(
        self, client: httpx.AsyncClient, path: str, payload: dict[str, Any]
    ) -> Any:
        try:
            async with client.stream(
                "POST", f"{self.root}{path}", json=payload, timeout=30.0
            ) as r:
                if r.status_code != 200:
                    return None
                raw = await http.read_bounded(r, MAX_INFO_BYTES)
        except httpx.HTTPError:
            return None
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return None

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int] | None:
        # llama-server reads "content", vLLM "prompt" (and "model"): one body serves both
        out = await self._post(
            client,
            "/tokenize",
            {
                "content": text,
                "prompt": text,
                "model": self.api_model,
                "add_special": False,
            },
        )
        toks = out.get("tokens") if isinstance(out, dict) else None
        if not isinstance(toks, list):
            return await self._extras_tokenize(client, text)
        ids = [t.get("id") if isinstance(t, dict) else t for t in toks]
        return (
            ids
            if all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
            else None
        )

    async def detokenize(self, client: httpx.AsyncClient, ids: list[int]) -> str | None:
        out = await self._post(
            client, "/detokenize", {"tokens": ids, "model": self.api_model}
        )
        if not isinstance(out, dict):
            out = await self._post(
                client, "/extras/detokenize", {"tokens": ids, "model": self.api_model}
            )
            if not isinstance(out, dict):
                return None
        text = out.get("content", out.get("prompt", out.get("text")))
        return text if isinstance(text, str) else None

    async def _extras_tokenize(
        self, client: httpx.AsyncClient, text: str
    ) -> list[int] | None:
        """llama_cpp.server's /extras/tokenize (it has no /tokenize). It adds the BOS token: the ids it
        gives the empty text are taken off the front, so the ids are the text's own."""

        async def ids_of(t: str) -> list[int] | None:
            out = await self._post(
                client, "/extras/tokenize", {"input": t, "model": self.api_model}
            )
            toks = out.get("tokens") if isinstance(out, dict) else None
            if not isinstance(toks, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in toks
            ):
                return None
            return toks

        if not hasattr(self, "_extras_prefix"):
            self._extras_prefix = await ids_of("")
        pre = self._extras_prefix
        if pre is None:
            return None
        ids = await ids_of(text)
        if ids is None:
            return None
        return ids[len(pre) :] if ids[: len(pre)] == pre else ids

    async def reset_cache(self, client: httpx.AsyncClient, how: str) -> dict[str, Any]:
        """``erase``: llama-server's slot erase (runtime.backends.openai_http.slots); ``restart``: the
        managed server stopped and started again (its caches, the host-memory prompt cache included,
        empty); a server this run did not start cannot be restarted (said so, ``ok`` false)."""
        from runtime.backends.openai_http import slots

        if how != "restart":
            return await slots.erase_all(client, self.root)
        out: dict[str, Any] = {"action": "restart", "ok": False, "error": None}
        if self._restart is None:
            out["error"] = (
                "the server was not started by this run: it cannot be restarted"
            )
            return out
        try:
            base, startup_ms = await asyncio.to_thread(self._restart)
        except (
            Exception
        ) as exc:  # a failed start is the run's failure: alive() says so next
            out["error"] = f"restart failed: {http.quote(str(exc), 300)}"
            return out
        self._at(base)
        out.update(ok=True, startup_ms=startup_ms)
        return out

    async def metrics(self, client: httpx.AsyncClient) -> dict[str, float] | None:
        """Prometheus counters and gauges without labels (llama-server with --metrics, vLLM, TGI)."""
        try:
            async with client.stream("GET", f"{self.root}/metrics", timeout=10.0) as r:
                if r.status_code != 200 or "text/plain" not in r.headers.get(
                    "content-type", "text/plain"
                ):
                    return None
                raw = await http.read_bounded(r, MAX_INFO_BYTES)
        except httpx.HTTPError:
            return None
        if raw is None:
            return None
        out: dict[str, float] = {}
        for line in raw.decode("utf-8", "replace").splitlines():
            if not line or line.startswith("#") or "{" in line:
                continue
            parts = line.split()
            if len(parts) >= 2:
                try:
                    v = float(parts[1])
                except ValueError:
                    continue
                # NaN and +Inf (a gauge not yet set) are no counts to difference
                if math.isfinite(v):
                    out[parts[0][:200]] = v
                if len(out) >= MAX_METRICS:
                    break
        return out or None

    async def metrics_text(
        self, client: httpx.AsyncClient, limit: int = 2 << 20
    ) -> str | None:
        """The server's /metrics exposition as text, at most ``limit`` bytes (None: absent or not text)."""
        try:
            async with client.stream("GET", f"{self.root}/metrics", timeout=5.0) as r:
                if r.status_code != 200:
                    return None
                buf = bytearray()
                async with http.body_chunks(r) as chunks:
                    async for chunk in chunks:
                        buf += chunk
                        if len(buf) > limit:
                            break
        except httpx.HTTPError:
            return None
        return bytes(buf[:limit]).decode("utf-8", "replace")
