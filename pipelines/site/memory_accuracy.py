"""The memory planner's accuracy, on the Memory planner page: predicted against measured
peak RSS (host RAM), peak VRAM (one GPU) and per-GPU VRAM of split runs.
"""

from __future__ import annotations

from core.records.run import RunRecord
from pipelines import memory as mem
from pipelines.runs import latest_per_key
from pipelines.site.markdown import (
    MEASURED_BADGE,
    PROJECTED_BADGE,
    admonition,
    cell,
    code,
    fold,
    link,
    nbytes,
    no_data,
    num,
    pct,
    run_link,
    table,
)


def split_vram_vs_measured(runs: list[RunRecord], overhead: int | None) -> str:
    """Runs on a host of several visible GPUs: each GPU's predicted share beside its measured peak."""
    if overhead is None:
        return ""
    latest = latest_per_key(runs)
    preds = [p for p in mem.split_predictions(latest, overhead) if len(p["gpus"]) > 1]
    if not preds:
        return ""
    rows = []
    checked = [g for p in preds for g in p["gpus"] if g["within_10pct"] is not None]
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"], p["split_mode"])):
        for g in p["gpus"]:
            rows.append(
                [
                    link(p["id"], run_link(p["id"])),
                    code(p["host_id"]),
                    cell(p["model"]),
                    code(p["test_name"]),
                    code(p["split_mode"]),
                    f"GPU{g['index']}"
                    + (
                        f" <small>{cell(g['pci_bus_id'])}</small>"
                        if g["pci_bus_id"]
                        else ""
                    ),
                    "idle: context only, not predicted"
                    if g["idle"]
                    else nbytes(g["predicted"]),
                    f"{nbytes(g['measured'])} {MEASURED_BADGE}",
                    "—" if g["error"] is None else pct(g["error"]),
                ]
            )
    within = sum(1 for g in checked if g["within_10pct"])
    comm = sorted(
        {
            (nbytes(p["comm_overhead"]), p["comm_runs"])
            for p in preds
            if p.get("comm_overhead") is not None
        }
    )
    comm_note = (
        " A tensor split also holds its all-reduce communicators (NCCL) on each GPU, which no model "
        "fact tells: each tensor-split run is predicted with the median residual of the *other* "
        "tensor-split runs ("
        + "; ".join(f"{b} from {n} run{'s' if n != 1 else ''}" for b, n in comm)
        + "), so no run predicts itself."
        if comm
        else ""
    )
    return "\n".join(
        [
            f"**Per GPU, a model over several GPUs** (issue 29): each visible GPU's share by the split the run "
            f"used (layer: whole layers and their KV cache per GPU, the output matrix and logits on the last; "
            f"tensor: every layer's weights and KV cache by the shares, a compute buffer on each GPU; "
            f"none: everything on one GPU) plus a runtime overhead of {nbytes(overhead)} per working GPU (the "
            f"one-GPU residual above), against that GPU's peak (NVML, per process).{comm_note} "
            f"{within} of {len(checked)} working GPUs within 10%.",
            "",
            table(
                [
                    "run",
                    "host",
                    "model",
                    "test",
                    "split",
                    "GPU",
                    "predicted",
                    "measured peak",
                    "error",
                ],
                rows,
                ["l", "l", "l", "l", "l", "l", "r", "r", "r"],
            ),
        ]
    )


SMALL_MISS_BYTES = (
    16 * 2**20
)  # a miss this small is a fixed Python-side cost, not a missing buffer


def other_backends_note(runs: list[RunRecord], gpu: bool = False) -> str:
    """How many measured runs of other backends the planner leaves out of its accuracy (it predicts
    llama.cpp's memory), by backend; "" when none."""
    other = mem.other_backends(runs, gpu=gpu)
    n = sum(other.values())
    if not n:
        return ""
    return (
        f"**{n} run{'s' if n != 1 else ''} of other backends not scored** ("
        + ", ".join(f"{cell(b)}: {num(k, 0)}" for b, k in other.items())
        + "): the planner predicts llama.cpp's buffers, so another runtime's memory is no test of it."
    )


def predicted_vs_measured(runs: list[RunRecord]) -> str:
    known = mem.facts_by_sha(runs)
    current = latest_per_key(runs)
    preds = [
        p for p in (mem.run_prediction(d, known) for d in current) if p is not None
    ]
    skipped = other_backends_note(current)
    if not preds:
        return no_data(
            "No CPU runs with a peak RSS yet", "Run `invoke bench` to measure one."
        ) + ("\n\n" + skipped if skipped else "")
    out = [
        "Every current CPU run: the planner's prediction for its exact settings (context, cache types, "
        "sliding-window cache, the largest batch the test decodes) against the peak RSS the run measured "
        "(the child process's VmHWM). llama.cpp's own report of its buffers (from the run's log) is shown beside.",
        "",
    ]
    rows = []
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"], p["created"])):
        rep = p["reported_mib"]
        reported = (
            "; ".join(
                f"{cell(k)} "
                + " + ".join(f"{num(v, 1)}" for v in rep[k].values())
                + " MiB"
                for k in ("model", "kv", "compute")
                if k in rep
            )
            or "—"
        )
        rows.append(
            [
                link(p["id"], run_link(p["id"])),
                cell(p["model"]),
                code(p["test_name"]),
                num(p["n_ctx"], 0),
                code(f"{p['type_k']}/{p['type_v']}"),
                f"{nbytes(p['predicted'])} {PROJECTED_BADGE}",
                f"{nbytes(p['measured'])} {MEASURED_BADGE}",
                pct(p["error"]),
                "yes" if p["within_10pct"] else "**no**",
                reported,
            ]
        )
    out += [
        fold(
            "Every current CPU run: predicted, measured peak RSS, error, llama.cpp's own report",
            table(
                [
                    "run",
                    "model",
                    "test",
                    "n_ctx",
                    "K/V",
                    "predicted",
                    "measured peak RSS",
                    "error",
                    "within 10%",
                    "llama.cpp reported",
                ],
                rows,
                ["l", "l", "l", "r", "l", "r", "r", "r", "l", "l"],
            ),
        ),
        "",
    ]
    ok = sum(p["within_10pct"] for p in preds)
    out.append(
        f"**{ok} of {len(preds)}** predictions are within 10% of the measured peak RSS."
    )
    out.append("")
    if skipped:
        out += [skipped, ""]
    out += ["#### Accuracy per run type", ""]
    trows = []
    for rt in sorted({p["run_type"] for p in preds}):
        ps_ = [p for p in preds if p["run_type"] == rt]
        errs = [p["error"] for p in ps_]
        miss_mib = [(p["measured"] - p["predicted"]) / 2**20 for p in ps_]
        trows.append(
            [
                cell(rt),
                num(len(ps_), 0),
                f"{pct(min(errs))} … {pct(max(errs))}",
                f"{num(sum(p['within_10pct'] for p in ps_), 0)} of {num(len(ps_), 0)}",
                f"{num(min(miss_mib), 1)} … {num(max(miss_mib), 1)} MiB",
            ]
        )
    out += [
        table(
            [
                "run type",
                "runs",
                "error range",
                "within 10%",
                "unpredicted (measured − predicted)",
            ],
            trows,
            ["l", "r", "r", "r", "r"],
        ),
        "",
    ]
    # breakdown of the newest one of the first model
    p = max(preds, key=lambda p: p["created"])
    out += [f"#### Where the memory of {link(p['id'], run_link(p['id']))} goes", ""]
    rows = [
        [cell(k), nbytes(v), num(v / p["predicted"] * 100, 1) + "%"]
        for k, v in p["plan"].components.items()
    ]
    rows.append(["**predicted total**", f"**{nbytes(p['predicted'])}**", "100%"])
    rows.append(
        [
            "measured peak RSS",
            nbytes(p["measured"]),
            num(p["measured"] / p["predicted"] * 100, 1) + "%",
        ]
    )
    out += [table(["component", "bytes", "of predicted"], rows, ["l", "r", "r"]), ""]
    for note in p["plan"].notes:
        out.append(admonition("note", "Why the prediction can miss", cell(note)))
    bad = [x for x in preds if not x["within_10pct"]]
    small = [x for x in bad if abs(x["measured"] - x["predicted"]) <= SMALL_MISS_BYTES]
    if small:
        chat_gen = [
            (p["measured"] - p["predicted"]) / 2**20
            for p in preds
            if p["run_type"] in ("chat", "generate") and p["within_10pct"]
        ]
        rate = [
            (p["measured"] - p["predicted"]) / 2**20
            for p in preds
            if p["run_type"] == "rate"
        ]
        med = lambda v: sorted(v)[len(v) // 2] if v else None  # noqa: E731
        out.append(
            admonition(
                "info",
                "Explained: small models, a fixed unmodelled cost",
                f"{len(small)} run(s) miss by more than 10% but by at most {num(SMALL_MISS_BYTES / 2**20, 0)} MiB: "
                + ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({cell(x['model'])}, {pct(x['error'])}, "
                    f"{num((x['measured'] - x['predicted']) / 2**20, 1)} MiB of {nbytes(x['measured'])})"
                    for x in small
                )
                + ". Their totals are small (a model of a few MiB), so a fixed cost the plan does not model weighs "
                "more than 10%: the chat and generate paths build Python-side state (the Jinja chat template, the "
                "sampler and its per-token arrays) that rate tests do not; on this data the median unpredicted "
                f"memory is {num(med(chat_gen), 1)} MiB for chat and generate runs against {num(med(rate), 1)} MiB "
                "for rate tests.",
            )
        )
        bad = [x for x in bad if x not in small]
    amx = [x for x in bad if ((x["reported_mib"] or {}).get("model") or {}).get("AMX")]
    if amx:
        parts = []
        for x in amx:
            a = x["reported_mib"]["model"]["AMX"] * 2**20
            with_amx = (
                x["predicted"]
                + a
                - x["plan"].components.get("repacked weights", 0)
                - x["measured"]
            ) / x["measured"]
            parts.append(
                f"{link(x['id'], run_link(x['id']))} ({pct(x['error'])}; with llama.cpp's reported AMX buffer of "
                f"{nbytes(a)} in place of the repacked copies: {pct(with_amx)})"
            )
        out.append(
            admonition(
                "info",
                "Explained: AMX weight buffers",
                "On an Intel AMX host llama.cpp copies the weights into AMX-layout buffers (its log reports "
                "them), beside the mapped file; the planner does not model that layout. "
                + ", ".join(parts)
                + ".",
            )
        )
        bad = [x for x in bad if x not in amx]
    drafted = [x for x in bad if x["run_type"].endswith("draft model")]
    if drafted:
        out.append(
            admonition(
                "info",
                "Partly explained: the context of a second model",
                ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({pct(x['error'])}, "
                    f"{num((x['measured'] - x['predicted']) / 2**20, 1)} MiB unpredicted)"
                    for x in drafted
                )
                + ": the plan includes the draft model's weights, KV cache, buffers and tokenizer, but counts each "
                "context's compute buffer only as the pages one batch touches (est.). llama.cpp reserves a full "
                "compute buffer per context (the target's log reports "
                + ", ".join(
                    f"{num(sum((x['reported_mib'].get('compute') or {}).values()), 1)} MiB"
                    for x in drafted
                )
                + "); the draft's is not in the log excerpt read, and the unpredicted memory fits within it. A likely "
                "cause, not a measured one.",
            )
        )
        bad = [x for x in bad if x not in drafted]
    for x in bad:
        if x["incomplete"]:
            out.append(
                admonition(
                    "warning",
                    "Incomplete prediction",
                    f"{link(x['id'], run_link(x['id']))}: "
                    + "; ".join(cell(m) for m in x["incomplete"]),
                )
            )
    if bad:
        out.append(
            admonition(
                "warning",
                "Predictions off by more than 10%",
                "The prediction counts the buffers llama.cpp allocates and the process before "
                "the load; what it cannot see: Python objects a test builds (the chat path's "
                "per-token arrays, logits kept for speculative decoding with `logits_all`), the "
                "allocator's fragmentation, pages the kernel has not mapped yet for a file read "
                "with mmap on a memory-starved host, and libraries a backend loads lazily. "
                "Off: "
                + ", ".join(
                    f"{link(x['id'], run_link(x['id']))} ({pct(x['error'])})"
                    for x in bad
                ),
            )
        )
    return "\n".join(out)


def vram_vs_measured(runs: list[RunRecord]) -> str:
    current = latest_per_key(runs)
    preds = [p for p in (mem.vram_prediction(d) for d in current) if p is not None]
    skipped = other_backends_note(current, gpu=True)
    if not preds:
        return "No run with every layer on a GPU and a measured peak VRAM yet." + (
            "\n\n" + skipped if skipped else ""
        )
    out = [
        "Runs with every layer on a GPU: weights (less the token embedding, which llama.cpp keeps on the CPU), "
        "KV cache and the reserved compute buffer, predicted "
        + PROJECTED_BADGE
        + " without any runtime overhead, "
        "against the process's peak VRAM (NVML). The residual is what the CUDA runtime itself holds (context, "
        "cuBLAS workspace, allocator pools).",
        "",
    ]
    rows = []
    for p in sorted(preds, key=lambda p: (p["model"], p["test_name"])):
        rows.append(
            [
                link(p["id"], run_link(p["id"])),
                code(p["host_id"]),
                cell(p["model"]),
                code(p["test_name"]),
                nbytes(p["predicted"]),
                f"{nbytes(p['measured'])} {MEASURED_BADGE}",
                nbytes(p["residual"]),
                "yes" if p["exact_roles"] else "no: embedding counted on the GPU",
            ]
        )
    out += [
        fold(
            "Every run with all layers on a GPU: predicted, measured peak VRAM, residual",
            table(
                [
                    "run",
                    "host",
                    "model",
                    "test",
                    "predicted (no overhead)",
                    "measured peak VRAM",
                    "residual",
                    "per-role tensor bytes in the artifact",
                ],
                rows,
                ["l", "l", "l", "l", "r", "r", "r", "l"],
            ),
        ),
        "",
    ]
    if skipped:
        out += [skipped, ""]
    return "\n".join(out)
