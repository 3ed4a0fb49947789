"""The run artifact's declaration (version 2): the envelope every run shares, whatever its kind.

What was asked (matrix, backend, test, settings), where it ran (host, build), on what model (a
local file or an endpoint model), what was measured (samples, summary, details) and what the run's
process took (resources). A run's ``samples`` and ``details`` are its test kind's (core.kinds):
core/schema.py adds their models to the generated schema as one ``allOf`` condition per kind.

The parts quality and perplexity artifacts share with a run (the host's fingerprint, the GGUF
facts, the settings, the matrix, the build's common fields) are declared here too, and reused by
core.models.quality and core.models.perplexity.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, cast

from pydantic import (
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from core.models.base import (
    AS_WRITTEN,
    HOST_ID_PATTERN,
    INTEGRAL,
    SHA256_PATTERN,
    ArtifactModel,
    Closed,
    Count,
    DateTime,
    Failure,
    Integer,
    NonNegativeNumber,
    Number,
    Open,
    Positive,
    PositiveNumber,
    absent,
)
from core.models.host import Cpu, Fingerprint, StoredSummary

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
TEST_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$"
Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN)]
NonEmpty = Annotated[str, Field(min_length=1)]


#: counts with the bound past which a GGUF header's value is implausible
Upto4K = Annotated[int, Field(ge=0, le=4096), INTEGRAL]
Upto64K = Annotated[int, Field(ge=0, le=65536), INTEGRAL]
Upto1M = Annotated[int, Field(ge=0, le=1048576), INTEGRAL]
Upto16M = Annotated[int, Field(ge=0, le=16777216), INTEGRAL]
Upto64M = Annotated[int, Field(ge=0, le=67108864), INTEGRAL]
Upto2G = Annotated[int, Field(ge=0, le=2147483648), INTEGRAL]


def _window_pattern(v: Any) -> Any:
    """An integer 0-4096 (every n-th layer is full attention) or a list of up to 4096 booleans or
    integers (per layer)."""
    if v is None:
        return v
    if isinstance(v, bool):
        raise ValueError("Input should be an integer, an array or null")
    if isinstance(v, float) and v.is_integer():  # JSON Schema's integer: 8.0 is 8
        v = int(v)
    if isinstance(v, int):
        if not 0 <= v <= 4096:
            raise ValueError("Input should be between 0 and 4096")
        return v
    if isinstance(v, list):
        if len(v) > 4096:
            raise ValueError("List should have at most 4096 items")
        if not all(
            isinstance(x, bool | int) or (isinstance(x, float) and x.is_integer())
            for x in v
        ):
            raise ValueError("Each item should be a boolean or an integer")
        return v
    raise ValueError("Input should be an integer, an array or null")


WindowPattern = Annotated[
    Any,
    PlainValidator(_window_pattern),
    AS_WRITTEN,
    WithJsonSchema(
        {
            "type": ["integer", "array", "null"],
            "minimum": 0,
            "maximum": 4096,
            "maxItems": 4096,
            "items": {"type": ["boolean", "integer"]},
        }
    ),
]


# -- shared with quality and perplexity -------------------------------------------------------
class RunCpu(Cpu):
    """The CPU as the OS reports it."""

    cache: dict[str, str] = absent(
        "Cache sizes by level as the OS reports them ('32 KiB', '480 MiB', '32768K')."
    )


class RunHost(Fingerprint):
    """The host that ran it (runtime.hosts.fingerprint)."""

    cpu: RunCpu
    source: str = absent("inventory: known only from data/hosts.yaml (never reached)")
    memory_bytes: Count | None = Field(
        description="null when unknown (a host known only from imported results)"
    )
    numa_nodes: Positive | None


class GgufFacts(Open):
    """Facts read from the GGUF header (core.gguf.gguf_facts) that the memory planner, the roofline and
    the pages compute with; declared so that a value of another type, or an implausible size, is
    refused at validation instead of failing a page. Other keys may follow (the registry's facts)."""

    architecture: str | None = absent()
    name: str | None = absent()
    quantization: str | None = absent(
        "The file type's name (Q4_K_M, Q8_0, ...; file_type_<n> when gguf-py does not know it): "
        "free text, shown as it is."
    )
    file_type: Count | None = absent()
    family: str | None = absent()
    description: str | None = absent()
    context_length: Upto2G | None = absent()
    embedding_length: Upto1M | None = absent()
    block_count: Upto4K | None = absent()
    feed_forward_length: Upto16M | None = absent()
    head_count: Upto64K | None = absent()
    head_count_kv: Upto64K | None = absent()
    head_count_kv_layers: Annotated[list[Upto64K], Field(max_length=4096)] | None = (
        absent()
    )
    key_length: Upto64K | None = absent()
    value_length: Upto64K | None = absent()
    sliding_window: Upto2G | None = absent()
    sliding_window_pattern: WindowPattern = absent()
    expert_count: Upto64K | None = absent()
    expert_used_count: Upto64K | None = absent()
    kv_lora_rank: Upto1M | None = absent()
    rope_dimension_count: Upto1M | None = absent()
    vocab_size: Upto64M | None = absent()
    vocab_text_bytes: Count | None = absent()
    vocab_sha256: str | None = absent()
    tensor_bytes_by_type: dict[str, Count] = absent()
    tensor_bytes_by_role: dict[str, dict[str, Count]] = absent()
    synthetic: bool = absent()
    synthetic_shape: str | None = absent()
    has_chat_template: bool = absent()
    capabilities: list[str] = absent()
    prompt_styles: list[str] = absent()


Threads = Annotated[int, Field(ge=0), INTEGRAL]
GpuLayers = Annotated[int, Field(ge=-1), INTEGRAL]


class SettingsValues(Open):
    """Backend settings by name (requested, swept or as the backend reported them): the ones the pages
    compute with are declared with their types; a backend may add others. KV cache types (type_k,
    type_v) are free text: a type the memory planner does not know is shown as unknown, never
    guessed."""

    n_threads: Threads | None = absent()
    n_threads_batch: Threads | None = absent()
    n_ctx: Threads | None = absent()
    n_batch: Threads | None = absent()
    n_ubatch: Threads | None = absent()
    n_seq_max: Threads | None = absent()
    parallel: Threads | None = absent()
    n_slots: Threads | None = absent()
    draft_max: Threads | None = absent()
    lookup_ngram_max: Threads | None = absent()
    n_layers_total: Threads | None = absent()
    main_gpu: Threads | None = absent()
    n_expert_used: Threads | None = absent()
    n_gpu_layers: GpuLayers | None = absent()
    n_gpu_layers_requested: GpuLayers | None = absent()
    seed: Integer | None = absent()
    type_k: str | None = absent()
    type_v: str | None = absent()
    chat_format: str | None = absent()
    speculative: str | None = absent()
    draft_model: str | None = absent()
    draft_model_file: str | None = absent()
    endpoint: str | None = absent()
    server: str | None = absent()
    base_url: str | None = absent()
    api_model: str | None = absent()
    flash_attn: str | bool | None = absent(
        "on, off or auto (a boolean in older artifacts)"
    )
    flash_attn_requested: str | bool | None = absent()
    swa_full: bool | None = absent()
    logits_all: bool | None = absent()
    offload_kqv: bool | None = absent()
    use_mmap: bool | None = absent()
    use_mlock: bool | None = absent()
    extra_bufts: bool | None = absent()
    use_extra_bufts: bool | None = absent()
    kv_unified: bool | None = absent()
    gpu_offload_supported: bool | None = absent()
    draft_synthetic: bool | None = absent()
    kv_overrides: dict[str, Any] | None = absent()
    llama_memory_mib: dict[str, dict[str, Number]] | None = absent()
    draft_load_time_s: Number | None = absent()
    request_timeout_s: Number | None = absent()


class Build(Open):
    """The software that measured: the backend and its version, the almanac and its method."""

    backend: str
    backend_version: str
    almanac: str
    method_version: Integer


# -- the run's own parts ----------------------------------------------------------------------
class RunError(Failure):
    """Why a run failed."""

    kind: Literal[
        "error",
        "crash",
        "timeout",
        "unsupported",
        "refused",
        "unreachable",
        "incompatible",
        "model_changed",
    ]
    message: str
    signal: str | None = absent()
    exit_code: Integer | None = absent()
    traceback: str = absent()


class RunMatrix(Open):
    """The matrix (and its sweep) the configuration came from."""

    name: str
    file: str
    sweep: str | None = absent("The named sweep of the matrix this point belongs to.")
    baseline_key: Sha256 | None = absent(
        "Key of the sweep's baseline configuration (the point this one is compared with); null "
        "when the sweep names none."
    )


class RunPrecision(Open):
    """How a test asked to repeat to a precision (core.precision.Precision, as the matrix wrote it):
    the target CI95 half-width as a fraction of the mean, and the floor and ceilings of the count."""

    target: PositiveNumber | None = absent()
    min_repetitions: Positive | None = absent()
    max_repetitions: Positive | None = absent()
    max_time_s: PositiveNumber | None = absent()


class RunTest(Open):
    """The test as the matrix asked for it (core.kinds: its kind's spec, as a dict). The kind is free
    text: a kind this almanac does not know is shown as it is and ranked nowhere. The name follows
    the matrix's rule for test ids (it names the artifact's file)."""

    kind: NonEmpty
    name: Annotated[str, Field(min_length=1, max_length=80, pattern=TEST_NAME_PATTERN)]
    repetitions: Positive | None = absent()
    n_prompt: Count | None = absent()
    n_gen: Count | None = absent()
    n_depth: Count | None = absent()
    n_seq: Positive | None = absent()
    max_tokens: Count | None = absent()
    requests: Count | None = absent()
    warmup_requests: Count | None = absent()
    precision: RunPrecision | None = Field(
        default=None,
        description="Repeat to a precision (an object), or null: exactly the count asked for.",
    )


class RunSettings(Closed):
    """The settings as requested, as swept by the matrix, and as the backend reported it ran with."""

    requested: SettingsValues
    swept: SettingsValues
    effective: SettingsValues


class ModelFile(Open):
    """A local model file (GGUF): its sha256 is its identity."""

    kind: Literal["file"]
    identity: NonEmpty = Field(
        description="What the configuration key uses: the file's sha256 (or its name where the "
        "hash is unknown)."
    )
    name: NonEmpty
    file_name: str
    sha256: Sha256 | None = Field(
        description="sha256 of the GGUF file; null only in a failed artifact of a remote host "
        "that was never reached, when the file is known only there."
    )
    size_bytes: Count
    source: str
    synthetic: bool
    gguf: GgufFacts
    desc: str | None = absent()
    n_params: Integer | None = absent()
    metadata: dict[str, Any] = absent()


class ModelEndpoint(Closed):
    """A model served by an OpenAI-compatible server, known only by what the server reports of it
    (runtime.models.endpoint): no file name, no sha256, no GGUF facts."""

    kind: Literal["endpoint"]
    identity: Annotated[str, Field(pattern=r"^endpoint:[0-9a-f]{64}$")] = Field(
        description="sha256 of the served name and what the server reports that tells one set of "
        "weights from another (identity_basis); changes when the served model changes, not when "
        "only the server's settings do."
    )
    identity_basis: list[str] = Field(
        description="The reported facts the identity is computed from (beside the served name); "
        "empty when the server reports none (llama_cpp.server, an unknown server): then the "
        "identity is the served name's alone."
    )
    name: NonEmpty = Field(description="The registry name.")
    served_name: NonEmpty = Field(
        description="The name the server serves it under (the requests' `model`)."
    )
    base_url: NonEmpty = Field(description="The server's OpenAI-compatible root.")
    source: Literal["endpoint"]
    synthetic: bool = Field(
        description="Random weights (the registry entry's family is 'synthetic': a synthetic "
        "GGUF's weights served by another engine, runtime.models.synth_hf)."
    )
    description: str = absent()
    server_version_stated: bool = absent(
        "server_version is the registry's statement (endpoint.server_version), the server "
        "reporting none (transformers serve)."
    )
    server: NonEmpty = Field(
        description="The server software that reported it, as detected (llama-server, "
        "llama_cpp.server, vLLM, SGLang, TGI, Ollama, unknown)."
    )
    server_version: str | None = absent(
        "The version the server reports (llama-server's build_info, vLLM's /version, TGI's /info, "
        "SGLang's /get_server_info, Ollama's /api/version)."
    )
    model_id: str | None = absent(
        "The underlying model the server names: llama-server's file name, vLLM's root, TGI's "
        "model_id, SGLang's model_path, Ollama's model."
    )
    revision: str | None = absent(
        "A revision the server reports (TGI's model_sha, SGLang's revision)."
    )
    digest: str | None = absent(
        "A content digest the server reports (Ollama's blob digest)."
    )
    quantization: str | None = absent(
        "The quantization the server reports (llama-server's file type as GGUF names it, "
        "Ollama's quantization_level, SGLang's quantization)."
    )
    context_length: Count | None = absent(
        "The context the server reports for the model (llama-server: n_ctx; vLLM, SGLang: "
        "max_model_len; TGI: max_total_tokens; Ollama: the GGUF's context_length)."
    )
    size_bytes: Count | None = absent(
        "The model's size in bytes, where the server reports it (llama-server, Ollama)."
    )
    n_params: Count | None = absent(
        "Parameter count, where the server reports it (llama-server, Ollama)."
    )
    pinned: dict[str, str] | None = Field(
        description="The revision, digest or identity the registry entry pins (checked before "
        "the run)."
    )
    reported: dict[str, Any] = Field(
        description="What the server's routes said of the model and itself (trimmed), by route."
    )


class RunBuild(Build):
    """The software that measured: the backend, its version and build, the almanac."""

    llama_cpp_python: str = absent()
    llama_cpp_commit: str = absent()
    system_info: str = absent()
    in_process: bool = Field(
        description="The backend ran the model in the measuring process (true) or talked to a "
        "server (false), as the backend declares."
    )
    server: str | None = absent(
        "The server software an HTTP backend talked to, as detected (absent in process)."
    )
    server_version: str | None = absent(
        "The server's version: a started llama-server's --version, or what an external server "
        "reports."
    )
    server_commit: str | None = absent(
        "The server's source commit, where it reports one."
    )
    server_detected: dict[str, Any] = absent(
        "What an external server's routes said it is (runtime.backends.openai_http.detect): "
        "server, version, commit, evidence."
    )
    stats_method: Positive = absent(
        "Which runs the measurement kept (core.records.run.STATS_METHODS): 1 every run as "
        "measured (absent: 1), 2 runs kept from a quiet machine (core.quiet). Results of "
        "different stats methods are not pooled."
    )


class RunSummary(StoredSummary):
    """One metric's statistic (core.stats.summarize; read as core.summary.Summary)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class GpuPeak(Open):
    index: Count
    pci_bus_id: str | None = absent()
    peak_bytes: Count
    utilisation_mean_pct: Number | None = absent()
    utilisation_max_pct: Number | None = absent()
    utilisation_samples: Count = absent()


class QuietAttempt(Open):
    share: Number | None = absent()
    loadavg_1m_before: Number | None = absent()
    loadavg_1m_after: Number | None = absent()
    wall_s: Number | None = absent()
    own_cpu_s: Number | None = absent()
    waited_s: Number | None = absent()
    share_before: Number | None = absent()
    disturbed: bool | None = absent()


class Quiet(Open):
    """The quiet-machine policy's record (core.quiet)."""

    policy: Positive
    enabled: bool = absent()
    max_share: Number = absent()
    attempts: Annotated[list[QuietAttempt], Field(min_length=1)]
    kept: Count
    disturbed: bool | None
    nice: Integer = absent("the nice value the run measured at")


class Resources(Open):
    """What the run's process took (runtime.execution.runner): peak memory, wall time, how it
    ended."""

    peak_rss_bytes: Count | None
    peak_vram_bytes: Count | None
    peak_rss_method: str = absent()
    peak_vram_method: str | None = absent()
    baseline_rss_bytes: Count | None = absent(
        "RSS of the child before the model load (after the backend's libraries where it reports "
        "that point)"
    )
    rss_after_load_bytes: Count | None = absent(
        "RSS of the child right after the model load"
    )
    wall_s: NonNegativeNumber
    process_cpu_s: NonNegativeNumber | None = absent(
        "CPU time (user + system, seconds) of the run's process and the children it waited for, "
        "over the same interval as wall_s (wait4's rusage); null when no process ran (a refused "
        "configuration). Above wall_s: the run used more than one core."
    )
    exit_code: Integer | None
    signal: str | None
    peak_vram_by_gpu: list[GpuPeak] | None = absent(
        "Per visible GPU (CUDA ordinal order): peak memory of the run by peak_vram_method, and "
        "NVML utilisation sampled meanwhile (issue 29)."
    )
    loadavg_1m_before: Number | None = absent()
    quiet: Quiet | None = absent(
        "The quiet-machine policy's record (core.quiet): every attempt's others' CPU share at "
        "the measurement's priority, load averages, wait and wall time, which attempt was kept, "
        "and whether the kept one was disturbed (excluded from figures and verdicts)."
    )

    @classmethod
    def from_dict(cls, d: Any) -> Resources:
        """A stored ``resources`` block as the model (:meth:`read`)."""
        return cls.read(d)

    @property
    def disturbed(self) -> bool:
        """The run never got a quiet slot (core.quiet): kept, but out of every figure and verdict."""
        from core import quiet

        return quiet.record_disturbed(self.get("quiet"))


# the status rule: an ok run has no error and a hashed model file; a failed one says why
STATUS_RULES: list[dict[str, Any]] = [
    {
        "if": {"properties": {"status": {"const": "ok"}}},
        "then": {
            "properties": {
                "error": {"type": "null"},
                "model": {"properties": {"sha256": {"type": "string"}}},
            }
        },
    },
    {
        "if": {"properties": {"status": {"const": "failed"}}},
        "then": {"properties": {"error": {"type": "object"}}},
    },
]


class Run(ArtifactModel):
    """One measured configuration: what was asked (matrix, backend, test, settings), where it ran
    (host, build), on what model (a local file: its hash and GGUF facts; or an endpoint model: the
    served name and what the server reports of it), and what was measured (raw samples, summary
    statistics), or why it failed. Version 2: `model.kind` (file or endpoint) and `model.identity`,
    `build.in_process`; version 1 files are migrated on load."""

    ARTIFACT: ClassVar[str] = "run"
    TITLE: ClassVar[str] = "Inference Almanac run artifact"
    model_config = ConfigDict(json_schema_extra={"allOf": cast(Any, STATUS_RULES)})

    artifact: Literal["run"]
    schema_version: Literal[2]
    id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    key: Sha256
    created: DateTime
    status: Literal["ok", "failed"]
    error: RunError | None
    matrix: RunMatrix
    backend: NonEmpty
    test: RunTest
    settings: RunSettings
    model: Annotated[ModelFile | ModelEndpoint, Field(discriminator="kind")]
    host: RunHost
    build: RunBuild
    samples: dict[str, Any]
    summary: dict[str, RunSummary]
    details: dict[str, Any]
    resources: Resources
    log_tail: str

    @field_validator("error")
    @classmethod
    def _error_by_status(cls, v: RunError | None, info: ValidationInfo) -> Any:
        status = info.data.get("status")
        if status == "ok" and v is not None:
            raise ValueError("an ok run has no error (null)")
        if status == "failed" and v is None:
            raise ValueError("a failed run says why (an object)")
        return v

    @field_validator("model")
    @classmethod
    def _hashed_when_ok(cls, v: Any, info: ValidationInfo) -> Any:
        if (
            info.data.get("status") == "ok"
            and isinstance(v, ModelFile)
            and v.sha256 is None
        ):
            raise ValueError("an ok run's model file has its sha256")
        return v


__all__ = ["HOST_ID_PATTERN", "Run", "Resources", "RunHost", "GgufFacts"]
