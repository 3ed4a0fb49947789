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
