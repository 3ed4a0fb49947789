"""The Agent loops page: tool-calling loops under injected faults, tools internal vs external.

The answer first (per run: success, the price of the network hop, what the faults cost), then
the matrix per fault profile (success and steps; latency and retries), the per-scenario split
and the method, folded. Every figure is recomputed from the artifact's episodes (pipelines.agents).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from core import stats
from core.metrics import METRICS
from pipelines import agents as agents_mod
from pipelines import split_host as split_mod
from pipelines import uncertainty as unc_mod
from pipelines.site import charts
from pipelines.site.markdown import (
    admonition,
    cell,
    code,
    fold,
    link,
    num,
    pre,
    run_link,
    table,
)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def _rate(c: dict[str, Any] | None) -> str:
    if not c:
        return "—"
    lo, hi = c["success_ci95"]
    ci = f"<br><small>CI95 {_pct(lo)}–{_pct(hi)}</small>" if lo is not None else ""
    return f"{_pct(c['success_rate'])} ({c['successes']}/{c['episodes']}){ci}"


def _mean(s: dict[str, Any] | None, decimals: int = 1) -> str:
    if not s or not s.get("n"):
        return "—"
    ci = (
        f"<br><small>±{num((s['ci95_high'] - s['ci95_low']) / 2, decimals)}</small>"
        if s.get("ci95_low") is not None
        else ""
    )
    return f"{num(s['mean'], decimals)}{ci}"


def _ratio(c: dict[str, Any] | None) -> str:
    if not c or c.get("ratio") is None:
        return "—"
    ci = (
        f"<br><small>CI95 {c['ci95_low']:.2f}–{c['ci95_high']:.2f}×, {cell(c['verdict'])}</small>"
        if c.get("ci95_low") is not None
        else f"<br><small>{cell(c['verdict'])}</small>"
    )
    return f"{c['ratio']:.2f}×{ci}"


def _success_delta(s: dict[str, Any] | None) -> str:
    if not s or not s["pairs"]:
        return "—"
    lo, hi = s["ci95"]
    p = "no discordant pair" if s["p_value"] is None else f"p = {s['p_value']:.3f}"
    return (
        f"{100 * s['delta']:+.0f} pp<br><small>CI95 {100 * lo:+.0f}…{100 * hi:+.0f} pp; {p}; "
        f"{cell(s['verdict'])}</small>"
    )


def _cells(run: agents_mod.AgentRun) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["profile"], c["placement"]): c for c in run.stats["cells"]}


def _comparisons(run: agents_mod.AgentRun) -> dict[str, dict[str, Any]]:
    return {c["profile"]: c for c in run.stats["comparisons"]}


def headline(run: agents_mod.AgentRun) -> str:
    """What the run shows, in one paragraph of numbers (plain words; the page escapes them)."""
    pooled = run.stats["pooled"]
    parts = []
    for pl in ("internal", "external"):
        c = pooled.get(pl)
        if c:
            parts.append(f"{pl} {_pct(c['success_rate'])} of {c['episodes']} episodes")
    text = "Success " + ", ".join(parts) + "."
    o = run.stats.get("overall")
    if o:
        loop, hop = o["loop_ms"], o["tool_attempt_ms"]
        if loop.get("ratio") is not None:
            text += f" Episode latency external/internal {loop['ratio']:.2f}× ({loop['verdict']})"
            text += (
                f"; one tool call {hop['ratio']:.1f}× ({hop['verdict']})."
                if hop.get("ratio") is not None
                else "; no tool call was made, so the hop itself was never timed."
            )
        s = o["success"]
        text += (
            " Success is identical in both placements on every episode pair."
            if s["p_value"] is None
            else f" Success external − internal {100 * s['delta']:+.0f} pp (exact McNemar p = {s['p_value']:.3f}, "
            f"{s['verdict']})."
        )
    by_task: dict[str, list[bool]] = {}
    for e in run.episodes:
        by_task.setdefault(e.scenario, []).append(e.success)
    if len(by_task) > 1:
        text += (
            " By task: "
            + ", ".join(f"{k} {_pct(sum(v) / len(v))}" for k, v in by_task.items())
            + " (every profile and placement pooled)."
        )
    calls = sum(c["tool_calls"] for c in pooled.values())
    steps = sum(e.steps for e in run.episodes)
    text += f" The model made {calls} tool call attempts in {steps} turns" + (
        " — it answered without calling a tool every time." if calls == 0 else "."
    )
    return text


def _success_table(run: agents_mod.AgentRun) -> str:
    cells, comps = _cells(run), _comparisons(run)
    rows = []
    for prof in run.stats["profiles"]:
        ci, ce = cells.get((prof, "internal")), cells.get((prof, "external"))
        rows.append(
            [
                code(prof),
                cell(agents_mod.fault_label(run.profiles.get(prof))),
                _rate(ci),
                _rate(ce),
                _success_delta((comps.get(prof) or {}).get("success")),
                _mean((ci or {}).get("steps"), 2),
                _mean((ce or {}).get("steps"), 2),
            ]
        )
    pooled, overall = run.stats["pooled"], run.stats.get("overall") or {}
    if len(run.stats["profiles"]) > 1 and pooled:
        ci, ce = pooled.get("internal"), pooled.get("external")
        rows.append(
            [
                "**all profiles**",
                "pooled",
                _rate(ci),
                _rate(ce),
                _success_delta(overall.get("success")),
                _mean((ci or {}).get("steps"), 2),
                _mean((ce or {}).get("steps"), 2),
            ]
        )
    return table(
        [
            "profile",
            "faults",
            "internal success",
            "external success",
            "external − internal",
            "steps to answer (int)",
            "steps to answer (ext)",
        ],
        rows,
        ["l", "l", "r", "r", "r", "r", "r"],
    )


def _latency_table(run: agents_mod.AgentRun) -> str:
    cells, comps = _cells(run), _comparisons(run)
    rows = []
    for prof in run.stats["profiles"]:
        ci, ce = (
            cells.get((prof, "internal")) or {},
            cells.get((prof, "external")) or {},
        )
        comp = comps.get(prof) or {}
        rows.append(
            [
                code(prof),
                _mean(ci.get("loop_ms"), 0),
                _mean(ce.get("loop_ms"), 0),
                _ratio(comp.get("loop_ms")),
                _mean(ci.get("tool_attempt_ms"), 2),
                _mean(ce.get("tool_attempt_ms"), 2),
                _ratio(comp.get("tool_attempt_ms")),
                _mean(ci.get("retries"), 2),
                _mean(ce.get("retries"), 2),
                f"{_pct(ci.get('tool_error_rate'))} / {_pct(ce.get('tool_error_rate'))}",
            ]
        )
    pooled, overall = run.stats["pooled"], run.stats.get("overall") or {}
    if len(run.stats["profiles"]) > 1 and pooled:
        ci, ce = pooled.get("internal") or {}, pooled.get("external") or {}
        rows.append(
            [
                "**all profiles**",
                _mean(ci.get("loop_ms"), 0),
                _mean(ce.get("loop_ms"), 0),
                _ratio(overall.get("loop_ms")),
                _mean(ci.get("tool_attempt_ms"), 2),
                _mean(ce.get("tool_attempt_ms"), 2),
                _ratio(overall.get("tool_attempt_ms")),
                _mean(ci.get("retries"), 2),
                _mean(ce.get("retries"), 2),
                f"{_pct(ci.get('tool_error_rate'))} / {_pct(ce.get('tool_error_rate'))}",
            ]
        )
    return table(
        [
            "profile",
            "episode ms (int)",
            "episode ms (ext)",
            "ext/int episode",
            "tool call ms (int)",
            "tool call ms (ext)",
            "ext/int tool call",
            "retries/episode (int)",
            "retries/episode (ext)",
            "failed tool steps int / ext",
        ],
        rows,
        ["l"] + ["r"] * 9,
    )


def _scenario_table(run: agents_mod.AgentRun) -> str:
    rows = []
    for c in agents_mod.scenario_cells(run):
        rows.append(
            [
                code(c["scenario"]),
                cell(c["placement"]),
                _rate(c),
                _mean(c["steps"], 2),
                num(c["tool_calls"], 0),
                cell(", ".join(f"{k} {v}" for k, v in c["end_reasons"].items())),
            ]
        )
    return table(
        [
            "scenario",
            "placement",
            "success (every profile)",
            "steps to answer",
            "tool call attempts",
            "how episodes ended",
        ],
        rows,
        ["l", "l", "r", "r", "r", "l"],
    )


def success_chart(run: agents_mod.AgentRun) -> Any:
    rows = [
        {
            "label": f"{c['profile']} · {c['placement']}",
            "mean": 100 * c["success_rate"],
            "stddev": None,
            "n": c["episodes"],
            "ci95_low": 100 * c["success_ci95"][0],
            "ci95_high": 100 * c["success_ci95"][1],
            "id": run.record.id,
        }
        for c in run.stats["cells"]
        if c["episodes"]
    ]
    if not rows:
        return None
    return charts.bar_with_ci(
        pd.DataFrame(rows),
        METRICS["agent_success"],
        title="Success per fault profile and placement",
    )


def _examples(run: agents_mod.AgentRun, n: int = 3) -> list[str]:
    """A few episodes as transcripts: a success and failures of different kinds, when there are."""
    picked: list[Any] = []
    for cond in (
        lambda e: e.success,
        lambda e: e.tool_failures > 0,
        lambda e: not e.success and e.tool_calls == 0,
        lambda e: not e.success,
    ):
        e = next((x for x in run.episodes if cond(x) and x not in picked), None)
        if e is not None and len(picked) < n:
            picked.append(e)
    out = []
    for e in picked:
        lines = [f"{e.task}  [expected {e.expected!r}; {e.profile}, {e.placement}]"]
        for t in e.turns:
            m = t.model
            if m is not None:
                said = (
                    m.text
                    if m.ok
                    else (m.error.message if m.error is not None else None)
                )
                lines.append(f"model ({num(m.e2e_ms, 0)} ms): {said}")
            tool = t.tool
            if tool is not None:
                att = ", ".join(
                    f"{a.error or 'ok'} {a.ms:.1f} ms" for a in tool.attempts
                )
                said = json_short(tool.result) if tool.ok else tool.error
                lines.append(f"  tool {tool.name}: {said} [{att}]")
        lines.append(
            f"-> {'success' if e.success else 'failure'} ({e.end_reason}, {e.steps} steps, {e.loop_ms:.0f} ms)"
        )
        out.append(pre("\n".join(lines)))
    return out


def json_short(v: Any) -> str:
    import json

    text = json.dumps(v)
    return text if len(text) <= 80 else text[:79] + "…"


def _split_table(pair: split_mod.SplitPair) -> str:
    run = pair.split
    cells = _cells(run)
    comps = _comparisons(run)
    rows = []
    for prof in run.stats["profiles"]:
        ci, ce = (
            cells.get((prof, "internal")) or {},
            cells.get((prof, "external")) or {},
        )
        eps = {
            pl: [e for e in run.episodes if e.profile == prof and e.placement == pl]
            for pl in ("internal", "external")
        }
        rows.append(
            [
                code(prof),
                _mean(ci.get("loop_ms"), 0),
                _mean(ce.get("loop_ms"), 0),
                _ratio((comps.get(prof) or {}).get("loop_ms")),
                _pct(split_mod.error_rate(eps["internal"])),
                _pct(split_mod.error_rate(eps["external"])),
                _mean(ce.get("retries"), 2),
                f"{_pct(ci.get('success_rate'))} / {_pct(ce.get('success_rate'))}",
            ]
        )
    return table(
        [
            "profile",
            "internal mean (ms)",
            "external mean (ms)",
            "ext/int ratio",
            "int error",
            "ext error",
            "ext tool retries",
            "success int / ext",
        ],
        rows,
        ["l", "r", "r", "r", "r", "r", "r", "r"],
    )


def _hop_table(pair: split_mod.SplitPair) -> str:
    rows = []
    hop = pair.hop()
    for label, run in (
        ("co-located (loopback)", pair.colocated),
        ("split (the other host)", pair.split),
    ):
        if run is None:
            rows.append([cell(label), "no run", "—", "—", "—", "—", "—"])
            continue
        turns = split_mod.model_turn_ms(run.episodes)
        ctl = split_mod.controller_ms(run.episodes)
        tools = [e.tool_ms for e in run.episodes if e.tool_calls]
        where = split_mod.netns(run)
        is_split = run is pair.split
        rows.append(
            [
                cell(label)
                + (
                    f"<br><small>netns {code(where)}, {code(run.record.requested.get('host'))}</small>"
                    if where
                    else ""
                ),
                num(len(turns), 0),
                _mean(stats.summarize(turns) if turns else None, 1),
                (
                    f"{hop['diff_ms']:+.1f} ms<br><small>{_ratio(hop)}</small>"
                    if is_split and hop
                    else "—"
                ),
                _mean(stats.summarize(ctl) if ctl else None, 2),
                _mean(stats.summarize(tools) if tools else None, 1),
                link(run.record.id[:12], run_link(run.record.id)),
            ]
        )
    return table(
        [
            "model server",
            "model turns",
            "model hop mean (ms per turn)",
            "split − co-located",
            "controller overhead mean (ms per episode)",
            "tool time (ms per episode with a call)",
            "artifact",
        ],
        rows,
        ["l", "r", "r", "r", "r", "r", "l"],
    )


def split_host_section(pairs: list[split_mod.SplitPair]) -> list[str]:
    if not pairs:
        return []
    out = [
        "## Split host",
        "",
        "Seed 004 puts the model server on a GPU host and the controller with its tools on a CPU host. Here the "
        "model server (llama-server) runs on a second host: a Linux network namespace with its own network "
        "stack, reached over a veth link (`benchmarks/split_host_netns.sh`); the controller and the tools stay "
        "on this host (tools internal: a call in the controller's process; external: the tool service over "
        "HTTP on loopback). Both hosts share this machine's CPU, so the hop measured is the network path "
        "between two network stacks, not a datacenter link. The seed's columns come from the split run; the "
        "second table sets its model hop (each model turn's end-to-end time) against the same loops with the "
        "server on the controller's host (ratio of means, CI95). Errors are episodes an error ended or broke "
        "(a failed model call, a lost server, a tool step failed every attempt); wrong answers count in success "
        "only. The two runs ran one after the other on a shared 2-core host: the CI95 covers the spread inside "
        "each run, not the host's drift between them, which a veth hop (tens of microseconds) is far below.",
        "",
    ]
    for p in pairs:
        out += [
            f"**Split-host matrix: {cell(p.split.record.model_name)} on {code(p.host)}** "
            f"({link(p.split.record.id[:12], run_link(p.split.record.id))})",
            "",
            _split_table(p),
            "",
            f"**The model hop, split against co-located, on {code(p.host)}**",
            "",
            _hop_table(p),
            "",
        ]
    return out


def _paired_delta(c: stats.PairedComparison) -> str:
    if c.n == 0 or c.diff is None:
        return "—"
    ci = (
        f" [{100 * c.ci95_low:+.0f}, {100 * c.ci95_high:+.0f}]"
        if c.ci95_low is not None and c.ci95_high is not None
        else ""
    )
    p = "no discordant pair" if not (c.a_only + c.b_only) else f"p = {c.p_value:.3f}"
    return f"{100 * c.diff:+.0f} pp<br><small>CI95{ci} pp; {p}; {cell(c.verdict)}; n = {c.n}</small>"


def uncertainty_section(abls: list[unc_mod.Ablation]) -> list[str]:
    if not abls:
        return []
    out = [
        "## Uncertainty ablation",
        "",
        "Seed 004 gates its agent loop on the model's confidence. Here the controller asks llama-server for the "
        "sampled tokens' log-probabilities; a turn whose least likely token's probability is below the "
        "threshold is escalated: the model is asked again at that step, told it was unsure (once per step). The "
        "same loops with the gate off are the other arm; episodes pair by fault profile, placement, scenario "
        "and task (greedy: the same turns until the gate acts), and the difference on − off is tested with the "
        "exact McNemar test (Agresti-Min CI95).",
        "",
    ]
    for a in abls:
        profs = a.profiles
        arms = []
        for prof in profs:
            for label, run in (("on", a.on), ("off", a.off)):
                cells = _cells(run)
                ci = cells.get((prof, "internal"))
                ce = cells.get((prof, "external"))
                arms.append(
                    [
                        f"{code(prof)} gate {label}",
                        _rate(ci),
                        _rate(ce),
                        _ratio(a.ext_int_latency(run, prof)),
                        f"{num(a.escalations(prof), 0)} of {num(a.turns(prof), 0)} turns"
                        if label == "on"
                        else "—",
                        link(run.record.id[:12], run_link(run.record.id)),
                    ]
                )
        deltas = [
            cell(a.label),
            *[
                _paired_delta(a.delta(prof, pl))
                for prof in profs
                for pl in ("internal", "external")
            ],
        ]
        th = unc_mod.threshold(a.on)
        out += [
            f"**Uncertainty on − off: success delta on {code(a.on.record.host_id)}** (threshold "
            f"{num(th, 2)}; {link(a.on.record.id[:12], run_link(a.on.record.id))} against "
            f"{link(a.off.record.id[:12], run_link(a.off.record.id))})",
            "",
            table(
                [
                    "system",
                    *[
                        f"{cell(prof)} {pl} delta"
                        for prof in profs
                        for pl in ("internal", "external")
                    ],
                ],
                [deltas],
                ["l"] + ["r"] * (2 * len(profs)),
            ),
            "",
            f"**Arms: success per placement on {code(a.on.record.host_id)}**",
            "",
            table(
                [
                    "arm",
                    "internal success",
                    "external success",
                    "ext/int latency",
                    "escalated",
                    "artifact",
                ],
                arms,
                ["l", "r", "r", "r", "r", "l"],
            ),
            "",
        ]
    return out


def agents_page(docs: list[Any]) -> str:
    runs = agents_mod.agent_runs(docs)
    if not runs:
        return admonition(
            "info", "No agent loop run yet", "Run `invoke bench --matrix agent-loops`."
        )
    pairs = split_mod.split_pairs(runs)
    abls = unc_mod.ablations(runs)
    shown_apart = split_mod.in_pairs(pairs) | unc_mod.in_ablations(abls)
    runs = [r for r in runs if r.record.id not in shown_apart] or runs
    out: list[str] = []
    out += ["## What the runs show", ""]
    out += [
        f"- **{cell(r.label)}**: {cell(headline(r))} ({link(r.record.id, run_link(r.record.id))})"
        for r in runs
    ]
    out.append("")
    for r in runs:
        out += [
            f"## {cell(r.endpoint)} · {cell(r.record.model_name)} on {code(r.record.host_id)}",
            "",
        ]
        if not r.record.ok:
            out += [
                admonition(
                    "warning",
                    "Incomplete run",
                    cell(r.record.error_message or "failed"),
                ),
                "",
            ]
        out += ["### Success and steps per fault profile", "", _success_table(r), ""]
        out += ["### Latency and retries", "", _latency_table(r), ""]
        ch = success_chart(r)
        if ch is not None:
            out += [
                charts.embed(
                    ch,
                    caption="Share of episodes answered correctly, with the Wilson CI95.",
                ),
                "",
            ]
        body = [
            _scenario_table(r),
            "",
            "Example episodes (every transcript is in the artifact):",
            "",
        ] + _examples(r)
        out += [
            fold("Per scenario, and example episodes", "\n".join(body), "abstract"),
            "",
        ]
    out += split_host_section(pairs)
    out += uncertainty_section(abls)
    proto = runs[0].protocol
    if proto is not None:
        shown = [
            f"System message: {proto.system}",
            "",
            "Solved example in front of every task:",
        ]
        shown += [f"  {m.role}: {m.content}" for m in proto.example or []]
        if proto.action_schema:
            import json

            shown += [
                "",
                "Action schema (response_format json_object with schema):",
                json.dumps(proto.action_schema),
            ]
        out += [
            fold("The protocol the model is given", pre("\n".join(shown)), "note"),
            "",
        ]
    return "\n".join(out)


def agents_from_data() -> str:
    from pipelines.runs import load_runs

    return agents_page(list(load_runs()))
