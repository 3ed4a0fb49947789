"""Fixture artifacts for the planning pages (projections, memory, roofline, what-if).

Run, host and projection artifacts are built here from a few inputs, schema-valid, so each
test states the numbers it depends on. The model facts are the real GGUF facts of the
embedded model and of a tiny synthetic MoE (tests/fixtures/planning/*.facts.json, written by
``runtime.models.registry.gguf_facts``); hosts are made up.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from core import artifacts, stats
from core.records import run as record
from core.records.host import HostRecord
from runtime.backends import settings_class

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "planning"
GEMMA_FACTS: dict[str, Any] = json.loads(
    (FIXTURES / "gemma3-270m-q4_k_m.facts.json").read_text()
)
MOE_FACTS: dict[str, Any] = json.loads(
    (FIXTURES / "tiny-qwen3moe-q8_0.facts.json").read_text()
)
GEMMA = "gemma3-270m-q4_k_m"
GEMMA_SHA = "a" * 64
GEMMA_SIZE = 253_113_024

HOST: dict[str, Any] = {
    "id": "fixture-host-0000aaaa",
    "name": "fixture-host",
    "cpu": {
        "model": "Fixture CPU",
        "vendor": "fixture",
        "arch": "x86_64",
        "physical_cores": 2,
        "logical_cores": 2,
        "max_mhz": 3000,
        "flags": ["avx", "avx2", "fma"],
        "cache": {},
        "hypervisor": False,
    },
    "memory_bytes": 8 * 2**30,
    "numa_nodes": 1,
    "os": {"system": "Linux"},
    "gpus": [],
}

CHAT_SHORT = {
    "kind": "chat",
    "id": "chat-short",
    "name": "chat-short",
    "max_tokens": 64,
    "requests": 3,
    "warmup_requests": 1,
    "repetitions": 5,
    "warmup": True,
    "messages": [
        {"role": "user", "content": "Explain in three sentences why the sky is blue."}
    ],
}


def rate_test(n_prompt: int = 0, n_gen: int = 0, n_depth: int = 0) -> dict[str, Any]:
    parts = ([f"pp{n_prompt}"] if n_prompt else []) + ([f"tg{n_gen}"] if n_gen else [])
    name = "+".join(parts) + (f"@d{n_depth}" if n_depth else "")
    return {
        "kind": "rate",
        "name": name,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "repetitions": 3,
        "warmup": True,
    }


def requested(**overrides: Any) -> dict[str, Any]:
    base = settings_class("llama_cpp")().model_dump(mode="json")
    base["chat_format"] = "gemma"
    base.update(overrides)
    return base


def chat_requests(
    stages: list[dict[str, float]], prompt_tokens: int = 19, output_tokens: int = 40
) -> list[dict[str, Any]]:
    out = []
    for s in stages:
        total = sum(s.values())
        tpot = (s["decode"] + s.get("sample", 0) + s.get("detokenise", 0)) / (
            output_tokens - 1
        )
        ttft = total - tpot * (output_tokens - 1)
        out.append(
            {
                "ttft_ms": ttft,
                "e2e_ms": total,
                "tpot_ms": tpot,
                "output_tokens": output_tokens,
                "prompt_tokens": prompt_tokens,
                "finish_reason": "length",
                "itl_ms": [tpot] * (output_tokens - 1),
                "text": "The sky is blue.",
                "stages_ms": dict(s),
            }
        )
    return out


def run_doc(
    *,
    test: dict[str, Any],
    metrics: dict[str, list[float]],
    model: str = GEMMA,
    facts: dict | None = None,
    sha: str = GEMMA_SHA,
    size: int = GEMMA_SIZE,
    matrix: str = "default",
    settings: dict | None = None,
    effective: dict | None = None,
    samples: dict | None = None,
    details: dict | None = None,
    created: str = "2026-01-01T00:00:00+00:00",
    host: dict | None = None,
    resources: dict | None = None,
    synthetic: bool = False,
    status: str = "ok",
) -> dict[str, Any]:
    host = host or HOST
    req = settings if settings is not None else requested()
    key = hashlib.sha256(
        json.dumps([model, sha, test, req, host["id"]], sort_keys=True).encode()
    ).hexdigest()
    eff = {
        "n_ctx": 4096,
        "n_batch": 2048,
        "n_ubatch": 512,
        "n_threads": 2,
        "type_k": req.get("type_k", "f16"),
        "type_v": req.get("type_v", "f16"),
        "swa_full": req.get("swa_full", False),
        "flash_attn": "on",
        "n_gpu_layers": 0,
        "use_mmap": True,
    }
    eff.update(effective or {})
    doc = record.new_run(
        key=key,
        created=datetime.fromisoformat(created),
        status=status,
        error=None
        if status == "ok"
        else {"kind": "crash", "message": "fixture failure"},
        matrix={"name": matrix, "file": f"data/matrices/{matrix}.yaml"},
        backend="llama_cpp",
        test=test,
        requested=req,
        swept={},
        effective=eff,
        model={
            "name": model,
            "file_name": f"{model}.gguf",
            "sha256": sha,
            "size_bytes": size,
            "source": "path",
            "synthetic": synthetic,
            "gguf": copy.deepcopy(facts or GEMMA_FACTS),
            "desc": None,
            "n_params": None,
            "metadata": {},
        },
        host=host,
        build={
            "backend_version": "0.3.36",
            "llama_cpp_commit": "0c1e57098",
            "almanac": "0.1.0",
            "in_process": True,
        },
        samples=samples or {},
        summary={k: stats.summarize(v) for k, v in metrics.items()},
        details=details or {},
        resources={"wall_s": 1.0, "exit_code": 0, **(resources or {})},
        log_tail="",
    )
    artifacts.validate(doc)
    return doc


def host_doc(
    gbs: dict[int, list[float]],
    *,
    host: dict | None = None,
    created: str = "2026-01-01T00:00:00+00:00",
    kind: str = "memory_bandwidth",
    read: dict[int, list[float]] | None = None,
    llc_bytes: int | None = None,
) -> HostRecord:
    """A memory-bandwidth probe of ``host``, as the record the pipelines take."""
    host = host or HOST
    stamp = created[:19].replace("-", "").replace(":", "") + "Z"
    doc = {
        "artifact": "host",
        "schema_version": 1,
        "id": f"{host['id']}-{stamp}",
        "created": created,
        "host": host,
        "probe": {
            "kind": kind,
            "version": 1,
            "method": "fixture",
            "tool": "fixture",
            "buffer_bytes": 1 << 20,
            "repetitions": len(next(iter(gbs.values()))),
            "warmup": True,
            "bytes_counted": "read + written",
        },
        "bandwidth": [
            {"threads": t, "samples_gbs": v, "summary": stats.summarize(v)}
            for t, v in sorted(gbs.items())
        ],
        "conditions": {
            "loadavg_1m_before": 0.1,
            "loadavg_1m_after": 0.1,
            "logical_cores": 2,
        },
    }
    if read is not None:
        doc["read_bandwidth"] = [
            {"threads": t, "samples_gbs": v, "summary": stats.summarize(v)}
            for t, v in sorted(read.items())
        ]
        doc["probe"].update(read_method="fixture read", read_bytes_counted="read")
    if llc_bytes is not None:
        doc["probe"]["llc_bytes"] = llc_bytes
    artifacts.validate(doc)
    return HostRecord(doc)


STAGES_A = {
    "tokenise": 0.5,
    "prefill": 60.0,
    "decode": 600.0,
    "sample": 30.0,
    "detokenise": 2.0,
    "other": 7.5,
}


def embedded_dataset(repeated: bool = False) -> dict[str, list[Any]]:
    """The embedded model's roles measured on the fixture host: baselines, verification runs,
    a host probe. Numbers chosen for the tests; see each test for the arithmetic.

    ``repeated``: the worker's tg128 configuration measured a second time (means 41.0 and 41.4 t/s), so
    that the host has a run-to-run noise estimate for generation rates (pipelines.noise, from history)
    and every tg figure of the fact layer an interval."""
    runs = [
        # front door: chat, default matrix; TPOT = (600 + 30 + 2) / 39 ms -> 61.7 t/s
        run_doc(
            test=CHAT_SHORT,
            metrics={
                "decode_tps": [61.0, 62.0, 62.4],
                "ttft_ms": [70.0, 71.0, 69.0],
                "e2e_ms": [700.0, 701.0, 699.0],
                "load_time_s": [0.5],
            },
            samples={"requests": chat_requests([STAGES_A] * 3)},
            created="2026-01-01T00:00:00+00:00",
            resources={"peak_rss_bytes": 410_000_000, "baseline_rss_bytes": 60_000_000},
        ),
        # worker: tg128, default matrix
        run_doc(
            test=rate_test(n_gen=128),
            metrics={"tokens_per_second": [40.0, 41.0, 42.0], "load_time_s": [0.5]},
            details={
                "perf_counters": [
                    {
                        "t_p_eval_ms": 0.0,
                        "n_p_eval": 0,
                        "t_eval_ms": 3100.0,
                        "n_eval": 128,
                    }
                ]
            },
            effective={"n_ctx": 256, "n_ubatch": 128, "n_batch": 128},
            created="2026-01-01T00:01:00+00:00",
            resources={"peak_rss_bytes": 380_000_000, "baseline_rss_bytes": 60_000_000},
        ),
        # long context: tg128@d4096, projections matrix, f16 cache
        run_doc(
            test=rate_test(n_gen=128, n_depth=4096),
            matrix="projections",
            settings=requested(type_k="f16", type_v="f16"),
            metrics={"tokens_per_second": [30.0, 30.5, 31.0]},
            effective={"n_ctx": 4224},
            created="2026-01-01T00:02:00+00:00",
        ),
        # verification: tg128@d4096 with a q8_0 cache
        run_doc(
            test=rate_test(n_gen=128, n_depth=4096),
            matrix="projections",
            settings=requested(type_k="q8_0", type_v="q8_0"),
            metrics={"tokens_per_second": [31.0, 31.5, 32.0]},
            effective={"n_ctx": 4224},
            created="2026-01-02T00:00:00+00:00",
        ),
    ]
    if repeated:
        runs.append(
            run_doc(
                test=rate_test(n_gen=128),
                metrics={"tokens_per_second": [40.4, 41.4, 42.4], "load_time_s": [0.5]},
                details={
                    "perf_counters": [
                        {
                            "t_p_eval_ms": 0.0,
                            "n_p_eval": 0,
                            "t_eval_ms": 3090.0,
                            "n_eval": 128,
                        }
                    ]
                },
                effective={"n_ctx": 256, "n_ubatch": 128, "n_batch": 128},
                created="2026-01-01T01:01:00+00:00",
                resources={
                    "peak_rss_bytes": 380_000_000,
                    "baseline_rss_bytes": 60_000_000,
                },
            )
        )
    hosts = [host_doc({1: [19.0, 19.4, 19.2], 2: [24.0, 25.0, 24.5]})]
    return {"runs": [record.RunRecord(d) for d in runs], "hosts": hosts}


def write_dataset(data_dir: Path, dataset: dict[str, list[Any]]) -> None:
    from pipelines.projections import record_path
    from runtime.hosts import probe as hostprobe

    for d in dataset.get("runs", []):
        record.write(getattr(d, "doc", d), data_dir / "runs")
    for d in dataset.get("hosts", []):
        doc = getattr(d, "doc", d)
        artifacts.write(hostprobe.artifact_path(doc, data_dir / "hosts"), doc)
    for d in dataset.get("projections", []):
        artifacts.write(record_path(d, data_dir / "projections"), d)


def run_record(**kw: Any) -> record.RunRecord:
    """:func:`run_doc` as the record the pipelines take (core.records.run.RunRecord)."""
    return record.RunRecord(run_doc(**kw))
