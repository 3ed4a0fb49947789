"""Import llama-bench results (``llama-bench -o json`` or ``-o jsonl``) as run artifacts.

Each llama-bench record (one test: pp512, tg128, pp512+tg128, with an optional depth)
becomes one "run" artifact of backend ``llama-bench``: the same test names, the same
per-repetition samples (``samples_ns``/``samples_ts``) and the same summary statistics as
our own runs, so an imported figure sits beside ours on the leaderboard.

Decisions, stated once:

* **Model identity.** Every artifact records the model file's sha256, and llama-bench does
  not. The importer hashes the model file: ``model_filename`` as llama-bench recorded it
  (absolute, or relative to the JSON file's folder or the working directory), or the
  file/registry name given with ``model=`` (``--model``). Without the file the import is
  refused rather than inventing a hash. The file must match the JSON: the sum of its
  tensor sizes must equal llama-bench's ``model_size``.
* **Host.** Without ``host_name`` the results are taken as measured on this machine, and
  llama-bench's ``cpu_info`` must name this machine's CPU. With ``host_name`` the host
  fingerprint is reused from an earlier artifact of that host when there is one (a run, or
  a host probe under data/hosts/; its CPU must match too); otherwise only what the JSON
  says is recorded (CPU and GPU names) and the rest is null, never guessed.
* **Identity and resume.** The key is computed like the runner's (backend, llama.cpp
  commit, model hash, every llama-bench setting, test, host); the id carries
  llama-bench's ``test_time``. Importing the same file twice writes nothing the second time.
* **Bad input.** Every record is parsed, checked (types, samples consistent with
  ``avg_ts``, ``n_prompt``/``n_gen`` and each other) and turned into a validated artifact
  before anything is written: one bad record means nothing is written and one line names
  the file and the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core import artifacts, stats
from core.errors import ConfigError, ModelError, UserError
from core.kinds.rate import RateTest
from core.paths import data_dir, project_root, relpath, runs_dir, slug
from core.records import run as run_record
from core.yamlio import read_text
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models_mod

BACKEND = "llama-bench"
MATRIX_NAME = "llama-bench-import"
# Relative tolerance for the consistency checks (llama-bench prints avg_ts with 6 decimals).
REL_TOL = 1e-3
# llama-bench writes its counts as C ints and its times as uint64 nanoseconds: nothing larger is real
I32 = 2**31 - 1
U64 = 2**64 - 1
MAX_SAMPLES = 100_000  # repetitions of one test (llama-bench -r)
MAX_JSON_BYTES = 64 << 20


class LlamaBenchRecord(BaseModel):
    """One record of llama-bench's JSON output (the fields this importer relies on).

    Fields of newer llama-bench versions that are not listed here are kept as they are
    (``extra="allow"``) and recorded in the artifact's effective settings."""

    model_config = ConfigDict(extra="allow", strict=True)

    build_commit: str = Field(
        ..., min_length=1, description="llama.cpp commit llama-bench was built from."
    )
    build_number: int | None = Field(None, description="llama.cpp build number.")
    cpu_info: str = Field(..., description="CPU description (ggml's CPU device).")
    gpu_info: str = Field("", description="GPU descriptions, comma-separated.")
    backends: str | None = Field(
        None, description="ggml backends in use (e.g. CPU, CUDA)."
    )
    model_filename: str = Field(
        ..., min_length=1, description="Model path as given to llama-bench -m."
    )
    model_type: str = Field(
        ...,
        description="llama.cpp's model description (e.g. 'gemma3 270M Q4_K - Medium').",
    )
    model_size: int = Field(
        ..., ge=0, le=U64, description="Bytes of the model's tensors."
    )
    model_n_params: int = Field(..., ge=0, le=U64, description="Parameters.")
    n_batch: int = Field(..., ge=1, le=I32)
    n_ubatch: int = Field(..., ge=1, le=I32)
    n_threads: int = Field(..., ge=1, le=I32)
    type_k: str = Field(..., min_length=1)
    type_v: str = Field(..., min_length=1)
    n_gpu_layers: int
    flash_attn: bool | int = Field(
        ..., description="bool in older llama-bench; -1 auto, 0 off, 1 on in newer."
    )
    n_prompt: int = Field(..., ge=0, le=I32)
    n_gen: int = Field(..., ge=0, le=I32)
    n_depth: int = Field(
        0, ge=0, le=I32, description="Absent before llama-bench learnt -d: 0."
    )
    test_time: str = Field(..., min_length=1)
    avg_ns: int = Field(..., ge=0, le=U64)
    stddev_ns: int = Field(..., ge=0, le=U64)
    avg_ts: float = Field(..., ge=0)
    stddev_ts: float = Field(..., ge=0)
    samples_ns: list[Annotated[int, Field(gt=0, le=U64)]] = Field(
        ..., min_length=1, max_length=MAX_SAMPLES
    )
    samples_ts: list[float] = Field(..., min_length=1, max_length=MAX_SAMPLES)

    @model_validator(mode="after")
    def _consistent(self) -> LlamaBenchRecord:
        if self.n_prompt + self.n_gen == 0:
            raise ValueError("n_prompt and n_gen are both 0: not a test")
        if (
            isinstance(self.flash_attn, int)
            and not isinstance(self.flash_attn, bool)
            and self.flash_attn not in (-1, 0, 1)
        ):
            raise ValueError(
                f"flash_attn must be -1, 0, 1 or a boolean (got {self.flash_attn})"
            )
        if len(self.samples_ns) != len(self.samples_ts):
            raise ValueError(
                f"samples_ns has {len(self.samples_ns)} values, samples_ts {len(self.samples_ts)}"
            )
        if any(v <= 0 for v in self.samples_ns) or any(
            not math.isfinite(v) or v <= 0 for v in self.samples_ts
        ):
            raise ValueError("samples must be positive")
        n_tokens = self.n_prompt + self.n_gen
        for i, (ns, ts) in enumerate(zip(self.samples_ns, self.samples_ts)):
            expected = n_tokens * 1e9 / ns
            if abs(ts - expected) > REL_TOL * expected:
                raise ValueError(
                    f"samples_ts[{i}] = {ts} is not {n_tokens} tokens / samples_ns[{i}] ({expected:.3f})"
                )
        mean_ns = sum(self.samples_ns) / len(self.samples_ns)
        if abs(self.avg_ns - mean_ns) > REL_TOL * mean_ns + 1:
            raise ValueError(
                f"avg_ns {self.avg_ns} is not the mean of samples_ns ({mean_ns:.0f})"
            )
        mean = sum(self.samples_ts) / len(self.samples_ts)
        if abs(self.avg_ts - mean) > REL_TOL * mean:
            raise ValueError(
                f"avg_ts {self.avg_ts} is not the mean of samples_ts ({mean:.3f})"
            )
        try:
            test_datetime(self.test_time)
        except ValueError:
            raise ValueError(
                f"test_time {self.test_time!r} is not an ISO 8601 time"
            ) from None
        return self

    @property
    def flash_attn_name(self) -> str:
        if isinstance(self.flash_attn, bool):
            return "on" if self.flash_attn else "off"
        return {-1: "auto", 0: "off", 1: "on"}[self.flash_attn]

    def test(self) -> RateTest:
        return RateTest(
            n_prompt=self.n_prompt,
            n_gen=self.n_gen,
            n_depth=self.n_depth,
            repetitions=len(self.samples_ts),
        )

    def requested_settings(self) -> dict[str, Any]:
        """The settings llama-bench ran with, under the llama_cpp backend's names."""
        s = {
            "n_threads": self.n_threads,
            "n_batch": self.n_batch,
            "n_ubatch": self.n_ubatch,
            "n_gpu_layers": self.n_gpu_layers,
            "flash_attn": self.flash_attn_name,
            "type_k": self.type_k,
            "type_v": self.type_v,
        }
        extra = self.model_extra or {}
        if isinstance(extra.get("main_gpu"), int):
            s["main_gpu"] = extra["main_gpu"]
        if isinstance(extra.get("no_kv_offload"), bool):
            s["offload_kqv"] = not extra["no_kv_offload"]
        return s

    def llama_bench_settings(self) -> dict[str, Any]:
        """Every other field llama-bench printed (cpu_mask, poll, split_mode, ...), as printed."""
        return {k: v for k, v in sorted((self.model_extra or {}).items())}


def test_datetime(text: str) -> datetime:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


# -- reading ---------------------------------------------------------------------------------
def read_records(path: Path) -> list[LlamaBenchRecord]:
    """Parse a llama-bench JSON (array, or a single object) or JSONL file; UserError on bad input."""
    source = relpath(path)
    text = read_text(path, what="llama-bench JSON file", max_bytes=MAX_JSON_BYTES)
    raw = _decode(text, source)
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise ConfigError(
            f"expected an array of llama-bench records, got {type(raw).__name__}",
            file=source,
        )
    if not raw:
        raise ConfigError("no records (an empty llama-bench run?)", file=source)
    records = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ConfigError(
                f"expected an object, got {type(item).__name__}",
                file=source,
                field=f"[{i}]",
            )
        try:
            records.append(LlamaBenchRecord.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(_error_line(exc), file=source, field=f"[{i}]") from None
    return records


def _decode(text: str, source: str) -> Any:
    try:
        return _loads(text, source)
    except json.JSONDecodeError as first:
        lines = text.splitlines()
        if _is_object_line(lines[0] if lines else ""):  # -o jsonl: one object per line
            out = []
            for n, ln in enumerate(lines, 1):
                if not ln.strip():
                    continue
                try:
                    out.append(_loads(ln, source, line=n))
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"invalid JSON Lines at line {n} column {exc.colno}: {exc.msg}",
                        file=source,
                    ) from None
            return out
        cut = text.strip() and first.pos >= len(text.rstrip())
        hint = (
            " (unterminated: an interrupted llama-bench run leaves its output cut short)"
            if cut
            else ""
        )
        raise ConfigError(
            f"invalid JSON at line {first.lineno} column {first.colno}: {first.msg}{hint}",
            file=source,
        ) from None


def _loads(text: str, source: str, line: int = 0) -> Any:
    """``json.loads``, with what it raises besides JSONDecodeError as one line: nesting deeper than
    the interpreter's recursion (100,000 ``[``), an integer of more than 4,300 digits."""
    where = f" at line {line}" if line else ""
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(
            f"invalid JSON{where}: nested too deeply", file=source
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # int parsing past sys.get_int_max_str_digits()
        raise ConfigError(
            f"invalid JSON{where}: {' '.join(str(exc).split())[:160]}", file=source
        ) from None


def _is_object_line(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return False


def _error_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "required field is missing"
    elif err["type"] != "value_error" and "input" in err:
        msg = f"{msg} (got {json.dumps(err['input'])[:60]})"
    return f"{loc}: {msg}" if loc else msg


# -- model and host --------------------------------------------------------------------------
def resolve_model(
    record: LlamaBenchRecord, index: int, source: Path, model: str | None
) -> models_mod.ModelRef:
    """The model file behind a record, hashed, and checked against llama-bench's model_size."""
    src = relpath(source)
    if model:
        try:
            ref = models_mod.resolve(model)
        except UserError as exc:
            raise ConfigError(
                f"--model {model!r}: {exc.detail}",
                file=src,
                field=f"[{index}].model_filename",
            ) from None
    else:
        given = Path(record.model_filename).expanduser()
        candidates = (
            [given]
            if given.is_absolute()
            else [source.parent / given, Path.cwd() / given]
        )
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            raise ModelError(
                f"model file {record.model_filename!r} not found; pass --model PATH (or a registry name): "
                "its sha256 identifies the model in every artifact",
                file=src,
                field=f"[{index}].model_filename",
            )
        ref = models_mod.resolve(str(found.resolve()))
    if ref.name not in _registry_names():
        ref = dataclasses.replace(
            ref, name=registry_name_for(ref) or Path(ref.path).stem
        )
    tensor_bytes = sum((ref.facts.get("tensor_bytes_by_type") or {}).values())
    if tensor_bytes != record.model_size:
        raise ModelError(
            f"{Path(ref.path).name} holds {tensor_bytes} bytes of tensors but llama-bench measured a model of "
            f"{record.model_size}: not the same model file",
            file=src,
            field=f"[{index}].model_size",
        )
    return ref


def _registry_names() -> set[str]:
    try:
        return set(models_mod.load_registry().models)
    except UserError:
        return set()


def registry_name_for(ref: models_mod.ModelRef) -> str | None:
    """The registry name of this model file (so imported runs of the embedded model sit under the
    same name as ours): same recorded hash, same path, or the hash a package's SHA256SUMS names.
    Nothing is fetched or hashed."""
    try:
        registry = models_mod.load_registry()
    except UserError:
        return None
    for name, entry in registry.models.items():
        if entry.sha256 == ref.sha256:
            return name
        if entry.path:
            path = Path(entry.path).expanduser()
            if (
                path if path.is_absolute() else project_root() / path
            ).resolve() == Path(ref.path).resolve():
                return name
        if entry.package:
            try:
                module = importlib.import_module(entry.package.replace("-", "_"))
                if models_mod._package_expected(module)[1] == ref.sha256:
                    return name
            except (ImportError, UserError):
                continue
    return None


def _same_cpu(a: str, b: str) -> bool:
    return " ".join(a.split()).lower() == " ".join(b.split()).lower()


def resolve_host(
    records: list[LlamaBenchRecord], source: Path, host_name: str | None, root: Path
) -> dict[str, Any]:
    src = relpath(source)
    cpu = records[0].cpu_info
    for i, r in enumerate(records[1:], 1):
        if r.cpu_info != cpu or r.gpu_info != records[0].gpu_info:
            raise ConfigError(
                "CPU/GPU differ from record 0's: import one host's results at a time",
                file=src,
                field=f"[{i}].cpu_info",
            )
    here = hostinfo.fingerprint()
    if host_name is None or host_name == here["name"]:
        if not _same_cpu(cpu, here["cpu"]["model"]):
            raise ConfigError(
                f"{cpu!r} is not this host's CPU ({here['cpu']['model']!r}); for results measured elsewhere "
                "pass --host-name NAME",
                file=src,
                field="[0].cpu_info",
            )
        return here
    known = _known_host(host_name, root)
    if known is not None:
        if not _same_cpu(cpu, known["cpu"]["model"]):
            raise ConfigError(
                f"{cpu!r} is not the CPU recorded for host {host_name!r} ({known['cpu']['model']!r})",
                file=src,
                field="[0].cpu_info",
            )
        return known
    gpus = [{"name": g.strip()} for g in records[0].gpu_info.split(",") if g.strip()]
    digest = hashlib.sha256(
        json.dumps({"cpu": cpu, "gpus": sorted(g["name"] for g in gpus)}).encode()
    ).hexdigest()[:8]
    return {
        "id": f"{slug(host_name)}-{digest}",
        "name": host_name,
        "cpu": {
            "model": cpu,
            "physical_cores": None,
            "logical_cores": None,
            "flags": [],
        },
        "memory_bytes": None,
        "numa_nodes": None,
        "os": {},
        "gpus": gpus,
        "known_from": "llama-bench JSON (CPU and GPU names only)",
    }


def _known_host(name: str, root: Path) -> dict[str, Any] | None:
    """The fingerprint of host ``name`` from the newest artifact that has one: a run under
    ``root`` or a host probe under data/hosts/ (e.g. a remote host measured over SSH)."""
    prefix = slug(name) + "-"
    best: tuple[str, dict[str, Any]] | None = None
    for base in (root, data_dir() / "hosts"):
        if not base.exists():
            continue
        for folder in base.iterdir():
            if not (folder.is_dir() and folder.name.startswith(prefix)):
                continue
            for path in folder.rglob("*.json"):
                try:
                    doc = artifacts.load(path)
                except UserError:
                    continue
                h = doc.get("host")
                if (
                    isinstance(h, dict)
                    and h.get("name") == name
                    and (best is None or doc["created"] > best[0])
                ):
                    best = (doc["created"], h)
    return best[1] if best else None


# -- artifacts ---------------------------------------------------------------------------------
def build_artifact(
    rec: LlamaBenchRecord,
    index: int,
    *,
    source: Path,
    source_sha256: str,
    model: models_mod.ModelRef,
    host: dict[str, Any],
    imported_at: datetime,
) -> dict[str, Any]:
    test = rec.test()
    requested = rec.requested_settings()
    extra = rec.llama_bench_settings()
    backend_version = f"llama.cpp {rec.build_commit}"
    key = run_record.config_key(
        BACKEND,
        model.sha256,
        {**requested, "llama_bench": extra},
        test.to_dict(),
        host["id"],
        backend_version,
    )
    measured = test_datetime(rec.test_time).astimezone(UTC)
    build = {
        "backend_version": backend_version,
        "llama_cpp_commit": rec.build_commit,
        "in_process": True,
    }  # llama-bench: in its own process
    if rec.build_number is not None:
        build["build_number"] = rec.build_number
    if rec.backends is not None:
        build["ggml_backends"] = rec.backends
    if rec.gpu_info:
        build["gpu_info"] = rec.gpu_info
    return run_record.new_run(
        key=key,
        created=measured,
        status="ok",
        matrix={"name": MATRIX_NAME, "file": relpath(source)},
        backend=BACKEND,
        test=test.to_dict(),
        requested=requested,
        swept={},
        effective={**requested, **extra},
        model={
            "name": model.name,
            "file_name": Path(rec.model_filename).name,
            "sha256": model.sha256,
            "size_bytes": model.size_bytes,
            "source": model.source,
            "synthetic": bool(model.facts.get("synthetic")),
            "gguf": {k: v for k, v in model.facts.items() if k != "default_settings"},
            "desc": rec.model_type,
            "n_params": rec.model_n_params,
            "metadata": {},
        },
        host=host,
        build=build,
        samples={"ns": list(rec.samples_ns), "ts": list(rec.samples_ts)},
        summary={"tokens_per_second": stats.summarize(rec.samples_ts)},
        details={
            "method": "llama-bench (imported): random tokens, warm-up unless --no-warmup, one token per decode for tg",
            "imported_from": relpath(source),
            "imported_from_sha256": source_sha256,
            "record_index": index,
            "imported_at": imported_at.isoformat(timespec="seconds"),
            "llama_bench": {
                "model_filename": rec.model_filename,
                "model_size": rec.model_size,
                "test_time": rec.test_time,
                "avg_ns": rec.avg_ns,
                "stddev_ns": rec.stddev_ns,
                "avg_ts": rec.avg_ts,
                "stddev_ts": rec.stddev_ts,
                "cpu_info": rec.cpu_info,
            },
        },
        # llama-bench does not report memory or its own wall time: only the timed repetitions are known.
        resources={"wall_s": sum(rec.samples_ns) / 1e9, "exit_code": 0},
        log_tail="",
    )


@dataclass
class ImportReport:
    source: str
    written: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


def import_file(
    path: Path | str,
    *,
    host_name: str | None = None,
    model: str | None = None,
    root: Path | None = None,
) -> ImportReport:
    """Import every record of a llama-bench JSON/JSONL file; all or nothing."""
    path = Path(path)
    root = root or runs_dir()
    records = read_records(path)
    if model and len({r.model_filename for r in records}) > 1:
        raise ConfigError(
            "--model names one file but the records use several models; import without --model "
            "(files found by model_filename) or split the file",
            file=relpath(path),
            field="model_filename",
        )
    host = resolve_host(records, path, host_name, root)
    refs: dict[str, models_mod.ModelRef] = {}
    source_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    now = datetime.now(UTC)
    planned: list[tuple[Path, dict[str, Any]]] = []
    for i, rec in enumerate(records):
        if rec.model_filename not in refs:
            refs[rec.model_filename] = resolve_model(rec, i, path, model)
        doc = build_artifact(
            rec,
            i,
            source=path,
            source_sha256=source_sha,
            model=refs[rec.model_filename],
            host=host,
            imported_at=now,
        )
        target = run_record.run_path(doc, root)
        artifacts.validate(doc, f"{relpath(path)} [{i}]")
        planned.append((target, doc))
    report = ImportReport(relpath(path))
    for target, doc in planned:
        if target.exists():
            report.skipped.append(target)
            continue
        artifacts.write(target, doc)
        report.written.append(target)
    return report
