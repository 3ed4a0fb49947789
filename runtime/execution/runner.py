"""Run a matrix: every configuration in its own child process, one artifact each.

Reruns are cheap: a configuration whose artifact exists (same model identity, settings, test,
host and backend version) is skipped unless forced, so an interrupted matrix resumes where
it stopped and a second run with nothing changed measures nothing.

A model's identity is its file's sha256, or, for an endpoint model (runtime.models.endpoint),
what its server reports of it: the server is asked before anything runs (a server that does
not answer, or reports another revision or digest than the entry pins, is refused in one
line, nothing written) and again after each configuration (a model swapped during the run
makes that configuration's artifact a failed one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import artifacts, quiet, request_records, stats
from core.errors import ArtifactError, ConfigError
from core.paths import project_root, relpath, runs_dir
from core.records import run as record
from runtime import backends, procs
from runtime.execution import matrix as matrix_mod
from runtime.execution import preflight as fit
from runtime.execution import runlock
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models

METHOD_VERSION = record.METHOD_VERSION
LOG_TAIL_LINES = 120
LOG_READ_BYTES = 8 << 20  # the most of a child's log the runner reads back
KILL_GRACE_S = 2.0  # past its timeout a worker whose runner is gone kills itself after this much more
NOISY_LOG_PREFIXES = (
    "llama_graph_n_input_tensors",
    "create_tensor:",
    "llama_model_loader: - kv",
    "load_tensors: layer",
    "resolve_fused_ops: fused",
    "llama_model_loader: - type",
    "llama_adapter_lora_init_impl: lora for",
    "llama_adapter_lora_init_impl: - kv",
)


config_key = record.config_key  # one owner of the key: core.records.run


def find_existing(key: str, root: Path | None = None) -> list[Path]:
    root = root or runs_dir()
    if not root.exists():
        return []
    return sorted(
        p for p in root.rglob(f"*--{key[:16]}-*.json") if not p.name.startswith(".")
    )


def quarantine_dir(root: Path | None = None) -> Path:
    """Where corrupt artifacts met on resume are set aside: beside the runs folder, never in it."""
    root = root or runs_dir()
    return root.parent / "quarantine"


def set_aside(path: Path, root: Path | None = None) -> Path:
    """Move a corrupt artifact out of the runs folder (keeping its relative path), so it counts as not measured."""
    root = root or runs_dir()
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    dest = quarantine_dir(root) / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        dest = dest.with_name(f"{dest.name}.{int(time.time() * 1000)}")
    os.replace(path, dest)
    return dest


def last_valid(
    key: str,
    root: Path | None,
    emit: Callable[[str, dict[str, Any]], None],
    reader: Callable[[Path], Any] = artifacts.load,
) -> tuple[Path, Any] | None:
    """The newest readable artifact of ``key`` (a RunRecord by default; ``reader`` reads other
    types); corrupt ones met on the way are reported and set aside."""
    now = datetime.now(UTC)
    for path in reversed(find_existing(key, root)):
        try:
            doc = reader(path)
            ahead = artifacts.from_the_future(getattr(doc, "doc", doc), now)
            if (
                ahead
            ):  # stamped by a clock ahead: not a measurement to resume from (issue 34)
                raise ArtifactError(ahead, file=relpath(path), field="created")
            return path, doc
        except ArtifactError as exc:
            dest = set_aside(path, root)
            emit(
                "corrupt",
                {"path": relpath(path), "moved_to": relpath(dest), "error": str(exc)},
            )
    return None


def tail_log(text: str, n: int = LOG_TAIL_LINES) -> str:
    lines = [ln for ln in text.splitlines() if not ln.startswith(NOISY_LOG_PREFIXES)]
    out = "\n".join(lines[-n:])
    return out[-20000:]


@dataclass
class ChildOutcome:
    result: dict[str, Any] | None
    exit_code: int | None
    signal: str | None
    timed_out: bool
    peak_rss_bytes: int | None
    wall_s: float
    log: str
    loadavg_before: float | None = None  # 1-minute load average when the child started
    # others' CPU over the child's interval (core.quiet), and the quiet policy's record once kept
    attempt: quiet.Attempt | None = None
    quiet_record: dict[str, Any] | None = None
    # CPU time (user + system) of the child and the children it waited for, over wall_s (wait4)
    cpu_s: float | None = None


def run_child(
    job: dict[str, Any],
    timeout_s: float,
    module: str = "runtime.execution.worker",
    python: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> ChildOutcome:
    """Run ``python -m <module>`` (default runtime.execution.worker) on ``job``; never raises for what the child does.

    ``python``: another interpreter (an installed build's venv, runtime.execution.builds), ``extra_env``: its
    environment (e.g. LLAMA_CPP_LIB_PATH); default: this process's."""
    with procs.job_dir() as td:
        job_path, out_path, log_path = (
            Path(td, "job.json"),
            Path(td, "result.json"),
            Path(td, "log.txt"),
        )
        job_path.write_text(json.dumps(job))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(project_root())]
            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(extra_env or {})
        # the worker dies with this process (PR_SET_PDEATHSIG + a watchdog) and kills itself past the deadline
        # even when no runner is left to enforce it (runtime.procs)
        env[procs.PARENT_ENV] = str(os.getpid())
        env[procs.DEADLINE_ENV] = repr(time.time() + timeout_s + KILL_GRACE_S)
        load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        snap0 = quiet.snapshot()
        t0 = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", module, str(job_path), str(out_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(project_root()),
                env=env,
                start_new_session=True,
            )
            # its own session: under autogroup give it the priority nice means it to have (core.quiet)
            autogroup_nice = quiet.protect(proc.pid)
            timed_out = False
            # Wait without polling: a thread blocks in wait4 while this one sleeps on a join
            # with the deadline. A parent waking up every few ms would steal time slices from
            # the child's compute threads on a small host (measurable on 2 cores).
            reaped: dict[str, Any] = {}
            waiter = threading.Thread(
                target=lambda: reaped.update(r=os.wait4(proc.pid, 0)), daemon=True
            )
            try:
                waiter.start()
                waiter.join(timeout_s)
                if waiter.is_alive():
                    timed_out = True
                    os.killpg(proc.pid, signal.SIGKILL)
                    waiter.join()
                pid, status, rusage = reaped["r"]
            except (
                BaseException
            ):  # Ctrl-C: take the child with us, keep what was finished
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                    os.wait4(proc.pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                proc.returncode = -9
                raise
        wall = time.perf_counter() - t0
        cpu_s = rusage.ru_utime + rusage.ru_stime
        attempt = quiet.attempt_of(
            snap0, quiet.snapshot(), cpu_s, autogroup_nice=autogroup_nice
        )
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code
        sig = signal.Signals(-code).name if code < 0 else None
        result = None
        if out_path.exists():
            try:
                result = json.loads(out_path.read_text())
            except ValueError:
                result = None
        log_text = _read_tail(log_path, LOG_READ_BYTES)
        return ChildOutcome(
            result,
            code if code >= 0 else None,
            sig,
            timed_out,
            int(rusage.ru_maxrss) * 1024,
            wall,
            log_text,
            load_before,
            attempt,
            cpu_s=round(cpu_s, 3),
        )


def run_quietly(
    job: dict[str, Any],
    timeout_s: float,
    module: str = "runtime.execution.worker",
    python: str | None = None,
    extra_env: dict[str, str] | None = None,
    policy: quiet.Policy | None = None,
) -> ChildOutcome:
    """:func:`run_child` under the quiet-machine policy (core.quiet): wait for a quiet slot, measure
    again a run disturbed by others' CPU (a failed run is not repeated); the kept outcome carries the
    record of every attempt."""
    outcome, record_ = quiet.measure(
        lambda: run_child(job, timeout_s, module, python, extra_env),
        lambda o: o.attempt,
        policy,
        retry=lambda o: o.exit_code == 0 and not o.timed_out,
    )
    outcome.quiet_record = record_
    return outcome


def _read_tail(path: Path, limit: int) -> str:
    """A child's log as text, at most ``limit`` bytes: its first eighth (load-time facts) and the
    rest from its end. A child that floods its log costs the runner no more than this."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(0)
            if size <= limit:
                data = fh.read()
            else:
                head = fh.read(limit // 8)
                fh.seek(size - (limit - len(head)))
                data = (
                    head
                    + f"\n[log: {size - limit} bytes not kept]\n".encode()
                    + fh.read()
                )
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def source_provenance() -> dict[str, Any]:
    """Which copy of the project measured: set by runtime.remote for runs on a remote host
    (the snapshot's digest, git commit, dirty flag); empty for a local run."""
    raw = os.environ.get("ALMANAC_SOURCE")
    if not raw:
        return {}
    try:
        return {"almanac_source": json.loads(raw)}
    except ValueError:
        return {"almanac_source": {"digest": raw}}


def _summaries(metrics: dict[str, list[float]]) -> dict[str, Any]:
    return {name: stats.summarize(values) for name, values in metrics.items()}


def model_block(
    ref: models.AnyModelRef, describe_model: dict[str, Any]
) -> dict[str, Any]:
    """The artifact's ``model``: a local file's record (kind file), or an endpoint model's as its
    server reported it before the run (kind endpoint)."""
    if ref.kind == "endpoint":
        return ref.record()
    return {
        "name": ref.name,
        "file_name": Path(ref.path).name,
        "sha256": ref.sha256,
        "size_bytes": ref.size_bytes,
        "source": ref.source,
        "synthetic": bool(ref.facts.get("synthetic")),
        "gguf": {k: v for k, v in ref.facts.items() if k not in ("default_settings",)},
        "desc": describe_model.get("desc"),
        "n_params": describe_model.get("n_params"),
        "metadata": describe_model.get("metadata", {}),
    }


def build_artifact(
    *,
    cfg: matrix_mod.Configuration,
    ref: models.AnyModelRef,
    settings: Any,
    host: dict[str, Any],
    key: str,
    backend_version: str,
    outcome: ChildOutcome,
    build_variant: BuildVariant | None = None,
) -> dict[str, Any]:
    created = datetime.now(UTC)
    res = outcome.result or {}
    status = "ok" if res.get("status") == "ok" and outcome.exit_code == 0 else "failed"
    error = None
    if status == "failed":
        if outcome.timed_out:
            error = {
                "kind": "timeout",
                "message": f"no result within {cfg.timeout_s:g} s; child killed",
            }
        elif outcome.signal:
            hint = {
                "SIGKILL": " (killed: out of memory?)",
                "SIGABRT": " (llama.cpp aborted)",
                "SIGSEGV": " (segmentation fault)",
            }.get(outcome.signal, "")
            error = {
                "kind": "crash",
                "message": f"child process ended by {outcome.signal}{hint}",
            }
        elif res.get("error"):
            error = {k: v for k, v in res["error"].items()}
        else:
            error = {
                "kind": "crash",
                "message": f"child exited with code {outcome.exit_code} and no result",
            }
        error["signal"] = outcome.signal
        error["exit_code"] = outcome.exit_code
    describe = res.get("describe") or {}
    load = res.get("load") or {}
    effective = dict(load.get("effective_settings") or {})
    effective.update(backends.backend_class(cfg.backend).log_facts(outcome.log))
    metrics = dict(res.get("metrics") or {})
    if load.get("load_time_s") is not None:
        metrics["load_time_s"] = [load["load_time_s"]]
    # the child's own VmHWM when it reported one (ru_maxrss includes the parent's high-water mark at exec)
    peak_rss = res.get("peak_rss_self_bytes") or outcome.peak_rss_bytes
    metrics["peak_rss_bytes"] = [peak_rss] if peak_rss else []
    if res.get("peak_vram_bytes") is not None:
        metrics["peak_vram_bytes"] = [res["peak_vram_bytes"]]
    model_desc = describe.get("model") or {}
    after = model_desc.get("identity_after")
    if (
        ref.kind == "endpoint"
        and status == "ok"
        and after is not None
        and after != ref.identity
    ):
        status = "failed"  # the server served another model by the end: the samples are not of this one
        error = {
            "kind": "model_changed",
            "message": f"the served model changed during the run: {ref.served_name!r} at "
            f"{ref.base_url} was {ref.identity} before and {after} after",
            "signal": None,
            "exit_code": outcome.exit_code,
        }
    if status == "failed":
        metrics = {
            k: v
            for k, v in metrics.items()
            if k in ("load_time_s", "peak_rss_bytes", "peak_vram_bytes")
        }
    build = {
        **(describe.get("build") or {"backend": cfg.backend}),
        "backend_version": backend_version,
        "in_process": backends.backend_class(cfg.backend).in_process,
        **source_provenance(),
    }
    if build_variant is not None:
        build.update(label=build_variant.label, variant=build_variant.to_dict())
    return record.new_run(
        key=key,
        created=created,
        status=status,
        error=error,
        matrix={"name": cfg.matrix, "file": cfg.matrix_file},
        backend=cfg.backend,
        test=cfg.test.to_dict(),
        requested=settings.recorded(),
        swept=cfg.swept,
        effective=effective,
        model=model_block(ref, model_desc),
        host=host,
        build=build,
        samples=res.get("samples") or {},
        summary=_summaries(metrics),
        details=res.get("details") or {},
        resources={
            "peak_rss_bytes": peak_rss,
            "peak_vram_bytes": res.get("peak_vram_bytes"),
            "peak_rss_method": "VmHWM of the child"
            if res.get("peak_rss_self_bytes")
            else "ru_maxrss (wait4)",
            "peak_vram_method": res.get("peak_vram_method"),
            # per visible GPU (a model split over GPUs): peak bytes and utilisation (runtime.hosts.gpu.PeakVram)
            "peak_vram_by_gpu": res.get("peak_vram_by_gpu"),
            # RSS before the model load (after the backend's libraries, where it says) and after it
            "baseline_rss_bytes": load.get(
                "rss_before_model_bytes", res.get("rss_before_load_bytes")
            ),
            "rss_after_load_bytes": res.get("rss_after_load_bytes"),
            "wall_s": outcome.wall_s,
            "process_cpu_s": outcome.cpu_s,
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "loadavg_1m_before": outcome.loadavg_before,
            "quiet": outcome.quiet_record,
        },
        log_tail=tail_log(outcome.log),
    )


artifact_path = record.run_path  # one owner of the layout: core.records.run


def write_run(
    path: Path, doc: dict[str, Any], policy: request_records.RecordPolicy
) -> Path:
    """Write a run artifact with its request records bounded (core.request_records); with every record
    kept, their sidecar first (atomic), named in the artifact with its sha256. A refused artifact leaves
    no sidecar behind."""
    doc, data = request_records.prepare(path, doc, policy)
    if data is None:
        return artifacts.write(path, doc)
    side = request_records.sidecar_path(path)
    artifacts.atomic_write_bytes(side, data)
    try:
        return artifacts.write(path, doc)
    except BaseException:
        side.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class BuildVariant:
    """A variant of the build measured beside the ordinary one (e.g. a deliberately slowed
    build for a regression example). The artifact records the label and what the variant
    changes; its requested settings stay the matrix's, its effective settings show what ran."""

    label: str
    description: str
    overrides: dict[str, Any] = field(
        default_factory=dict
    )  # settings the variant's job runs with

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "description": self.description,
            "overrides": dict(self.overrides),
        }


@dataclass
class MatrixReport:
    matrix: str
    measured: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    # points not measured because the backend cannot honour one of their settings (one line each)
    unhonoured: list[str] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)


def merged_settings(cfg: matrix_mod.Configuration, ref: models.AnyModelRef) -> Any:
    """The model's default settings (registry) under the matrix's own."""
    cls = type(cfg.settings)
    defaults = {
        k: v
        for k, v in (ref.facts.get("default_settings") or {}).items()
        if k in cls.model_fields
    }
    if not defaults:
        return cfg.settings
    explicit = cfg.settings.model_dump(
        mode="json", include=cfg.settings.model_fields_set
    )
    return cls.model_validate({**defaults, **explicit})


def preflight(cfg: matrix_mod.Configuration, ref: models.AnyModelRef) -> None:
    """Check one configuration against its model's metadata (the backend's rules, e.g. an
    expert count llama.cpp would abort on). Refusal: a ConfigError naming the matrix file
    and the field; nothing runs and nothing is written."""
    settings = merged_settings(cfg, ref)
    try:
        backends.backend_class(cfg.backend).preflight(settings, ref, cfg.test)
    except ConfigError as exc:
        if exc.file:
            raise
        root = (exc.field or "").split(".")[0]
        is_base = cfg.baseline is not None and cfg.settings.model_dump(
            mode="json"
        ) == cfg.baseline.model_dump(mode="json")
        where = (
            "baseline"
            if is_base and root in cfg.swept
            else "sweep"
            if root in cfg.swept
            else "settings"
        )
        prefix = "" if cfg.sweep in ("", cfg.matrix) else f"sweeps.{cfg.sweep}."
        raise ConfigError(
            exc.detail,
            file=cfg.matrix_file,
            field=f"{prefix}{where}" + (f".{exc.field}" if exc.field else ""),
        ) from None


def key_of(
    cfg: matrix_mod.Configuration,
    ref: models.AnyModelRef,
    settings: Any,
    host_id: str,
    backend_version: str,
    build_label: str | None = None,
) -> str:
    """The configuration key (core.records.run.config_key) of one point: the model's identity (a
    file's sha256, an endpoint model's identity with its server's software and version)."""
    server = None
    if ref.kind == "endpoint":
        server = {"software": ref.served.server, "version": ref.served.server_version}
    return config_key(
        cfg.backend,
        ref.identity,
        settings.recorded(),
        cfg.test.to_dict(),
        host_id,
        backend_version,
        build_label=build_label,
        server=server,
    )


def baseline_key(
    cfg: matrix_mod.Configuration,
    ref: models.AnyModelRef,
    host_id: str,
    backend_version: str,
) -> str | None:
    """Key of the point this configuration is compared with (its sweep's baseline), or None."""
    if cfg.baseline is None:
        return None
    settings = merged_settings(dataclasses.replace(cfg, settings=cfg.baseline), ref)
    return key_of(cfg, ref, settings, host_id, backend_version)


def resolve_models(
    cfgs: list[matrix_mod.Configuration], registry: models.Registry, matrix_file: str
) -> dict[str, models.AnyModelRef]:
    """Every model of the configurations: local files verified, endpoint models identified by
    the backend that reaches them (their server asked, their pins checked). Bad input: one line."""
    backend_of = {c.model: c.backend for c in cfgs}
    refs: dict[str, models.AnyModelRef] = {}
    for name in dict.fromkeys(c.model for c in cfgs):
        ref = models.resolve_any(name, registry)
        if ref.kind == "endpoint":
            cls = backends.backend_class(backend_of[name])
            if "endpoint" not in cls.model_kinds:
                raise ConfigError(
                    f"{name!r} is an endpoint model (served at {ref.base_url}, no local file): backend "
                    f"{cls.name} runs local files only; measure it with a backend that reaches servers "
                    "(openai_http)",
                    file=matrix_file,
                    field="models",
                )
            ref = cls.identify(ref)
        refs[name] = ref
    return refs


def run_matrix(
    name_or_path: str,
    *,
    force: bool = False,
    retry_failed: bool = False,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    root: Path | None = None,
    build_variant: BuildVariant | None = None,
    sweeps: list[str] | None = None,
    lock_wait_s: float = 0.0,
    keep_all_requests: bool | None = None,
    requests_kept: int | None = None,
) -> MatrixReport:
    """Measure every configuration of a matrix not measured yet (only the named sweeps' when
    ``sweeps`` is given). All input is validated first; one run per data folder and host at a
    time (runtime.execution.runlock). ``requests_kept`` / ``keep_all_requests`` override the matrix's
    fields of those names (core.request_records)."""
    m = matrix_mod.load(name_or_path)
    policy = request_records.RecordPolicy(
        kept=requests_kept or m.spec.requests_kept,
        keep_all=bool(keep_all_requests or m.spec.keep_all_requests),
    )
    cfgs = m.configurations()
    if sweeps:
        unknown = sorted(set(sweeps) - {c.sweep for c in cfgs})
        if unknown:
            raise ConfigError(
                f"no sweep named {unknown[0]!r} (known: {', '.join(dict.fromkeys(c.sweep for c in cfgs))})",
                file=relpath(m.path),
                field="sweeps",
            )
        cfgs = [c for c in cfgs if c.sweep in sweeps]
    registry = models.load_registry()
    refs = resolve_models(cfgs, registry, relpath(m.path))
    for cfg in cfgs:  # every point against its model's metadata, before anything runs
        preflight(cfg, refs[cfg.model])
    host = hostinfo.fingerprint()
    emit = on_event or (lambda kind, info: None)
    for stale in procs.clean_stale_job_dirs():
        emit("cleaned", {"path": str(stale)})
    with runlock.run_lock(root or runs_dir(), host["id"], wait_s=lock_wait_s):
        return _run_configurations(
            m,
            cfgs,
            refs,
            host,
            emit,
            force=force,
            retry_failed=retry_failed,
            root=root,
            build_variant=build_variant,
            policy=policy,
        )


def _does_not_fit(
    cfg: matrix_mod.Configuration, ref: models.AnyModelRef, settings: Any
) -> str | None:
    n_ctx = backends.backend_class(cfg.backend).context_tokens(settings, cfg.test)
    verdict = fit.check(
        ref.facts, n_ctx, fit.available_memory() if n_ctx is not None else None
    )
    return None if verdict.ok else verdict.message


def _run_configurations(
    m: matrix_mod.Matrix,
    cfgs: list[matrix_mod.Configuration],
    refs: dict[str, models.AnyModelRef],
    host: dict[str, Any],
    emit: Callable[[str, dict[str, Any]], None],
    *,
    force: bool,
    retry_failed: bool,
    root: Path | None,
    build_variant: BuildVariant | None,
    policy: request_records.RecordPolicy | None = None,
) -> MatrixReport:
    report = MatrixReport(m.name)
    policy = policy or request_records.RecordPolicy()
    emit(
        "start",
        {
            "matrix": m.name,
            "total": len(cfgs),
            "host": host["id"],
            "loadavg": os.getloadavg()[0],
            "cores": host["cpu"]["logical_cores"],
        },
    )

    def scenarios():
        for i, cfg in enumerate(cfgs, 1):
            ref = refs[cfg.model]
            settings = merged_settings(cfg, ref)
            unhonoured = backends.backend_class(cfg.backend).cannot_honour(
                settings, ref, cfg.test
            )
            if (
                unhonoured is not None
            ):  # nothing measured for this point; the sweep goes on
                setting, why = unhonoured
                report.unhonoured.append(
                    f"{m.name}: {setting} ({cfg.test.name}): {why}"
                )
                emit(
                    "unhonoured",
                    {
                        "matrix": m.name,
                        "setting": setting,
                        "test": cfg.test.name,
                        "why": why,
                    },
                )
                continue
            bversion = backends.version(cfg.backend)
            key = key_of(
                cfg,
                ref,
                settings,
                host["id"],
                bversion,
                build_label=build_variant.label if build_variant else None,
            )
            job_settings = settings.model_dump(mode="json")
            if build_variant is not None:
                job_settings.update(build_variant.overrides)
            job = {
                "backend": cfg.backend,
                "model": ref.to_dict(),
                "settings": job_settings,
                "test": cfg.test.model_dump(mode="json"),
            }

            def build(
                outcome: ChildOutcome,
                cfg=cfg,
                ref=ref,
                settings=settings,
                key=key,
                bversion=bversion,
            ):
                doc = build_artifact(
                    cfg=cfg,
                    ref=ref,
                    settings=settings,
                    host=host,
                    key=key,
                    backend_version=bversion,
                    outcome=outcome,
                    build_variant=build_variant,
                )
                doc["matrix"].update(
                    sweep=cfg.sweep or None,
                    baseline_key=baseline_key(cfg, ref, host["id"], bversion),
                )
                return doc

            yield Scenario(
                key=key,
                root=root or runs_dir(),
                module="runtime.execution.worker",
                job=job,
                timeout_s=cfg.timeout_s,
                label={
                    "index": i,
                    "total": len(cfgs),
                    "model": cfg.model,
                    "test": cfg.test.name,
                    "swept": cfg.swept,
                },
                build=build,
                path=lambda doc: artifact_path(doc, root),
                write=lambda path, doc: write_run(path, doc, policy),
                refusal=lambda cfg=cfg, ref=ref, settings=settings: _does_not_fit(
                    cfg, ref, settings
                ),
            )

    return execute(scenarios(), report, emit, force=force, retry_failed=retry_failed)


@dataclass
class Scenario:
    """One unit of work of any kind, for :func:`execute`: a speed test of a matrix, a quality
    suite run (runtime.quality.suite_runner), a perplexity run (runtime.quality.perplexity). The
    kind supplies its key (resume identity), the child module and job, and how to turn the
    child's outcome into its artifact; the skip / resume / retry path, the child process and
    the atomic write are the same for all."""

    key: str
    root: Path
    module: str
    job: dict[str, Any]
    timeout_s: float
    label: dict[str, Any]
    build: Callable[[ChildOutcome], dict[str, Any]]
    path: Callable[[dict[str, Any]], Path]
    # resource preflight (runtime.execution.preflight): a message when the configuration cannot fit, checked just
    # before it would run; it then becomes a failed artifact without any child process
    refusal: Callable[[], str | None] | None = None
    # how the artifact is written (a run's: its request records bounded, core.request_records)
    write: Callable[[Path, dict[str, Any]], Path] = artifacts.write


def execute(
    scenarios: Any,
    report: MatrixReport,
    emit: Callable[[str, dict[str, Any]], None],
    *,
    force: bool = False,
    retry_failed: bool = False,
) -> MatrixReport:
    """The one run loop: skip what is measured (unless forced; a failed one only with
    ``retry_failed``), run the rest each in its own child process, write one artifact each."""
    for sc in scenarios:
        found = (
            last_valid(sc.key, sc.root, emit, artifacts.load) if not force else None
        )  # corrupt ones set aside
        if found is not None:
            last_path, last = found
            if last["status"] == "ok" or not retry_failed:
                report.skipped.append(last_path)
                emit(
                    "skip",
                    {**sc.label, "path": relpath(last_path), "status": last["status"]},
                )
                continue
        emit("run", sc.label)
        refusal = sc.refusal() if sc.refusal is not None else None
        if refusal is not None:  # a failed artifact, without loading anything
            outcome = ChildOutcome(
                {"status": "failed", "error": {"kind": "refused", "message": refusal}},
                None,
                None,
                False,
                None,
                0.0,
                "",
            )
        else:
            outcome = run_quietly(sc.job, sc.timeout_s, module=sc.module)
        doc = sc.build(
            outcome
        )  # may raise a UserError (bad input found by the child): nothing is written
        path = sc.write(sc.path(doc), doc)
        (report.measured if doc["status"] == "ok" else report.failed).append(path)
        emit(
            "done",
            {
                **sc.label,
                "path": relpath(path),
                "status": doc["status"],
                "summary": doc.get("summary"),
                "results": doc.get("results"),
                "error": doc["error"],
            },
        )
    return report
