"""The Memory planner page: the planner's accuracy first (pipelines.site.memory_accuracy),
then one folded plan per model file measured (pipelines.site.memory_plan), and the endpoint
models it cannot plan.
"""

from __future__ import annotations

from typing import Any

from core.errors import UserError
from core.records.host import HostRecord
from core.records.run import RunRecord
from pipelines import memory as mem
from pipelines.runs import latest_per_key
from pipelines.site.markdown import (
    cell,
    fold,
    nbytes,
    no_data,
    num,
    table,
)
from pipelines.site.memory_accuracy import (
    predicted_vs_measured,
    split_vram_vs_measured,
    vram_vs_measured,
)
from pipelines.site.memory_plan import model_memory_section


def _models_in(runs: list[RunRecord]) -> list[RunRecord]:
    """One (newest) run per model file, to read its GGUF facts from (endpoint models have none)."""
    by_sha: dict[str | None, RunRecord] = {}
    for d in latest_per_key(runs):
        if not d.has_local_file:
            continue
        cur = by_sha.get(d.model_sha256)
        if cur is None or d.created > cur.created:
            by_sha[d.model_sha256] = d
    return sorted(by_sha.values(), key=lambda d: (d.synthetic, d.model_name))


def _endpoint_models_in(runs: list[RunRecord]) -> list[tuple[str, str]]:
    """(name, where it is served) of every endpoint model with a current run: listed, not planned."""
    out = {}
    for d in latest_per_key(runs):
        if d.is_endpoint:
            out[(d.model_name, d.model_identity)] = d.model_origin
    return sorted((name, origin) for (name, _), origin in out.items())


def endpoint_models_note(runs: list[RunRecord]) -> str:
    """The memory planner's line on endpoint models: no local file, not planned ("" when there are none)."""
    eps = _endpoint_models_in(list(runs))
    if not eps:
        return ""
    rows = [
        [cell(name), cell(origin), cell("no local file: not planned")]
        for name, origin in eps
    ]
    return "\n".join(
        [
            "## Endpoint models",
            "",
            "Measured through a server that serves them, with no local file: the "
            "planner has no GGUF facts (layers, heads, tensor bytes) to plan them from.",
            "",
            table(["model", "served", "plan"], rows, max_rows=50),
            "",
        ]
    )


def _host_memory(
    runs: list[RunRecord], hosts: list[HostRecord]
) -> tuple[str | None, int | None]:
    runs, hosts = list(runs), [h for h in hosts]
    docs = [(h.created, h.host) for h in hosts] + [(d.created, d.host) for d in runs]
    if not docs:
        return None, None
    _, h = max(docs, key=lambda x: x[0])
    return h["id"], h.get("memory_bytes")


def _baseline_rss(runs: list[RunRecord], host_id: str | None) -> int | None:
    vals = [
        d.resources.baseline_rss_bytes
        for d in list(runs)
        if d.host_id == host_id and d.resources.baseline_rss_bytes
    ]
    return int(sorted(vals)[len(vals) // 2]) if vals else None


MODELS_SHOWN = 12  # model files with a memory section of their own on the page


def memory_page(runs: list[RunRecord], hosts: list[HostRecord]) -> str:
    try:
        settings = mem.load_planner_settings()
    except UserError as exc:
        return no_data("Planner settings missing or invalid", cell(str(exc)))
    docs = _models_in(runs)
    if not docs:
        return (
            no_data(
                "No models measured yet",
                "Run `invoke bench`; or plan any GGUF with "
                "`invoke plan.memory --model PATH`.",
            )
            + ("\n\n" + endpoint_models_note(runs)).rstrip()
        )
    host_id, host_memory = _host_memory(runs, hosts)
    base = _baseline_rss(runs, host_id)
    overhead, n_gpu_runs = mem.gpu_overhead_from_runs(latest_per_key(runs))
    if overhead is not None:
        settings = settings.model_copy(
            update={
                "gpu_runtime_overhead_mib": overhead / mem.MiB,
                "gpu_runtime_overhead_source": f"the median residual of {n_gpu_runs} measured GPU runs",
            }
        )
    out = [
        "## Predicted against measured",
        "",
        "### Host RAM (CPU runs)",
        "",
        predicted_vs_measured(runs),
        "",
        "### GPU memory",
        "",
        vram_vs_measured(runs),
        "",
        split_vram_vs_measured(runs, overhead),
        "",
    ]
    from pipelines.site.tracks import adapter_memory_section

    lora = adapter_memory_section(runs)
    if lora:
        out += [lora, ""]
    if len(docs) > MODELS_SHOWN:
        # a section per model file: the newest few; the rest are listed (the planner plans any of them)
        newest = sorted(docs, key=lambda d: d.created, reverse=True)
        out += [
            "## Model files",
            "",
            f"{len(docs):,} model files have measurements; the {MODELS_SHOWN} most recently measured have a section "
            "below. Plan any other with `invoke plan.memory --model NAME_OR_PATH`.",
            "",
            fold(
                "The model files, newest first",
                table(
                    [
                        "model",
                        "quantization",
                        "parameters",
                        "file size",
                        "last measured",
                    ],
                    [
                        [
                            cell(d.model_name),
                            cell(d.quantization),
                            num(d.n_params, 0),
                            nbytes(d.model_size_bytes),
                            cell(d.created),
                        ]
                        for d in newest
                    ],
                    max_rows=50,
                ),
            ),
            "",
        ]
        shown = {id(d) for d in newest[:MODELS_SHOWN]}
        docs = [d for d in docs if id(d) in shown]
    # the current runs by model file, once (a scan of every current run for each model section was
    # models x runs)
    by_model: dict[Any, list[RunRecord]] = {}
    for r in latest_per_key(runs):
        by_model.setdefault(r.model_sha256, []).append(r)
    for d in docs:
        try:
            shape = mem.ModelShape.from_facts(d.gguf, d.model_name)
        except UserError as exc:
            out += [f"## {cell(d.model_name)}", "", cell(str(exc)), ""]
            continue
        checks = [
            c
            for r in by_model.get(d.model_sha256, [])
            if (c := mem.vram_prediction(r, overhead or 0)) is not None
        ]
        out.append(
            model_memory_section(shape, d, settings, host_id, host_memory, base, checks)
        )
    note = endpoint_models_note(runs)
    if note:
        out.append(note)
    return "\n".join(out)
