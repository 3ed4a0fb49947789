"""``python -m runtime.agents.tool_server --port P [--host H] [--seed S]``: the agent loop's
tool service over HTTP (the *external* placement), stdlib only.

``GET /health`` answers 200. ``POST /call`` with ``{"stream", "tool", "args", "faults"}`` answers
200 ``{"result", "n", "injected"}``, 500 ``{"error", "injected": "fail"}`` for an injected failure,
400 ``{"error"}`` for a call the tool refuses. A hanging call sleeps in its own thread
(ThreadingHTTPServer), so it never blocks the next one.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runtime.agents.tools import ToolError, ToolFault, ToolService

MAX_BODY = 1 << 16


def make_handler(service: ToolService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(
            self, fmt: str, *args: Any
        ) -> None:  # quiet: the run's log is the model server's
            pass

        def _send(self, status: int, doc: dict[str, Any]) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (
                BrokenPipeError,
                ConnectionResetError,
            ):  # the controller gave up (a hang past its timeout)
                pass

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/call":
                self._send(404, {"error": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    raise ValueError("body too large")
                req = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                self._send(400, {"error": f"bad request: {exc}"})
                return
            try:
                out = service.call(
                    str(req.get("tool")),
                    req.get("args"),
                    stream=str(req.get("stream", "")),
                    faults=req.get("faults")
                    if isinstance(req.get("faults"), dict)
                    else None,
                )
            except ToolFault as exc:
                self._send(500, {"error": str(exc), "injected": "fail"})
                return
            except ToolError as exc:
                self._send(400, {"error": str(exc)})
                return
            self._send(200, out)

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The agent loop's tool service over HTTP.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    # started through ManagedServer (runtime/backends/openai_http/server.py, handed to the loop
    # by the backend): PR_SET_PDEATHSIG
    # kills it with the worker, and it stays in the worker's process group
    server = ThreadingHTTPServer(
        (args.host, args.port), make_handler(ToolService(args.seed))
    )
    server.daemon_threads = True
    print(
        f"tool service on http://{args.host}:{args.port}", file=sys.stderr, flush=True
    )
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
