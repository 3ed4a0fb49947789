"""The Optimization page: one section per track, sweep charts, best configurations, failures.

Built from ``pipelines.optimization`` (artifacts alone). Every value from an artifact goes
through ``cell()``/``num()``/``code()`` or ``charts.embed()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import altair as alt
import pandas as pd

from core import degeneration
from core.metrics import METRICS
from core.records.perplexity import PerplexityRecord
from core.records.quality import QualityRecord
from core.records.run import RunRecord
from pipelines import optimization as opt
from pipelines.site import chart_shapes, charts, figures
from pipelines.site.markdown import (
    SYNTHETIC_BADGE,
    admonition,
    as_text,
    cell,
    code,
    fold,
    link,
    num,
    pre,
    run_link,
    table,
)

# The command lines that reproduce a run ({"server", "bench", "python", "notes"}: llama.cpp's tools and
# llama-cpp-python's arguments), or None where its backend prints none. They are the backend's knowledge
# (runtime.backends.command_lines); a pipeline never imports a backend (import-linter's "stages" contract), so
# the site's composition root (docs/macros.py) hands them in (``hand``) and the page prints what it was handed.
CommandLines = Callable[[RunRecord], dict[str, str] | None]
_HANDED: list[CommandLines | None] = [None]


def hand(command_lines: CommandLines | None) -> None:
    """What the run stage says of a run's command lines, handed in by the site's composition root."""
    _HANDED[0] = command_lines


def handed() -> CommandLines | None:
    """The command lines the site's composition root handed in (None: none, no page prints any)."""
    return _HANDED[0]


TRACK_INTRO = {
    "speculative": (
        "A draft proposes K tokens (`draft_max`), the target verifies them in one batch and keeps the "
        "longest agreeing prefix. **Prompt lookup** drafts by finding the last n-gram of the context "
        "earlier in the context (`lookup_ngram_max` = the longest n-gram tried): it shines when the answer "
        "repeats the prompt (editing, summarising a given text) and has nothing to offer in free generation. "
        "An external **draft model** must share the target's vocabulary. Acceptance = drafted tokens the "
        "target accepted / drafted tokens it verified. Greedy speculation must reproduce the baseline's text "
        "token for token; where it does not, that is reported below as a finding."
    ),
    "experts": (
        "`n_expert_used` overrides the GGUF key `<architecture>.expert_used_count` (llama.cpp "
        "`--override-kv`): fewer experts per token, less compute and memory traffic, a different model. "
        "The count llama.cpp really used is read back from its log (`n_expert_used = N`). Each point's "
        "greedy text is compared with the baseline's: where it first diverges, how many token positions "
        'agree, and whether the degeneration detector calls it garbage (the seed\'s "MoE2: GARBAGE").'
    ),
    "threads": (
        "Threads used for generation (and prompt processing unless set apart); the "
        "x axis is what llama.cpp reports it used."
    ),
    "depth": (
        "Generation rate after N tokens already in the context (`tg…@dN`, prefilled "
        "outside the timer): the KV cache read per token grows with N."
    ),
    "settings": "Batch sizes, flash attention and KV-cache types, one configuration per point.",
    "moe-speculation": "",
    "adapters": "",
}
STATUS_COLORS = {
    "baseline": charts.MUTED,
    "identical": charts.GOOD,
    "diverged": charts.WARN,
    "degenerate": charts.BAD,
}
# A swept setting on a chart's x axis: what it is and its unit (charts.axis_title).
SETTING_AXES = {
    "n_threads": ("threads", "count"),
    "n_threads_batch": ("batch threads", "count"),
    "n_batch": ("logical batch n_batch", "tokens"),
    "n_ubatch": ("physical batch n_ubatch", "tokens"),
    "n_ctx": ("context n_ctx", "tokens"),
    "n_depth": ("context depth", "tokens"),
    "n_gpu_layers": ("layers on the GPU", "layers"),
    "draft_max": ("draft length K", "tokens"),
    "lookup_ngram_max": ("largest n-gram looked up", "tokens"),
    "n_expert_used": ("experts per token", "count"),
    "retries": ("automatic retries", "count"),
    "fault_every": ("a fault every k-th request", "requests"),
}


def setting_axis(key: str) -> tuple[str, str]:
    """(label, unit) of a swept setting's axis; a setting not listed is labelled by its name, valued as set."""
    return SETTING_AXES.get(key, (key, "value as set"))


def _model(doc: RunRecord) -> str:
    return cell(doc.model_name) + (" " + SYNTHETIC_BADGE if doc.synthetic else "")


def _ratio(p: opt.Point) -> str:
    c = p.comparison
    if p.is_baseline:
        return "baseline"
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f" ({num(c['ci95_low'], 2)}–{num(c['ci95_high'], 2)})"
        if c.get("ci95_low") is not None
        else ""
    )
    return f"{num(c['ratio'], 2)}×{ci}"


def _rate(p: opt.Point) -> str:
    if not p.ok:
        return "—"
    m = METRICS.get(p.metric or "")
    dec = m.decimals if m else 2
    sd = f" ± {num(p.stddev, dec)}" if p.stddev is not None else ""
    return f"{num(p.mean, dec)}{sd}"


def _ci(p: opt.Point) -> str:
    lo, hi = p.ci95
    return "—" if lo is None or hi is None else f"{num(lo, 2)} – {num(hi, 2)}"


def _precision(p: opt.Point) -> str:
    """Whether the point reached its precision target, and why repetition stopped if not."""
    prec = p.doc.precision if p.ok else None
    if not prec:
        return "— <small>(fixed count)</small>" if p.ok else "—"
    if prec.target_rel is None:
        return "<small>fixed count</small>"
    hw = prec.half_width_rel
    got = f"±{num(hw * 100, 1)}%" if hw is not None else "—"
    if prec.met:
        return f"met ({got})"
    why = {"max_repetitions": "count ceiling", "max_time_s": "time ceiling"}.get(
        prec.stop_reason, cell(prec.stop_reason)
    )
    return f"**not met** ({got}; {why})"


def _lossless(p: opt.Point) -> str:
    if p.is_baseline or p.lossless is None:
        return "—"
    ll = p.lossless
    text = (
        "identical"
        if ll["identical"]
        else f"differs at token {num(ll['first_diff'], 0)}; {num(100 * ll['agreement'], 0)}% of positions agree"
    )
    if (p.requested.get("speculative") or "none") == "none":
        return text  # a setting that changes the text on purpose: its divergence, no lossless verdict
    return figures.lossless(p.id, ll["identical"], text)


def _degenerate(p: opt.Point) -> str:
    d = p.degeneration
    if d is None:
        return "—"
    if not d["degenerate"]:
        return "no"
    return "**degenerate**: " + cell("; ".join(d["reasons"][:2]))


def _status(p: opt.Point) -> str:
    if not p.ok:
        msg = str(p.doc.error_message or "")
        short = (
            msg
            if len(msg) <= 90
            else msg[:90].rsplit(" ", 1)[0] + " … (see Failed approaches)"
        )
        return f"**failed ({cell(p.doc.error_kind)})**: {cell(short)}"
    return (
        cell(p.verdict)
        if p.verdict and not p.is_baseline
        else ("baseline" if p.is_baseline else "—")
    )


def _x_value(p: opt.Point, key: str) -> Any:
    """The value of a swept setting as it ran (the effective value when the request was null)."""
    eff = p.doc.reported
    if key == "n_expert_used":
        return (
            eff.get("n_expert_used")
            or p.requested.get("n_expert_used")
            or p.doc.gguf.get("expert_used_count")
        )
    v = p.requested.get(key)
    return eff.get(key) if v is None and key in eff else v


# -- charts --------------------------------------------------------------------------------
def _baseline_frame(value: float | None) -> pd.DataFrame | None:
    return None if value is None else pd.DataFrame([{"baseline": value}])


def _baseline_rule(data: Any, metric: Any) -> alt.Chart | None:
    if data is None:
        return None
    return (
        alt.Chart(data)
        .mark_rule(strokeDash=[5, 4], color=charts.MUTED)
        .encode(
            y=charts.qy("baseline", metric),
            tooltip=[alt.Tooltip("baseline:Q", format=".2f", title="baseline")],
        )
    )


def speculative_chart(points: list[opt.Point]) -> dict[str, Any] | None:
    """K against the rate (CI95 band, baseline dashed) beside K against the acceptance rate."""
    rows = []
    for p in points:
        if not p.ok or p.is_baseline or p.mean is None:
            continue
        req = p.requested
        series = (
            f"n-gram ≤ {req.get('lookup_ngram_max')}"
            if req.get("speculative") == "prompt_lookup"
            else f"draft {req.get('draft_model')}"
        )
        rows.append(
            {
                "K": req.get("draft_max"),
                "mean": p.mean,
                "ci95_low": p.ci95[0] if p.ci95[0] is not None else p.mean,
                "ci95_high": p.ci95[1] if p.ci95[1] is not None else p.mean,
                "acceptance": p.acceptance,
                "series": series,
                "lossless": _lossless(p),
                "id": p.id,
            }
        )
    if not rows:
        return None
    baseline = next((p for p in points if p.is_baseline and p.ok), None)
    return speculative_shape(
        (pd.DataFrame(rows), _baseline_frame(baseline.mean if baseline else None)),
        METRICS[points[0].metric or "generation_tps"],
    )


@chart_shapes.shape
def speculative_shape(df: Any, baseline: Any, metric: Any) -> alt.HConcatChart:
    """speculative_chart's shape: ``df`` its points, ``baseline`` the baseline's rate (or None)."""
    base = alt.Chart(df).encode(
        x=charts.qx(
            "K",
            "K, drafted per step",
            "tokens",
            axis=alt.Axis(tickMinStep=1, format="d"),
        ),
        color=alt.Color("series:N", title=None),
    )
    rate = base.mark_area(opacity=0.15).encode(
        y=charts.qy("ci95_low", metric), y2=alt.Y2("ci95_high:Q")
    ) + base.mark_line(point=True).encode(
        y=charts.qy("mean", metric),
        tooltip=[
            alt.Tooltip("K:Q"),
            alt.Tooltip("mean:Q", format=".2f"),
            alt.Tooltip("series:N"),
            alt.Tooltip("lossless:N"),
            alt.Tooltip("id:N"),
        ],
    )
    rule = _baseline_rule(baseline, metric)
    if rule is not None:
        rate = rate + rule
    acc = base.mark_line(point=True, strokeDash=[2, 2]).encode(
        y=charts.qy(
            "acceptance", "draft acceptance", "%", scale=alt.Scale(domain=[0, 100])
        ),
        tooltip=[
            alt.Tooltip("K:Q"),
            alt.Tooltip("acceptance:Q", format=".1f"),
            alt.Tooltip("series:N"),
        ],
    )
    return alt.hconcat(
        rate.properties(width=320, height=240, title="rate (dashed: baseline)"),
        acc.properties(width=220, height=240, title="acceptance"),
    )


def experts_chart(points: list[opt.Point]) -> dict[str, Any] | None:
    """Experts per token against the rate, each point marked identical / diverged / degenerate."""
    rows = []
    for p in points:
        if not p.ok or p.mean is None:
            continue
        if p.is_baseline:
            status = "baseline"
        elif p.degeneration and p.degeneration["degenerate"]:
            status = "degenerate"
        elif p.lossless is not None and not p.lossless["identical"]:
            status = "diverged"
        else:
            status = "identical"
        rows.append(
            {
                "experts": _x_value(p, "n_expert_used"),
                "mean": p.mean,
                "ci95_low": p.ci95[0] if p.ci95[0] is not None else p.mean,
                "ci95_high": p.ci95[1] if p.ci95[1] is not None else p.mean,
                "status": status,
                "divergence": _lossless(p),
                "id": p.id,
            }
        )
    if not rows:
        return None
    return experts_shape(
        (pd.DataFrame(rows),), METRICS[points[0].metric or "tokens_per_second"]
    )


@chart_shapes.shape
def experts_shape(df: Any, metric: Any) -> alt.LayerChart:
    """experts_chart's shape."""
    base = alt.Chart(df).encode(
        x=charts.qx(
            "experts",
            *setting_axis("n_expert_used"),
            axis=alt.Axis(tickMinStep=1, format="d"),
        )
    )
    line = base.mark_line(color=charts.QUIET).encode(y=charts.qy("mean", metric))
    err = base.mark_errorbar(color=charts.MUTED).encode(
        y=charts.qy("ci95_low", metric), y2=alt.Y2("ci95_high:Q")
    )
    domain = list(STATUS_COLORS)
    dots = base.mark_point(size=90, filled=True).encode(
        y=charts.qy("mean", metric),
        color=alt.Color(
            "status:N",
            scale=alt.Scale(domain=domain, range=list(STATUS_COLORS.values())),
            title="output vs baseline",
        ),
        shape=alt.Shape(
            "status:N", scale=alt.Scale(domain=domain), title="output vs baseline"
        ),
        tooltip=[
            alt.Tooltip("experts:Q"),
            alt.Tooltip("mean:Q", format=".2f"),
            alt.Tooltip("status:N"),
            alt.Tooltip("divergence:N"),
            alt.Tooltip("id:N"),
        ],
    )
    return (line + err + dots).properties(width="container", height=260)


def sweep_line_chart(points: list[opt.Point], key: str) -> dict[str, Any] | None:
    """A numeric setting (or the context depth) against the rate, one line per series."""
    rows = []
    for p in points:
        if not p.ok or p.mean is None:
            continue
        x = p.doc.test_param("n_depth", 0) if key == "n_depth" else _x_value(p, key)
        if not isinstance(x, (int, float)):
            continue
        others = {k: v for k, v in p.swept.items() if k != key}
        series = (
            p.doc.test_name
            if key != "n_depth"
            else (opt._label(others) if others else "as configured")
        )
        if key == "n_depth":
            series = p.doc.test_name.split("@")[0] + (
                " · " + opt._label(others) if others else ""
            )
        rows.append(
            {
                key: x,
                "mean": p.mean,
                "stddev": p.stddev,
                "n": p.n,
                "ci95_low": p.ci95[0] if p.ci95[0] is not None else p.mean,
                "ci95_high": p.ci95[1] if p.ci95[1] is not None else p.mean,
                "series": series,
                "id": p.id,
            }
        )
    if not rows:
        return None
    metric = METRICS[points[0].metric or "tokens_per_second"]
    label, unit = setting_axis(key)
    return charts.line_sweep(
        pd.DataFrame(rows), key, metric, series="series", x_title=label, x_unit=unit
    )


def settings_chart(points: list[opt.Point]) -> dict[str, Any] | None:
    rows = [
        {
            "label": p.label,
            "mean": p.mean,
            "stddev": p.stddev,
            "n": p.n,
            "ci95_low": p.ci95[0] if p.ci95[0] is not None else p.mean,
            "ci95_high": p.ci95[1] if p.ci95[1] is not None else p.mean,
            "id": p.id,
        }
        for p in points
        if p.ok and p.mean is not None
    ]
    if not rows:
        return None
    return charts.bar_with_ci(
        pd.DataFrame(rows), METRICS[points[0].metric or "tokens_per_second"]
    )


def sweep_chart(sw: opt.Sweep, points: list[opt.Point]) -> dict[str, Any] | None:
    if sw.track == "speculative":
        return speculative_chart(points)
    if sw.track == "experts":
        return experts_chart(points)
    if sw.track == "threads":
        return sweep_line_chart(points, "n_threads")
    if sw.track == "depth":
        return sweep_line_chart(points, "n_depth")
    numeric = [
        k
        for k in dict.fromkeys(k for p in points for k in p.swept)
        if all(
            isinstance(p.swept.get(k), (int, float))
            and not isinstance(p.swept.get(k), bool)
            for p in points
            if k in p.swept
        )
    ]
    if numeric:
        return sweep_line_chart(points, numeric[0])
    return settings_chart(points)


# -- tables --------------------------------------------------------------------------------
def sweep_table(sw: opt.Sweep, points: list[opt.Point]) -> str:
    m = METRICS.get(points[0].metric or "")
    unit = f"{cell(m.label)} ({cell(m.unit)})" if m else "rate"
    headers = [
        "model",
        "point",
        unit,
        "n",
        "CI95 of mean",
        "±2% target",
        "speedup (CI95)",
        "verdict",
    ]
    align = ["l", "l", "r", "r", "r", "l", "r", "l"]
    spec = sw.track == "speculative"
    experts = sw.track == "experts"
    texts = any(p.lossless is not None or p.degeneration is not None for p in points)
    if spec:
        headers += ["acceptance (%)"]
        align += ["r"]
    if experts:
        headers += ["experts (llama.cpp log)"]
        align += ["r"]
    if texts:
        headers += ["greedy text vs baseline", "degenerate"]
        align += ["l", "l"]
    headers += ["source"]
    align += ["l"]
    rows = []
    for p in points:
        r = [
            _model(p.doc),
            cell(p.label),
            _rate(p),
            num(p.n, 0) if p.ok else "—",
            _ci(p),
            _precision(p),
            _ratio(p),
            _status(p),
        ]
        if spec:
            r.append(num(p.acceptance, 1))
        if experts:
            r.append(num(p.doc.reported.get("n_expert_used"), 0))
        if texts:
            r += [_lossless(p), _degenerate(p)]
        r.append(link(p.id, run_link(p.id)))
        rows.append(r)
    return table(headers, rows, align)


def best_table(
    all_sweeps: list[opt.Sweep],
    quality_docs: list[QualityRecord] | None = None,
    command_lines: CommandLines | None = None,
) -> str:
    """The best point per model and test with the model's quality and its output check, then the settings
    that reproduce each one (``command_lines``: a point whose backend gives none has none)."""
    from pipelines.site import best_quality

    if quality_docs is None:
        quality_docs = _quality_docs()
    rows = []
    repro: list[str] = []
    for b in opt.best_per_model(all_sweeps):
        p: opt.Point | None = b["best"]
        model = cell(b["model"]) + (" " + SYNTHETIC_BADGE if b["synthetic"] else "")
        if p is None:
            base = b["baseline"]
            excluded = b["excluded"]
            why = (
                (
                    f"no acceptable point beat its baseline beyond noise ({num(b['candidates'], 0)} tried; "
                    f"{num(len(excluded), 0)} faster one(s) left out as failed approaches: "
                    + ", ".join(
                        f"{cell(x.label)} ({cell(', '.join(kinds))})"
                        for x, kinds in excluded
                    )
                    + ")"
                )
                if excluded
                else f"no point beat its baseline beyond noise ({num(b['candidates'], 0)} tried)"
            )
            rows.append(
                [
                    model,
                    code(b["test_name"]),
                    why,
                    _rate(base) if base else "—",
                    "—",
                    best_quality.quality_cell(b["model"], b["host_id"], quality_docs),
                    "—",
                    link(base.id, run_link(base.id)) if base else "—",
                ]
            )
            continue
        judged = (
            " <small>(text not judged: the baseline's is degenerate too)</small>"
            if opt.text_not_judged(p)
            else ""
        )
        rows.append(
            [
                model,
                code(b["test_name"]),
                cell(f"{p.sweep}: {p.label}") + judged,
                _rate(p),
                _ratio(p),
                best_quality.quality_cell(b["model"], b["host_id"], quality_docs),
                best_quality.output_check(p),
                link(p.id, run_link(p.id)),
            ]
        )
        rep = command_lines(p.doc) if command_lines else None
        if rep is None:
            continue
        lines = [f"# llama.cpp\n{rep['server']}"] + (
            [f"# measure it with llama-bench\n{rep['bench']}"] if "bench" in rep else []
        )
        lines.append(f"# llama-cpp-python\n{rep['python']}")
        repro += (
            [
                f"**{cell(b['model'])} · {code(b['test_name'])}** ({cell(p.sweep)}: {cell(p.label)})",
                "",
                pre("\n".join(lines)),
            ]
            + ([f"<small>{cell(rep['notes'])}</small>"] if rep.get("notes") else [])
            + [""]
        )
    out = table(
        [
            "model",
            "test",
            "best point",
            "rate",
            "speedup (CI95)",
            "quality (model)",
            "output check",
            "source",
        ],
        rows,
        ["l", "l", "l", "r", "r", "l", "l", "l"],
    )
    if repro:
        out += "\n\n### Reproducing settings\n\n" + fold(
            "The commands for each best point: llama.cpp, llama-bench, llama-cpp-python",
            "\n".join(repro),
        )
    return out


def failures_table(all_sweeps: list[opt.Sweep]) -> str:
    rows = []
    for f in opt.failures(all_sweeps):
        p: opt.Point = f["point"]
        what = f"**{cell(f['kind'])}**"
        if f["kind"] == "not lossless":
            what = figures.lossless(p.id, False, what)
        rows.append(
            [
                cell(opt.TRACK_TITLES[f["track"]]),
                cell(f["sweep"]),
                _model(p.doc),
                code(p.doc.test_name),
                cell(p.label),
                what,
                cell(f["reason"]),
                link(p.id, run_link(p.id)),
            ]
        )
    if not rows:
        return (
            "No failed approaches recorded: every point ran, none lost to its baseline, "
            "none changed or broke the text."
        )
    return table(
        ["track", "sweep", "model", "test", "point", "what", "reason", "source"], rows
    )


def _sweep_section(sw: opt.Sweep) -> list[str]:
    out = [f"### {cell(sw.name)} · {cell(sw.matrix)} on {code(sw.host_id)}", ""]
    if sw.synthetic:
        out += [
            SYNTHETIC_BADGE
            + " Synthetic models have random weights: their rates are real, their text is "
            "noise, so divergence and degeneration only show the mechanism.",
            "",
        ]
    if sw.track == "depth":  # one chart across the sweep's tests: depth is the x axis
        rate = [p for p in sw.points if p.doc.test_kind == "rate"]
        chart = sweep_line_chart(rate, "n_depth") if rate else None
        if chart is not None:
            out += [
                charts.embed(
                    chart,
                    caption="Rate after N tokens of context: mean with CI95, one line per "
                    "configuration; every point links to its artifact in the tables below.",
                ),
                "",
            ]
    for test in sw.tests:
        pts = [p for p in sw.points if p.doc.test_name == test]
        kinds = {p.doc.test_kind for p in pts}
        out += [
            f"#### {code(test)}"
            + (f" ({cell(', '.join(sorted(kinds)))})" if kinds else ""),
            "",
        ]
        chart = sweep_chart(sw, pts) if sw.track != "depth" else None
        if chart is not None:
            m = METRICS.get(pts[0].metric or "")
            out += [
                charts.embed(
                    chart,
                    caption=f"{as_text(m.label) if m else 'rate'}: mean with CI95; every point links "
                    "to its artifact in the table below.",
                ),
                "",
            ]
        out += [
            fold(
                "Every point: settings, rate with its CI95, against the baseline, output check, artifact",
                sweep_table(sw, pts),
            ),
            "",
        ]
    return out


def _elsewhere() -> dict[str, tuple[str, str]]:
    """Matrices whose sweeps another page sums up in a seed's table: matrix -> (page, table)."""
    from pipelines import slots, whatif

    out: dict[str, tuple[str, str]] = {}
    with contextlib.suppress(
        Exception
    ):  # an unreadable input is reported by its own page
        rates = whatif.load_whatif().error_rates
        if rates is not None and rates.matrix:
            out[rates.matrix] = ("whatif.md", "Retry plan per error rate")
    with contextlib.suppress(Exception):
        plan = slots.load_slots()
        if plan is not None:
            out[plan.matrix] = ("roles.md", "Parallel slots per role")
    return out


def _summarised_elsewhere(
    sw: opt.Sweep, elsewhere: dict[str, tuple[str, str]]
) -> list[str] | None:
    if sw.matrix not in elsewhere:
        return None
    page, title = elsewhere[sw.matrix]
    return [
        f"### {cell(sw.name)} · {cell(sw.matrix)} on {code(sw.host_id)}",
        "",
        f"Summed up on {link(title, page)} (the seed's table); every point here.",
        "",
    ]


def _points_fold(sw: opt.Sweep) -> str:
    """Every point of a sweep that a summary table already answers, test by test, in one fold."""
    parts = []
    for test in sw.tests:
        pts = [p for p in sw.points if p.doc.test_name == test]
        parts += [f"**{code(test)}**", "", sweep_table(sw, pts), ""]
    return fold(
        f"Every point of {sw.name}: settings, rate with its CI95, against the baseline, output check, artifact",
        "\n".join(parts),
    )


SWEEPS_SHOWN = 6  # sweeps shown in full per track (the newest)


def _quality_docs() -> list[QualityRecord]:
    from pipelines import dataset

    return list(dataset.load().quality)


def _perplexity_docs() -> list[PerplexityRecord]:
    from pipelines import dataset

    return list(dataset.load().perplexity)


def optimization_page(
    docs: list[RunRecord],
    quality_docs: list[QualityRecord] | None = None,
    command_lines: CommandLines | None = None,
) -> str:
    """The page's body; ``command_lines`` (see ``hand``) prints the settings that reproduce each best point."""
    from pipelines import speculation, tradeoffs
    from pipelines.site import (
        context_batch,
        flash_depth,
        rope,
        spec_k,
        temperature,
        tracks,
    )

    # whole configurations traded off are no sweep against a baseline: the Quality page's "Quality vs speed"
    docs = [d for d in docs if d.matrix_name != tradeoffs.MATRIX]
    all_sweeps = opt.sweeps(docs)
    if not all_sweeps:
        return admonition(
            "warning",
            "No sweeps yet",
            "Run `invoke bench --matrix optimization` to measure the optimization tracks on this host.",
        )
    # RoPE scaling (no speed-up sought), flash attention against depth (its own table, a row per depth) and
    # the sweeps another page sums up are left out of the best table
    elsewhere = _elsewhere()
    out = [
        "## Best configuration per model",
        "",
        "Per model and test: the point with the largest speedup whose CI95 lies above 1 (a win over its "
        "sweep's baseline) and that is no failed approach: nothing listed under "
        "[Failed approaches](#failed-approaches) below is picked (speculation must reproduce the baseline's text, "
        "no output may be degenerate where the baseline's is not, and an expert override must have been "
        "applied). Where a synthetic model's random weights make the baseline's text degenerate too, the text "
        "judges nothing: the pick is by speed and the table says the text was not "
        "judged. The flags reproduce it with llama.cpp's own tools; the arguments, "
        "with llama-cpp-python. Flash attention against context depth has its own table below, one "
        "row per depth.",
        "",
        best_table(
            [
                sw
                for sw in all_sweeps
                if not rope.is_rope_sweep(sw)
                and not flash_depth.is_flash_depth_sweep(sw)
                and sw.matrix not in elsewhere
            ],
            quality_docs,
            command_lines,
        ),
        "",
    ]
    out += rope.rope_section(all_sweeps, docs, _perplexity_docs())
    out += spec_k.k_section(all_sweeps, _points_fold)
    out += context_batch.context_section(docs)
    for track in opt.TRACKS:
        # RoPE-scaling sweeps have their own section above
        group = [
            sw for sw in all_sweeps if sw.track == track and not rope.is_rope_sweep(sw)
        ]
        if not group:
            continue
        if (
            track == "adapters"
        ):  # one section across the adapter sweeps: the adapter table, cost per adapter, memory
            out += tracks.adapters_section(docs)
            continue
        out += [f"## {cell(opt.TRACK_TITLES[track])}", "", TRACK_INTRO[track], ""]
        if len(group) > SWEEPS_SHOWN:
            # the newest sweeps in full; every sweep's best point is in the table above, every point in the runs browser
            newest = sorted(
                group,
                key=lambda sw: max(p.doc.created for p in sw.points),
                reverse=True,
            )
            out += [
                f"Showing the {SWEEPS_SHOWN} most recently measured of {len(group):,} sweeps of this track; every "
                "sweep's best point is in the table above and every point in the [runs browser](runs/index.md).",
                "",
            ]
            keep = {id(sw) for sw in newest[:SWEEPS_SHOWN]}
            group = [sw for sw in group if id(sw) in keep]
        for sw in group:
            if track == "moe-speculation":
                out += tracks.moe_spec_section(sw)
                continue
            if speculation.is_k_sweep(sw):
                continue  # summed up, with every point folded, in "Best K per target size"
            summary = (
                flash_depth.flash_depth_section(sw)
                if flash_depth.is_flash_depth_sweep(sw)
                else temperature.temperature_section(sw)
                if temperature.is_temperature_sweep(sw)
                else _summarised_elsewhere(sw, elsewhere)
            )
            if (
                summary is not None
            ):  # a seed's table sums the sweep up: its points in one fold, no chart per test
                out += summary + [_points_fold(sw), ""]
                continue
            out += _sweep_section(sw)
            if speculation.is_draft_sweep(sw):
                if quality_docs is None:
                    quality_docs = _quality_docs()
                out += tracks.draft_pareto_section(sw, quality_docs)
    t = degeneration.thresholds()
    out += [
        "## Failed approaches",
        "",
        "Points that failed (with the reason the backend gave, e.g. a draft of another vocabulary), lost to "
        "their baseline beyond noise, changed the greedy text under speculation, or produced degenerate text "
        "where their baseline did not "
        f"(degeneration detector v{cell(t['version'])}: empty output, more than "
        f"{num(100 * t['non_text_max_share'], 0)}% unprintable characters, or a repetition loop).",
        "",
        fold("Every failed approach, with its reason", failures_table(all_sweeps)),
        "",
    ]
    return "\n".join(out)
