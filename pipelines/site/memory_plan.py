"""One model file's memory plan on the Memory planner page: facts from its GGUF, weights,
KV cache per context and cache type, what fits where (host RAM and each card), sweet spots,
split fits and LoRA adapters (pipelines.memory computes; this renders).
"""

from __future__ import annotations

from typing import Any

from core.records.run import RunRecord
from pipelines import memory as mem
from pipelines.site.markdown import (
    PROJECTED_BADGE,
    SYNTHETIC_BADGE,
    admonition,
    cell,
    code,
    fold,
    link,
    nbytes,
    num,
    run_link,
    table,
)

PLAN_FOLD = "The plan: facts from the GGUF, weights, KV cache, what fits where (host RAM and each card), LoRA adapters"


def model_memory_section(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    host_id: str | None,
    host_memory: int | None,
    baseline_rss: int | None,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    """A model file's plan under its heading, folded: the page shows the planner's accuracy first and
    one line per model file (a plan is a page of tables; a reader opens the one they plan for)."""
    head = f"## {cell(doc.model_name)}" + (
        " " + SYNTHETIC_BADGE if doc.synthetic else ""
    )
    return (
        head
        + "\n\n"
        + fold(
            PLAN_FOLD,
            _model_plan(
                shape, doc, settings, host_id, host_memory, baseline_rss, gpu_checks
            ),
        )
    )


def _model_plan(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    host_id: str | None,
    host_memory: int | None,
    baseline_rss: int | None,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    out: list[str] = []
    n_swa_layers = sum(shape.swa_layers)
    facts = [
        ["file", code(doc.model_file_name)],
        ["architecture", cell(shape.architecture)],
        ["quantization", cell(doc.quantization)],
        ["layers", num(shape.n_layer, 0)],
        ["embedding", num(shape.n_embd, 0)],
        [
            "attention heads (KV heads)",
            f"{num(shape.n_head, 0)} ({cell(', '.join(sorted({str(x) for x in shape.n_head_kv})))})",
        ],
        ["head size (K / V)", f"{num(shape.head_k, 0)} / {num(shape.head_v, 0)}"],
        [
            "sliding window",
            (
                f"{num(shape.n_swa, 0)} tokens on {n_swa_layers} of {shape.n_layer} layers "
                f"({cell(shape.swa_pattern_source)})"
            )
            if shape.n_swa
            else "none",
        ],
        ["vocabulary", num(shape.n_vocab, 0)],
        ["trained context", num(shape.n_ctx_train, 0)],
        [
            "MoE",
            f"{shape.expert_used_count} of {shape.expert_count} experts per token"
            if shape.is_moe
            else "dense",
        ],
        [
            "output matrix",
            "tied to the token embedding" if shape.tied_output else "separate",
        ],
    ]
    out += [table(["fact (from the GGUF)", "value"], facts), ""]
    for note in shape.notes:
        out += [admonition("note", "Approximation", cell(note)), ""]
    # weights
    out += ["### Weights", ""]
    total = shape.weight_bytes
    rows = [
        [code(t), nbytes(b), num(b / total * 100, 1) + "%"]
        for t, b in sorted(shape.tensor_bytes_by_type.items(), key=lambda kv: -kv[1])
    ]
    rows.append(["**total**", f"**{nbytes(total)}**", "100%"])
    out += [table(["tensor type", "bytes", "share"], rows, ["l", "r", "r"]), ""]
    roles = [
        [cell(r), nbytes(shape.role_bytes(r))]
        for r in ("token_embd", "output", "experts", "other")
        if shape.role_bytes(r)
    ]
    out += [
        f"By role: {', '.join(f'{a} {b}' for a, b in roles)}. On a CPU with AVX2 (or ARM dot-product), llama.cpp "
        f"copies {nbytes(shape.repack_bytes())} of them once more into its repacked buffer.",
        "",
    ]
    # KV cache
    out += ["### KV cache", ""]
    ex_layer = next((i for i in range(shape.n_layer) if shape.n_head_kv[i]), 0)
    per_cell = {
        t: shape.kv_row_bytes(ex_layer, t, t)
        for t in settings.cache_types
        if _kv_ok(shape, t)
    }
    out.append(
        f"Per cell and attention layer: K {num(shape.head_k, 0)} × {num(shape.n_head_kv[ex_layer], 0)} values + "
        f"V {num(shape.head_v, 0)} × {num(shape.n_head_kv[ex_layer], 0)} values = "
        + ", ".join(f"{nbytes(b)} ({code(t)})" for t, b in per_cell.items())
        + f". Full-attention layers hold `pad256(n_ctx)` cells; sliding-window layers "
        f"`pad256(min(n_ctx, {shape.n_swa} + n_ubatch))` (or the full context with `swa_full`)."
    )
    out.append("")
    headers = (
        ["context"]
        + [code(t) for t in settings.cache_types]
        + [f"{code('f16')}, swa_full"]
    )
    rows = []
    beyond_any = False
    for n_ctx in settings.contexts:
        beyond = bool(shape.n_ctx_train and n_ctx > shape.n_ctx_train)
        beyond_any |= beyond
        row = [num(n_ctx, 0) + (" ⚠" if beyond else "")]
        for t in settings.cache_types:
            row.append(
                nbytes(
                    mem.kv_cache(
                        shape, n_ctx, t, t, swa_full=False, n_ubatch=settings.n_ubatch
                    ).bytes
                )
                if _kv_ok(shape, t)
                else "n/a"
            )
        row.append(
            nbytes(
                mem.kv_cache(
                    shape,
                    n_ctx,
                    "f16",
                    "f16",
                    swa_full=True,
                    n_ubatch=settings.n_ubatch,
                ).bytes
            )
            if shape.n_swa
            else "same"
        )
        rows.append(row)
    out += [table(headers, rows, ["r"] * len(headers)), ""]
    if beyond_any:
        out += [
            admonition(
                "warning",
                "Beyond the trained context",
                f"⚠ marks contexts above the model's training length ({num(shape.n_ctx_train, 0)} tokens). "
                "The memory is what llama.cpp would allocate; whether the model still answers well that far "
                "(RoPE scaling, quality) is a separate question this plan does not answer.",
            ),
            "",
        ]
    # fits
    out += ["### What fits where", ""]
    out.append(
        f"Predicted totals with a {num(settings.headroom * 100, 0)}% headroom (fits when the total is at most "
        f"{num((1 - settings.headroom) * 100, 0)}% of the memory). **Host RAM**: weights, repacked copies, KV "
        "cache, tokenizer tables, the compute pages a full micro-batch touches"
        + (
            f" and the measured process before load ({nbytes(baseline_rss)}, median of this host's runs)"
            if baseline_rss
            else ""
        )
        + (f", against {code(host_id)}'s {nbytes(host_memory)}" if host_memory else "")
        + ". **GPU**: all layers offloaded, the reserved compute buffer"
        + (
            f", and a runtime overhead of {num(settings.gpu_runtime_overhead_mib, 0)} MiB ("
            + cell(settings.gpu_runtime_overhead_source)
            + ")"
            if settings.gpu_runtime_overhead_mib
            else " (no CUDA context overhead included: "
            + cell(settings.gpu_runtime_overhead_source)
            + ")"
        )
        + ". All figures "
        + PROJECTED_BADGE
        + "."
    )
    out.append("")
    fits = mem.fits_rows(shape, settings, host_memory, baseline_rss)
    cards = settings.cards
    headers = ["context", "cache", "KV", "host RAM"] + [
        f"{cell(c.name)}<br><small>{cell(c.unit_text)}</small>" for c in cards
    ]
    rows = []
    for r in fits:
        ctx = num(r["n_ctx"], 0) + (
            " ⚠ beyond training" if r.get("beyond_training") else ""
        )
        if r["error"]:
            rows.append(
                [ctx, code(r["cache_type"]), cell(r["error"]), "—"] + ["—"] * len(cards)
            )
            continue
        host = nbytes(r["cpu"].total) + (
            " ✓" if r["host_fit"] else " ✗" if r["host_fit"] is False else ""
        )
        gpu_cells = [("✓" if ok else "✗") for ok in r["gpu_fit"].values()]
        gpu_cells[0] = f"{nbytes(r['gpu'].total)} " + gpu_cells[0]
        rows.append(
            [ctx, code(r["cache_type"]), nbytes(r["kv_bytes"]), host] + gpu_cells
        )
    out += [table(headers, rows, ["r", "l", "r", "r"] + ["c"] * len(cards)), ""]
    out.append(
        "The first GPU column also gives the predicted VRAM total. Units: every total is in GiB (2^30 bytes). "
        + cell(mem.GPU_UNITS_NOTE)
    )
    out.append("")
    out += [split_fits_table(shape, settings, fits), ""]
    out += [sweet_spots_table(shape, doc, settings, gpu_checks or []), ""]
    # LoRA
    out += ["### LoRA adapters", ""]
    dims = mem.lora_module_dims(shape)
    out.append(
        "Seed formula, with this model's projection shapes: `r × (in + out) × layers × bytes` per module "
        "(A is r × in, B is out × r), f16 (2 bytes per value). Shapes (in → out): "
        + ", ".join(
            f"{code(k)} {num(v[0], 0)} → {num(v[1], 0)}" for k, v in dims.items()
        )
        + "."
    )
    out.append("")
    headers = ["targets"] + [f"r = {r}" for r in settings.lora_ranks]
    rows = []
    for name, mods in settings.lora_targets.items():
        rows.append(
            [cell(name)]
            + [
                nbytes(mem.lora_bytes(shape, r, tuple(mods)))
                for r in settings.lora_ranks
            ]
        )
    out += [table(headers, rows, ["l"] + ["r"] * len(settings.lora_ranks)), ""]
    return "\n".join(out)


def _gpu_check_text(checks: list[dict[str, Any]]) -> str:
    """What the VRAM plan behind the sweet spots gave against this file's runs on a real GPU."""
    if not checks:
        return (
            "Checked on a GPU: no GPU run of this file is committed, so these sweet spots are planned only "
            "(the plan's accuracy on the files that did run on a GPU is under Predicted against measured)."
        )
    worst = max(checks, key=lambda c: abs(c["error"]))
    return (
        f"Checked on a GPU: the same VRAM plan against {num(len(checks), 0)} measured run(s) of this file "
        f"with every layer offloaded (peak VRAM, e.g. {link(worst['id'][:12], run_link(worst['id']))} on "
        f"{code(worst['host_id'])}): the largest error {100 * worst['error']:+.1f}% "
        f"(planned {nbytes(worst['predicted'])}, measured {nbytes(worst['measured'])})."
    )


def sweet_spots_table(
    shape: mem.ModelShape,
    doc: RunRecord,
    settings: mem.PlannerSettings,
    gpu_checks: list[dict[str, Any]] | None = None,
) -> str:
    """Seed 002's Domestic GPU Sweet Spots, per card, from the same VRAM plan (pipelines.memory.sweet_spots)."""
    sp = settings.sweet_spot
    spots = mem.sweet_spots(shape, settings)
    rows = []
    for s in spots:
        base = f"{cell(doc.model_name)} ({cell(doc.quantization)})"
        if not s.fits:
            rows.append(
                [
                    cell(s.card.name),
                    base,
                    f"✗ {nbytes(s.base_bytes)} at one sequence",
                    "—",
                    "—",
                    "—",
                ]
            )
            continue
        ctx = (
            f"{num(s.max_context, 0)} tokens<br><small>KV {nbytes(s.max_context_kv)}</small>"
            if s.max_context
            else f"none of {cell(', '.join(str(c) for c in settings.contexts))}"
        )
        batch = f"{num(s.batch, 0)}{' (the cap)' if s.capped_batch else ''}<br><small>{nbytes(s.batch_total)}</small>"
        adapters = f"{num(s.adapters, 0)}{' (the cap)' if s.capped_adapters else ''}"
        rows.append(
            [cell(s.card.name), base, f"✓ {nbytes(s.base_bytes)}", adapters, ctx, batch]
        )
    intro = (
        "The most of each that fits beside the base model on each card, by the VRAM plan above "
        f"(all layers offloaded, {code(sp.cache_type)} cache, {num(settings.headroom * 100, 0)}% headroom), "
        "each at the others' minimum: **adapters** of rank "
        f"{num(sp.adapter_rank, 0)} on {cell(', '.join(sp.adapter_targets))} "
        f"(f16, {nbytes(mem.lora_bytes(shape, sp.adapter_rank, tuple(sp.adapter_targets)))} each) beside one "
        f"sequence of {num(sp.context, 0)} tokens; the largest **context** of the planned ones at one "
        f"sequence; the **batch**: parallel sequences of {num(sp.context, 0)} tokens each (llama-server "
        f"{code('-np')}, a cache stream each; at most {num(sp.max_batch, 0)} tried), with its total. "
        "Settings: data/memory_planner.yaml, sweet_spot. All figures "
        + PROJECTED_BADGE
        + "."
    )
    return "\n".join(
        [
            "### Sweet spots per card",
            "",
            intro,
            "",
            table(
                ["card", "base", "base fits", "adapters", "KV (context)", "batch"],
                rows,
                ["l", "l", "r", "r", "r", "r"],
            ),
            "",
            _gpu_check_text(gpu_checks or []),
        ]
    )


def split_fits_table(
    shape: mem.ModelShape, settings: mem.PlannerSettings, fits: list[dict]
) -> str:
    """What fits on 2x / 4x / 8x of each card: the fewest alike cards a layer split needs (issue 29)."""
    cards = settings.cards
    counts = "/".join(f"{n}×" for n in mem.SPLIT_CARD_COUNTS)
    rows = []
    for r in fits:
        if r["error"]:
            continue
        cells = []
        for c in cards:
            n = mem.cards_needed(shape, r["n_ctx"], r["cache_type"], c.bytes, settings)
            cells.append(f"{n}×" if n else f"> {mem.SPLIT_CARD_COUNTS[-1]}")
        rows.append([num(r["n_ctx"], 0), code(r["cache_type"])] + cells)
    if not rows:
        return ""
    return "\n".join(
        [
            f"**On several cards** ({counts} of one card, split by layer: llama.cpp's default over the visible "
            "GPUs): the fewest alike cards on which every card's share (its layers' weights and KV cache, its "
            "compute buffer, the runtime overhead each GPU holds) stays within the headroom "
            + PROJECTED_BADGE
            + ". The split itself is checked per GPU against measured runs above.",
            "",
            table(
                ["context", "cache"]
                + [
                    f"{cell(c.name)}<br><small>{cell(c.unit_text)}</small>"
                    for c in cards
                ],
                rows,
                ["r", "l"] + ["c"] * len(cards),
            ),
        ]
    )


def _kv_ok(shape: mem.ModelShape, cache_type: str) -> bool:
    block = mem.KV_TYPES[cache_type][0]
    return shape.head_k % block == 0 and shape.head_v % block == 0
