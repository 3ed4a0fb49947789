"""Run a quality matrix: generate in a child process, score in this one, write one artifact each.

Each (model, settings, suite) is a ``runtime.execution.runner.Scenario`` run by ``runner.execute``,
the same loop as speed tests: one skip / resume / retry path, one child-process runner,
one atomic write, and ids in the one format of ``core.records.run.run_id``.

For every (model, settings, suite) configuration: the seeded sample of items goes to a
child process (``runtime.execution.worker``, task ``items``, through ``runtime.execution.runner.run_child``: crash,
abort and timeout isolation, log and peak RSS captured); the outputs come back; each is
scored here by its scorer (model-written code only through the sandbox) and checked by
the shared degeneration detector; the artifact (``quality`` type) is written atomically
to ``data/quality/<host>/<model>/<suite>--<key16>-<stamp>.json``.

The key covers everything that changes a verdict: backend and its version, model file
hash, settings, suite name, version and content hash, the sampled item ids, generation
parameters, host, the scorers' and the detector's versions. An existing key is skipped
(resume); ``force`` runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.degeneration import VERSION as DEGENERATION_VERSION
from core.degeneration import detect
from core.paths import data_dir, relpath, slug
from core.records import quality as quality_record
from runtime import __version__, backends
from runtime.execution import runner
from runtime.execution.runner import ChildOutcome, merged_settings, tail_log
from runtime.hosts import fingerprint as hostinfo
from runtime.models import registry as models
from runtime.quality import scorers
from runtime.quality.suite_matrix import QualityConfiguration
from runtime.quality.suite_matrix import load as load_matrix

METHOD_VERSION = 1


def quality_dir() -> Path:
    return data_dir() / "quality"


def config_key(
    cfg: QualityConfiguration,
    ref: models.ModelRef,
    settings: dict[str, Any],
    host_id: str,
    backend_version: str,
) -> str:
    used = sorted({it.scorer for it in cfg.items})
    ident = {
        "backend": cfg.backend,
        "backend_version": backend_version,
        "model_sha256": ref.sha256,
        "settings": settings,
        "suite": {
            "name": cfg.suite.name,
            "version": cfg.suite.version,
            "content_sha256": cfg.suite.content_sha256,
        },
        "items": [it.id for it in cfg.items],
        "generation": cfg.generation.model_dump(mode="json"),
        "host": host_id,
        "method": METHOD_VERSION,
        "scorers": {s: scorers.get(s).version for s in used},
        "degeneration": DEGENERATION_VERSION,
    }
    if (
        cfg.prompt_style != "chat"
    ):  # chat keys stay as before prompt styles existed (resume keeps working)
        ident["prompt_style"] = cfg.prompt_style
    return hashlib.sha256(
        json.dumps(ident, sort_keys=True, default=str).encode()
    ).hexdigest()


def find_existing(key: str, root: Path | None = None) -> list[Path]:
    return runner.find_existing(key, root or quality_dir())


summarize_items = quality_record.summarize_items  # one owner: core.records.quality


def score_items(
    cfg: QualityConfiguration, records: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    by_id = {r["id"]: r for r in records}
    out = []
    for it in cfg.items:
        rec = by_id.get(it.id)
        if rec is None:  # not generated (the child died first): not scored, not counted
            continue
        text = rec.get("text") or ""
        t0 = time.perf_counter()
        sc = scorers.get(it.scorer)
        verdict = sc(
            it.check,
            rec["loglik"] if it.style == "loglikelihood" and "loglik" in rec else text,
        )
        system = next(
            (m["content"] for m in it.messages if m["role"] == "system"), None
        )
        out.append(
            {
                "id": it.id,
                "tags": it.tags,
                "prompt": it.prompt,
                "prompt_style": it.style,
                "system": system,
                "expected": it.expected,
                "scorer": it.scorer,
                "scorer_version": sc.version,
                "check": it.check,
                "output": text,
                "passed": verdict.passed,
                "score": verdict.score,
                "details": verdict.details,
                "degeneration": detect(text),
                "error": rec.get("error"),
                "timing": {
                    k: rec.get(k)
                    for k in (
                        "ttft_ms",
                        "tpot_ms",
                        "e2e_ms",
                        "output_tokens",
                        "prompt_tokens",
                        "finish_reason",
                        "wall_s",
                    )
                },
                "scoring_s": time.perf_counter() - t0,
            }
        )
    return out


def build_artifact(
    *,
    cfg: QualityConfiguration,
    ref: models.ModelRef,
    settings: Any,
    host: dict[str, Any],
    key: str,
    backend_version: str,
    outcome: ChildOutcome,
) -> dict[str, Any]:
    created = datetime.now(UTC)
    res = outcome.result or {}
    items = score_items(cfg, res.get("items") or [])
    complete = len(items) == len(cfg.items)
    status = (
        "ok"
        if res.get("status") == "ok" and outcome.exit_code == 0 and complete
        else "failed"
    )
    error = None
    if status == "failed":
        if outcome.timed_out:
            error = {
                "kind": "timeout",
                "message": f"no result within {cfg.timeout_s:g} s; child killed "
                f"({len(items)} of {len(cfg.items)} items generated)",
            }
        elif outcome.signal:
            error = {
                "kind": "crash",
                "message": f"child process ended by {outcome.signal} "
                f"({len(items)} of {len(cfg.items)} items generated)",
            }
        elif res.get("error"):
            error = dict(res["error"])
        else:
            error = {
                "kind": "crash",
                "message": f"child exited with code {outcome.exit_code}; "
                f"{len(items)} of {len(cfg.items)} items generated",
            }
        error["signal"] = outcome.signal
        error["exit_code"] = outcome.exit_code
    describe = res.get("describe") or {}
    load = res.get("load") or {}
    effective = dict(load.get("effective_settings") or {})
    effective.update(backends.backend_class(cfg.backend).log_facts(outcome.log))
    model_desc = describe.get("model") or {}
    sandbox = sorted(
        {layer for it in items for layer in (it["details"].get("isolation") or [])}
    )
    return quality_record.new_quality(
        key=key,
        created=created,
        status=status,
        error=error,
        matrix={"name": cfg.matrix, "file": cfg.matrix_file},
        backend=cfg.backend,
        prompt_style=cfg.prompt_style,
        suite={
            "name": cfg.suite.name,
            "prompt_styles": list(cfg.suite.prompt_styles),
            "version": cfg.suite.version,
            "category": cfg.suite.category,
            "description": cfg.suite.description,
            "file": relpath(cfg.suite.path),
            "includes": cfg.suite.includes,
            "content_sha256": cfg.suite.content_sha256,
            "n_items_in_suite": len(cfg.suite.items),
            "source": cfg.suite.source_info,
            "sample": {
                "requested": cfg.sample,
                "seed": cfg.seed,
                "ids": [it.id for it in cfg.items],
            },
        },
        generation=cfg.generation.model_dump(mode="json"),
        requested=settings.recorded(),
        swept=cfg.swept,
        effective=effective,
        model={
            "name": ref.name,
            "file_name": Path(ref.path).name,
            "sha256": ref.sha256,
            "size_bytes": ref.size_bytes,
            "source": ref.source,
            "synthetic": bool(ref.facts.get("synthetic")),
            "gguf": {
                k: v for k, v in ref.facts.items() if k not in ("default_settings",)
            },
            "desc": model_desc.get("desc"),
            "n_params": model_desc.get("n_params"),
        },
        host=host,
        build={
            **(describe.get("build") or {"backend": cfg.backend}),
            "backend_version": backend_version,
            "almanac": __version__,
            "method_version": METHOD_VERSION,
            "scorers": {
                s: scorers.get(s).version
                for s in sorted({it.scorer for it in cfg.items})
            },
            "degeneration_version": DEGENERATION_VERSION,
        },
        items=items,
        sandbox={"isolation": sandbox} if sandbox else None,
        resources={
            "peak_rss_bytes": outcome.peak_rss_bytes,
            "wall_s": outcome.wall_s,
            "load_time_s": load.get("load_time_s"),
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "scoring_s": sum(it["scoring_s"] for it in items),
        },
        log_tail=tail_log(outcome.log),
    )


def artifact_path(doc: dict[str, Any], root: Path | None = None) -> Path:
    root = root or quality_dir()
    stamp = doc["id"].split("-", 1)[1]
    style = doc.get("prompt_style") or "chat"
    name = (
        doc["suite"]["name"] if style == "chat" else f"{doc['suite']['name']}.{style}"
    )
    return (
        root
        / doc["host"]["id"]
        / slug(doc["model"]["name"])
        / f"{name}--{doc['key'][:16]}-{stamp}.json"
    )


def engine_label(backend: str, settings: Any) -> str:
    """How a configuration reaches the model, for progress lines: the backend, and the server it starts."""
    server = getattr(settings, "server", None)
    if getattr(
        settings, "base_url", None
    ):  # a server given by URL (an HTTP backend's settings)
        return f"{backend} ({settings.base_url})"
    return f"{backend} ({server})" if server else backend


QualityReport = runner.MatrixReport  # the same record: measured, skipped, failed


def run_quality_matrix(
    name_or_path: str,
    *,
    force: bool = False,
    retry_failed: bool = False,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    root: Path | None = None,
    accept_sandbox_risk: bool = False,
) -> QualityReport:
    """Generate and score every configuration of a quality matrix not done yet. Input is validated first.
    Code scoring needs kernel isolation: without it the run is refused before anything runs,
    unless ``accept_sandbox_risk``."""
    m = load_matrix(name_or_path)
    if any(it.scorer == "code_exec" for cfg in m.configurations for it in cfg.items):
        from runtime.quality import sandbox

        sandbox.require_isolation(accept_sandbox_risk)
        if accept_sandbox_risk:
            os.environ[sandbox.ACCEPT_ENV] = "1"  # the scorers run in this process
    registry = models.load_registry()
    refs = {
        name: models.resolve(name, registry)
        for name in dict.fromkeys(c.model for c in m.configurations)
    }
    host = hostinfo.fingerprint()
    report = QualityReport(m.name)
    emit = on_event or (lambda kind, info: None)
    from runtime.procs import clean_stale_job_dirs

    clean_stale_job_dirs()  # job folders of runners that crashed
    emit(
        "start", {"matrix": m.name, "total": len(m.configurations), "host": host["id"]}
    )

    def scenarios():
        for i, cfg in enumerate(m.configurations, 1):
            ref = refs[cfg.model]
            settings = merged_settings(cfg, ref)
            bversion = backends.version(cfg.backend)
            key = config_key(cfg, ref, settings.recorded(), host["id"], bversion)
            job = {
                "task": "items",
                "backend": cfg.backend,
                "model": ref.to_dict(),
                "settings": settings.model_dump(mode="json"),
                "generation": cfg.generation.model_dump(mode="json"),
                "items": [it.to_dict() for it in cfg.items],
            }

            def build(
                outcome, cfg=cfg, ref=ref, settings=settings, key=key, bversion=bversion
            ):
                return build_artifact(
                    cfg=cfg,
                    ref=ref,
                    settings=settings,
                    host=host,
                    key=key,
                    backend_version=bversion,
                    outcome=outcome,
                )

            yield runner.Scenario(
                key=key,
                root=root or quality_dir(),
                module="runtime.execution.worker",
                job=job,
                timeout_s=cfg.timeout_s,
                label={
                    "index": i,
                    "total": len(m.configurations),
                    "model": cfg.model,
                    "backend": engine_label(cfg.backend, settings),
                    "suite": cfg.suite.name,
                    "prompt_style": cfg.prompt_style,
                    "items": len(cfg.items),
                    "swept": cfg.swept,
                },
                build=build,
                path=lambda doc: artifact_path(doc, root),
            )

    return runner.execute(
        scenarios(), report, emit, force=force, retry_failed=retry_failed
    )
