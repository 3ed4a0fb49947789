"""Transient errors on purpose: a loopback proxy between the client and the server that answers
every k-th chat request with an HTTP error and forwards the others, streaming.

Error and retry overhead (seed 003) can only be measured where errors happen. With
``fault_every: k`` the backend starts this proxy in front of the server it talks to; attempt
k, 2k, 3k, ... (counted over every POST to ``/chat/completions``, warm-ups and retries
included, so the pattern is deterministic) gets ``fault_status`` (503 by default: a retryable
"service unavailable") with a JSON error body at once, the way an overloaded server or a load
balancer answers; every other request is forwarded to the server and its streamed response
relayed chunk by chunk. The artifact records how many faults were injected.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


class FaultProxy:
    """``with FaultProxy(upstream, every=5) as p: p.base_url`` (a loopback URL ending in /v1)."""

    def __init__(
        self,
        upstream_base_url: str,
        every: int,
        status: int = 503,
        timeout_s: float = 120.0,
    ):
        if every < 1:
            raise ValueError("every must be at least 1")
        parts = urlsplit(upstream_base_url)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or (443 if parts.scheme == "https" else 80)
        self.upstream_prefix = parts.path.rstrip("/")
        self.every = every
        self.status = status
        self.timeout_s = timeout_s
        self.attempts = 0
        self.injected = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(
                self, fmt: str, *args: Any
            ) -> None:  # quiet: the run's log is the server's
                pass

            def do_GET(self) -> None:
                proxy._forward(self, b"")

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                if (
                    self.path.rstrip("/").endswith("/chat/completions")
                    and proxy._fault_now()
                ):
                    payload = json.dumps(
                        {
                            "error": {
                                "message": f"injected fault (every {proxy.every}th request)",
                                "type": "service_unavailable",
                                "code": proxy.status,
                            }
                        }
                    ).encode()
                    self.send_response(proxy.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                proxy._forward(self, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fault-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "not started"
        return (
            f"http://127.0.0.1:{self._server.server_address[1]}{self.upstream_prefix}"
        )

    def facts(self) -> dict[str, Any]:
        return {
            "every": self.every,
            "status": self.status,
            "attempts": self.attempts,
            "injected": self.injected,
            "forwarded": self.forwarded,
            "method": (
                "loopback proxy: every k-th POST /chat/completions answered at once with "
                "the status; the rest forwarded, streamed"
            ),
        }

    # -- requests -----------------------------------------------------------------------------
    def _fault_now(self) -> bool:
        with self._lock:
            self.attempts += 1
            if self.attempts % self.every == 0:
                self.injected += 1
                return True
            self.forwarded += 1
            return False

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        path = h.path
        if self.upstream_prefix and path.startswith(self.upstream_prefix):
            path = path[len(self.upstream_prefix) :]
        conn = http.client.HTTPConnection(
            self.upstream_host, self.upstream_port, timeout=self.timeout_s
        )
        try:
            headers = {
                k: v
                for k, v in h.headers.items()
                if k.lower() not in HOP_BY_HOP and k.lower() != "host"
            }
            if body:
                headers["Content-Length"] = str(len(body))
            conn.request(
                h.command,
                self.upstream_prefix + path,
                body=body or None,
                headers=headers,
            )
            resp = conn.getresponse()
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    h.send_header(k, v)
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (OSError, http.client.HTTPException) as exc:
            try:
                payload = json.dumps(
                    {"error": {"message": f"proxy: upstream failed ({exc})"}}
                ).encode()
                h.send_response(502)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(payload)))
                h.end_headers()
                h.wfile.write(payload)
            except OSError:
                pass
        finally:
            conn.close()
