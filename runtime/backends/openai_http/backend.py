"""Any OpenAI-compatible endpoint over HTTP (llama-server, python -m llama_cpp.server, vLLM,
Ollama ...): streamed chat completions, timed per chunk on the client.

Tests:

* ``chat``: the in-process backend's chat test, sent over HTTP (same prompts, same sampling),
  so the two can be compared request for request;
* ``serve``: startup to healthy, the cold first request, warm steady state;
* ``concurrency``: a closed-loop sweep of concurrency levels with SLO goodput;
* ``load``, ``capacity``, ``probe``: load profiles, the capacity search and the endpoint probe,
  run by ``runtime.load`` through this backend's transport (``transport.py``): the backend
  only sends one request at a time;
* ``agent_loop``: tool-calling loops under injected tool faults, run by ``runtime.agents.loop``
  over one model turn (``loop.Endpoint``); the backend hands it ``ManagedServer`` to start the
  tool service.

A model is a local file (the backend starts the server with it, or ``base_url`` names a server
that already runs it) or an endpoint model of the registry (runtime.models.endpoint: a served
name at a URL, no file), which :meth:`OpenAIHttpBackend.identify` asks the server about
(runtime.backends.openai_http.detect) before the run, and :meth:`describe` again after it.

A server the backend starts is always stopped (``close()``, also after a failure) and its
log is written into the run's log. A run whose server is lost, or in which no request
succeeded, fails (``ServingFailed``) and still keeps every request record it made.

This module never imports llama_cpp: a started llama_cpp.server is just a command line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core import plausibility
from core.errors import ConfigError, ModelError
from core.kinds import chat as chat_kind
from core.kinds import concurrency as concurrency_kind
from core.kinds import request_stats as servingstats
from core.kinds import serve as serve_kind
from core.kinds.agent import AgentLoopTest
from core.kinds.base import TestSpec
from core.kinds.capacity import CapacityTest
from core.kinds.chat import ChatTest, Send
from core.kinds.concurrency import ConcurrencyTest
from core.kinds.load import LoadTest
from core.kinds.probe import ProbeTest
from core.kinds.request import RequestWorkload
from core.kinds.serve import ServeTest
from core.kinds.tokenize import TokenizeTest
from runtime.backends.base import Backend, TestResult, UnsupportedTest, runs
from runtime.backends.openai_http import NAME, detect, llama_server
from runtime.backends.openai_http import client as http
from runtime.backends.openai_http.config import OpenAIHttpSettings
from runtime.backends.openai_http.server import (
    ManagedServer,
    ServerError,
    echo_log,
    free_port,
    server_log_facts,
)
from runtime.hosts import placement
from runtime.models.endpoint import EndpointRef, endpoint_identity


class ServingFailed(Exception):
    """The run cannot stand as a measurement (server lost, nothing succeeded). ``partial``
    holds what was measured, so the failed artifact still accounts for every request."""

    def __init__(self, message: str, partial: TestResult | None = None):
        super().__init__(message)
        self.partial = partial


def physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


class OpenAIHttpBackend(Backend):
    name = NAME
    settings_class = OpenAIHttpSettings
    settings: OpenAIHttpSettings
    test_kinds = (
        "chat",
        "serve",
        "concurrency",
        "agent_loop",
        "load",
        "capacity",
        "probe",
        "tokenize",
    )
    in_process = False
    model_kinds = ("file", "endpoint")
    servers = (
        "llama-server",
        "llama_cpp.server",
    )  # started by the run; any OpenAI-compatible server by URL
    prompt_styles = (
        "chat",
        "completion",
    )  # completion: /v1/completions (openai_http/completions.py)

    def __init__(self, model, settings: OpenAIHttpSettings):
        super().__init__(model, settings)
        self.endpoint_model: EndpointRef | None = (
            model if getattr(model, "kind", "file") == "endpoint" else None
        )
        self.server: ManagedServer | None = None
        self.starts: list[dict[str, Any]] = []
        self.base_url: str | None = settings.base_url or (
            self.endpoint_model.base_url if self.endpoint_model else None
        )
        self.port: int | None = None
        self.command: list[str] | None = None
        self.served_models: list[str] | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._log_echoed = False
        self._server_binary: Path | None = None
        self._server_version: dict[str, Any] | None = None
        self._server_extra: list[
            str
        ] = []  # --no-repack where AMX is compiled in (runtime.backends.llama_cpp.lib_policy)
        self._extra_bufts: dict[str, Any] | None = None
        self._faults: Any = None  # runtime.backends.openai_http.faults.FaultProxy when fault_every is set

    # -- endpoint -------------------------------------------------------------------------
    @classmethod
    def identify(cls, model: EndpointRef) -> EndpointRef:
        """Ask the endpoint model's server (runtime.backends.openai_http.detect) and check the
        entry's pins: one line naming the entry for a server that does not answer, does not
        serve the name, or reports another revision, digest or identity than pinned."""
        from core.paths import relpath
        from runtime.models.registry import registry_path

        where = relpath(registry_path())
        key = os.environ.get(model.api_key_env) if model.api_key_env else None
        try:
            served = detect.probe(
                model.base_url,
                model.served_name,
                api_key=key,
                timeout_s=model.probe_timeout_s,
            )
        except detect.SlowListing as exc:
            raise ModelError(
                f"the endpoint answers too slowly ({exc}, probe_timeout_s {model.probe_timeout_s:g} s); "
                "check its server, or give it a longer endpoint.probe_timeout_s",
                file=where,
                field=f"models.{model.name}.endpoint.probe_timeout_s",
            ) from None
        except detect.BadListing as exc:
            raise ModelError(
                f"the server does not give a model list ({exc})",
                file=where,
                field=f"models.{model.name}.endpoint.base_url",
            ) from None
        except detect.Unreachable as exc:
            raise ModelError(
                f"the endpoint does not answer ({exc}); start its server, or leave the model out",
                file=where,
                field=f"models.{model.name}.endpoint.base_url",
            ) from None
        except detect.NotServed as exc:
            raise ModelError(
                f"the server at {model.base_url} {exc}",
                file=where,
                field=f"models.{model.name}.endpoint.model",
            ) from None
        return model.identified(served, where)

    # characters per token assumed when a prompt's tokens are not known before the run: few, so that the
    # estimate errs towards more tokens (English text in these tokenizers runs at about 4 per token)
    CHARS_PER_TOKEN = 3.0

    @classmethod
    def cannot_honour(
        cls, settings: OpenAIHttpSettings, model, test: TestSpec
    ) -> tuple[str, str] | None:
        """llama-server's slots share one KV cache of n_ctx tokens (--kv-unified): ``parallel`` requests
        at once need room for every one's prompt and output. A started llama-server whose slots cannot
        all hold a request of this test is a point not measured (its requests would be cut short or
        refused), not a failed run. A batched tokenize test needs llama-server's /tokenize, which takes
        a list of texts."""
        if isinstance(test, TokenizeTest) and settings.server != "llama-server":
            return (
                f"server={settings.server or 'external'}",
                "batched tokenize requests need llama-server's /tokenize (a list of texts in one body)",
            )
        if (
            not cls.managed_server(settings)
            or settings.server != "llama-server"
            or settings.parallel <= 1
        ):
            return None
        messages = getattr(test, "messages", None)
        max_tokens = getattr(test, "max_tokens", None)
        if not messages or not max_tokens:
            return None
        chars = sum(len(m.content) for m in messages)
        per_request = int(chars / cls.CHARS_PER_TOKEN) + int(max_tokens)
        need = settings.parallel * per_request
        if need <= settings.n_ctx:
            return None
        return (
            f"parallel={settings.parallel}",
            f"{settings.parallel} slots × about {per_request:,} tokens per request (prompt of {chars:,} characters "
            f"at {cls.CHARS_PER_TOKEN:g} per token + max_tokens {max_tokens}) = {need:,} exceed the context's room "
            f"of n_ctx {settings.n_ctx:,} tokens",
        )

    @staticmethod
    def managed_server(settings: OpenAIHttpSettings) -> bool:
        """Whether the run starts its own server (no base_url given)."""
        return settings.base_url is None

    @classmethod
    def preflight(cls, settings: OpenAIHttpSettings, model, test: TestSpec) -> None:
        """An endpoint model is measured where it is served: no server to start (that needs a
        local file), no other URL or served name in the settings. Placement settings reach a
        started llama-server only, checked against this host (runtime.hosts.placement)."""
        asked = [k for k in placement.DEFAULTS if not placement.is_default(settings, k)]
        if asked:
            started_llama_server = (
                settings.base_url is None
                and settings.server_command is None
                and settings.server == "llama-server"
                and getattr(model, "kind", "file") != "endpoint"
            )
            if not started_llama_server:
                raise ConfigError(
                    f"{asked[0]} reaches a llama-server this backend starts (server: llama-server, no "
                    "server_command or base_url); another server takes its own flags (server_args)",
                    field=asked[0],
                )
            placement.check(
                settings, placement.HostView.here(), offload=settings.n_gpu_layers != 0
            )
        if getattr(model, "kind", "file") != "endpoint":
            return
        given = settings.model_fields_set
        for name in (
            "server_command",
            "server_args",
            "server",
            "server_binary",
            "port",
        ):
            if name in given and getattr(settings, name) not in (
                None,
                [],
                "llama_cpp.server",
            ):
                raise ConfigError(
                    f"a started server needs a local model file; {model.name!r} is an endpoint model "
                    f"(served at {model.base_url}): leave {name} out",
                    field=name,
                )
        if settings.base_url and settings.base_url != model.base_url:
            raise ConfigError(
                f"{model.name!r} is served at {model.base_url} (data/models.yaml), not at {settings.base_url}",
                field="base_url",
            )
        if settings.api_model and settings.api_model != model.served_name:
            raise ConfigError(
                f"{model.name!r} is served as {model.served_name!r} (data/models.yaml), not as "
                f"{settings.api_model!r}",
                field="api_model",
            )

    @property
    def managed(self) -> bool:
        return self.settings.base_url is None and self.endpoint_model is None

    @property
    def api_model(self) -> str:
        if self.settings.api_model:
            return self.settings.api_model
        if self.endpoint_model is not None:
            return self.endpoint_model.served_name
        return self.model.name if self.model else "default"

    def label(self) -> str:
        s = self.settings
        if s.server_label:
            return s.server_label
        if not self.managed:
            return f"endpoint {urlsplit(self.base_url).netloc}"
        if s.server_command is None:
            return s.server
        cmd = s.server_command
        if (
            "python" in Path(cmd[0]).name and len(cmd) > 1
        ):  # python -m module / python script.py
            return cmd[2] if cmd[1] == "-m" and len(cmd) > 2 else Path(cmd[1]).name
        return Path(cmd[0]).name

    def _placeholders(self) -> dict[str, str]:
        s = self.settings
        return {
            "python": sys.executable,
            "model_path": str(self.model.path)
            if self.model and self.model.path
            else "",
            "model_name": self.api_model,
            "host": s.host,
            "port": str(self.port),
            "threads": str(s.n_threads or physical_cores()),
            "n_ctx": str(s.n_ctx),
            "n_batch": str(s.n_batch),
            "chat_format": s.chat_format or "",
            "logits_all": str(s.logits_all),
            "n_gpu_layers": str(s.n_gpu_layers),
            "parallel": str(s.parallel),
            "server_binary": str(self._server_binary or ""),
        }

    @property
    def is_llama_server(self) -> bool:
        return (
            self.managed
            and self.settings.server_command is None
            and self.settings.server == "llama-server"
        )

    def _resolve_server(self) -> None:
        """Find the llama-server binary once (BackendError when it is not built) and ask its version."""
        if self.is_llama_server and self._server_binary is None:
            self._server_binary = llama_server.find_binary(self.settings.server_binary)
            self._server_version = llama_server.version(self._server_binary)
            self._server_extra, self._extra_bufts = llama_server.extra_bufts(
                self._server_binary
            )

    def build_command(self, port: str | None = None) -> list[str]:
        """The server's command line; ``port`` replaces the chosen port (e.g. "{port}" for the record)."""
        s = self.settings
        if self.is_llama_server:
            cmd = (
                list(llama_server.COMMAND)
                + llama_server.chat_template(s.chat_format)
                + self._server_extra
                + placement.cli_args(s, server=True)
            )
        elif s.server_command is None:
            cmd = [
                "{python}",
                "-m",
                "runtime.backends.openai_http.llama_cpp_server",
                "--model",
                "{model_path}",
                "--model_alias",
                "{model_name}",
                "--host",
                "{host}",
                "--port",
                "{port}",
                "--interrupt_requests",
                "False",
                "--n_threads",
                "{threads}",
                "--n_threads_batch",
                "{threads}",
                "--n_ctx",
                "{n_ctx}",
                "--n_batch",
                "{n_batch}",
                "--logits_all",
                "{logits_all}",
                "--n_gpu_layers",
                "{n_gpu_layers}",
            ]
            if s.chat_format:
                cmd += ["--chat_format", "{chat_format}"]
        else:
            cmd = list(s.server_command)
        values = self._placeholders()
        if port is not None:
            values["port"] = port
        out = [part.format(**values) for part in cmd] + list(s.server_args)
        # ip netns exec enters the namespace and execs the server: the pid is the server's own
        return ["ip", "netns", "exec", s.server_netns, *out] if s.server_netns else out

    def _health_url(self) -> str:
        parts = urlsplit(self.base_url)
        # llama-server answers /v1/models while its model still loads; /health says 200 only when ready
        path = (
            "/health"
            if self.is_llama_server
            and "health_path" not in self.settings.model_fields_set
            else self.settings.health_path
        )
        return f"{parts.scheme}://{parts.netloc}{path}"

    def _api_key(self) -> str | None:
        env = self.settings.api_key_env or (
            self.endpoint_model.api_key_env if self.endpoint_model else None
        )
        return os.environ.get(env) if env else None

    def _start(self) -> float:
        """Start (or restart) the managed server; return startup to healthy in ms."""
        s = self.settings
        if self.server is not None:
            self._stop()
        # a namespace's address is not bindable here: a port free on this host's loopback (the namespace is
        # a fresh network stack, where nothing else listens)
        self.port = s.port or free_port("127.0.0.1" if s.server_netns else s.host)
        self.base_url = f"http://{s.host}:{self.port}/v1"
        self.command = self.build_command()
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="almanac-server-")
        self.server = ManagedServer(
            self.command,
            self._health_url(),
            Path(self._tmp.name) / "server.log",
            startup_timeout_s=s.startup_timeout_s,
            stop_timeout_s=s.stop_timeout_s,
        )
        entry: dict[str, Any] = {"port": self.port, "startup_ms": None}
        self.starts.append(entry)
        try:
            entry["startup_ms"] = self.server.start()
        finally:
            entry["pid"] = self.server.pid
        return entry["startup_ms"]

    def _stop(self) -> None:
        if self.server is None:
            return
        info = self.server.stop()
        if self.starts:
            self.starts[-1]["stop"] = info

    def _alive(self) -> bool:
        return self.server.alive() if self.server is not None else True

    def _probe(self) -> None:
        """An endpoint given by URL must answer its health path before anything is timed."""
        import httpx

        key = self._api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        deadline = time.monotonic() + min(self.settings.startup_timeout_s, 30.0)
        last = ""
        with httpx.Client(
            timeout=httpx.Timeout(self.settings.connect_timeout_s),
            trust_env=False,
            headers=headers,
        ) as c:
            while time.monotonic() < deadline:
                try:
                    # the answer is read within its size bound and the probe's deadline (detect.read_body)
                    status, raw, _ = detect.read_body(c, self._health_url(), deadline)
                    if status == 200:
                        self.served_models = _model_ids(raw)
                        return
                    last = f"HTTP {status}"
                except (httpx.HTTPError, detect.TooSlow) as exc:
                    last = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                time.sleep(0.25)
        raise ServingFailed(
            f"endpoint {self.base_url} is unreachable ({self._health_url()}: {last})"
        )

    # -- Backend interface ----------------------------------------------------------------
    def load(self, test: TestSpec | None = None) -> dict[str, Any]:
        if not self.supports(test):
            raise UnsupportedTest(
                f"backend {self.name} cannot run tests of kind {test.kind!r} "
                f"(it runs: {', '.join(self.test_kinds)})"
            )
        self._resolve_server()
        try:
            if not self.managed:
                self._probe()
            elif not isinstance(
                test, ServeTest
            ):  # serve starts the server itself, once per cold start
                self._start()
        except ServerError as exc:
            raise ServingFailed(
                str(exc), TestResult({}, {}, self._details(test))
            ) from None
        if self.settings.fault_every and self._faults is None and self.base_url:
            from runtime.backends.openai_http.faults import FaultProxy

            self._faults = FaultProxy(
                self.base_url,
                self.settings.fault_every,
                self.settings.fault_status,
                timeout_s=self.settings.request_timeout_s,
            ).start()
        # the model loads in the server, not here: its startup is the startup_ms metric
        return {
            "load_time_s": None,
            "effective_settings": {**self._effective(), **self._server_log_facts()},
        }

    def _startup_metric(self) -> dict[str, list[float]]:
        values = [
            st["startup_ms"] for st in self.starts if st.get("startup_ms") is not None
        ]
        return {"startup_ms": values} if values else {}

    def _effective(self) -> dict[str, Any]:
        s = self.settings
        d = {
            "endpoint": self.label(),
            "server": self.label()
            if self.managed and s.server_command is None
            else None,
            "managed_server": self.managed,
            "base_url": self.base_url,
            "server_command": self.build_command(port="{port}")
            if self.managed
            else None,
            "api_model": self.api_model,
            "request_timeout_s": s.request_timeout_s,
            "retries": s.retries,
            "include_usage": s.include_usage,
            "slo": self._slo().to_dict(),
        }
        if self.managed and s.server_command is None:
            d.update(
                n_ctx=s.n_ctx,
                n_batch=s.n_batch,
                n_gpu_layers_requested=s.n_gpu_layers,
                n_threads=s.n_threads or physical_cores(),
                chat_format=s.chat_format,
            )
            if self.is_llama_server:
                d.update(
                    parallel=s.parallel, kv_unified=True, flash_attn_requested="auto"
                )
                # placement as passed (-sm, -mg ... are always on the command line); the GPUs it
                # occupies among those this host shows (the server inherits the environment)
                d.update(
                    placement.effective(
                        s, placement.HostView.here(), offload=s.n_gpu_layers != 0
                    )
                )
                if self._extra_bufts is not None:
                    d.update(use_extra_bufts=self._extra_bufts["use_extra_bufts"])
            else:
                d.update(parallel=1, logits_all=s.logits_all)
        return d

    def _prefix_facts(self) -> dict[str, int]:
        """Generations the started server ran and how many reused a cached prompt prefix."""
        if self.server is None:
            return {}
        text = self.server.log_text()
        return (
            llama_server.prefix_facts(text)
            if self.is_llama_server
            else server_log_facts(text)
        )

    def _server_log_facts(self) -> dict[str, Any]:
        """What the started server's log says llama.cpp decided (flash attention, offloaded layers, slots)."""
        if self.server is None:
            return {}
        return llama_server.log_facts(self.server.log_text())

    def _slo(self) -> servingstats.Slo:
        s = self.settings
        return servingstats.Slo(s.slo_ttft_ms, s.slo_tpot_ms, s.slo_attainment)

    # -- requests -------------------------------------------------------------------------
    def _body(self, test: ChatTest | RequestWorkload, i: int) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {
            "model": self.api_model,
            "messages": [m.model_dump() for m in test.messages],
            "max_tokens": test.max_tokens,
            "temperature": test.temperature,
            "top_p": test.top_p,
            "top_k": test.top_k,
            "min_p": test.min_p,
            "repeat_penalty": test.repeat_penalty,
            "seed": s.seed + i,
            "stream": True,
        }
        if s.include_usage:
            body["stream_options"] = {"include_usage": True}
        if test.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = test.max_tokens
        body.update(s.extra_body)
        return body

    def _policy(self) -> http.RequestPolicy:
        s = self.settings
        return http.RequestPolicy(s.request_timeout_s, s.retries, s.retry_backoff_s)

    def _client(self, connections: int):
        s = self.settings
        return http.make_client(
            connect_timeout_s=s.connect_timeout_s,
            read_timeout_s=s.read_timeout_s,
            max_connections=connections,
            api_key=self._api_key(),
        )

    def _url(self) -> str:
        base = self._faults.base_url if self._faults is not None else self.base_url
        return f"{base}/chat/completions"

    @contextmanager
    def _session(self, test: ChatTest | RequestWorkload) -> Iterator[Send]:
        """The chat kind's primitive over HTTP: a sequence of requests on one connection, each
        ``send(i)`` one streamed request (``seed`` of the settings + i), timed by the client from
        this sequence's origin; a request after the server is gone is recorded as not sent."""
        origin = time.perf_counter_ns()
        loop = asyncio.new_event_loop()
        connection = self._client(1)
        client = loop.run_until_complete(connection.__aenter__())

        def send(i: int) -> dict[str, Any]:
            if not self._alive():
                return http.not_sent(
                    "server_lost",
                    f"not sent: the server is gone ({self.server.exit_description()})",
                    origin,
                )
            return loop.run_until_complete(
                http.stream_chat(
                    client,
                    self._url(),
                    self._body(test, i),
                    self._policy(),
                    origin_ns=origin,
                    server_alive=self._alive,
                )
            )

        try:
            yield send
        finally:
            try:
                loop.run_until_complete(connection.__aexit__(None, None, None))
                # what asyncio.run does before it closes its loop
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    def _requests(self, test, seeds: list[int]) -> list[dict[str, Any]]:
        """One sequence of requests with the given seeds (serve's cold and warm requests)."""
        with self._session(test) as send:
            return [send(i) for i in seeds]

    # -- chat (Backend.run calls the method marked for the test's kind) ------------------------
    @runs("chat")
    def _run_chat(self, test: ChatTest) -> TestResult:
        # the kind's loop (core.kinds.chat.run_requests) over this backend's primitive: a sequence
        # of streamed requests on one connection; the body's seed is the settings' seed + i
        run = chat_kind.run_requests(
            test, None, 0, session=lambda: self._session(test), failures=True
        )
        records = run.records
        result = TestResult(
            metrics={**run.metrics, **self._startup_metric()},
            samples={"requests": records, "warmup": run.warmup_records},
            details=self._details(
                test, warmup_requests=run.warmup, precision=run.precision
            ),
        )
        self._check(result, records, "chat")
        return result

    # -- serve: cold vs warm --------------------------------------------------------------
    @runs("serve")
    def _run_serve(self, test: ServeTest) -> TestResult:
        starts = test.cold_starts if self.managed else 1

        def start() -> float | None:
            if not self.managed:
                return None  # an endpoint given by URL: nobody starts it
            try:
                return self._start()
            except ServerError as exc:
                raise serve_kind.StartFailed(str(exc)) from None

        # the kind's loop (core.kinds.serve.run_cold_warm) over this backend's primitives: start
        # and stop its server, a sequence of streamed requests
        try:
            run = serve_kind.run_cold_warm(
                test,
                starts,
                start,
                self._stop if self.managed else lambda: None,
                lambda seeds: self._requests(test, seeds),
                lambda: None if self._alive() else self.server.exit_description(),
            )
        except serve_kind.ServeStopped as exc:
            raise ServingFailed(
                str(exc),
                TestResult(
                    metrics={},
                    samples=exc.samples,
                    details=self._details(test, cold_starts=starts),
                ),
            ) from None
        result = TestResult(
            metrics=run.metrics,
            samples=run.samples,
            details=self._details(
                test,
                cold_starts=starts,
                warmup_requests=run.warmup,
                cold_is_fresh_server=self.managed,
            ),
        )
        cold, warm = run.samples["cold"], run.samples["warm"]
        self._check(result, cold + warm, "serve")
        return result

    # -- concurrency sweep ----------------------------------------------------------------
    @runs("concurrency")
    def _run_concurrency(self, test: ConcurrencyTest) -> TestResult:
        warm_n = test.warmup_requests if test.warmup is not False else 0
        warmup = (
            self._requests(test, [1000 + i for i in range(warm_n)]) if warm_n else []
        )

        def lost(level: int) -> dict[str, Any]:
            origin = time.perf_counter_ns()
            msg = f"not sent: the server was lost at an earlier level ({self.server.exit_description()})"
            return {
                "level": level,
                "wall_s": 0.0,
                "requests": [
                    http.not_sent("server_lost", msg, origin)
                    for _ in range(level * test.rounds)
                ],
            }

        # the kind's sweep (core.kinds.concurrency.run_levels) over this backend's primitive: one
        # batch of a level, that many clients at once on one connection pool
        levels, precision = concurrency_kind.run_levels(
            test,
            lambda level, offset: asyncio.run(
                self._level(test, level, round_offset=offset)
            ),
            self._alive,
            lost,
        )
        sweep = servingstats.sweep_stats(levels, self._slo())
        all_recs = [r for lv in levels for r in lv["requests"]]
        metrics: dict[str, list[float]] = {
            "failed_requests": [sum(1 for r in all_recs if not r["ok"])],
            **self._startup_metric(),
        }
        if sweep["peak_aggregate_tps"] is not None:
            metrics["peak_aggregate_tps"] = [sweep["peak_aggregate_tps"]]
        metrics["slo_max_concurrency"] = [sweep["max_level_meeting_slo"]]
        result = TestResult(
            metrics=metrics,
            samples={"levels": levels, "warmup": warmup},
            details=self._details(
                test,
                warmup_requests=warm_n,
                sweep=sweep,
                precision=precision,
            ),
        )
        self._check(result, all_recs, "concurrency")
        return result

    async def _level(
        self, test: ConcurrencyTest, level: int, round_offset: int = 0
    ) -> dict[str, Any]:
        records: list[dict[str, Any]] = []
        origin = time.perf_counter_ns()
        stop = asyncio.Event()

        async def user(client, u: int) -> None:
            for r in range(round_offset, round_offset + test.rounds):
                if stop.is_set() or not self._alive():
                    stop.set()
                    records.append(
                        {
                            **http.not_sent(
                                "server_lost", "not sent: the server is gone", origin
                            ),
                            "level": level,
                            "user": u,
                            "round": r,
                        }
                    )
                    continue
                rec = await http.stream_chat(
                    client,
                    self._url(),
                    self._body(test, level * 100000 + u * 1000 + r),
                    self._policy(),
                    origin_ns=origin,
                    server_alive=self._alive,
                )
                rec.update(level=level, user=u, round=r)
                records.append(rec)
                if rec["error"] and rec["error"]["reason"] == "server_lost":
                    stop.set()

        async with self._client(level) as client:
            await asyncio.gather(*(user(client, u) for u in range(level)))
        wall = (time.perf_counter_ns() - origin) / 1e9
        records.sort(key=lambda r: (r["start_ms"], r["user"]))
        return {"level": level, "wall_s": wall, "requests": records}

    # -- load profiles, capacity search, probe (runtime.load) -----------------------------
    def transport(self):
        """This endpoint as the load generator's transport: it sends one request at a time."""
        from runtime.backends.openai_http.transport import HttpTransport

        s = self.settings
        body: dict[str, Any] = {"model": self.api_model, "stream": True}
        if s.include_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(s.extra_body)
        return HttpTransport(
            base_url=self.base_url,
            label=self.label(),
            body=body,
            policy=self._policy(),
            make_client=self._client,
            alive=self._alive,
            api_model=self.api_model,
            restart=self._restart if self.managed else None,
        )

    def _restart(self) -> tuple[str, float]:
        """Stop and start the managed server again (a cold cache between repeats): its new base URL and
        startup time in ms."""
        startup_ms = self._start()  # a new port, so the base URL is read after it
        return str(self.base_url), startup_ms

    @runs("load")
    def _run_load_test(self, test: LoadTest) -> TestResult:
        return self._run_load(test)

    @runs("capacity")
    def _run_capacity(self, test: CapacityTest) -> TestResult:
        return self._run_load(test)

    def _run_load(self, test: LoadTest | CapacityTest) -> TestResult:
        from runtime.load import capacity as capacity_mod
        from runtime.load import runner as load_runner

        outcome = (capacity_mod if isinstance(test, CapacityTest) else load_runner).run(
            self.transport(), test
        )
        # the test's own percentile SLOs replace the settings' (those of the concurrency kind)
        result = TestResult(
            metrics={**outcome.metrics, **self._startup_metric()},
            samples=outcome.samples,
            details=self._details(
                test,
                **outcome.details,
                slo=test.slo.model_dump(),
                cache_state=self._cache_state(),
            ),
        )
        result.details["implausible_requests"] = plausibility.refused(result.samples)
        if outcome.failure:
            raise ServingFailed(outcome.failure, result)
        if self.server is not None and not self.server.alive():
            raise ServingFailed(
                f"the server was lost during the {test.kind} test ({self.server.exit_description()})",
                result,
            )
        return result

    def _cache_state(self) -> dict[str, Any]:
        """Cold or warm: a managed server is started for each test (its caches empty before the warm-up);
        an external one's caches hold whatever it served before, unknown to us."""
        if self.managed:
            return {"start": "fresh server", "cold": True, "starts": len(self.starts)}
        return {"start": "external server (cache state unknown)", "cold": None}

    @runs("tokenize")
    def _run_tokenize(self, test: TokenizeTest) -> TestResult:
        from runtime.load import tokenize as tokenize_loop

        root = self.transport().root
        rounds, tokens, tokens_batched = tokenize_loop.run(root, test)
        ok = [r for r in rounds if not r["failed"]]
        result = TestResult(
            metrics={
                "batching_speedup": [r["one_by_one_s"] / r["batched_s"] for r in ok],
                "tokenize_one_by_one_s": [r["one_by_one_s"] for r in ok],
                "tokenize_batched_s": [r["batched_s"] for r in ok],
                **self._startup_metric(),
            },
            samples={"rounds": rounds},
            details=self._details(
                test,
                corpus=test.corpus,
                texts=test.requests,
                tokens_per_pass=tokens,
                tokens_per_pass_batched=tokens_batched,
                endpoint=f"{root}/tokenize",
                method=f"{test.requests} texts to /tokenize, one a request and {test.batch} a request "
                f"(a list in one body), {test.clients} client(s) at once, the arms alternating over "
                f"{test.rounds} rounds",
            ),
        )
        if not ok:
            raise ServingFailed(
                f"every round had failed tokenize requests ({sum(r['failed'] for r in rounds)} in all)",
                result,
            )
        return result

    @runs("probe")
    def _run_probe(self, test: ProbeTest) -> TestResult:
        from runtime.load import probe as probe_mod

        cases = probe_mod.run(self.transport(), test)
        metrics = {
            "probe_success_rate": [
                c["success_rate"]
                for c in cases.values()
                if c["success_rate"] is not None
            ],
            **self._startup_metric(),
        }
        result = TestResult(
            metrics=metrics,
            samples={"cases": cases},
            details=self._details(
                test,
                probe={
                    k: {
                        kk: v[kk]
                        for kk in (
                            "case",
                            "description",
                            "n",
                            "succeeded",
                            "success_rate",
                            "latency_ms_median",
                            "reasons",
                        )
                    }
                    for k, v in cases.items()
                },
            ),
        )
        if self.server is not None and not self.server.alive():
            raise ServingFailed(
                f"the server was lost during the probe ({self.server.exit_description()})",
                result,
            )
        return result

    # -- outcome --------------------------------------------------------------------------
    def _check(
        self, result: TestResult, records: list[dict[str, Any]], what: str
    ) -> None:
        """Fail the run (keeping every record) when the server was lost or nothing succeeded; count the
        answers refused as implausible (core.plausibility)."""
        result.details["implausible_requests"] = plausibility.refused(result.samples)
        if self.server is not None and not self.server.alive():
            raise ServingFailed(
                f"the server was lost during the {what} test ({self.server.exit_description()}); "
                f"{sum(1 for r in records if not r['ok'])} of {len(records)} requests failed",
                result,
            )
        if records and not any(r["ok"] for r in records):
            reasons = sorted(
                {(r.get("error") or {}).get("reason", "?") for r in records}
            )
            raise ServingFailed(
                f"none of the {len(records)} requests succeeded ({', '.join(reasons)})",
                result,
            )

    def _details(self, test: TestSpec | None, **extra: Any) -> dict[str, Any]:
        s = self.settings
        d: dict[str, Any] = {
            "endpoint": self.label(),
            "server": {
                "managed": self.managed,
                "command": self.command,
                "base_url": self.base_url,
                "starts": self.starts,
                "served_models": self.served_models,
                "log_facts": self._prefix_facts(),
                "llama_log_facts": self._server_log_facts(),
            },
            "slo": self._slo().to_dict(),
            **({"faults": self._faults.facts()} if self._faults is not None else {}),
            "request_policy": {
                "request_timeout_s": s.request_timeout_s,
                "read_timeout_s": s.read_timeout_s,
                "connect_timeout_s": s.connect_timeout_s,
                "retries": s.retries,
                "retry_backoff_s": s.retry_backoff_s,
            },
            "method": "OpenAI chat completions, stream=true, timed per chunk on the client (httpx, asyncio)",
        }
        d.update(extra)
        return d

    def describe(self) -> dict[str, Any]:
        build: dict[str, Any] = {
            "backend": self.name,
            "endpoint": self.label(),
            "httpx": _version("httpx"),
        }
        if self.is_llama_server:
            v = self._server_version or {}
            build["server"] = "llama-server"
            build["server_binary"] = (
                str(self._server_binary) if self._server_binary else None
            )
            build["server_version"] = v.get("version")
            build["server_build_number"] = v.get("build_number")
            build["llama_cpp_commit"] = v.get(
                "commit"
            )  # the backend build, as the in-process backend records it
            build["server_built_with"] = v.get("built_with")
        elif self.managed and self.settings.server_command is None:
            build["server"] = "llama_cpp.server"
            build["server_package"] = f"llama-cpp-python {_version('llama-cpp-python')}"
        elif self.command:
            build["server"] = " ".join(self.command[:3])
        model: dict[str, Any] = (
            {"served_models": self.served_models} if self.served_models else {}
        )
        if not self.managed:
            served = self._detect()
            if served is not None:
                # the server software and version it reports (runtime.backends.openai_http.detect)
                build["server_detected"] = {
                    "server": served.server,
                    "version": served.server_version,
                    "commit": served.server_commit,
                    "evidence": served.evidence,
                }
                if served.server != "unknown":
                    build["server"] = served.server
                    build.update(
                        {
                            k: v
                            for k, v in (
                                ("server_version", served.server_version),
                                ("server_commit", served.server_commit),
                            )
                            if v
                        }
                    )
                stated = (
                    self.endpoint_model.stated_server_version
                    if self.endpoint_model is not None
                    else None
                )
                if not served.server_version and stated:
                    # a server that reports no version (transformers serve): the registry's word, marked
                    build["server_version"] = stated
                    build["server_version_stated"] = True
                if served.server == "llama-server" and served.server_commit:
                    build["llama_cpp_commit"] = (
                        served.server_commit
                    )  # as a started llama-server records it
                if (
                    self.endpoint_model is not None
                ):  # what it serves after the run (the runner compares)
                    model["identity_after"] = endpoint_identity(
                        self.endpoint_model.served_name, served.identity_facts
                    )
        return {"build": build, "model": model}

    def _detect(self):
        """What the external server says about itself and the served model now (None when it does not answer)."""
        timeout = (
            self.endpoint_model.probe_timeout_s
            if self.endpoint_model
            else min(self.settings.connect_timeout_s, 5.0)
        )
        try:
            return detect.probe(
                self.base_url,
                self.api_model,
                api_key=self._api_key(),
                timeout_s=timeout,
            )
        except (detect.Unreachable, detect.NotServed):
            return None

    # -- agent loops under injected tool faults (the loop: runtime/agents/loop.py) -------
    @runs("agent_loop")
    def _run_agent_loop(self, test: AgentLoopTest) -> TestResult:
        from core.kinds import agent as agent_kind
        from runtime.agents import loop

        ep = loop.Endpoint(
            url=self._url(),
            model=self.api_model,
            client=lambda: self._client(1),
            stream_chat=http.stream_chat,
            policy=self._policy(),
            alive=self._alive,
            seed=self.settings.seed,
        )
        episodes, facts = loop.run(
            ep, test, loop.Processes(server=ManagedServer, free_port=free_port)
        )
        result = TestResult(
            metrics={**agent_kind.metrics(episodes), **self._startup_metric()},
            samples={"episodes": episodes},
            details=self._details(test, agent=loop.details(test, episodes, facts)),
        )
        turns = [t["model"] for e in episodes for t in e["turns"]]
        if self.server is not None and not self.server.alive():
            raise ServingFailed(
                f"the server was lost during the agent loops ({self.server.exit_description()})",
                result,
            )
        if turns and not any(t["ok"] for t in turns):
            reasons = sorted({(t.get("error") or {}).get("reason", "?") for t in turns})
            raise ServingFailed(
                f"none of the {len(turns)} model turns succeeded ({', '.join(reasons)})",
                result,
            )
        return result

    # -- quality prompt styles ------------------------------------------------------------
    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int,
        stop: list[str],
        temperature: float = 0.0,
        seed: int = 0,
    ) -> dict[str, Any]:
        from runtime.backends.openai_http import completions

        s = self.settings
        return completions.complete(
            self.base_url,
            self.api_model,
            prompt,
            max_tokens=max_tokens,
            stop=stop,
            temperature=temperature,
            seed=seed,
            connect_timeout_s=s.connect_timeout_s,
            request_timeout_s=s.request_timeout_s,
            api_key=self._api_key(),
        )

    def close(self) -> None:
        if self._faults is not None:
            self._faults.stop()
            self._faults = None
        if self.server is not None:
            self._stop()
            if not self._log_echoed:
                echo_log(
                    self.server.log_text(), f"{self.label()}, pid {self.server.pid}"
                )
                self._log_echoed = True
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _version(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "not installed"


MAX_SERVED_MODELS = 50  # model ids of a health check's listing kept in the artifact


def _model_ids(raw: bytes | None) -> list[str] | None:
    """The ids a /models answer lists, as kept in the artifact: at most MAX_SERVED_MODELS, each cut
    to 200 characters (None: not a listing, or larger than the probe reads)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw).get("data", [])
    except (ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(data, list):
        return None
    ids = [str(m.get("id"))[:200] for m in data if isinstance(m, dict)]
    return ids[:MAX_SERVED_MODELS]
