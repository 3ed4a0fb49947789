"""Settings of the OpenAI-compatible HTTP backend.

Either ``base_url`` names an endpoint that is already running, or the backend starts the
server itself, waits for it to be healthy, and always stops it: a ``server`` kind it knows
(``llama_cpp.server``, llama-cpp-python's server, the default; or ``llama-server``,
llama.cpp's own, built from the source that llama-cpp-python vendors) or any
``server_command``, each with the model on a free loopback port.

The default command mirrors the in-process llama_cpp backend where llama_cpp.server lets
it (threads = physical cores, n_ctx 4096, n_batch 2048, logits_all off), so an in-process
vs server comparison measures the server, not different settings; and it passes
``--interrupt_requests False``, without which a new request cancels the stream in flight.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from runtime.backends import placement
from runtime.backends.base import BackendSettings
from runtime.backends.placement import PlacementSettings

PLACEHOLDERS = (
    "python",
    "model_path",
    "model_name",
    "host",
    "port",
    "threads",
    "n_ctx",
    "n_batch",
    "chat_format",
    "logits_all",
    "n_gpu_layers",
    "parallel",
    "server_binary",
)


class OpenAIHttpSettings(BackendSettings, PlacementSettings):
    """Placement settings (split_mode ... poll) apply to a started llama-server only (its -sm, -ts,
    -mg, --numa, -C, --cpu-strict, --prio, --poll); elsewhere only their defaults are accepted."""

    OMITTED_AT_DEFAULT = (
        "fault_every",
        "fault_status",
        "main_gpu",
        "server_netns",
        *placement.OMITTED,
    )

    base_url: str | None = Field(
        None,
        description="An already running OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 "
        "(its /chat/completions is used); null = start the server from server_command.",
    )
    server_command: list[str] | None = Field(
        None,
        description="Command that starts the server (no shell). Placeholders: "
        + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        + ". null = python -m llama_cpp.server with the model on a loopback port.",
    )
    server: Literal["llama_cpp.server", "llama-server"] = Field(
        "llama_cpp.server",
        description="The server started "
        "when server_command is null: llama_cpp.server (python -m llama_cpp.server, "
        "llama-cpp-python's) or llama-server (llama.cpp's own, built from the source "
        "llama-cpp-python vendors by benchmarks/llama_bench_build.py).",
    )
    server_binary: str | None = Field(
        None,
        description="llama-server only: path of the binary; null = "
        "$ALMANAC_LLAMA_SERVER, else the build of benchmarks/llama_bench_build.py in the "
        "cache. Its version and commit are recorded in the artifact's build.",
    )
    n_gpu_layers: int = Field(
        -1,
        ge=-1,
        description="Default commands: layers offloaded to the GPU, -1 = all (as the "
        "in-process backend; nothing is offloaded on a CPU-only build).",
    )
    parallel: int = Field(
        4,
        ge=1,
        le=64,
        description="llama-server only: parallel slots (-np) sharing one KV cache of "
        "n_ctx tokens (--kv-unified); 4 is llama-server's own default. llama_cpp.server has no "
        "slots: it serialises requests.",
    )
    server_args: list[str] = Field(
        default_factory=list,
        description="Extra arguments appended to the server command "
        "(for llama_cpp.server a later flag wins, so these override the defaults).",
    )
    server_label: str | None = Field(
        None,
        description="Name of the endpoint in tables (e.g. 'vLLM 0.6 on A100'); null = "
        "derived from the command or the URL.",
    )
    host: str = Field(
        "127.0.0.1",
        description="Address a started server listens on (loopback by default).",
    )
    server_netns: str | None = Field(
        None,
        description="Start the server inside this Linux network namespace (ip netns exec NAME): a second host "
        "with its own network stack, reached over a veth link; set host to the namespace's address "
        "(benchmarks/split_host_netns.sh makes one). null = this host's network.",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$",
    )
    port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of a started server; null = a free port.",
    )
    health_path: str = Field(
        "/v1/models",
        description="Path polled until it answers 200 (startup to healthy).",
    )
    api_model: str | None = Field(
        None,
        description="Model name sent in requests; null = the model's registry name "
        "(also the --model_alias of the default command).",
    )
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding an API key (sent as a Bearer token; "
        "the key itself is never recorded).",
    )
    n_threads: int | None = Field(
        None,
        ge=1,
        description="Default command: --n_threads and --n_threads_batch; null = "
        "physical cores (as the in-process backend).",
    )
    n_ctx: int = Field(
        4096,
        ge=64,
        description="Default command: context size (the in-process chat default).",
    )
    n_batch: int = Field(
        2048,
        ge=1,
        description="Default command: logical batch size (llama.cpp's default).",
    )
    logits_all: bool = Field(
        False,
        description="Default command: llama_cpp.server's --logits_all (its own default, "
        "True, computes logits for every prompt position and costs time).",
    )
    chat_format: str | None = Field(
        None,
        description="Default command: --chat_format (the registry's default for the "
        "model applies, as in process).",
    )
    startup_timeout_s: float = Field(
        180.0,
        gt=0,
        description="Longest wait from starting the server to a healthy answer.",
    )
    stop_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Wait after SIGTERM before SIGKILL when stopping the server.",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, description="Longest wait for a TCP connection."
    )
    read_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Longest silence between two received pieces of a response "
        "(covers queueing behind other requests and the prefill).",
    )
    request_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Hard limit on one request, retries and back-off included.",
    )
    retries: int = Field(
        1,
        ge=0,
        le=5,
        description="Retries of a request that failed before any content arrived "
        "(connection refused or dropped, timeout, HTTP 5xx/429); each is recorded.",
    )
    retry_backoff_s: float = Field(
        0.25,
        ge=0,
        le=10,
        description="Wait before the first retry, doubled for each next one.",
    )
    fault_every: int | None = Field(
        None,
        ge=1,
        description="Inject transient errors: a loopback proxy in front of the "
        "server answers every k-th chat request attempt (warm-ups and retries counted) with "
        "fault_status at once and forwards the rest (runtime.backends.openai_http.faults); "
        "null = no proxy. For measuring error rates and retry costs.",
    )
    fault_status: int = Field(
        503,
        ge=400,
        le=599,
        description="HTTP status of an injected fault (503: retryable).",
    )
    include_usage: bool = Field(
        True,
        description="Ask for stream_options.include_usage (output tokens from the server's "
        "usage; servers that ignore it are counted by content chunks, and the artifact says which).",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra fields merged into every request body."
    )
    seed: int = Field(
        42,
        ge=0,
        description="Seed sent with request i as seed + i (the in-process backend does the same).",
    )
    slo_ttft_ms: float | None = Field(
        500.0,
        gt=0,
        description="SLO on TTFT for goodput (MLPerf interactive Llama-3.1-8B: 500 ms); null = none.",
    )
    slo_tpot_ms: float | None = Field(
        30.0,
        gt=0,
        description="SLO on TPOT for goodput (MLPerf interactive: 30 ms); null = none.",
    )
    slo_attainment: float = Field(
        0.9,
        gt=0,
        le=1.0,
        description="Share of a level's requests that must meet the SLOs "
        "for the level to count as meeting them.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must start with http:// or https:// (got {v!r})"
            )
        return v.rstrip("/")

    @field_validator("server_command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("server_command must not be empty")
        import string

        for part in v:
            for _, name, _, _ in string.Formatter().parse(part):
                if name is not None and name not in PLACEHOLDERS:
                    raise ValueError(
                        f"unknown placeholder {{{name}}} in server_command (known: {', '.join(PLACEHOLDERS)})"
                    )
        return v

    @field_validator("health_path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"health_path must start with / (got {v!r})")
        return v

    @model_validator(mode="after")
    def _one_endpoint(self) -> OpenAIHttpSettings:
        if self.base_url and (self.server_command or self.server_args):
            raise ValueError(
                "give either base_url (a running endpoint) or server_command/server_args (a server to start), not both"
            )
        if self.server_binary and self.server != "llama-server":
            raise ValueError(
                f"server_binary is for server 'llama-server' (server is {self.server!r})"
            )
        if self.server_netns and self.base_url:
            raise ValueError(
                "server_netns starts the server in a network namespace: give it without base_url"
            )
        if self.server_netns and self.host in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(
                f"server_netns {self.server_netns!r}: host must be the namespace's address, not loopback "
                f"({self.host!r} there is the namespace's own loopback, unreachable from here)"
            )
        if self.server != "llama_cpp.server" and (self.base_url or self.server_command):
            raise ValueError(
                f"server {self.server!r} is a kind the run starts: give it without base_url and server_command"
            )
        return self
