"""llama-server's slot erase: empty every slot's KV cache so the next request starts cold.

``GET /slots`` lists the slots (on by default; ``--no-slots`` turns it off), ``POST
/slots/{id}?action=erase`` empties one and answers ``{"id_slot", "n_erased"}`` (the tokens it
dropped). llama-server answers the erase with 501 unless it was started with ``--slot-save-path DIR``
(its source, ``server-context.cpp`` at the pinned build 0c1e57098: every slot action needs it, erase
included; an erase writes nothing there): a matrix that erases passes it in ``server_args``.
An erase empties the slots only: llama-server's host-memory prompt cache (``--cache-ram``, 8 GiB by
default, llama.cpp PR 16391) keeps idle slots' prompts and gives them back to the next request that
matches (measured here: 62% of a repeat's prompt tokens came from the cache after an erase), so a
cold repeat also needs ``--cache-ram 0`` (or a restart); what the server then reports per repeat is
the check (``core.kinds.load_stats.repeat_stats``). A server without
the endpoints (llama_cpp.server, vLLM, a llama-server with ``--no-slots``) gets ``ok: false`` and
the reason; nothing raises.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from runtime.backends.openai_http import client as http

MAX_SLOTS = 256  # slots erased at most (llama-server's -np is far below)
MAX_BYTES = 4 << 20  # a /slots listing (it carries each slot's sampling settings)
NOT_SUPPORTED = (
    " (llama-server allows slot actions only when started with --slot-save-path: "
    "add server_args: [--slot-save-path, /tmp])"
)


async def _json(r: httpx.Response) -> Any:
    raw = await http.read_bounded(r, MAX_BYTES)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


async def erase_all(client: httpx.AsyncClient, root: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "action": "erase",
        "ok": False,
        "slots": 0,
        "erased_tokens": 0,
        "error": None,
    }
    try:
        async with client.stream("GET", f"{root}/slots", timeout=10.0) as r:
            listing = await _json(r) if r.status_code == 200 else None
            status = r.status_code
        if not isinstance(listing, list):
            out["error"] = (
                f"the server has no slot listing (GET /slots answered {status}): its cache cannot be erased"
            )
            return out
        ids = [
            s["id"]
            for s in listing[:MAX_SLOTS]
            if isinstance(s, dict)
            and isinstance(s.get("id"), int)
            and not isinstance(s.get("id"), bool)
        ]
        for i in ids:
            async with client.stream(
                "POST", f"{root}/slots/{i}", params={"action": "erase"}, timeout=10.0
            ) as r:
                ans = await _json(r) if r.status_code == 200 else None
                if not isinstance(ans, dict):
                    out["error"] = (
                        f"POST /slots/{i}?action=erase answered {r.status_code}"
                        + (NOT_SUPPORTED if r.status_code == 501 else "")
                    )
                    return out
                n = ans.get("n_erased")
                if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40:
                    out["erased_tokens"] += n
            out["slots"] += 1
    except httpx.HTTPError as exc:
        out["error"] = (
            f"slot erase failed: {type(exc).__name__}: {http.quote(str(exc), 200)}"
        )
        return out
    out["ok"] = out["slots"] > 0
    if not out["ok"]:
        out["error"] = "the server listed no slots"
    return out
