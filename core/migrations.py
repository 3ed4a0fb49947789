"""Migrations of stored artifacts: ``<type>_to_<N>`` turns a version N-1 document into version N
(the asv ``update_to_N`` way). core.artifacts applies them on load, so every stored file is read
in the current shape and never rewritten: a measurement stays as it was measured.
"""

from __future__ import annotations

from typing import Any


def run_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    """Run v1 -> v2: the model was always a local file (``kind: file``, its sha256 as its identity,
    or its name where a remote host never reported the hash); whether the backend ran the model in
    process follows from whether it talked to a server (v1 recorded the server it talked to)."""
    model = dict(doc["model"])
    model.setdefault("kind", "file")
    model.setdefault("identity", model.get("sha256") or model.get("name"))
    build = dict(doc["build"])
    build.setdefault("in_process", not (build.get("server") or build.get("endpoint")))
    return {**doc, "model": model, "build": build}


def noise_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    """Noise v1 -> v2: a v1 A/A ran a fixed count of runs and counted its first (warm-up) run, so
    every run is marked counted (``warmup: false``), no warm-up was dropped, the stopping record
    says "fixed", and each estimate is judged by the current rule (core.noise.assess: the CI95 a
    single run widened by it gets; too noisy beyond core.noise.USEFUL_FACTOR, and why)."""
    from core import noise

    runs = [{**r, "warmup": False} for r in doc["runs"]]
    ests = {}
    for cls, e in doc["estimates"].items():
        verdict = noise.assess(float(e["sigma"]), int(e["df"]))
        if verdict["why"]:
            verdict["why"] += (
                f" (a version 1 A/A of {e['runs']} runs, its first run counted)"
            )
        ests[cls] = {**e, "warmup_dropped": 0, **verdict}
    counted = (doc.get("conditions") or {}).get("matrix_runs")
    if not isinstance(counted, int) or isinstance(counted, bool) or counted < 0:
        counted = max((int(e["runs"]) for e in doc["estimates"].values()), default=0)
    stopping = {
        "rule": "version 1: a fixed count of runs, the first (warm-up) run counted",
        "useful_factor": noise.USEFUL_FACTOR,
        "min_df": noise.MIN_DF,
        "warmup_runs": 0,
        "counted_runs": counted,
        "max_runs": None,
        "budget_s": None,
        "reason": "fixed",
    }
    return {**doc, "runs": runs, "estimates": ests, "stopping": stopping}
