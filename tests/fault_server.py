"""A small OpenAI-compatible server of our own that misbehaves on purpose (tests only).

``python tests/fault_server.py --port N [--mode MODE] [--delay-ms D] [--slots K] ...``

Each request picks its behaviour by its ``model`` field (falling back to ``--mode``):

* ``ok``: streams ``min(max_tokens, --tokens)`` one-word chunks, ``--delay-ms`` apart, then a
  finish chunk, a usage chunk when ``stream_options.include_usage`` is asked, and ``[DONE]``;
  ``ok-nousage`` never reports usage;
* ``http500``: HTTP 500; ``flaky``: 503 on odd-numbered requests, ``ok`` on even ones;
* ``http429`` / ``http503``: HTTP 429 (with ``Retry-After: 1``) / 503, each with an error body in
  one of the recorded dialects (TGI's ``{"error": "Model is overloaded"}`` for 429, llama-server's
  ``{"error": {"code", "message", "type"}}`` for 503);
* ``slow-headers``: sleeps ``--stall-s`` before answering at all;
* ``stall``: two chunks, then silence for ``--stall-s``;
* ``trickle``: a chunk every 200 ms, never finishing;
* ``drop``: two chunks, then the socket is closed in the middle of the chunked body;
* ``truncate``: two chunks, then a clean end of body without finish_reason or ``[DONE]``;
* ``error-event``: a ``data: {"error": ...}`` event; ``bad-json``: a data line that is not JSON;
* ``wrong-shape``: a chunk whose ``choices`` is a string; ``number-content``: a delta whose
  content is a number; ``list-line``: a data line that is a JSON list; ``endless-line``: bytes
  without a newline, forever (until the client goes);
* ``die``: two chunks, then the whole server process exits (code 3); ``--die-after N`` turns
  the Nth request into ``die`` whatever it asked for.

``--slots K`` lets at most K streams generate at once (1 = serialised, like llama_cpp.server);
headers are sent at once, the wait for a slot happens before the first chunk.
``--die-on-start`` exits before listening; ``--unhealthy`` answers 503 on /v1/models.

Under load: ``--mix ok:0.8,http429:0.05,drop:0.05,...`` draws each request's mode from those
weights (seeded by ``--mix-seed`` and the request's number, so a run repeats), for requests whose
``model`` names no mode of its own. ``--replay DIR``: a request whose ``model`` is ``replay:NAME``
gets the recorded response
DIR/NAME.json (tests/fixtures/dialects/: ``raw`` SSE bytes, ``events`` framed as SSE data lines,
or a JSON ``body``, with its ``status``). ``--tokenizer`` adds llama-server's /tokenize and /detokenize
(a word tokenizer: one id per whitespace-separated word, ids handed out as words are first seen).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRICS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "fixtures",
    "telemetry",
    "llama-server.txt",
)
COUNTER = itertools.count(1)
VOCAB: dict[str, int] = {}
WORDS: list[str] = []
VOCAB_LOCK = threading.Lock()


def _word_ids(text: str) -> list[int]:
    with VOCAB_LOCK:
        out = []
        for w in text.split():
            if w not in VOCAB:
                VOCAB[w] = len(WORDS)
                WORDS.append(w)
            out.append(VOCAB[w])
        return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault-server/1"
    opts: argparse.Namespace
    slots: threading.Semaphore | None = None
    mix: list[tuple[str, float]] = []

    def log_message(
        self, fmt: str, *args
    ) -> None:  # one line per request on stderr (the server log)
        sys.stderr.write("fault-server: " + (fmt % args) + "\n")

    # -- helpers --------------------------------------------------------------------------
    def _json(self, code: int, obj: dict, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, obj) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._chunk(f"data: {payload}\n\n".encode())

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _delta(i: int, content: str | None = None, finish: str | None = None) -> dict:
        delta = {"content": content} if content is not None else {}
        return {
            "id": f"fault-{i}",
            "object": "chat.completion.chunk",
            "model": "fault",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _replay(self, name: str) -> None:
        path = os.path.join(self.opts.replay, os.path.basename(name) + ".json")
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
        if "body" in rec:
            return self._json(int(rec.get("status", 200)), rec["body"])
        self.send_response(int(rec.get("status", 200)))
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if "raw" in rec:
            self._chunk(rec["raw"].encode("utf-8"))
        else:
            for ev in rec["events"]:
                self._event(ev)
            if rec.get("done"):
                self._event("[DONE]")
        self._end()

    # -- routes ---------------------------------------------------------------------------
    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            if self.opts.unhealthy:
                return self._json(503, {"error": "loading"})
            return self._json(
                200, {"object": "list", "data": [{"id": "fault", "object": "model"}]}
            )
        if self.opts.metrics and self.path.rstrip("/") == "/metrics":
            with open(METRICS, "rb") as fh:
                data = fh.read()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.rstrip("/")
        if self.opts.tokenizer and path == "/tokenize":
            return self._json(
                200, {"tokens": _word_ids(str(body.get("content") or ""))}
            )
        if self.opts.tokenizer and path == "/detokenize":
            with VOCAB_LOCK:
                words = [
                    WORDS[i]
                    for i in body.get("tokens") or []
                    if isinstance(i, int) and 0 <= i < len(WORDS)
                ]
            return self._json(200, {"content": " ".join(words)})
        if path != "/v1/chat/completions":
            return self._json(404, {"error": "not found"})
        n = next(COUNTER)
        if self.opts.replay and str(body.get("model") or "").startswith("replay:"):
            return self._replay(str(body["model"])[len("replay:") :])
        mode = body.get("model") if body.get("model") in MODES else None
        if mode is None and self.mix:
            names, weights = zip(*self.mix)
            mode = random.Random(self.opts.mix_seed * 1_000_003 + n).choices(
                names, weights
            )[0]
        if mode is None:
            mode = self.opts.mode
        if self.opts.die_after and n >= self.opts.die_after:
            mode = "die"
        if mode == "http500":
            return self._json(500, {"error": {"message": "injected failure"}})
        if mode == "http429":
            # TGI's documented 429 body (docs/openapi.json), with a Retry-After as a proxy would add
            return self._json(
                429, {"error": "Model is overloaded"}, headers={"Retry-After": "1"}
            )
        if mode == "http503":
            # llama-server's error shape (tools/server/README.md, "API errors"; 503 while loading)
            return self._json(
                503,
                {
                    "error": {
                        "code": 503,
                        "message": "Loading model",
                        "type": "unavailable_error",
                    }
                },
            )
        if mode == "flaky" and n % 2 == 1:
            return self._json(503, {"error": {"message": "injected 503 (flaky)"}})
        if mode == "slow-headers":
            time.sleep(self.opts.stall_s)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        tokens = max(1, min(int(body.get("max_tokens") or 16), self.opts.tokens))
        usage = (body.get("stream_options") or {}).get(
            "include_usage"
        ) and mode != "ok-nousage"
        pt = (
            sum(
                len(str(m.get("content") or "").split())
                for m in body.get("messages") or []
                if isinstance(m, dict)
            )
            or 7
        )
        delay = self.opts.delay_ms / 1000.0
        if mode in ("stall", "drop", "truncate", "die", "error-event", "bad-json"):
            for i in range(2):
                self._event(self._delta(n, f"w{i} "))
                time.sleep(delay)
            if mode == "stall":
                time.sleep(self.opts.stall_s)
                self._end()
            elif mode == "drop":
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            elif mode == "truncate":
                self._end()
            elif mode == "die":
                sys.stderr.write("fault-server: dying mid-stream as asked\n")
                sys.stderr.flush()
                os._exit(3)
            elif mode == "error-event":
                self._event({"error": {"message": "injected error event", "code": 500}})
                self._end()
            else:
                self._chunk(b"data: {this is not json\n\n")
                self._end()
            return
        if mode in ("wrong-shape", "number-content", "list-line"):
            self._event(self._delta(n, "w0 "))
            if mode == "wrong-shape":
                self._event(
                    {
                        "id": f"fault-{n}",
                        "object": "chat.completion.chunk",
                        "choices": "not a list",
                    }
                )
            elif mode == "number-content":
                self._event(
                    {
                        "id": f"fault-{n}",
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"content": 42},
                                "finish_reason": None,
                            }
                        ],
                    }
                )
            else:
                self._event("[1, 2, 3]")
            self._event(self._delta(n, None, "stop"))
            self._event("[DONE]")
            self._end()
            return
        if mode == "endless-line":
            block = b"x" * 65536
            try:
                self._chunk(b"data: ")
                while True:
                    self._chunk(block)
            except (BrokenPipeError, ConnectionResetError):
                return
        if mode == "trickle":
            i = 0
            while True:
                self._event(self._delta(n, f"t{i} "))
                i += 1
                time.sleep(0.2)
        if self.slots is not None:
            self.slots.acquire()
        try:
            for i in range(tokens):
                time.sleep(delay)
                self._event(self._delta(n, f"w{i} "))
        finally:
            if self.slots is not None:
                self.slots.release()
        self._event(self._delta(n, None, "length"))
        if usage:
            self._event(
                {
                    "id": f"fault-{n}",
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": {
                        "prompt_tokens": pt,
                        "completion_tokens": tokens,
                        "total_tokens": tokens + pt,
                    },
                }
            )
        self._event("[DONE]")
        self._end()


MODES = (
    "ok",
    "ok-nousage",
    "http500",
    "http429",
    "http503",
    "flaky",
    "slow-headers",
    "stall",
    "trickle",
    "drop",
    "truncate",
    "error-event",
    "bad-json",
    "die",
    "wrong-shape",
    "number-content",
    "list-line",
    "endless-line",
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", default="ok", choices=MODES)
    p.add_argument(
        "--tokens", type=int, default=8, help="most chunks an ok answer streams"
    )
    p.add_argument("--delay-ms", type=float, default=5.0, help="time per chunk")
    p.add_argument(
        "--stall-s", type=float, default=30.0, help="how long stall/slow-headers wait"
    )
    p.add_argument(
        "--slots",
        type=int,
        default=0,
        help="streams generating at once (0 = unlimited)",
    )
    p.add_argument(
        "--die-after",
        type=int,
        default=0,
        help="the Nth chat request (and any later) dies mid-stream",
    )
    p.add_argument("--die-on-start", action="store_true")
    p.add_argument("--unhealthy", action="store_true")
    p.add_argument("--startup-delay-s", type=float, default=0.0)
    p.add_argument(
        "--mix",
        default="",
        help="MODE:WEIGHT,... each request's mode drawn from these weights",
    )
    p.add_argument("--mix-seed", type=int, default=0)
    p.add_argument(
        "--tokenizer",
        action="store_true",
        help="serve /tokenize and /detokenize (one id per word)",
    )
    p.add_argument(
        "--metrics",
        action="store_true",
        help="serve /metrics (llama-server's exposition, tests/fixtures/telemetry)",
    )
    p.add_argument(
        "--replay", default="", help="folder of recorded responses (model replay:NAME)"
    )
    opts = p.parse_args(argv)
    sys.stderr.write(
        f"fault-server: starting on {opts.host}:{opts.port} mode={opts.mode} slots={opts.slots}\n"
    )
    sys.stderr.flush()
    if opts.die_on_start:
        sys.stderr.write(
            "fault-server: failing at startup as asked (model file missing)\n"
        )
        return 1
    time.sleep(opts.startup_delay_s)
    Handler.opts = opts
    Handler.slots = threading.Semaphore(opts.slots) if opts.slots > 0 else None
    mix = []
    for part in filter(None, opts.mix.split(",")):
        name, _, weight = part.partition(":")
        if name not in MODES:
            p.error(f"--mix: unknown mode {name!r}")
        mix.append((name, float(weight or 1)))
    Handler.mix = mix
    server = ThreadingHTTPServer((opts.host, opts.port), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
