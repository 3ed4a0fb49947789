"""Serving analyses from run artifacts alone: cold vs warm, concurrency sweeps, and
in-process vs server comparisons.

Concurrency figures are computed again from each artifact's raw request records with
``core.kinds.request_stats`` (the functions the backend used when it measured), so a page can
never disagree with the samples it links to.

A configuration's headline rates and latencies (warm TTFT, TPOT and E2E, a cold start's total, a
sweep's peak output, a comparison's two sides and their ratio) are the fact layer's figures
(pipelines.facts: the group of the run, the run as the unit, the same number every page shows);
per-request detail (percentiles, levels, request tables) stays each run's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from core import stats
from core.kinds.load_stats import BORDER
from core.kinds.request import workload_fingerprint
from core.kinds.request_stats import Slo, stored_sweep, sweep_stats
from core.records.run import RunRecord
from core.summary import Summary
from pipelines import facts as facts_mod
from pipelines.runs import latest_per_key

SERVING_KINDS = ("serve", "concurrency", "load", "capacity", "probe")
COMPARED = ("ttft_ms", "tpot_ms", "e2e_ms")
WARM_FIGURES = (
    "cold_total_ms",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
)  # a serve run's headline figures (fact layer)


def endpoint(doc: RunRecord) -> str:
    """How a run reached the model: the server's label, or in-process (core.records.run.RunRecord.endpoint)."""
    return doc.endpoint


def _summary(rec: RunRecord, name: str) -> Summary | None:
    s = rec.stat(name)
    return s if s is not None and s.n else None


def cold_warm(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """One row per current ``serve`` artifact that succeeded."""
    rows = []
    fx = facts_mod.of(docs)
    for d in latest_per_key(docs):
        if d.test_kind != "serve" or not d.ok:
            continue
        fresh = d.details.cold_is_fresh_server
        rows.append(
            {
                # the configuration's figures (its group's, the run as the unit): what the tables show as its means
                "figures": {name: fx.figure_of(d.id, name) for name in WARM_FIGURES},
                "id": d.id,
                "host": d.host_id,
                "model": d.model_name,
                "synthetic": d.synthetic,
                "model_server": d.model_server,
                "endpoint": d.endpoint,
                "test_name": d.test_name,
                "fresh_server": True if fresh is None else bool(fresh),
                **{
                    name: _summary(d, name)
                    for name in (
                        "startup_ms",
                        "cold_ttft_ms",
                        "cold_e2e_ms",
                        "cold_total_ms",
                        "ttft_ms",
                        "tpot_ms",
                        "e2e_ms",
                        "output_tokens",
                        "failed_requests",
                    )
                },
                # distribution-free bounds of the warm E2E percentiles, from the request records (core.stats)
                "e2e_bounds": {
                    q: stats.quantile_interval(d.values("e2e_ms"), q)
                    for q in (0.95, 0.99)
                },
            }
        )
    return sorted(
        rows, key=lambda r: (r["host"], r["model"], r["endpoint"], r["test_name"])
    )


def _levels(d: RunRecord) -> list[dict[str, Any]]:
    """A sweep's levels as core.kinds.request_stats reads them (records as stored)."""
    return [lv.model_dump(exclude_unset=True) for lv in d.samples.levels or []]


def _slo(d: RunRecord) -> Slo:
    return Slo.from_dict(
        d.details.slo.model_dump(exclude_unset=True) if d.details.slo else None
    )


def sweep_of(d: RunRecord) -> dict[str, Any] | None:
    """A concurrency run's sweep over every request it sent (None: no level recorded): the one it stored
    when it ran (today's arithmetic), else recomputed from its records. A run whose levels store a
    reservoir sample of their requests (core.request_records) is never recomputed from the sample: from
    every record kept beside it, or, without them, as the run computed it from all of them."""
    levels = _levels(d)
    if not levels:
        return None
    stored = stored_sweep(d.details.sweep)
    if stored is not None:
        return stored
    if any(lv.get("sampled") for lv in levels):
        return _from_all_records(
            d,
            levels,
            lambda lvs: sweep_stats(lvs, _slo(d)),
            d.details.sweep,
        )
    return sweep_stats(levels, _slo(d))


def sweeps(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Every current ``concurrency`` artifact with recorded levels (a failed run shows what it measured)."""
    from core import request_records

    out = []
    fx = facts_mod.of(docs)
    for d in latest_per_key(docs):
        if d.test_kind != "concurrency":
            continue
        sweep = sweep_of(d)
        if sweep is None:
            continue
        out.append(
            {
                "id": d.id,
                "host": d.host_id,
                "model": d.model_name,
                "peak": fx.figure_of(d.id, "peak_aggregate_tps") if d.ok else None,
                "synthetic": d.synthetic,
                "model_server": d.model_server,
                "endpoint": d.endpoint,
                "test_name": d.test_name,
                "status": d.status,
                "error": d.error_message,
                "sweep": sweep,
                "precision": level_precision(d),
                # a run whose levels store a reservoir sample of their records (core.request_records)
                "request_records": _records_of(d),
                "records_file": request_records.sidecar_of(d.data_path, d.records_full),
            }
        )
    return sorted(
        out, key=lambda r: (r["host"], r["model"], r["endpoint"], r["test_name"])
    )


def _records_of(d: RunRecord) -> dict[str, Any] | None:
    """How the run stored its request records (the kind's ``details.request_records``), as a dict; None
    for a run that never bounded them."""
    rr = getattr(d.details, "request_records", None)
    return rr.model_dump() if rr is not None else None


def level_precision(doc: RunRecord) -> dict[int, dict[str, Any]]:
    """Per level: the precision record (target, half-width reached, met, why it stopped). An artifact
    measured before repeat-to-precision gets its E2E CI95 half-width computed from its records,
    with ``target_rel`` None (a fixed count of rounds)."""
    from core import stats as st

    d = doc
    rec = d.precision.levels if d.precision is not None else None
    if rec:
        return {int(r.level): r.model_dump(exclude_unset=True) for r in rec}
    out = {}
    for lv in d.samples.levels or []:
        out[int(lv.level)] = {
            "metric": "e2e_ms",
            "target_rel": None,
            "n": len(lv.requests),
            "half_width_rel": st.ci95_half_width_rel(
                [r.e2e_ms for r in lv.requests if r.ok]
            ),
            "met": None,
            "stop_reason": "fixed_count",
        }
    if any(lv.sampled for lv in d.samples.levels or []):
        # the records are a sample: the level's count and its E2E spread are the summary's, over all
        for row in (sweep_of(d) or {}).get("levels") or []:
            out[int(row["level"])].update(
                n=row["requests"],
                half_width_rel=st.ci95_half_width_rel_of(row["e2e_ms"]),
            )
    return out


def finding(sw: dict[str, Any]) -> list[str]:
    """What a sweep shows, in words built from its numbers (plain text; the page escapes it)."""
    s = sw["sweep"]
    lines = []
    top, par, speed = s["top_level"], s["top_effective_parallelism"], s["top_speedup"]
    rows = s["levels"]
    base = rows[0]["level"] if rows else 1
    mult = rows[-1]["p95_multiplier"] if rows else None
    ideal = top / base if top else None
    if s["serialised"] is True:
        lines.append(
            f"Serialised: at {top} concurrent clients the server produced one stream at a time (effective "
            f"parallelism {par:.2f}); extra clients wait in a queue for the single generation slot."
        )
    elif s["serialised"] is False:
        lines.append(
            f"Concurrent: at {top} clients streams overlapped (effective parallelism {par:.2f})."
        )
    if speed is not None and ideal:
        lines.append(
            f"Aggregate output at {top} clients: {_x(speed)} that of {base} (linear scaling would be "
            f"{ideal:.0f}×); p95 latency {_x(mult)}."
        )
        if speed > 1.1 * ideal:
            lines.append(
                "Caution: more than linear scaling means the lowest level ran slower for another reason "
                "(other load on the host, a cold cache); this sweep is noisy."
            )
    slo = s["slo"]
    limits = (
        " and ".join(
            x
            for x in (
                f"TTFT <= {slo['ttft_ms']:g} ms" if slo.get("ttft_ms") else "",
                f"TPOT <= {slo['tpot_ms']:g} ms" if slo.get("tpot_ms") else "",
            )
            if x
        )
        or "no limits"
    )
    target = f"{slo['attainment'] * 100:.0f}% of requests within {limits}"
    if s["max_level_meeting_slo"]:
        lines.append(
            f"Highest concurrency meeting the SLOs ({target}): {s['max_level_meeting_slo']}."
        )
    else:
        lines.append(f"No level met the SLOs ({target}).")
    errors = sum(r["errors"] for r in rows)
    if errors:
        lines.append(
            f"{errors} of {sum(r['requests'] for r in rows)} requests failed; reasons per level are in the table."
        )
    return lines


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}×"


# -- comparisons --------------------------------------------------------------------------
def comparisons(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Each server run (chat, or serve's warm requests) against the newest in-process chat run
    with the same request, model and host: per metric the two configurations' figures (the fact
    layer's: the group of each run, the run as the unit) and their ratio server / in-process with
    CI95 and a verdict (pipelines.facts.Facts.compare, as every verdict of the site)."""
    fx = facts_mod.of(docs)
    current = [d for d in latest_per_key(docs) if d.ok]
    baselines: dict[tuple, RunRecord] = {}
    for d in current:
        if d.in_process and d.test_kind == "chat":
            k = (d.host_id, d.model_identity, workload_fingerprint(d.test))
            if k not in baselines or d.created > baselines[k].created:
                baselines[k] = d
    rows = []
    for d in current:
        if d.in_process or d.test_kind not in ("chat", "serve"):
            continue
        base = baselines.get(
            (d.host_id, d.model_identity, workload_fingerprint(d.test))
        )
        if base is None:
            continue
        for metric in COMPARED:
            a, b = base.values(metric), d.values(metric)
            fa, fb = fx.figure_of(base.id, metric), fx.figure_of(d.id, metric)
            if not a or not b or fa is None or fb is None:
                continue
            c = fx.compare(fa, fb)
            rows.append(
                {
                    "host": d.host_id,
                    "model": d.model_name,
                    "synthetic": d.synthetic,
                    "model_server": d.model_server,
                    "workload": base.test_name,
                    "endpoint": d.endpoint,
                    "kind": d.test_kind,
                    "metric": metric,
                    "baseline_id": base.id,
                    "candidate_id": d.id,
                    "baseline_mean": fa.mean,
                    "candidate_mean": fb.mean,
                    "baseline_figure": fa,
                    "candidate_figure": fb,
                    "baseline_requests": len(a),
                    "candidate_requests": len(b),
                    "baseline_tokens": _mean_tokens(base),
                    "candidate_tokens": _mean_tokens(d),
                    "prefix_reuse": _prefix_reuse(d),
                    "server": d.server,
                    "candidate_created": d.created,
                    **c.to_dict(),
                }
            )
    return sorted(
        rows,
        key=lambda r: (
            r["host"],
            r["model"],
            r["workload"],
            r["endpoint"],
            r["kind"],
            COMPARED.index(r["metric"]),
        ),
    )


Facet = tuple[
    str, str
]  # (what: "test", "setting", "build" or "matrix"; its name, "" for the matrix)


def _facets(r: RunRecord) -> dict[Facet, Any]:
    """What a reader can tell two runs apart by: the test's parameters, the settings in effect, the
    build and the matrix (when each ran, the caller tells)."""
    out: dict[Facet, Any] = {("test", k): v for k, v in r.test.items()}
    out.update({("setting", k): v for k, v in r.effective.items()})
    out.update({("build", k): v for k, v in r.build_identity.items()})
    out[("matrix", "")] = r.matrix_name
    return out


def set_apart(runs: list[RunRecord]) -> dict[str, list[tuple[Facet, Any, list[Any]]]]:
    """For runs a page would otherwise show under one heading: per run id, each facet whose value differs
    among them, as (facet, its value, the other runs' values); a facet absent or null is None (not
    recorded). A run that differs from the others in no facet maps to []: only when it ran sets it apart."""
    facets = {r.id: _facets(r) for r in runs}
    names = sorted({k for f in facets.values() for k in f})
    differing = [
        k
        for k in names
        if len(
            {json.dumps(f.get(k), sort_keys=True, default=str) for f in facets.values()}
        )
        > 1
    ]
    return {
        rid: [
            (k, f.get(k), [o.get(k) for oid, o in facets.items() if oid != rid])
            for k in differing
        ]
        for rid, f in facets.items()
    }


def _prefix_reuse(doc: RunRecord) -> dict[str, int] | None:
    """How many of the server's generations reused the previous prompt's KV cache (from its log)."""
    server = getattr(doc.details, "server", None)
    facts = (server.log_facts if server is not None else None) or {}
    return facts if facts.get("prefix_match_hits") else None


def _mean_tokens(doc: RunRecord) -> float | None:
    vals = doc.values("output_tokens")
    return sum(vals) / len(vals) if vals else None


def failed_serving(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Current runs that talked to a server and failed, with their reason (shown, never hidden)."""
    out = []
    for d in latest_per_key(docs):
        if d.ok or d.in_process or d.test_kind not in SERVING_KINDS + ("chat",):
            continue
        out.append(
            {
                "id": d.id,
                "host": d.host_id,
                "model": d.model_name,
                "endpoint": d.endpoint,
                "model_server": d.model_server,
                "test_name": d.test_name,
                "kind": d.error_kind,
                "message": d.error_message,
                "created": d.created,
            }
        )
    return sorted(out, key=lambda r: r["created"], reverse=True)


# -- load profiles, capacity searches, probes (kinds load, capacity, probe) -------------------
LOAD_KINDS = ("load", "capacity")
LIMIT_LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}


def _load_levels(r: RunRecord) -> list[dict[str, Any]]:
    """A load run's levels as core.kinds.load_stats reads them (records as stored)."""
    return [lv.model_dump(exclude_unset=True) for lv in r.samples.levels or []]


def _from_all_records(
    r: RunRecord,
    levels: list[dict[str, Any]],
    compute: Callable[[list[dict[str, Any]]], dict[str, Any]],
    stored: Any,
) -> dict[str, Any] | None:
    """A sampled run's statistics recomputed by today's arithmetic (``compute`` over its levels) from its
    full records (the sidecar, core.request_records), or ``stored`` (what the run computed from all its
    requests) when it kept none: never from the sample."""
    from core import request_records
    from core.paths import project_root

    if r.records_full is None or r.spec is None:
        return stored if isinstance(stored, dict) and stored.get("levels") else None
    full = request_records.load_full(project_root() / r.path, r)
    return compute([{**lv, "requests": recs} for lv, recs in zip(levels, full)])


def _load_summary(r: RunRecord, levels: list[dict[str, Any]]) -> dict[str, Any]:
    from core.kinds import load_stats

    spec: Any = r.spec  # a load or capacity test (core.kinds.load)
    capacity = r.test_kind == "capacity"
    return load_stats.sweep_summary(
        levels,
        spec.slo,
        spec.profile,
        grid=spec.levels if capacity else None,
        confidence=spec.look_confidence() if capacity else None,
        steady_state=spec.steady_state,
    )


def load_results(docs: list[RunRecord], latest: bool = True) -> list[dict[str, Any]]:
    """Every current ``load`` and ``capacity`` artifact with levels: its statistics (stored when it
    ran if today's arithmetic, else recomputed from the raw records), its answer and interval, and
    for a capacity search what the search cost against the exhaustive sweep."""
    from core.kinds import load_stats

    out = []
    for d in (
        latest_per_key(docs)
        if latest
        else sorted(docs, key=lambda x: (x.created, x.id))
    ):
        r = d
        if r.test_kind not in LOAD_KINDS:
            continue
        spec = r.spec
        summary = load_stats.stored_summary(r.details.summary)
        levels = _load_levels(r)
        if summary is None and any(lv.get("sampled") for lv in levels):
            # stored records are a sample: today's figures come from every record (kept beside the
            # artifact) or, without them, stay as the run computed them from all requests
            summary = _from_all_records(
                r, levels, partial(_load_summary, r), r.details.summary
            )
        if summary is None and spec is not None and r.samples.levels:
            summary = _load_summary(r, levels)
        if summary is None or spec is None:
            continue
        search = getattr(r.details, "search", None)
        out.append(
            {
                "id": r.id,
                "host": r.host_id,
                "model": r.model_name,
                "synthetic": r.synthetic,
                "endpoint": r.endpoint,
                "model_sha256": r.model_sha256,
                "server": r.server,
                "test_name": r.test_name,
                "kind": r.test_kind,
                "status": r.status,
                "error": r.error_message,
                "profile": spec.profile,
                "unit": spec.level_unit(),
                "slo": spec.slo,
                "workload": spec.workload.describe(),
                "stats": summary,
                "answer": summary["answer"],
                "answer_text": load_stats.answer_text(
                    summary["answer"], spec.slo, spec.level_unit()
                ),
                "search": search.model_dump(mode="json")
                if search is not None
                else None,
                "requests": summary["requests"],
                "errors": summary["errors"],
                "error_reasons": summary["error_reasons"],
                "created": r.created,
                "workload_info": r.details.workload or {},
            }
        )
    if not latest:
        return out  # oldest first: repeats of one configuration in the order they ran
    return sorted(
        out,
        key=lambda x: (
            x["host"],
            x["model"],
            x["kind"],
            x["profile"],
            x["endpoint"],
            x["test_name"],
        ),
    )


def serving_index(
    docs: list[RunRecord],
) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """Capacity answers and probes by (host, model sha256): what the Roles page checks a role's
    serving requirement against."""
    out: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for row in load_results(docs):
        if row["status"] == "ok" and row["model_sha256"]:
            out.setdefault(
                (row["host"], row["model_sha256"]), {"capacity": [], "probe": []}
            )["capacity"].append(row)
    for row in probe_results(docs):
        if row["status"] == "ok" and row["model_sha256"]:
            out.setdefault(
                (row["host"], row["model_sha256"]), {"capacity": [], "probe": []}
            )["probe"].append(row)
    return out


def probe_results(docs: list[RunRecord]) -> list[dict[str, Any]]:
    """Every current ``probe`` artifact: per case, tries, successes, median latency, failure reasons."""
    out = []
    for d in latest_per_key(docs):
        r = d
        if r.test_kind != "probe":
            continue
        cases = {
            k: c.model_dump(mode="json") for k, c in (r.samples.cases or {}).items()
        }
        if not cases:
            continue
        out.append(
            {
                "id": r.id,
                "host": r.host_id,
                "model": r.model_name,
                "synthetic": r.synthetic,
                "endpoint": r.endpoint,
                "server": r.server,
                "status": r.status,
                "error": r.error_message,
                "model_sha256": r.model_sha256,
                "cases": cases,
                "created": r.created,
            }
        )
    return sorted(out, key=lambda x: (x["host"], x["model"], x["endpoint"]))


def served_by(res: dict[str, Any]) -> str:
    """A load result's endpoint with the server software it was, where the endpoint's label does not
    name it (an endpoint model: "transformers serve · endpoint 127.0.0.1:8011")."""
    server, endpoint = res.get("server") or "", str(res["endpoint"])
    return endpoint if not server or server in endpoint else f"{server} · {endpoint}"


def throughput_latency_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per level: achieved throughput against each limited percentile (with its interval),
    the verdict, and whether the level is the run's answer: the chart's data."""
    rows = []
    for res in results:
        slo = res["slo"]
        p = f"p{slo.percentile:g}"
        series = f"{served_by(res)} · {res['kind']} {res['profile']} · {res['host']}"
        for lv in res["stats"]["levels"]:
            for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
                limit = getattr(slo, metric)
                if limit is None:
                    continue
                v = lv["slo"]["limits"].get(metric) or {}
                rows.append(
                    {
                        "series": series,
                        "id": res["id"],
                        "metric": LIMIT_LABELS[metric],
                        "percentile": p,
                        "level": lv["level"],
                        "unit": res["unit"],
                        "throughput_rps": lv.get("completed_rps"),
                        "aggregate_tps": lv.get("aggregate_tps"),
                        "value": v.get("value"),
                        "upper": v.get("upper"),
                        "lower": v.get("lower"),
                        "limit": limit,
                        "verdict": lv["slo"]["verdict"],
                        "answer": lv["level"] == res["answer"]["answer"]
                        and res["answer"]["answer"] > 0,
                        "errors": lv.get("errors"),
                    }
                )
    return rows


def load_finding(res: dict[str, Any]) -> list[str]:
    """What one load test or capacity search shows, in words built from its numbers (plain text)."""
    s, a = res["stats"], res["answer"]
    lines = [
        f"Answer: {res['answer_text']} (confidence {res['slo'].confidence:.0%} for each level's verdict)."
    ]
    if a.get("open_above"):
        lines.append(
            "Every level measured met the SLOs: the capacity is at least the top of the grid."
        )
    search = res.get("search")
    if search:
        lines.append(
            f"The search sent {search['requests_sent']:,} requests over {len(search['visits'])} of "
            f"{len(search['grid'])} levels; the exhaustive sweep of the same grid would send "
            f"{search['exhaustive_requests']:,} ({search['requests_sent'] / search['exhaustive_requests']:.0%} "
            f"of it). Stopped: {search.get('stopped') or '—'}."
        )
        if search.get("rechecked"):
            lines.append(
                "Measured again and judged on both runs pooled: "
                + ", ".join(f"{x:g}" for x in search["rechecked"])
                + f" {res['unit']}."
            )
        if search.get("budget_stop"):
            b = search["budget_stop"]
            lines.append(
                f"Its budget ({search.get('budget') or 0:.0%} of the sweep's requests) ended it before a "
                f"{b['why']} visit of {b['level']:g} {res['unit']}: the interval is what it had measured."
            )
    if s.get("saturation_level") is not None:
        lines.append(
            f"Saturated from {s['saturation_level']:g} {res['unit']}: throughput stopped growing or the "
            "queue grew without bound."
        )
    if s.get("client_bound_levels"):
        lines.append(
            "The client could not keep the schedule at "
            + ", ".join(f"{x:g}" for x in s["client_bound_levels"])
            + f" {res['unit']}: those levels are reported, not judged (their latencies include the client's lateness)."
        )
    if a.get("borderline_levels"):
        lines.append(
            f"Borderline from one run (an observed percentile within {BORDER:g}× of its limit, a verdict a "
            "repeat can flip), so they bound nothing: "
            + ", ".join(f"{x:g}" for x in a["borderline_levels"])
            + f" {res['unit']}."
        )
    if a.get("saturated_meets"):
        lines.append(
            "Met the SLOs while the queue still grew (saturated), so they bound nothing: "
            + ", ".join(f"{x:g}" for x in a["saturated_meets"])
            + f" {res['unit']}."
        )
    if a.get("non_monotonic"):
        lines.append(
            "Caution: a level was observed within the limits above one observed beyond them (noise, or another "
            "load on the host); neither bounds the interval where the other contradicts it."
        )
    if res["errors"]:
        reasons = ", ".join(
            f"{k}: {v}" for k, v in sorted(res["error_reasons"].items())
        )
        lines.append(
            f"{res['errors']} of {res['requests']} requests failed ({reasons}); each counts as an SLO miss."
        )
    return lines


def capacity_lines(paths: list[Any]) -> list[str]:
    """One line per capacity, load or probe artifact among ``paths``: its answer, for the task's output."""
    from core.records.run import read

    rows = [read(p) for p in paths]
    lines = []
    for res in load_results(rows):
        cost = ""
        if res.get("search"):
            s = res["search"]
            cost = f"; {s['requests_sent']} requests (exhaustive sweep: {s['exhaustive_requests']})"
        lines.append(
            f"{res['endpoint']} · {res['test_name']}: {res['answer_text']}{cost}"
            + (f" [failed: {res['error']}]" if res["status"] != "ok" else "")
        )
    for p in probe_results(rows):
        parts = [f"{k} {v['succeeded']}/{v['n']}" for k, v in p["cases"].items()]
        lines.append(f"{p['endpoint']} · probe: " + ", ".join(parts))
    return lines
