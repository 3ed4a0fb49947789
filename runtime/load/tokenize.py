"""The ``tokenize`` kind's loop (core.kinds.tokenize): one text a request, then ``batch`` texts a request
(a list of texts in one /tokenize body: llama-server tokenizes each), sent by ``clients`` clients at
once, the two arms alternating over rounds. The backend owns the server; this module owns the loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.kinds.tokenize import TokenizeTest
from core.texts import load_text, passages


def texts(test: TokenizeTest) -> list[str]:
    """``requests`` texts: the corpus's passages in turn."""
    parts = passages(load_text(test.corpus).read())
    return [parts[i % len(parts)] for i in range(test.requests)]


async def _send(client: Any, url: str, content: Any) -> int | None:
    """Tokens the server returned for the body's texts, None when the request failed."""
    try:
        r = await client.post(url, json={"content": content, "add_special": False})
    except Exception:
        return None
    if r.status_code != 200:
        return None
    try:
        toks = r.json().get("tokens")
    except ValueError:
        return None
    return len(toks) if isinstance(toks, list) else None


async def _arm(
    client: Any, url: str, bodies: list[Any], clients: int
) -> tuple[float, int, int]:
    """Send every body, ``clients`` at a time (each client its share, one after another): wall time
    (s), failures, tokens."""
    results: list[int | None] = []

    async def worker(share: list[Any]) -> None:
        for b in share:
            results.append(await _send(client, url, b))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(bodies[i::clients]) for i in range(clients)))
    wall = time.perf_counter() - t0
    return wall, sum(1 for x in results if x is None), sum(x or 0 for x in results)


async def _rounds(
    root: str, test: TokenizeTest
) -> tuple[list[dict[str, Any]], int, int]:
    import httpx

    items = texts(test)
    single: list[Any] = items
    batched: list[Any] = [
        items[i : i + test.batch] for i in range(0, len(items), test.batch)
    ]
    url = f"{root}/tokenize"
    out = []
    tokens = tokens_batched = 0
    limits = httpx.Limits(
        max_connections=test.clients, max_keepalive_connections=test.clients
    )
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as client:
        if (
            test.warmup is not False
        ):  # one untimed pass of each arm: connections open, caches warm
            await _arm(client, url, single[: test.batch], test.clients)
            await _arm(client, url, batched[:1], test.clients)
        for _ in range(test.rounds):
            one, f1, tokens = await _arm(client, url, single, test.clients)
            bat, f2, tokens_batched = await _arm(client, url, batched, test.clients)
            out.append({"one_by_one_s": one, "batched_s": bat, "failed": f1 + f2})
    return out, tokens, tokens_batched


def run(root: str, test: TokenizeTest) -> tuple[list[dict[str, Any]], int, int]:
    """Every round's wall times and failures, and the tokens of one pass each way (the server's count:
    the batched texts' tokens come back as one list, as many as one by one)."""
    return asyncio.run(_rounds(root, test))
