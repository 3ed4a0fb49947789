"""A small OpenAI-compatible server that lies, floods and drips on purpose (tests only).

``python tests/hostile/liar_server.py --port N [--models MODE] [--metrics MODE] [--flood N]``

A chat request picks its behaviour by its ``model`` field; every answer is otherwise a short, well
formed stream of four one-word chunks, a usage chunk and ``[DONE]``:

* ``honest``: nothing wrong (the control);
* ``usage-1e15``: ``usage.completion_tokens`` 10^15 for the four chunks; ``usage-1e400``: 10^400;
* ``chunk-flood``: ``--flood`` one-character chunks (10^6 by default), whatever ``max_tokens`` says;
* ``cached-1e6``: ``cached_tokens`` 10^6 of a 5-token prompt;
* ``timings-nan``: llama-server's ``timings`` with ``NaN`` and ``Infinity``;
* ``prompt-1e12``: ``usage.prompt_tokens`` 10^12 for a one-line prompt;
* ``timings-future``: llama-server's ``timings`` claiming 10^9 ms of generation;
* ``markup-error``: HTTP 500 whose message is Rich markup (``[/]``, ``[link=…]``);
* ``huge-answer``: a non-streamed answer of 64 MiB (``stream: false``); ``drip``: a non-streamed
  answer at one byte a second. A non-streamed ``/v1/completions`` answers raw text.

GET routes: ``/v1/models`` (and ``/health``) by ``--models``: ``ok`` (a plain listing), ``drip``
(one byte a second, for ever), ``many`` (10,000 entries and the served name), ``nested`` (JSON nested
100,000 deep), ``superscript`` (llama-server's ``meta.size: "²"``), ``digits`` (5,000-digit strings
and a 5,000-digit number), ``big`` (over 2 MiB, the served name first), ``endless`` (a body that never
ends), ``markup`` (model ids that are Rich markup). ``/metrics`` by ``--metrics``: ``ok``, ``nan``
(NaN and +Inf values), ``endless``. ``/tokenize`` (one id per word) and ``/detokenize``; an endless
``/tokenize`` body with ``--tokenize endless``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVED = "liar"
WORDS = ["one", "two", "three", "four"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "liar/1"
    opts: argparse.Namespace

    def log_message(self, fmt: str, *args) -> None:
        pass

    # -- helpers ----------------------------------------------------------------------------
    def _raw(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _start_chunked(self, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _endless(self, ctype: str, piece: bytes) -> None:
        self._start_chunked(ctype)
        try:
            for _ in range(1 << 20):
                self._chunk(piece)
        except OSError:
            return

    def _drip(self, text: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        try:
            for b in text:
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(1.0)
        except OSError:
            return

    # -- routes -----------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/v1/models", "/models", "/health"):
            return self._models()
        if path == "/metrics":
            mode = self.opts.metrics
            if mode == "endless":
                return self._endless(
                    "text/plain", b"llamacpp:tokens_predicted_total 1\n" * 256
                )
            value = "NaN" if mode == "nan" else "3"
            body = f"# TYPE x counter\nllamacpp:prompt_tokens_total {value}\nllamacpp:busy +Inf\nllamacpp:ok 2\n"
            return self._raw(200, body.encode(), "text/plain; version=0.0.4")
        return self._raw(404, b'{"error": "not found"}')

    def _models(self) -> None:
        mode = self.opts.models
        entry = {"id": SERVED, "object": "model", "owned_by": "liar"}
        if mode == "drip":
            return self._drip(json.dumps({"data": [entry]}).encode())
        if mode == "endless":
            self._start_chunked("application/json")
            try:
                self._chunk(b'{"data": [')
                for _ in range(1 << 20):
                    self._chunk(b'{"id": "x", "object": "model"},' * 64)
            except OSError:
                pass
            return
        if mode == "many":
            data = [entry] + [
                {"id": f"model-{i:05d}", "object": "model", "owned_by": "x" * 900}
                for i in range(10_000)
            ]
            return self._raw(200, json.dumps({"object": "list", "data": data}).encode())
        if mode == "nested":
            return self._raw(200, b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        if mode == "superscript":
            e = {
                **entry,
                "owned_by": "llamacpp",
                "meta": {
                    "size": "\u00b2",
                    "n_params": "\u0661\u0662",
                    "n_ctx": "9" * 5000,
                },
            }
            return self._raw(200, json.dumps({"data": [e]}).encode())
        if mode == "digits":
            e = {
                **entry,
                "root": "7" * 5000,
                "max_model_len": "8" * 5000,
                "owned_by": "vllm",
            }
            body = (
                json.dumps({"data": [e]})
                .encode()
                .replace(
                    b'"max_model_len": "',
                    b'"n": ' + b"9" * 5000 + b', "max_model_len": "',
                    1,
                )
            )
            return self._raw(200, body)
        if mode == "big":
            pad = [
                {"id": f"pad-{i}", "object": "model", "owned_by": "y" * 400}
                for i in range(6000)
            ]
            return self._raw(200, json.dumps({"data": [entry] + pad}).encode())
        if mode == "markup":
            data = [
                {"id": "[/]", "object": "model"},
                {"id": "[link=javascript:alert(1)]x[/link]", "object": "model"},
            ]
            return self._raw(200, json.dumps({"data": data}).encode())
        return self._raw(200, json.dumps({"object": "list", "data": [entry]}).encode())

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            req = {}
        path = self.path.split("?", 1)[0]
        if path == "/tokenize":
            if self.opts.tokenize == "endless":
                self._start_chunked("application/json")
                try:
                    self._chunk(b'{"tokens": [')
                    for _ in range(1 << 20):
                        self._chunk(b"1, " * 4096)
                except OSError:
                    pass
                return
            text = str(req.get("content") or req.get("prompt") or "")
            return self._raw(
                200, json.dumps({"tokens": [len(w) for w in text.split()]}).encode()
            )
        if path == "/detokenize":
            ids = req.get("tokens") or []
            return self._raw(
                200,
                json.dumps(
                    {"content": " ".join("w" * max(1, int(i) % 9) for i in ids)}
                ).encode(),
            )
        mode = str(req.get("model") or "honest")
        if mode == "markup-error":
            msg = "[/] closing tag [link=javascript:alert(1)]click[/link] [bold]x"
            return self._raw(
                500, json.dumps({"error": {"message": msg, "code": 500}}).encode()
            )
        if mode == "huge-answer" or req.get("stream") is False:
            if mode == "huge-answer":
                self._start_chunked("application/json")
                try:
                    self._chunk(b'{"choices": [{"message": {"content": "')
                    for _ in range(1024):
                        self._chunk(b"x" * (64 << 10))
                    self._chunk(b'"}}]}')
                    self._end()
                except OSError:
                    pass
                return
            whole = {"message": {"role": "assistant", "content": "one two"}}
            if not path.endswith("/chat/completions"):  # /v1/completions: raw text
                whole = {"text": "one two"}
            if mode == "drip":
                return self._drip(
                    json.dumps(
                        {"choices": [{**whole, "finish_reason": "stop"}]}
                    ).encode()
                )
            answer = {
                "choices": [{**whole, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": 5,
                    "completion_tokens": 10**15 if mode == "usage-1e15" else 2,
                },
            }
            return self._raw(200, json.dumps(answer).encode())
        self._stream(mode, req)

    def _stream(self, mode: str, req: dict) -> None:
        self._start_chunked("text/event-stream")

        def event(payload: str) -> None:
            self._chunk(f"data: {payload}\n\n".encode())

        def delta(content: str | None, finish: str | None = None) -> str:
            d = {"content": content} if content is not None else {}
            return json.dumps(
                {
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
                }
            )

        try:
            if mode == "chunk-flood":
                piece = delta("x").encode()
                frame = b"data: " + piece + b"\n\n"
                batch = frame * 256
                for _ in range(max(1, self.opts.flood // 256)):
                    self._chunk(batch)
            else:
                for w in WORDS:
                    event(delta(w + " "))
                    time.sleep(0.002)
            event(delta(None, "length"))
            usage = '{"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}'
            timings = ""
            if mode == "usage-1e15":
                usage = '{"prompt_tokens": 5, "completion_tokens": 1000000000000000}'
            elif mode == "usage-1e400":
                usage = '{"prompt_tokens": 5, "completion_tokens": 1' + "0" * 400 + "}"
            elif mode == "cached-1e6":
                usage = (
                    '{"prompt_tokens": 5, "completion_tokens": 4, '
                    '"prompt_tokens_details": {"cached_tokens": 1000000}}'
                )
            elif mode == "prompt-1e12":
                usage = '{"prompt_tokens": 1000000000000, "completion_tokens": 4}'
            elif mode == "timings-nan":
                timings = (
                    ', "timings": {"cache_n": 0, "prompt_n": 5, "prompt_ms": NaN, '
                    '"predicted_n": 4, "predicted_ms": Infinity}'
                )
            elif mode == "timings-future":
                timings = (
                    ', "timings": {"cache_n": 0, "prompt_n": 5, "prompt_ms": 1.0, '
                    '"predicted_n": 4, "predicted_ms": 1e9}'
                )
            elif mode == "chunk-flood":
                usage = (
                    '{"prompt_tokens": 5, "completion_tokens": '
                    + str(self.opts.flood)
                    + "}"
                )
            event(
                '{"object": "chat.completion.chunk", "choices": [], "usage": '
                + usage
                + timings
                + "}"
            )
            event("[DONE]")
            self._end()
        except OSError:
            return


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--models", default="ok")
    ap.add_argument("--metrics", default="ok")
    ap.add_argument("--tokenize", default="ok")
    ap.add_argument("--flood", type=int, default=1_000_000)
    opts = ap.parse_args()
    Handler.opts = opts
    srv = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    srv.daemon_threads = True
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
