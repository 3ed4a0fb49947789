"""The host artifact's declaration: a host's fingerprint and its memory-bandwidth probe."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from core.models.base import (
    HOST_ID_PATTERN,
    ID_PATTERN,
    ArtifactModel,
    Closed,
    Count,
    DateTime,
    Integer,
    NonNegativeNumber,
    Number,
    Open,
    Positive,
    PositiveNumber,
    absent,
)


class Cpu(Open):
    """The CPU as the OS reports it."""

    model: str
    physical_cores: Integer | None
    logical_cores: Integer | None
    flags: list[str]
    cache: dict[str, str] = absent()
    vendor: str | None = absent(
        "vendor_id of /proc/cpuinfo (GenuineIntel, AuthenticAMD)."
    )
    arch: str = absent("The machine architecture (x86_64, aarch64).")
    signature: dict[str, Integer] = absent(
        "The CPU's signature from /proc/cpuinfo (x86: family, model, stepping; ARM: implementer, "
        "architecture, variant, part, revision), as integers; part of the host's identity "
        "(core.hostid). Absent before id_scheme 2."
    )


class Os(Open):
    platform: str = absent()
    system: str = absent()
    release: str = absent()


class Gpu(Open):
    name: str
    memory_bytes: Count | None = absent()
    datasheet_bandwidth_bytes_per_s: NonNegativeNumber | None = absent()
    compute_capability: str | None = absent()
    driver: str | None = absent()
    cuda: str | None = absent()


class Fingerprint(Open):
    """The host a probe ran on (runtime.hosts.fingerprint)."""

    id: Annotated[str, Field(pattern=HOST_ID_PATTERN)]
    id_scheme: Positive = absent(
        "The host-identity rule the id was made by (core.hostid.SCHEME: 2 hashes the signature "
        "and the longer flag list); absent: an older fingerprint, compared with newer ones on the "
        "facts both record."
    )
    name: str
    cpu: Cpu
    memory_bytes: Count | None
    source: str = absent()
    os: Os
    gpus: list[Gpu]


class Probe(Open):
    """What was measured and how."""

    kind: Literal["memory_bandwidth", "gpu_memory_bandwidth"] = Field(
        description="memory_bandwidth: host RAM by CPU threads; gpu_memory_bandwidth: one GPU's "
        "device memory by a device-to-device copy (threads is then 1: one host thread drives it)."
    )
    device: str = absent("The GPU a gpu_memory_bandwidth probe measured.")
    version: Positive
    method: str
    tool: str
    numpy: str = absent()
    buffer_bytes: Positive
    repetitions: Positive
    warmup: bool
    bytes_counted: str
    read_method: str = absent(
        "How read_bandwidth was measured (a read-only pass: decode only reads)."
    )
    read_bytes_counted: str = absent()
    llc_bytes: Integer | None = absent(
        "Last-level cache of the host (a model that fits in it is not bound by memory bandwidth)."
    )
    read_kernels: dict[str, Any] = absent(
        "Per thread count: the read kernel kept (the fastest) and every kernel's mean GB/s."
    )


class Trend(Open):
    tau: Number = absent()
    p_value: Number = absent()
    monotonic: bool = absent()
    first_sample_outlier: bool = absent()
    warmup_suspect: bool = absent()


class StoredSummary(Open):
    """The statistic of a row's samples as stored (core.stats.summarize; read as core.summary.Summary)."""

    n: Count
    mean: Number | None
    stddev: Number | None
    ci95_low: Number | None
    ci95_high: Number | None
    median: Number | None
    min: Number | None
    max: Number | None
    p95: Number | None
    p99: Number | None
    median_ci95_low: Number | None = absent(
        "Distribution-free CI95 of the median (order statistics); null below 6 samples."
    )
    median_ci95_high: Number | None = absent()
    outliers: list[Count] = absent(
        "Indices of samples more than 3.5 robust standard deviations (1.4826 MAD) from the "
        "median: flagged, never dropped."
    )
    trend: Trend | None = absent(
        "Drift across repetitions (a warm-up that was not enough): Kendall's tau against sample "
        "order, its p-value, whether the first sample alone is an outlier; null below 4 samples."
    )


class BandwidthRow(Closed):
    """One thread count of a probe pass: its samples (GB/s) and their statistic."""

    threads: Positive
    samples_gbs: Annotated[list[PositiveNumber], Field(min_length=1)]
    summary: StoredSummary

    @property
    def best(self) -> float:
        return max(self.samples_gbs)


class Conditions(Open):
    loadavg_1m_before: Number | None = absent()
    loadavg_1m_after: Number | None = absent()
    logical_cores: Integer | None = absent()


class Host(ArtifactModel):
    """A host probe: the host's fingerprint and its memory bandwidth measured by a large copy
    (bytes read + written per second), single-threaded and multi-threaded, with the raw samples,
    their summary and the machine's load at the time."""

    ARTIFACT: ClassVar[str] = "host"
    TITLE: ClassVar[str] = "Inference Almanac host artifact"

    artifact: Literal["host"]
    schema_version: Literal[1]
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    created: DateTime
    host: Fingerprint
    probe: Probe
    bandwidth: Annotated[list[BandwidthRow], Field(min_length=1)]
    read_bandwidth: Annotated[list[BandwidthRow], Field(min_length=1)] = absent(
        "Read-only pass (decode reads, it does not write): bytes read per second, per thread "
        "count; what the decode roofline divides by."
    )
    conditions: Conditions
