"""The Quality page's backend parity section: does a backend change the model's answers?

Built from pipelines.parity (quality artifacts only). The answer comes first (one line per
backend against the reference), then the per-suite table, then every item whose output
differs, folded, with both outputs escaped.
"""

from __future__ import annotations

from typing import Any

from pipelines import parity as parity_mod
from pipelines.site.markdown import admonition, cell, code, fold, link, num, pre, table
from pipelines.site.quality_pages import quality_link

OUTPUT_SHOWN = (
    400  # characters of each output shown for a differing item (the artifact has all)
)
DIFFS_SHOWN = 40  # differing items listed per backend pair


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def _pp(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:+.1f} pp"


def _delta_cell(delta: float | None, ci: tuple[float | None, float | None]) -> str:
    lo, hi = ci
    if delta is None:
        return "—"
    return (
        f"{_pp(delta)}<br><small>CI95 {_pp(lo)} … {_pp(hi)}</small>"
        if lo is not None
        else _pp(delta)
    )


def _p(p: float | None) -> str:
    return "— (no discordant item)" if p is None else num(p, 3)


def _verdict(v: str) -> str:
    return f"**{cell(v)}**" if v in ("win", "loss") else cell(v)


def _sentence(o: parity_mod.Overall) -> str:
    same = (
        "identical"
        if o.identical_output == o.n
        else f"{o.identical_output} of {o.n} identical"
    )
    lo, hi = o.delta_ci
    verdicts = (
        "the same verdict on every item"
        if o.same_verdict == o.n
        else f"different verdicts on {o.n - o.same_verdict} items ({o.b} passed only through {o.reference}, "
        f"{o.c} only through {o.other})"
    )
    return (
        f"**{cell(o.other)}** against {cell(o.reference)} on {o.n} items of {o.suites} suite samples: "
        f"outputs {same}; {verdicts}; pass rate {_pct(o.ref_passed / o.n)} → {_pct(o.other_passed / o.n)} "
        f"({_pp(o.delta)}, CI95 {_pp(lo)} … {_pp(hi)}); exact McNemar p = {_p(o.p_value)}: "
        f"{_verdict(o.verdict)}."
    )


def _overall_table(rows: list[parity_mod.Overall]) -> str:
    out = []
    for o in rows:
        out.append(
            [
                cell(o.other),
                cell(o.reference),
                num(o.n, 0),
                f"{o.identical_output} ({_pct(o.identical_output / o.n)})",
                f"{o.same_verdict} ({_pct(o.same_verdict / o.n)})",
                _pct(o.ref_passed / o.n),
                _pct(o.other_passed / o.n),
                _delta_cell(o.delta, o.delta_ci),
                f"{o.b} / {o.c}",
                _p(o.p_value),
                _verdict(o.verdict),
            ]
        )
    return table(
        [
            "backend",
            "against",
            "items",
            "identical output",
            "same verdict",
            "reference pass",
            "backend pass",
            "Δ pass rate",
            "discordant (ref only / backend only)",
            "McNemar p",
            "verdict",
        ],
        out,
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "l"],
    )


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f} ms"


def _ms_delta_cell(delta: float | None, ci: tuple[float | None, float | None]) -> str:
    lo, hi = ci
    if delta is None:
        return "—"
    if lo is None or hi is None:
        return f"{delta:+,.0f} ms"
    return f"{delta:+,.0f} ms<br><small>CI95 {lo:+,.0f} … {hi:+,.0f}</small>"


SCORE_LATENCY_CAPTION = (
    "**Score and latency per backend, on the same items** (the seed's runtime vs vLLM matrix): the pass "
    "rate through each backend and through the reference, their paired difference (Agresti-Min CI95), "
    "and the mean end-to-end latency per item through each, with the mean paired difference "
    "(backend − reference, Student-t CI95). A latency includes whatever the backend generated: an "
    "item answered with more tokens takes longer."
)


SECOND_FAMILY_ABSENT = (
    "*Not measured: a second engine family's score.* Every backend above is llama.cpp. Hugging Face "
    "transformers was not installed on these CPU hosts (PyPI's PyTorch wheels bring gigabytes of CUDA "
    "libraries), and where it ran, on a lent GPU (`transformers serve`), it served random weights, "
    "whose answers score nothing: its speed beside llama-server on the same GPU is on "
    "[Serving](serving.md) and [Comparisons](comparisons.md)."
)


def _score_latency_table(
    rows: list[parity_mod.Overall], groups: list[parity_mod.Group]
) -> str:
    out = []
    for o in rows:
        ids = [p.other_id for g in groups for p in g.pairs if p.other == o.other]
        sources = " ".join(link(str(i + 1), quality_link(a)) for i, a in enumerate(ids))
        out.append(
            [
                cell(o.other),
                cell(o.reference),
                num(o.n, 0),
                _pct(o.other_passed / o.n),
                _pct(o.ref_passed / o.n),
                _delta_cell(o.delta, o.delta_ci),
                _ms(o.other_latency_ms),
                _ms(o.ref_latency_ms),
                _ms_delta_cell(o.latency_delta_ms, o.latency_delta_ci),
                sources,
            ]
        )
    return table(
        [
            "backend",
            "reference",
            "items",
            "backend score",
            "reference score",
            "Δ score",
            "backend latency",
            "reference latency",
            "Δ latency",
            "artifacts (one per suite sample)",
        ],
        out,
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "l"],
    )


def _suite_table(groups: list[parity_mod.Group]) -> str:
    rows = []
    for g in groups:
        for p in g.pairs:
            rows.append(
                [
                    code(g.label),
                    cell(p.other),
                    num(p.n, 0),
                    f"{p.identical_output}",
                    f"{p.same_verdict}",
                    link(
                        _pct(p.ref_passed / p.n if p.n else None),
                        quality_link(p.ref_id),
                    ),
                    link(
                        _pct(p.other_passed / p.n if p.n else None),
                        quality_link(p.other_id),
                    ),
                    _delta_cell(p.delta, p.delta_ci),
                    f"{p.b} / {p.c}",
                    _p(p.p_value),
                    _verdict(p.verdict),
                ]
            )
    return table(
        [
            "suite",
            "backend",
            "items",
            "identical output",
            "same verdict",
            "reference pass",
            "backend pass",
            "Δ pass rate",
            "ref only / backend only",
            "McNemar p",
            "verdict",
        ],
        rows,
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "l"],
    )


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_SHOWN else text[:OUTPUT_SHOWN] + " …"


def _diff_block(
    g: parity_mod.Group, p: parity_mod.Pair, d: parity_mod.ItemDiff
) -> list[str]:
    verdicts = (
        f"{'pass' if d.ref_passed else 'fail'} → {'pass' if d.other_passed else 'fail'}"
    )
    lines = [
        f"**{cell(d.id)}** ({code(g.label)}): {cell(verdicts)}; the outputs part at character {d.diverge_at}.",
        "",
    ]
    for who, text, err in (
        (p.reference, d.ref_output, d.ref_error),
        (p.other, d.other_output, d.other_error),
    ):
        lines.append(f"{cell(who)}" + (f" (error: {cell(err)})" if err else "") + ":")
        lines += ["", pre(_clip(text) or "(empty)"), ""]
    return lines


def _diffs(groups: list[parity_mod.Group]) -> list[str]:
    by_pair: dict[
        str, list[tuple[parity_mod.Group, parity_mod.Pair, parity_mod.ItemDiff]]
    ] = {}
    counts: dict[str, int] = {}
    for g in groups:
        for p in g.pairs:
            counts[p.other] = counts.get(p.other, 0) + p.n
            for d in p.diffs:
                by_pair.setdefault(p.other, []).append((g, p, d))
    out: list[str] = []
    for other in sorted(counts):
        found = by_pair.get(other, [])
        flipped = [x for x in found if x[2].ref_passed != x[2].other_passed]
        title = (
            f"{other}: {len(found)} of {counts[other]} items answered differently"
            f" ({len(flipped)} with a different verdict)"
        )
        body: list[str] = []
        if not found:
            body = [
                "Every output is identical to the reference's, character for character."
            ]
        # verdict changes first: those are the ones that move a score
        for g, p, d in sorted(
            found, key=lambda x: x[2].ref_passed == x[2].other_passed
        )[:DIFFS_SHOWN]:
            body += _diff_block(g, p, d)
        if len(found) > DIFFS_SHOWN:
            body.append(
                f"… and {len(found) - DIFFS_SHOWN} more (every output is in the linked artifacts)."
            )
        out += [fold(title, "\n".join(body), "note"), ""]
    return out


def parity_section(docs: list[dict[str, Any]]) -> str:
    groups = parity_mod.parity_groups(docs)
    if not groups:
        return admonition(
            "info",
            "No backend parity run yet",
            "Run `invoke quality --matrix quality-parity`: the same items through llama.cpp in "
            "process, llama_cpp.server and llama-server.",
        )
    out: list[str] = []
    runs: dict[tuple, list[parity_mod.Group]] = {}
    for g in groups:
        runs.setdefault((g.host, g.matrix, g.model), []).append(g)
    overall = {
        (o.host, o.matrix, o.model, o.other): o for o in parity_mod.overall(groups)
    }
    for (host, matrix, model), gs in runs.items():
        if len(runs) > 1:
            out += [f"### {cell(model)} on {code(host)} ({code(matrix)})", ""]
        rows = [
            o
            for (h, m, mo, _), o in sorted(overall.items())
            if (h, m, mo) == (host, matrix, model)
        ]
        out += [f"- {_sentence(o)}" for o in rows] + [""]
        out += [SCORE_LATENCY_CAPTION, "", _score_latency_table(rows, gs), ""]
        if not any("transformers" in o.other.lower() for o in rows):
            out += [SECOND_FAMILY_ABSENT, ""]
        out += [
            fold("Agreement and discordant items", _overall_table(rows), "abstract"),
            "",
        ]
        out += [fold("Per suite", _suite_table(gs), "abstract"), ""]
        out += _diffs(gs)
    return "\n".join(out)


def parity_from_data() -> str:
    from pipelines import quality as quality_mod

    return parity_section(quality_mod.load_quality())
