"""In-process backends side by side on the same model file and host.

llama.cpp is the reference (the in-process backend whose artifacts record a llama.cpp build,
``build.llama_cpp_commit``: read from the data, not from a backend's name); every other backend that runs the model
in the measuring process (``build.in_process``; e.g. transformers on PyTorch) is set beside it
on what both measured, each figure a ratio candidate / llama.cpp with its CI95 and the
candidate's verdict. The run is the unit (issue 32): each artifact's mean is one run, the ratio is of the
geometric means of the two sides' runs with a CI95 from the spread between runs, and a side of one run is
widened by its host's run-to-run noise for that kind of test (core.stats.compare_runs, as History,
Regressions and `invoke compare` judge); repetitions inside a run never stand in for runs:

* **load time**, **peak VRAM**, **peak RSS**: one value per artifact (each configuration runs in
  a fresh process), over the artifacts of the tests both backends ran;
* **cold TTFT** and **cold total** (load + first full request): ``serve`` runs in process, the runs
  that send the same request (each its own fresh process; the value shown: their runs' geometric mean);
* **warm TTFT** and **TPOT**: the warm requests of ``chat`` and ``serve`` runs that send the same
  request (each artifact one run);
* **prefill / decode rate** and **energy per token**: each ``rate`` test both ran (same test
  definition), the newest result of each side.

Reads artifacts only (no backend is imported).
"""

from __future__ import annotations

import json
from typing import Any

from core import stats
from core.kinds.request import workload_fingerprint
from core.metrics import METRICS
from core.records.run import RunRecord, latest_per_key
from core.summary import Summary

RATE_METRICS = ("tokens_per_second", "prefill_j_per_token", "decode_j_per_token")
RESOURCE_METRICS = ("load_time_s", "peak_vram_bytes", "peak_rss_bytes")
ORDER = (
    "load_time_s",
    "cold_ttft_ms",
    "cold_total_ms",
    "ttft_ms",
    "tpot_ms",
    "prefill",
    "decode",
    "prefill_j_per_token",
    "decode_j_per_token",
    "peak_vram_bytes",
    "peak_rss_bytes",
)


def is_reference(recs: list[RunRecord]) -> bool:
    """Whether these runs were measured by llama.cpp in process (their build names a llama.cpp commit):
    the reference every other in-process backend is set beside."""
    return bool(recs) and all(r.in_process and r.llama_cpp_commit for r in recs)


def _definition(r: RunRecord) -> str:
    return json.dumps(r.test_definition, sort_keys=True, default=str)


def _rate_label(r: RunRecord) -> tuple[str, str]:
    """("prefill" | "decode" | "rate", label) of a rate test by what it times."""
    t = r.test
    if t.get("n_prompt") and not t.get("n_gen"):
        return "prefill", f"Prefill rate ({r.test_name})"
    if t.get("n_gen") and not t.get("n_prompt"):
        return "decode", f"Decode rate ({r.test_name})"
    return "rate", f"Rate ({r.test_name})"


def _row(
    what: str,
    order: str,
    metric: str,
    comp: stats.Comparison,
    a_mean: float,
    b_mean: float,
    a_ids: list[str],
    b_ids: list[str],
    test: str | None = None,
) -> dict[str, Any]:
    m = METRICS[metric]
    return {
        "what": what,
        "order": order,
        "metric": metric,
        "unit": m.unit,
        "decimals": m.decimals,
        "higher_is_better": m.higher_is_better,
        "test_name": test,
        "baseline_mean": a_mean,
        "candidate_mean": b_mean,
        "baseline_ids": a_ids,
        "candidate_ids": b_ids,
        **comp.to_dict(),
    }


def _pooled(recs: list[RunRecord], metric: str) -> Summary | None:
    parts = [s for s in (r.stat(metric) for r in recs) if s is not None and s.n]
    return stats.pool_summaries(parts) if parts else None


def _run_side(recs: list[RunRecord], metric: str) -> tuple[list[float], float | None]:
    """One side's run means (one per artifact: the run is the unit) and, for a single run, its relative SE."""
    stats_ = [
        s
        for s in (r.stat(metric) for r in recs)
        if s is not None and s.mean is not None
    ]
    means = [float(m) for s in stats_ if (m := s.mean) is not None]  # every one
    rel = None
    if (
        len(stats_) == 1
        and stats_[0].stddev is not None
        and stats_[0].n > 1
        and stats_[0].mean
    ):
        rel = float(stats_[0].stddev) / abs(float(stats_[0].mean)) / stats_[0].n ** 0.5
    return means, rel


def _geomean(values: list[float]) -> float:
    """The geometric mean of a side's run means: the value a run-unit comparison compares."""
    import math

    pos = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in pos) / len(pos)) if pos else float("nan")


def compare_by_runs(
    metric: str, a: list[RunRecord], b: list[RunRecord], noise: Any = None
) -> stats.Comparison:
    """b against a with the run as the unit, each side estimated as every figure of the site is
    (core.stats.pooled_side: the runs' geometric mean; the host's run-to-run noise for that kind of test, else the
    spread between the runs, else the fleet's noise for a single run); ``noise``: record -> (host, fleet) RunNoise."""
    sides = []
    for recs in (a, b):
        means, rel = _run_side(recs, metric)
        own, fleet = noise(recs[-1]) if noise else (None, None)
        sides.append(stats.pooled_side(means, noise=own, fallback=fleet, rel_se=rel))
    return stats.combine_sides(sides[0], sides[1], METRICS[metric].higher_is_better)


def _compare_pooled(
    what: str,
    metric: str,
    a: list[RunRecord],
    b: list[RunRecord],
    order: str | None = None,
    noise: Any = None,
) -> dict[str, Any] | None:
    """The row of a request metric: the runs as the unit (the value shown is the geometric mean of the runs)."""
    sa, sb = _pooled(a, metric), _pooled(b, metric)
    if sa is None or sb is None or sa.mean is None or sb.mean is None:
        return None
    c = compare_by_runs(metric, a, b, noise)
    return _row(
        what,
        order or metric,
        metric,
        c,
        _geomean(_run_side(a, metric)[0]),
        _geomean(_run_side(b, metric)[0]),
        [r.id for r in a if r.stat(metric)],
        [r.id for r in b if r.stat(metric)],
    )


def _per_artifact(
    what: str, metric: str, a: list[RunRecord], b: list[RunRecord]
) -> dict[str, Any] | None:
    """One value per artifact (a fresh process each) on each side."""
    va = [
        (r.id, s.mean)
        for r in a
        if (s := r.stat(metric)) is not None and s.mean is not None
    ]
    vb = [
        (r.id, s.mean)
        for r in b
        if (s := r.stat(metric)) is not None and s.mean is not None
    ]
    if not va or not vb:
        return None
    c = stats.compare(
        [v for _, v in va], [v for _, v in vb], METRICS[metric].higher_is_better
    )
    return _row(
        what,
        metric,
        metric,
        c,
        sum(v for _, v in va) / len(va),
        sum(v for _, v in vb) / len(vb),
        [i for i, _ in va],
        [i for i, _ in vb],
    )


def compare_backends(
    base: list[RunRecord], cand: list[RunRecord], noise: Any = None
) -> list[dict[str, Any]]:
    """Rows for one candidate backend against the baseline (both: current ok results of one host and model)."""
    rows: list[dict[str, Any]] = []
    shared = {_definition(r) for r in base} & {_definition(r) for r in cand}
    a_shared = [r for r in base if _definition(r) in shared]
    b_shared = [r for r in cand if _definition(r) in shared]
    for metric, label in (
        ("load_time_s", "Load time"),
        ("peak_vram_bytes", "Peak VRAM"),
        ("peak_rss_bytes", "Peak RSS"),
    ):
        row = _per_artifact(label, metric, a_shared, b_shared)
        if row:
            rows.append(row)

    # requests: serve (cold, then warm) and chat (warm), matched on the request they send
    def by_request(
        recs: list[RunRecord], kinds: tuple[str, ...]
    ) -> dict[str, list[RunRecord]]:
        out: dict[str, list[RunRecord]] = {}
        for r in recs:
            if r.test_kind in kinds:
                out.setdefault(workload_fingerprint(r.test), []).append(r)
        return out

    serve_a, serve_b = by_request(base, ("serve",)), by_request(cand, ("serve",))
    for fp in sorted(set(serve_a) & set(serve_b)):
        for metric, label in (
            ("cold_ttft_ms", "Cold TTFT"),
            ("cold_total_ms", "Cold total (load + first request)"),
        ):
            row = _compare_pooled(label, metric, serve_a[fp], serve_b[fp], noise=noise)
            if row:
                rows.append(row)
    warm_a, warm_b = (
        by_request(base, ("serve", "chat")),
        by_request(cand, ("serve", "chat")),
    )
    for fp in sorted(set(warm_a) & set(warm_b)):
        for metric, label in (("ttft_ms", "Warm TTFT"), ("tpot_ms", "TPOT")):
            row = _compare_pooled(label, metric, warm_a[fp], warm_b[fp], noise=noise)
            if row:
                rows.append(row)
    # rates and energy: each rate test both ran, newest result per side
    newest_a: dict[str, RunRecord] = {}
    newest_b: dict[str, RunRecord] = {}
    for side, recs in ((newest_a, base), (newest_b, cand)):
        for r in recs:
            if r.test_kind == "rate":
                k = _definition(r)
                if k not in side or (r.created, r.id) > (side[k].created, side[k].id):
                    side[k] = r
    for k in sorted(set(newest_a) & set(newest_b)):
        ra, rb = newest_a[k], newest_b[k]
        part, label = _rate_label(ra)
        for metric in RATE_METRICS:
            sa, sb = ra.stat(metric), rb.stat(metric)
            if sa is None or sb is None or sa.mean is None or sb.mean is None:
                continue
            c = compare_by_runs(metric, [ra], [rb], noise)
            what = (
                label
                if metric == "tokens_per_second"
                else f"{METRICS[metric].label} ({ra.test_name})"
            )
            rows.append(
                _row(
                    what,
                    part if metric == "tokens_per_second" else metric,
                    metric,
                    c,
                    sa.mean,
                    sb.mean,
                    [ra.id],
                    [rb.id],
                    test=ra.test_name,
                )
            )
    rows.sort(
        key=lambda r: (
            ORDER.index(r["order"]) if r["order"] in ORDER else len(ORDER),
            r["test_name"] or "",
        )
    )
    return rows


def backend_comparisons(docs: list[Any]) -> list[dict[str, Any]]:
    """Every (host, model file, candidate backend) with its rows against llama.cpp on the same host and file."""
    recs = [d for d in docs]
    current = [
        r for r in latest_per_key(recs) if r.ok and r.in_process and r.model_sha256
    ]
    groups: dict[tuple[str, str], dict[str, list[RunRecord]]] = {}
    for r in current:
        if (
            not r.model_sha256
        ):  # none left (current has a model file each): narrows the type
            continue
        groups.setdefault((r.host_id, r.model_sha256), {}).setdefault(
            r.backend, []
        ).append(r)
    from core import noise as noise_core
    from pipelines import facts as facts_mod
    from pipelines import noise as noise_mod

    fx = facts_mod.of(docs)

    def noise(r: RunRecord) -> tuple[stats.RunNoise | None, stats.RunNoise | None]:
        return noise_mod.noise_for(fx.noise, r), fx.fleet_noise.get(
            noise_core.noise_class(r.test)
        )

    out = []
    for (host, _sha), by_backend in sorted(groups.items()):
        baseline = next(
            (b for b, rs in sorted(by_backend.items()) if is_reference(rs)), None
        )
        if baseline is None:
            continue
        base = by_backend[baseline]
        for backend in sorted(b for b in by_backend if b != baseline):
            cand = by_backend[backend]
            rows = compare_backends(base, cand, noise)
            if not rows:
                continue
            out.append(
                {
                    "host": host,
                    "model": base[0].model_name,
                    "synthetic": base[0].synthetic,
                    "baseline": baseline,
                    "candidate": backend,
                    "baseline_build": base[-1].backend_build,
                    "candidate_build": cand[-1].backend_build,
                    "candidate_settings": cand[-1].effective,
                    "rows": rows,
                }
            )
    return out
