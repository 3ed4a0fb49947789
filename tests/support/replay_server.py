"""A loopback HTTP server that answers fixed routes with recorded JSON (tests only).

It stands in for servers that cannot run here (vLLM, TGI, SGLang, Ollama need a GPU or a
download): each fixture under ``tests/fixtures/endpoints/`` gives the answers of the routes
their own source or docs define, and says where each came from. Anything not in the fixture
is a 404, as a real server answers a route it does not have. Requests are recorded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "endpoints"


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class ReplayServer:
    """``with ReplayServer(routes) as srv:`` serves ``routes`` ({"GET /v1/models": {"status", "headers",
    "body"}}) on a free loopback port; ``srv.base_url`` is its ``/v1`` root, ``srv.requests`` what it was asked."""

    def __init__(self, routes: dict[str, dict[str, Any]]):
        self.routes = routes
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                key = f"{method} {self.path}"
                outer.requests.append(key)
                route = outer.routes.get(key)
                if route is None:
                    status, headers, body = 404, {}, {"error": "Not Found"}
                else:
                    status, headers, body = (
                        route.get("status", 200),
                        route.get("headers", {}),
                        route.get("body"),
                    )
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
