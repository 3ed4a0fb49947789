"""Quality and Roles pages: scores per model x suite with n and Wilson CI95, a drill-down
page per quality artifact (every output escaped), and the role assignments with the
escalation hierarchy, every decision explained from data and linked to its artifacts."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from runtime.metrics import METRICS

from .. import quality as quality_mod
from .. import roles as roles_mod
from . import charts
from .markdown import SYNTHETIC_BADGE, admonition, cell, code, link, num, pre, run_link, table

FALLBACKS_SHOWN = 10  # per role and host; the rest are counted
REJECTED_SHOWN = 25  # rejected configurations listed per role and host (the table's downloads hold all)
REJECTED_DETAILED = 5  # of which the evidence is shown (folded)


def quality_link(qid: str, from_dir: str = "") -> str:
    """Relative link from a page in ``from_dir`` ("" = docs/) to a quality artifact's detail view."""
    prefix = "" if from_dir == "quality-runs" else ("../" * (from_dir.count("/") + 1) if from_dir else "") + "quality-runs/"
    return f"{prefix}run.md?id={qid}"


def _pct(v: Any) -> str:
    return "—" if v is None or (isinstance(v, float) and pd.isna(v)) else f"{100 * v:.0f}%"


def _ci(lo: Any, hi: Any) -> str:
    if lo is None or hi is None or (isinstance(lo, float) and pd.isna(lo)):
        return "—"
    return f"{100 * lo:.0f}–{100 * hi:.0f}%"


def _score_cell(r: Any, from_dir: str = "") -> str:
    text = f"{_pct(r['pass_rate'])} ({r['passed']}/{r['n']})"
    out = link(text, quality_link(r["id"], from_dir)) + f"<br><small>CI95 {_ci(r['ci95_low'], r['ci95_high'])}</small>"
    if r["degenerate"]:
        out += f"<br><small>degenerate {r['degenerate']}/{r['n']}</small>"
    if r["status"] != "ok":
        out += "<br><small>incomplete run</small>"
    return out


def suites_table(frame: pd.DataFrame) -> str:
    rows = []
    for (suite, version), g in frame.groupby(["suite", "suite_version"], sort=True):
        r = g.iloc[0]
        rows.append([code(suite), num(int(version), 0), cell(r["category"]), num(int(r["n_in_suite"]), 0)])
    return table(["suite", "version", "category", "items in suite"], rows, ["l", "r", "l", "r"])


def quality_page(docs: list[dict[str, Any]]) -> str:
    if not docs:
        return admonition("warning", "No quality runs yet", "Run `invoke quality` to score the embedded model.")
    frame = quality_mod.scores_frame(docs)
    out: list[str] = []
    frame["row"] = frame["model"] + " · " + frame["config_label"]
    suites = sorted(frame["suite"].unique())
    # one cell per (configuration, host, suite): the newest complete run, else the newest incomplete one
    best = (frame.assign(_ok=frame["status"].eq("ok")).sort_values(["_ok", "created", "id"])
            .groupby(["row", "host_id", "suite"], sort=True).tail(1))
    out += ["## Scores per model and suite", "",
            "Each cell: pass rate (passed / scored items), its 95% Wilson interval, and degenerate outputs; "
            "it links to the artifact with every prompt, output and verdict. The configuration is the model "
            "file plus the settings that can change its output (threads and batch sizes do not).", ""]
    rows = []
    for (row, host), g in best.groupby(["row", "host_id"], sort=True):
        r0 = g.iloc[0]
        cells = []
        for s in suites:
            gs = g[g["suite"] == s]
            cells.append(_score_cell(gs.iloc[0]) if not gs.empty else "no data")
        rows.append([cell(r0["model"]) + (" " + SYNTHETIC_BADGE if r0["synthetic"] else ""), cell(r0["config_label"]),
                     code(host)] + cells)
    out.append(table(["model", "configuration", "host"] + [code(s) for s in suites], rows,
                     ["l", "l", "l"] + ["r"] * len(suites)))
    out.append("")
    metric = METRICS["pass_rate"]
    chart_df = pd.DataFrame([{"label": f"{r['suite']} · {r['row']}", "mean": 100 * r["pass_rate"], "stddev": None,
                              "n": r["n"], "ci95_low": 100 * r["ci95_low"], "ci95_high": 100 * r["ci95_high"],
                              "id": r["id"]} for _, r in best.iterrows() if r["n"]])
    if not chart_df.empty:
        out.append(charts.embed(charts.bar_with_ci(chart_df, metric, title="Pass rate per suite (Wilson CI95)"),
                                caption="Pass rate with its 95% Wilson interval; small samples give wide intervals."))
        out.append("")
    out += ["## Runs", "", "Every current quality artifact, superseded suite versions and incomplete runs included.", ""]
    rows = []
    for _, r in frame.sort_values(["suite", "model", "config_label"]).iterrows():
        gen = r["generation"]
        rows.append([code(r["suite"]), cell(r["model"]), cell(r["config_label"]), num(int(r["n"]), 0),
                     num(int(r["passed"]), 0), _pct(r["pass_rate"]), _ci(r["ci95_low"], r["ci95_high"]),
                     num(int(r["degenerate"]), 0), cell(f"max_tokens={gen.get('max_tokens')}, T={gen.get('temperature')}"),
                     cell(r["status"]), link(r["id"], quality_link(r["id"]))])
    out.append(table(["suite", "model", "configuration", "n", "passed", "pass rate", "CI95", "degenerate",
                      "generation", "status", "artifact"], rows,
                     ["l", "l", "l", "r", "r", "r", "r", "r", "l", "l", "l"]))
    out += ["", "## Suites", "", suites_table(frame), ""]
    return "\n".join(out)


def _anchor(item_id: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", "-", item_id.lower()).strip("-")


# -- roles --------------------------------------------------------------------------------
def _evidence_links(ev: roles_mod.Evidence) -> str:
    parts = []
    for kind, aid in ev.artifacts:
        parts.append(link(aid, quality_link(aid) if kind == "quality" else run_link(aid)))
    return ", ".join(parts) or "—"


def _verdict(ev: roles_mod.Evidence) -> str:
    if ev.ok is True:
        return "meets"
    return f"**{cell(ev.reason)}**" + (f": {cell(ev.message)}" if ev.message else "")


def _evidence_table(c: roles_mod.Candidate) -> str:
    rows = []
    for ev in c.evidence:
        ci = "—"
        if ev.ci and ev.ci[0] is not None and ev.kind == "quality":
            ci = _ci(*ev.ci)
        elif ev.ci and ev.ci[0] is not None:
            ci = f"{num(ev.ci[0])} – {num(ev.ci[1])}"
        rows.append([cell(ev.requirement), cell(ev.value), ci, num(ev.n, 0) if ev.n is not None else "—", _verdict(ev),
                     _evidence_links(ev)])
    return table(["requirement", "measured", "CI95", "n", "verdict", "source"], rows) if rows else "No requirements."


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
        parts.append(f"{s.test} {m.label} {'≥' if s.min is not None else '≤'} {num(s.min if s.min is not None else s.max, m.decimals)} {m.unit}")
    if role.memory_max is not None:
        parts.append(f"memory ≤ {roles_mod.nbytes(role.memory_max)}")
    return "; ".join(parts) or "none"


def roles_page(reg: roles_mod.RolesFile, assignments: list[roles_mod.Assignment]) -> str:
    out: list[str] = []
    by_role: dict[str, list[roles_mod.Assignment]] = {}
    for a in assignments:
        by_role.setdefault(a.role, []).append(a)
    chains = roles_mod.escalation_chains(reg)
    if chains:
        out += ["## Escalation hierarchy", "",
                "Each arrow is a role's `escalates_to`; each role shows the configuration assigned on each host "
                "and its measured speed (from the role's first speed requirement).", ""]
        hosts = sorted({a.host_id or "—" for a in assignments})
        for host in hosts:
            for chain in chains:
                steps = []
                for role in chain:
                    a = next((x for x in by_role.get(role, []) if (x.host_id or "—") == host), None)
                    steps.append(f"{role} ({_headline_speed(a) if a else 'not evaluated here'})")
                out.append(f"- on {code(host)}: " + " → ".join(cell(s) for s in steps))
        out.append("")
    out += ["## Role assignments", ""]
    rows = []
    for a in assignments:
        chosen = a.chosen
        rows.append([link(a.role, f"#role-{_anchor(a.role)}"), cell(a.spec.tier or "—"), code(a.host_id or "no host"),
                     cell(a.status), cell(chosen.label) if chosen else "—",
                     cell(" → ".join(c.label for c in a.fallbacks)) if a.fallbacks else "—",
                     num(len(a.rejected), 0)])
    out.append(table(["role", "tier", "host", "status", "assigned", "fallback chain", "rejected"], rows))
    out.append("")
    for role_name, items in by_role.items():
        role = items[0].spec
        out.append(f"## {cell(role_name)} {{#role-{_anchor(role_name)}}}")
        out.append("")
        out.append(f"{cell(role.description)}  \n**Needs:** {cell(_requirements(role))}  \n"
                   f"**Best means:** {'fastest' if role.prefer == 'speed' else 'highest mean pass rate'} first"
                   + (f"  \n**Escalates to:** {link(role.escalates_to, '#role-' + _anchor(role.escalates_to))}"
                      if role.escalates_to else ""))
        out.append("")
        for a in items:
            out.append(f"### On {code(a.host_id or 'no host with speed data')}")
            out.append("")
            if a.chosen:
                out.append(f"**Assigned:** {cell(a.chosen.label)}: meets every requirement and ranks first.")
                out.append("")
                out.append(_evidence_table(a.chosen))
                out.append("")
            else:
                out.append(admonition("warning", a.status.capitalize(),
                                      "No configuration meets every requirement on this host; the reasons are below."
                                      if a.status != "no data" else
                                      "The data needed to decide is missing: no guess is made. Run the quality "
                                      "matrix and the speed matrix on this host."))
            if a.fallbacks:
                out.append("**Fallback chain** (eligible, in rank order):")
                out.append("")
                for i, c in enumerate(a.fallbacks[:FALLBACKS_SHOWN], 1):
                    out.append(f"{i}. {cell(c.label)}")
                if len(a.fallbacks) > FALLBACKS_SHOWN:
                    out.append(f"{FALLBACKS_SHOWN + 1}. … and {len(a.fallbacks) - FALLBACKS_SHOWN:,} more eligible configurations")
                out.append("")
            if a.rejected:
                # one line per rejected configuration (all of them in the table's downloads); the
                # evidence of the first few, folded: the page stays short however many candidates run
                out.append(f"**Rejected** ({len(a.rejected):,}):")
                out.append("")
                out.append(table(["configuration", "why"], [[cell(c.label), cell(", ".join(c.reasons))] for c in a.rejected],
                                 max_rows=REJECTED_SHOWN))
                out.append("")
                for c in a.rejected[:REJECTED_DETAILED]:
                    out += [f'<details markdown="1"><summary>Evidence: {cell(c.label)}</summary>', "",
                            _evidence_table(c), "", "</details>", ""]
    return "\n".join(out)


def quality_page_from_data() -> str:
    return quality_page(quality_mod.load_quality())


def roles_page_from_data() -> str:
    from ..runs import load_runs

    reg = roles_mod.load_roles()
    caps, names = roles_mod.model_capabilities()
    assignments = roles_mod.recommend(reg, quality_mod.load_quality(), load_runs(), caps, names)
    return roles_page(reg, assignments)


def decision_rules() -> str:
    """How the recommender decides (for the Roles page), from the code's own declarations."""
    reasons = ", ".join(f"*{r}*" for r in roles_mod.REASONS)
    return (f"Every requirement is checked against artifacts only. A candidate that fails one is rejected with "
            f"every reason that applies ({reasons}); a requirement with no artifact is *no data*, never a guess. "
            "Quality comes from quality runs of the same configuration (model file and the settings that can "
            "change the output) on any host; speed and memory from speed runs on the host being assigned. "
            "Eligible candidates are ranked by the role's preference (speed: its first speed requirement's "
            "metric; quality: mean pass rate over its suites), then the other, then lower peak memory, then "
            "name: the first is assigned, the rest form the fallback chain.")


def scorers_table() -> str:
    """The registered scorers (name, version, what passes), from their declarations."""
    from runtime.quality import scorers

    rows = [[code(s.name), num(s.version, 0), cell(s.description),
             ", ".join(code(f) for f in s.check_model.model_fields)] for s in scorers.SCORERS.values()]
    return table(["scorer", "version", "passes when", "check fields"], rows)


def sandbox_layers() -> str:
    """The sandbox's isolation layers on the host that builds the site."""
    from runtime.quality import sandbox

    return ", ".join(code(x) for x in sandbox.isolation_layers())
