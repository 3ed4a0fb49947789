"""Quality and Roles pages: scores per model x suite with n and Wilson CI95, a drill-down
view per quality and perplexity artifact (the runs browsers' viewer), and the role assignments with the
escalation hierarchy, every decision explained from data and linked to its artifacts."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pandas as pd

from core.metrics import METRICS
from core.records.quality import QualityRecord
from pipelines import quality as quality_mod
from pipelines import roles as roles_mod
from pipelines import tiers as tiers_mod
from pipelines.site import charts
from pipelines.site.downsample import evenly
from pipelines.site.markdown import (
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

FALLBACKS_SHOWN = 10  # per role and host; the rest are counted
REJECTED_SHOWN = 25  # rejected configurations listed per role and host (the table's downloads hold all)
REJECTED_DETAILED = 5  # of which the evidence is shown (folded)

QUALITY_CHART_MAX = (
    60  # bars the Quality page's pass-rate chart draws (a fleet has thousands of cells)
)


def quality_link(qid: str, from_dir: str = "") -> str:
    """Relative link from a page in ``from_dir`` ("" = docs/) to a quality artifact's detail view."""
    prefix = (
        ""
        if from_dir == "quality-runs"
        else ("../" * (from_dir.count("/") + 1) if from_dir else "") + "quality-runs/"
    )
    return f"{prefix}run.md?id={quote(str(qid), safe='')}"


def perplexity_link(pid: str, from_dir: str = "") -> str:
    """Relative link from a page in ``from_dir`` ("" = docs/) to a perplexity artifact's detail view."""
    prefix = (
        ""
        if from_dir == "perplexity-runs"
        else ("../" * (from_dir.count("/") + 1) if from_dir else "")
        + "perplexity-runs/"
    )
    return f"{prefix}run.md?id={quote(str(pid), safe='')}"


def _pct(v: Any) -> str:
    return (
        "—" if v is None or (isinstance(v, float) and pd.isna(v)) else f"{100 * v:.0f}%"
    )


def _ci(lo: Any, hi: Any) -> str:
    if lo is None or hi is None or (isinstance(lo, float) and pd.isna(lo)):
        return "—"
    return f"{100 * lo:.0f}–{100 * hi:.0f}%"


def _score_cell(r: Any, from_dir: str = "") -> str:
    text = f"{_pct(r['pass_rate'])} ({r['passed']}/{r['n']})"
    out = (
        link(text, quality_link(r["id"], from_dir))
        + f"<br><small>CI95 {_ci(r['ci95_low'], r['ci95_high'])}</small>"
    )
    if r.get("chance") is not None and not pd.isna(r.get("chance")):
        out += f"<br><small>chance {_pct(r['chance'])}</small>"
    norm = r.get("acc_norm")
    if isinstance(norm, dict) and norm.get("n"):
        out += f"<br><small>acc_norm {_pct(norm['pass_rate'])}</small>"
    if r["degenerate"]:
        out += f"<br><small>degenerate {r['degenerate']}/{r['n']}</small>"
    if r["status"] != "ok":
        out += "<br><small>incomplete run</small>"
    return out


def suites_table(frame: pd.DataFrame) -> str:
    rows = []
    for (suite, version), g in frame.groupby(["suite", "suite_version"], sort=True):
        r = g.iloc[0]
        rows.append(
            [
                code(suite),
                num(int(version), 0),
                cell(r["category"]),
                num(int(r["n_in_suite"]), 0),
            ]
        )
    return table(
        ["suite", "version", "category", "items in suite"], rows, ["l", "r", "l", "r"]
    )


def quality_page(docs: list[QualityRecord]) -> str:
    if not docs:
        return admonition(
            "warning",
            "No quality runs yet",
            "Run `invoke quality` to score the embedded model.",
        )
    frame = quality_mod.scores_frame(docs)
    out: list[str] = []
    frame["row"] = frame["model"] + " · " + frame["config_label"]
    suites = sorted(frame["suite_style"].unique())
    # one cell per (configuration, host, suite and prompt style): the newest complete run,
    # else the newest incomplete one
    best = (
        frame.assign(_ok=frame["status"].eq("ok"))
        .sort_values(["_ok", "created", "id"])
        .groupby(["row", "host_id", "suite_style"], sort=True)
        .tail(1)
    )
    out += [
        "## Scores per model and suite",
        "",
        "Each cell: pass rate (passed / scored items), its 95% Wilson interval, and degenerate outputs; "
        "it links to the artifact with every prompt, output and verdict. The configuration is the model "
        "file plus the settings that can change its output (threads and batch sizes do not).",
        "",
    ]
    rows = []
    for (_row, host), g in best.groupby(["row", "host_id"], sort=True):
        r0 = g.iloc[0]
        cells = []
        for s in suites:
            gs = g[g["suite_style"] == s]
            cells.append(_score_cell(gs.iloc[0]) if not gs.empty else "no data")
        rows.append(
            [
                cell(r0["model"]) + (" " + SYNTHETIC_BADGE if r0["synthetic"] else ""),
                cell(r0["config_label"]),
                code(host),
            ]
            + cells
        )
    out.append(
        table(
            ["model", "configuration", "host"] + [code(s) for s in suites],
            rows,
            ["l", "l", "l"] + ["r"] * len(suites),
        )
    )
    out.append("")
    metric = METRICS["pass_rate"]
    chart_df = pd.DataFrame(
        [
            {
                "label": f"{r['suite_style']} · {r['row']}",
                "mean": 100 * r["pass_rate"],
                "stddev": None,
                "n": r["n"],
                "ci95_low": 100 * r["ci95_low"],
                "ci95_high": 100 * r["ci95_high"],
                "id": r["id"],
            }
            for _, r in best.iterrows()
            if r["n"]
        ]
    )
    if not chart_df.empty:
        # a fleet's cells: the chart draws a bounded few over the pass-rate ranking (the best and the
        # worst included), best first; the table above lists every cell
        drawn = chart_df
        if len(chart_df) > QUALITY_CHART_MAX:
            ranked = chart_df.sort_values(
                ["mean", "label", "id"], ascending=[False, True, True]
            )
            drawn = pd.DataFrame(
                evenly(ranked.to_dict("records"), QUALITY_CHART_MAX),
                columns=chart_df.columns,
            )
        out.append(
            charts.embed(
                charts.bar_with_ci(
                    drawn, metric, title="Pass rate per suite (Wilson CI95)"
                ),
                caption="Pass rate with its 95% Wilson interval; small samples give wide intervals."
                + (
                    f" {len(drawn):,} of {len(chart_df):,} scores drawn, spread evenly over them "
                    "ranked by pass rate (the best and the worst included); the table above lists "
                    "every one."
                    if len(drawn) < len(chart_df)
                    else ""
                ),
            )
        )
        out.append("")
    out += paired_section(docs)
    out += [
        "## Runs",
        "",
        "Every current quality artifact, superseded suite versions and incomplete runs included.",
        "",
    ]
    rows = []
    for _, r in frame.sort_values(["suite", "model", "config_label"]).iterrows():
        gen = r["generation"]
        rows.append(
            [
                code(r["suite_style"]),
                cell(r["model"]),
                cell(r["config_label"]),
                num(int(r["n"]), 0),
                num(int(r["passed"]), 0),
                _pct(r["pass_rate"]),
                _ci(r["ci95_low"], r["ci95_high"]),
                num(int(r["degenerate"]), 0),
                cell(f"max_tokens={gen.get('max_tokens')}, T={gen.get('temperature')}"),
                cell(r["status"]),
                link(r["id"], quality_link(r["id"])),
            ]
        )
    out.append(
        fold(
            "Every quality run: suite, configuration, pass rate with its CI95, generation, status",
            table(
                [
                    "suite",
                    "model",
                    "configuration",
                    "n",
                    "passed",
                    "pass rate",
                    "CI95",
                    "degenerate",
                    "generation",
                    "status",
                    "artifact",
                ],
                rows,
                ["l", "l", "l", "r", "r", "r", "r", "r", "l", "l", "l"],
            ),
        )
    )
    out += ["", "## Suites", "", suites_table(frame), ""]
    from pipelines.site.task_models import task_section

    out += [task_section(docs, quality_link)]
    return "\n".join(out)


def paired_cell(pc: Any) -> str:
    """A paired comparison in a cell: difference in points with its CI95, the verdict and McNemar's p,
    and the minimum detectable difference at that item count."""
    if pc is None:
        return "no shared items"
    mdd = (
        f"detectable: ±{num(100 * pc.mdd, 0)} pts at {pc.n} items"
        if pc.mdd is not None
        else f"{pc.n} items cannot detect any difference"
    )
    return (
        f"{num(100 * pc.diff, 0)} pts [{num(100 * pc.ci95_low, 0)}, {num(100 * pc.ci95_high, 0)}] "
        f"**{cell(pc.verdict)}** (McNemar p {'< 0.001' if pc.p_value < 0.001 else num(pc.p_value, 3)}; "
        f"{pc.a_only} vs {pc.b_only} discordant)"
        f"<br><small>{mdd}</small>"
    )


def paired_section(docs: list[dict[str, Any]]) -> list[str]:
    rows = quality_mod.paired_against_leader(docs)
    if not rows:
        return []
    out = [
        "## Paired comparisons",
        "",
        "Per suite and prompt style, every configuration against the one with the highest pass rate, item by item "
        "on the items both answered (not two independent intervals). "
        + cell(quality_mod.PAIRED_RULE),
        "",
    ]
    body = [
        [
            code(r["suite"]),
            link(r["config"], quality_link(r["id"])),
            link(r["leader"], quality_link(r["leader_id"])),
            num(r["comparison"].n, 0) if r["comparison"] else "0",
            paired_cell(r["comparison"]),
        ]
        for r in rows
    ]
    out += [
        fold(
            "Every configuration against its suite's leader, item by item",
            table(
                [
                    "suite",
                    "configuration (B)",
                    "leader (A)",
                    "shared items",
                    "B − A (CI95), verdict, detectable",
                ],
                body,
                ["l", "l", "l", "r", "l"],
            ),
        ),
        "",
    ]
    return out


def _anchor(item_id: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", "-", item_id.lower()).strip("-")


# -- roles --------------------------------------------------------------------------------
def _evidence_links(ev: roles_mod.Evidence) -> str:
    parts = []
    for kind, aid in ev.artifacts:
        parts.append(
            link(aid, quality_link(aid) if kind == "quality" else run_link(aid))
        )
    return ", ".join(parts) or "—"


def _verdict(ev: roles_mod.Evidence) -> str:
    if ev.ok is True:
        return "meets"
    return f"**{cell(ev.reason)}**" + (f": {cell(ev.message)}" if ev.message else "")


def _backing_line(c: roles_mod.Candidate, host: str | None) -> str:
    """What backed a pick: the artifacts of the configuration itself that met the role's requirements."""
    backing = c.backing
    where = f" on {code(host)}" if host else ""
    if not backing:
        return f"**Backed by:** no artifact: the role's requirements need none ({cell(c.backend)}{where})."
    return (
        f"**Backed by:** this configuration's own artifacts ({cell(c.backend)}{where}; never those of another "
        "backend, server or setting of the same model): "
        + "; ".join(
            f"{cell(e.requirement.split(' (')[0])}: {_evidence_links(e)}"
            for e in backing
        )
        + "."
    )


def _evidence_table(c: roles_mod.Candidate) -> str:
    from pipelines.site import figures

    rows = []
    for ev in c.evidence:
        ci = "—"
        if ev.kind == "speed" and ev.figure is not None:
            # the fact layer's figure (marked for the consistency check), its CI95 and what it rests on
            f = ev.figure
            measured = f"{figures.value(f)} {cell(f.metric.unit)}" + (
                f" ({num(f.runs, 0)} runs)" if f.runs > 1 else ""
            )
            if figures.flags(f):
                measured += " " + figures.flags(f)
            ci = (
                f"{figures.interval(f)} <small>({cell(figures.basis(f))})</small>"
                if f.has_interval
                else "—" + (f" <small>({cell(ev.note)})</small>" if ev.note else "")
            )
            rows.append(
                [
                    cell(ev.requirement),
                    measured,
                    ci,
                    num(ev.n, 0) if ev.n is not None else "—",
                    _verdict(ev),
                    _evidence_links(ev),
                ]
            )
            continue
        if ev.ci and ev.ci[0] is not None and ev.kind == "quality":
            ci = _ci(*ev.ci)
        elif ev.ci and ev.ci[0] is not None and ev.ci[0] == ev.ci[1]:
            ci = "—" + (f" <small>({cell(ev.note)})</small>" if ev.note else "")
        elif ev.ci and ev.ci[0] is not None:
            ci = f"{num(ev.ci[0])} – {num(ev.ci[1])}" + (
                f" <small>({cell(ev.note)})</small>" if ev.note else ""
            )
        rows.append(
            [
                cell(ev.requirement),
                cell(ev.value),
                ci,
                num(ev.n, 0) if ev.n is not None else "—",
                _verdict(ev),
                _evidence_links(ev),
            ]
        )
    return (
        table(["requirement", "measured", "CI95", "n", "verdict", "source"], rows)
        if rows
        else "No requirements."
    )


def _headline_speed(a: roles_mod.Assignment) -> str:
    if a.chosen is None:
        return "unassigned" if a.status != "no data" else "no data"
    speed = next((e for e in a.chosen.evidence if e.kind == "speed" and e.ok), None)
    return f"{a.chosen.model}, {speed.value}" if speed else a.chosen.model


def _requirements(role: roles_mod.Role) -> str:
    parts = []
    if role.capabilities:
        parts.append("capabilities " + ", ".join(role.capabilities))
    for q in role.quality:
        parts.append(f"{q.suite}{' [' + q.tag + ']' if q.tag else ''} ≥ {q.min:.0%}")
    for s in role.speed:
        m = METRICS[s.metric]
        parts.append(
            f"{s.test} {m.label} {'≥' if s.min is not None else '≤'} "
            f"{num(s.min if s.min is not None else s.max, m.decimals)} {m.unit}"
        )
    if role.memory_max is not None:
        parts.append(f"memory ≤ {roles_mod.nbytes(role.memory_max)}")
    if role.serving is not None:
        sv = role.serving
        if sv.users is not None:
            parts.append(f"{num(sv.users, 0)} users at SLO")
        if sv.rate is not None:
            parts.append(f"{num(sv.rate, 2)} req/s at SLO")
        if sv.probes:
            parts.append("endpoint " + ", ".join(sv.probes))
    return "; ".join(parts) or "none"


def _indent(text: str) -> str:
    return "\n".join("    " + ln if ln else "" for ln in text.splitlines())


def _candidate_line(c: roles_mod.Candidate) -> str:
    """One candidate's decision in one line: every failing or open requirement with its figure."""
    open_ = [e for e in c.evidence if e.ok is not True and e.reason != "no data"]
    missing = [e for e in c.evidence if e.reason == "no data"]
    parts = [f"{e.reason}: {e.message or e.value}" for e in open_]
    if missing:
        parts.append("not measured: " + ", ".join(e.requirement for e in missing))
    return f"{c.label} ({c.state}): " + "; ".join(parts)


def _states(
    assignments: list[roles_mod.Assignment],
) -> tuple[dict[int, str], dict[int, str]]:
    """Each rejected candidate's state and each assignment's status (keyed by ``id``), read once for a page:
    a page reads them several times (the summary, the details, the fold's title), and a candidate's state
    reads its evidence again each time (Candidate.state)."""
    state = {id(c): c.state for a in assignments for c in a.rejected}
    status = {
        id(a): roles_mod.status_of(a.chosen, [state[id(c)] for c in a.rejected])
        for a in assignments
    }
    return state, status


def _summary_table(
    assignments: list[roles_mod.Assignment],
    states: tuple[dict[int, str], dict[int, str]] | None = None,
) -> str:
    state, status = states or _states(assignments)
    rows = []
    for a in assignments:
        rejected = [c for c in a.rejected if state[id(c)] == "rejected"]
        unresolved = [c for c in a.rejected if state[id(c)] == "unresolved"]
        unmeasured = [
            c for c in a.rejected if state[id(c)] in ("not measured", "partly measured")
        ]
        if a.chosen:
            met = "; ".join(
                f"{e.requirement.split(' (')[0]}: {e.value}"
                for e in a.chosen.evidence
                if e.kind in ("quality", "speed", "serving")
            )
            why = (
                f"meets every requirement ({met})" if met else "meets every requirement"
            )
            if a.tie:
                why += (
                    f"; within noise of {', '.join(c.label for c in a.tie.others)} on {a.tie.requirement}: "
                    f"tie broken by {a.tie.decided_by}"
                )
        else:
            why = (
                "<br>".join(
                    cell(_candidate_line(c)) for c in (unresolved + rejected)[:2]
                )
                or "—"
            )
        rows.append(
            [
                link(a.role, f"#role-{_anchor(a.role)}"),
                cell(a.spec.tier or "—"),
                f"**{cell(status[id(a)])}**",
                cell(a.chosen.label) if a.chosen else "—",
                why if a.chosen is None else cell(why),
                f"{len(rejected)} / {len(unresolved)} / {len(unmeasured)}",
            ]
        )
    return table(
        [
            "role",
            "tier",
            "decision",
            "assigned",
            "why",
            "rejected / unresolved / not measured",
        ],
        rows,
        ["l", "l", "l", "l", "l", "r"],
    )


def _tier_roles(row: tiers_mod.TierRow) -> str:
    parts = [
        f"{cell(r.role)}: {cell(r.label)}"
        + ("" if r.assigned else " <small>(not assigned: closest candidate)</small>")
        + (
            f" <small>(counted once, in {cell(r.shared_with)})</small>"
            if r.shared_with
            else ""
        )
        for r in row.residents
    ]
    parts += [
        f"{cell(r)}: <small>no model measured here, not counted</small>"
        for r in row.unmeasured
    ]
    return "<br>".join(parts) or "no role in this tier"


def tier_budget_section(b: tiers_mod.Budget) -> list[str]:
    """Seed 001's "Memory Budget" (Tier | RAM | Status) on one host, from measured peaks."""
    rows = []
    for t in b.tiers:
        src = " · ".join(link(i[:12], run_link(i)) for i in t.run_ids) or "—"
        rows.append(
            [
                cell(t.tier),
                _tier_roles(t),
                nbytes(t.bytes),
                cell(tiers_mod.TIER_STATUS[t.tier]),
                src,
            ]
        )
    head = b.headroom
    fits = b.fits
    fp = (
        "host fingerprint of " + link(b.memory_run[:12], run_link(b.memory_run))
        if b.memory_run
        else "host fingerprint"
    )
    rows.append(
        [
            "Headroom",
            "context and KV cache beyond what the runs held",
            nbytes(head) if head is not None else "—",
            cell(
                "free"
                if fits
                else f"short by {nbytes(-(head or 0))}: the tiers do not fit together"
            ),
            fp,
        ]
    )
    status = ("fits" if fits else "does not fit") + (
        f" (not counted: {', '.join(b.unmeasured)})" if b.unmeasured else ""
    )
    rows.append(
        [
            "**Total**",
            "the host's memory",
            f"**{nbytes(b.host_memory)}**",
            f"**{cell(status)}**",
            fp,
        ]
    )
    return [
        f"### Memory budget on {code(b.host_id)}",
        "",
        "Seed 001's memory budget by tier: the configurations the roles keep resident together, each at "
        "the highest peak memory its runs measured here (RSS; VRAM on a GPU host), against the host's "
        "memory. A configuration serving several roles counts once (in the first tier that keeps it); "
        "every WARM model is counted as loaded at once. A role with no assignment is counted at its "
        "closest candidate (the most requirements met, then the smallest).",
        "",
        table(
            ["tier", "roles (resident model)", "RAM", "status", "source"],
            rows,
            ["l", "l", "r", "l", "l"],
        ),
        "",
    ]


def roles_page(
    reg: roles_mod.RolesFile,
    assignments: list[roles_mod.Assignment],
    host_memory: dict[str, tuple[int, str]] | None = None,
) -> str:
    out: list[str] = []
    states = _states(assignments)
    state, status = states
    by_role: dict[str, list[roles_mod.Assignment]] = {}
    by_host: dict[str, list[roles_mod.Assignment]] = {}
    for a in assignments:
        by_role.setdefault(a.role, []).append(a)
        by_host.setdefault(a.host_id or "no host with speed data", []).append(a)
    out += [
        "## Decisions per host",
        "",
        "One row per role: the decision, the configuration assigned and why, or for an unassigned role the "
        "reasons of its closest candidates. *Rejected*: a measured figure fails the requirement even at the "
        "favourable end of its CI95; *unresolved*: the interval straddles the threshold, and the details say "
        "how many more items or repetitions would settle it; *not measured*: no artifact.",
        "",
    ]
    for host, items in sorted(by_host.items()):
        out += [f"### On {code(host)}", "", _summary_table(items, states), ""]
    for host in sorted(by_host):
        if host in (host_memory or {}):
            mem, run = (host_memory or {})[host]
            out += tier_budget_section(tiers_mod.budget(host, by_host[host], mem, run))
    chains = roles_mod.escalation_chains(reg)
    if chains:
        out += ["## Escalation hierarchy", ""]
        for host in sorted({a.host_id or "—" for a in assignments}):
            for chain in chains:
                steps = []
                for role in chain:
                    a = next(
                        (
                            x
                            for x in by_role.get(role, [])
                            if (x.host_id or "—") == host
                        ),
                        None,
                    )
                    steps.append(
                        f"{role} ({_headline_speed(a) if a else 'not evaluated here'})"
                    )
                out.append(f"- on {code(host)}: " + " → ".join(cell(s) for s in steps))
        out.append("")
    out += [
        "## Details",
        "",
        "Every decision with the figures it rests on, folded; open a role to read them.",
        "",
    ]
    for role_name, items in by_role.items():
        role = items[0].spec
        out.append(f"### {cell(role_name)} {{#role-{_anchor(role_name)}}}")
        out.append("")
        out.append(
            f"{cell(role.description)}  \n**Needs:** {cell(_requirements(role))}  \n"
            f"**Best means:** {'fastest' if role.prefer == 'speed' else 'highest mean pass rate'} first"
            + (
                f"  \n**Escalates to:** {link(role.escalates_to, '#role-' + _anchor(role.escalates_to))}"
                if role.escalates_to
                else ""
            )
        )
        out.append("")
        for a in items:
            body: list[str] = []
            if a.chosen:
                body += [
                    f"**Assigned:** {cell(a.chosen.label)}: meets every requirement and ranks first.",
                    "",
                ]
                body += [_backing_line(a.chosen, a.host_id), ""]
                if a.tie:
                    body += [
                        f"**Within noise:** on {cell(a.tie.requirement)} it cannot be told apart from "
                        f"{cell(', '.join(c.label for c in a.tie.others))} (see the tie rule above); the tie is "
                        f"broken by {cell(a.tie.decided_by)}, which puts it first.",
                        "",
                    ]
                body += [_evidence_table(a.chosen), ""]
            if a.fallbacks:
                more = (
                    f" → … and {len(a.fallbacks) - FALLBACKS_SHOWN:,} more eligible configurations"
                    if len(a.fallbacks) > FALLBACKS_SHOWN
                    else ""
                )
                body += [
                    "**Fallback chain** (eligible, in rank order): "
                    + " → ".join(cell(c.label) for c in a.fallbacks[:FALLBACKS_SHOWN])
                    + more,
                    "",
                ]
            unmeasured = [c for c in a.rejected if state[id(c)] == "not measured"]
            decided = [c for c in a.rejected if state[id(c)] != "not measured"]
            if decided:
                # one line per configuration (all of them in the table's downloads); the evidence of
                # the first few: the page stays short however many candidates ran
                body += [
                    table(
                        ["configuration", "decision", "why"],
                        [
                            [
                                cell(c.label),
                                cell(state[id(c)]),
                                cell(", ".join(c.reasons)),
                            ]
                            for c in decided
                        ],
                        max_rows=REJECTED_SHOWN,
                    ),
                    "",
                ]
                # the evidence of those decided on measurements first: a configuration with no data for
                # a requirement (partly measured) has less to show than one rejected on its figures
                for c in sorted(
                    decided, key=lambda c: state[id(c)] == "partly measured"
                )[:REJECTED_DETAILED]:
                    body += [
                        f"**{cell(state[id(c)].capitalize())}:** {cell(c.label)}: {cell(', '.join(c.reasons))}",
                        "",
                        _evidence_table(c),
                        "",
                    ]
            if unmeasured:
                names = ", ".join(cell(c.label) for c in unmeasured[:REJECTED_SHOWN])
                extra = (
                    f" … and {len(unmeasured) - REJECTED_SHOWN:,} more"
                    if len(unmeasured) > REJECTED_SHOWN
                    else ""
                )
                body += [
                    "**Not measured** (no artifact for any requirement): "
                    + names
                    + extra,
                    "",
                ]
            title = f"{role_name} on {a.host_id or 'no host with speed data'}: {status[id(a)]}"
            kind = (
                "success"
                if a.chosen
                else ("warning" if status[id(a)] == "not resolved" else "note")
            )
            out += [fold(title, "\n".join(body), kind), ""]
    return "\n".join(out)


def quality_page_from_data() -> str:
    return quality_page(quality_mod.load_quality())


def _pool() -> roles_mod.Pool:
    """What every role assignment reads (pipelines.roles.prepare), figured once per loaded set: a host's
    Roles page judges its own host's roles from it, not every host's."""
    from pipelines import dataset

    def compute(ds: dataset.Dataset) -> roles_mod.Pool:
        reg = roles_mod.load_roles()
        caps, names = roles_mod.model_capabilities()
        return roles_mod.prepare(reg, list(ds.quality), list(ds.runs), caps, names)

    return dataset.load().derived("role_pool", compute)


def _assignments() -> tuple[roles_mod.RolesFile, list[roles_mod.Assignment]]:
    """Every role's assignment on every host, computed once per loaded set (the Roles page of every host)."""
    from pipelines import dataset

    def compute(
        ds: dataset.Dataset,
    ) -> tuple[roles_mod.RolesFile, list[roles_mod.Assignment]]:
        pool = _pool()
        return pool.reg, [
            roles_mod.assign(pool, name, host)
            for name in pool.reg.roles
            for host in pool.hosts_for(name)
        ]

    return dataset.load().derived("role_assignments", compute)


def roles_page_for(host: str | None) -> str:
    """The Roles page for every host (None) or for one host's assignments (those alone are judged)."""
    from pipelines import dataset

    if host is None:
        reg, assignments = _assignments()
    else:
        pool = _pool()
        reg, assignments = pool.reg, roles_mod.assignments_on(pool, host)
    memory = dataset.load().derived(
        "host_memory", lambda ds: tiers_mod.host_memory(list(ds.runs))
    )
    return roles_page(reg, assignments, memory)


def decision_rules() -> str:
    """How the recommender decides (for the Roles page), from the code's own declarations."""
    reasons = ", ".join(f"*{r}*" for r in roles_mod.REASONS)
    return (
        f"Every requirement is checked against artifacts only, with its uncertainty. A quality floor is met "
        "when the Wilson CI95 lower bound of the pass rate reaches it and failed when the upper bound stays below "
        "it (a 100% floor, which no lower bound reaches, allows no failed item); a speed floor is met when the "
        "CI95 lower bound of the mean reaches it (a ceiling: the upper bound) and failed when the whole interval "
        "misses it. Between the two the requirement is *not resolved*, and the page says about how many more "
        "items (or repetitions) at the observed rate would settle it. A role checks only what it needs: the "
        "degeneration check applies to roles with quality requirements. Scores of different prompt styles are "
        "never pooled (a requirement reads one style: the one it names, else the one with the most items). "
        f"Reasons: {reasons}; a requirement with no artifact is *no data*, never a guess. "
        "Quality comes from quality runs of the same configuration (model file and the settings that can "
        "change the output) on any host; speed and memory from speed runs on the host being assigned; users or "
        "requests at SLO and endpoint probes from the capacity searches and probes of the same configuration "
        "(backend, server, model and output settings) on that host: a server's capacity never fills a role for "
        "an in-process configuration of the same model, nor one server's for another. "
        "Speed figures treat the run as the unit: a configuration measured in two or more runs has the CI95 of "
        "the spread between them, one measured once its run widened by the host's run-to-run noise for that kind "
        "of test (or, where that noise was never measured, no interval: its mean decides). "
        "Eligible candidates are ranked by the role's preference (speed: its first speed requirement's "
        "metric; quality: mean pass rate over its suites), then the other, then lower peak memory, then "
        f"name: the first is assigned, the rest form the fallback chain. Ties within noise: {roles_mod.TIE_RULE}"
    )


def scorers_table(scorers: list[Any]) -> str:
    """The registered scorers (name, version, what passes), from their declarations."""
    rows = [
        [
            code(s.name),
            num(s.version, 0),
            cell(s.description),
            ", ".join(code(f) for f in s.check_model.model_fields),
        ]
        for s in scorers
    ]
    return table(["scorer", "version", "passes when", "check fields"], rows)


def sandbox_layers(layers: list[str]) -> str:
    """The sandbox's isolation layers on the host that builds the site."""
    return ", ".join(code(x) for x in layers)


# -- quantization ladder --------------------------------------------------------------------
def _pm(v: Any, se: Any, decimals: int = 3) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "—"
    return (
        f"{v:,.{decimals}f} ± {se:,.{decimals}f}"
        if se is not None and not pd.isna(se)
        else f"{v:,.{decimals}f}"
    )


def _speed_cell(s: Any) -> str:
    if not s:
        return "not measured"
    return (
        f"{link(num(s['mean'], 1), run_link(s['id']))}<br><small>CI95 "
        f"{num(s['ci95_low'], 1)}–{num(s['ci95_high'], 1)}, "
        f"n={s['n']}</small>"
    )


def ladder_chart(frame: pd.DataFrame, x: str, x_label: str, x_unit: str) -> Any:
    """Perplexity (± SE) against size or speed: one point per variant, error bars both ways where known."""
    import altair as alt

    rows = []
    for _, r in frame.iterrows():
        if x == "size_mib":
            xv, xlo, xhi = r["size_bytes"] / 2**20, None, None
        else:
            s = r[x]
            if not s:
                continue
            xv, xlo, xhi = s["mean"], s["ci95_low"], s["ci95_high"]
        rows.append(
            {
                "variant": f"{r['model']} ({r['quantization']})",
                "x": xv,
                "x_lo": xlo if xlo is not None else xv,
                "x_hi": xhi if xhi is not None else xv,
                "ppl": r["ppl"],
                "ppl_lo": r["ppl"] - r["ppl_se"],
                "ppl_hi": r["ppl"] + r["ppl_se"],
                "kld": r["kld"] if pd.notna(r["kld"]) else None,
                "id": r["ppl_id"],
            }
        )
    df = pd.DataFrame(rows)
    if df.empty:
        return None
    base = alt.Chart(df)
    scale = alt.Scale(zero=False)
    xa, ya = (x_label, x_unit), ("perplexity, lower is better", "no unit, ± SE")
    x_title = charts.axis_title(*xa)
    pts = base.mark_point(filled=True, size=90).encode(
        x=charts.qx("x", *xa, scale=scale),
        y=charts.qy("ppl", *ya, scale=scale),
        color=alt.Color(
            "variant:N", legend=alt.Legend(orient="bottom", columns=1, title=None)
        ),
        tooltip=[
            alt.Tooltip("variant:N"),
            alt.Tooltip("x:Q", format=",.1f", title=x_title),
            alt.Tooltip("ppl:Q", format=".3f"),
            alt.Tooltip("kld:Q", format=".5f", title="KLD vs source"),
            alt.Tooltip("id:N", title="artifact"),
        ],
    )
    ey = base.mark_rule().encode(
        x=charts.qx("x", *xa),
        y=charts.qy("ppl_lo", *ya),
        y2=alt.Y2("ppl_hi:Q"),
        color=alt.Color("variant:N", legend=None),
    )
    ex = base.mark_rule().encode(
        x=charts.qx("x_lo", *xa),
        x2=alt.X2("x_hi:Q"),
        y=charts.qy("ppl", *ya),
        color=alt.Color("variant:N", legend=None),
    )
    return (ey + ex + pts).properties(width="container", height=260)


def ladder_section(frame: pd.DataFrame) -> str:
    """The trade-off table and charts of the quantization ladder (one row / point per model file)."""
    if frame.empty:
        return admonition(
            "info",
            "No quantization ladder measured yet",
            "Run `invoke quality.ladder`, `invoke bench --matrix ladder` and "
            "`invoke quality --matrix quality-ladder`.",
        )
    # a trade-off needs two points: a score column is shown when at least two files have it
    counts: dict[str, int] = {}
    for sc in frame["scores"]:
        for k in sc:
            counts[k] = counts.get(k, 0) + 1
    score_cols = sorted(k for k, v in counts.items() if v >= 2 or len(frame) == 1)
    head = [
        "model",
        "quant",
        "file",
        "PPL ± SE",
        "KLD vs source ± SE",
        "same top token",
        "pp512 t/s",
        "tg128 t/s",
        "peak RSS",
    ] + [code(c) for c in score_cols]
    rows = []
    for _, r in frame.iterrows():
        d = r["derived"] or None
        origin = (
            f"<br><small>requantized from {cell(d['from'])} ({code(d['source_sha256'][:12])}): "
            f"{code(d['command'])}</small>"
            if d
            else "<br><small>packaged</small>"
        )
        has_kld = isinstance(r["kld_id"], str)  # pandas turns a missing value into NaN
        kld = (
            link(_pm(r["kld"], r["kld_se"], 4), perplexity_link(r["kld_id"]))
            if has_kld
            else "reference"
        )
        same = (
            f"{100 * r['same_top']:.1f} ± {100 * r['same_top_se']:.1f}%"
            if has_kld
            else "—"
        )
        cells = []
        for c in score_cols:
            s = r["scores"].get(c)
            if not s:
                cells.append("not measured")
                continue
            chance = (
                f", chance {_pct(s['chance'])}" if s.get("chance") is not None else ""
            )
            vs = (
                f"<br><small>vs source, paired: {paired_cell(s['paired'])}</small>"
                if s.get("paired") is not None
                else ""
            )
            cells.append(
                link(
                    f"{_pct(s['pass_rate'])} ({s['passed']}/{s['n']})",
                    quality_link(s["id"]),
                )
                + f"<br><small>CI95 {_ci(s['ci95_low'], s['ci95_high'])}{chance}</small>"
                + vs
            )
        rows.append(
            [
                cell(r["model"]) + origin,
                code(r["quantization"]),
                roles_mod.nbytes(r["size_bytes"]),
                link(_pm(r["ppl"], r["ppl_se"]), perplexity_link(r["ppl_id"])),
                kld,
                same,
                _speed_cell(r["pp512"]),
                _speed_cell(r["tg128"]),
                roles_mod.nbytes(r["peak_rss_bytes"])
                if pd.notna(r["peak_rss_bytes"]) and r["peak_rss_bytes"]
                else "—",
            ]
            + cells
        )
    r0 = frame.iloc[0]
    speed_host = f"speed on `{r0['speed_host']}`; " if r0.get("speed_host") else ""
    out = [
        f"Perplexity on `{r0['text']}` ({int(r0['n_tokens']):,} scored tokens, n_ctx {r0['n_ctx']}, "
        "llama-perplexity's chunking; ± is the standard error of the mean). KL-divergence and top-token "
        f"agreement are measured against the file each variant was requantized from; {speed_host}scores are per suite "
        "and prompt style (never merged across styles), with the Wilson CI95 and the chance level.",
        "",
        table(head, rows),
        "",
    ]
    for x, label, unit in (
        ("size_mib", "file size", "MiB"),
        ("tg128", "tg128", "tokens/s, CI95"),
    ):
        title = charts.axis_title(label, unit)
        ch = ladder_chart(frame, x, label, unit)
        if ch is not None:
            out.append(
                charts.embed(
                    ch,
                    caption=f"Perplexity against {title}: one point per variant, with its intervals.",
                )
            )
            out.append("")
    return "\n".join(out)


def ladder_from_data() -> str:
    from pipelines import perplexity as ppl_mod
    from pipelines.runs import load_runs

    return ladder_section(
        ppl_mod.ladder_frame(
            ppl_mod.load_perplexity(), load_runs(), quality_mod.load_quality()
        )
    )
