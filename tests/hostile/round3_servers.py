"""Hostile corpus, third round, the server half (issue 34): servers that lie, flood, drip and answer
in markup, met by ``invoke bench`` and ``invoke validate``.

Each case starts the hostile server (tests/hostile/liar_server.py) on a free loopback port with its
``server`` arguments; ``{port}`` in its files is that port. Identification cases end in one line
naming data/models.yaml and write nothing; a bench against a lying server writes its artifacts
(``writes``) and says why the configuration failed, and the next configuration still runs;
``invoke validate`` refuses stored lies with one line each and the count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.corpus import CHAT, VALIDATE, Case, _mutated

LIAR = Path(__file__).resolve().parent / "liar_server.py"
BENCH = ["bench", "--matrix", "m"]
ARTIFACTS = r"runs/[^/]+/(\.run\.lock|.+\.json)"  # what a bench may write: its run lock, its artifacts


def _endpoint(extra: str = "") -> dict[str, bytes]:
    return {
        "models.yaml": (
            "schema_version: 1\nmodels:\n  ep:\n    endpoint:\n"
            '      base_url: "http://127.0.0.1:{port}/v1"\n      model: liar\n      probe_timeout_s: 3\n'
            + extra
        ).encode(),
        "matrices/m.yaml": (
            b"schema_version: 1\nname: m\nbackend: openai_http\nmodels: [ep]\ntimeout_s: 120\n"
            b"tests:\n  - {kind: chat, id: c, max_tokens: 4, requests: 2, warmup_requests: 0}\n"
        ),
    }


def _against(*modes: str) -> dict[str, bytes]:
    """A matrix measuring the embedded model's name at the hostile server, one configuration per mode."""
    listed = ", ".join(json.dumps(m) for m in modes)
    return {
        "matrices/m.yaml": (
            "schema_version: 1\nname: m\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\ntimeout_s: 120\n"
            'settings: {base_url: "http://127.0.0.1:{port}/v1", retries: 0}\n'
            f"sweep:\n  api_model: [{listed}]\n"
            "tests:\n  - kind: chat\n    id: c\n    messages: [{role: user, content: hi}]\n"
            "    max_tokens: 4\n    requests: 2\n    warmup_requests: 0\n"
        ).encode()
    }


def _lie(path: str, value) -> bytes:
    def fn(doc: dict) -> None:
        rec = doc["samples"]["requests"][0]
        *parents, last = path.split(".")
        for k in parents:
            rec = rec[k]
        rec[last] = value

    return _mutated(fn, CHAT)


def _rate(doc: dict) -> None:
    doc["summary"]["decode_tps"] = {
        **doc["summary"]["ttft_ms"],
        "mean": 2.5e16,
        "max": 2.5e16,
    }


CASES = [
    # -- identification: bounded in time and size, one line, nothing written
    Case(
        "ident-drips-one-byte-a-second",
        _endpoint(),
        BENCH,
        "answers too slowly",
        server=("--models", "drip"),
    ),
    Case(
        "ident-listing-nested-100000",
        _endpoint(),
        BENCH,
        "nested too deeply",
        server=("--models", "nested"),
    ),
    Case(
        "ident-listing-over-2-mib",
        _endpoint(),
        BENCH,
        "larger than 2 MiB",
        server=("--models", "big"),
    ),
    Case(
        "ident-listing-endless",
        _endpoint(),
        BENCH,
        "larger than 2 MiB",
        server=("--models", "endless"),
    ),
    Case(
        "ident-listing-of-markup",
        _endpoint(),
        BENCH,
        "does not serve 'liar'",
        server=("--models", "markup"),
    ),
    # -- a bench against lying servers: the configuration fails with the reason, the next one runs
    Case(
        "bench-usage-1e15-then-honest",
        _against("usage-1e15", "honest"),
        BENCH,
        "api_model=honest: ok",  # after the lying server's configuration failed (implausible)
        rc=0,
        lines=-1,
        server=(),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-usage-1e400",
        _against("usage-1e400"),
        BENCH,
        "none of the 2 requests succeeded (implausible)",
        rc=0,
        lines=-1,
        server=(),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-chunk-flood-10e6",
        _against("chunk-flood"),
        BENCH,
        "none of the 2 requests succeeded (implausible)",
        rc=0,
        lines=-1,
        server=("--flood", "1000000"),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-cached-1e6",
        _against("cached-1e6"),
        BENCH,
        "none of the 2 requests succeeded (implausible)",
        rc=0,
        lines=-1,
        server=(),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-nan-in-timings",
        _against("timings-nan"),
        BENCH,
        "api_model=timings-nan: ok",
        rc=0,
        lines=-1,
        server=(),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-markup-everywhere",
        _against("[/][link=javascript:alert(1)]x", "markup-error", "honest"),
        BENCH,
        "api_model=honest: ok",  # on main: a MarkupError traceback at the first, and nothing after it
        rc=0,
        lines=-1,
        server=(),
        writes=ARTIFACTS,
    ),
    Case(
        "bench-load-metrics-nan",
        {
            "matrices/m.yaml": (
                b"schema_version: 1\nname: m\nbackend: openai_http\nmodels: [gemma3-270m-q4_k_m]\ntimeout_s: 120\n"
                b'settings: {base_url: "http://127.0.0.1:{port}/v1", retries: 0, api_model: honest}\n'
                b"tests:\n  - {kind: load, id: l, profile: concurrent, levels: [1], requests: 3, warmup_requests: 0, "
                b"workload: {prompt_tokens: 8, output_tokens: 4, seed: 1}, "
                b"slo: {percentile: 50, ttft_ms: 5000, tpot_ms: null}}\n"
            )
        },
        BENCH,
        "gemma3-270m-q4_k_m · l: ok",  # not "crash: child exited with code 1 and no result"
        rc=0,
        lines=-1,
        server=("--metrics", "nan"),
        writes=ARTIFACTS,
    ),
    # -- stored lies: invoke validate runs the same checks
    Case(
        "validate-stored-usage-1e15",
        {CHAT: _lie("output_tokens", 10**15)},
        VALIDATE,
        "implausible: the server reports about 10^15 output tokens",
        rc=1,
        lines=2,
        with_runs=True,
    ),
    Case(
        "validate-stored-cached-1e6",
        {CHAT: _lie("cached_tokens", 10**6)},
        VALIDATE,
        "cached tokens of a",
        rc=1,
        lines=2,
        with_runs=True,
    ),
    Case(
        "validate-stored-rate-2.5e16",
        {CHAT: _mutated(_rate, CHAT)},
        VALIDATE,
        "summary.decode_tps.mean: implausible",
        rc=1,
        lines=2,
        with_runs=True,
    ),
]


# registered in the corpus by tests/hostile/corpus.py itself (every round*.py module's CASES)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(case: Case) -> Iterator[Case]:
    """The hostile server of ``case`` (``case.server``: its arguments) on a free loopback port,
    and the case with ``{port}`` filled in."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(LIAR), "--port", str(port), *case.server],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        files = {
            k: v.replace(b"{port}", str(port).encode()) for k, v in case.files.items()
        }
        yield dataclasses.replace(case, files=files)
    finally:
        proc.kill()
        proc.wait()
