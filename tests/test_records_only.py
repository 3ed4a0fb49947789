"""Pipelines read artifacts through typed records, and nothing but the backends knows a backend's
name (#18): both checked by reading the source, as `grep` would."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

# raw subscripts of a run's parts, and the chained reads that replaced them before the records
RAW_READS = re.compile(
    r"""\[\s*['"](test|details|samples|summary)['"]\s*\]|\.get\(\s*['"](details|samples)['"]"""
)
BACKEND_NAMES = re.compile(r"""['"](llama_cpp|openai_http)['"]""")


def _py(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_pipelines_read_no_raw_subscripts_of_artifacts():
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in _py(ROOT / "pipelines")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if RAW_READS.search(line)
    ]
    assert not hits, (
        "read these through the typed records (core.records):\n" + "\n".join(hits)
    )


def test_no_backend_name_outside_the_backends():
    """Code outside runtime/backends/ asks a backend what it is (Backend.in_process, servers, test_kinds)
    or reads what its artifacts recorded; only the registry and each backend's package name them.
    (Tests name them on purpose; matrices and the docs' prose name them as configuration.)"""
    roots = [
        ROOT / d for d in ("core", "runtime", "pipelines", "benchmarks", "docs")
    ] + [ROOT / "tasks.py", ROOT / "almanac_tasks"]
    files = [p for r in roots for p in ([r] if r.is_file() else _py(r))]
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in files
        if (ROOT / "runtime" / "backends") not in p.parents
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if BACKEND_NAMES.search(line)
    ]
    assert not hits, "ask the backend's declaration instead:\n" + "\n".join(hits)


def test_the_checks_would_see_a_raw_read():
    assert RAW_READS.search('x = d["test"]["kind"]') and RAW_READS.search(
        "f\"{r['summary']}\""
    )
    assert RAW_READS.search('(doc.get("details") or {}).get("precision")')
    assert not RAW_READS.search("rec.details.precision") and not RAW_READS.search(
        'r["test_name"]'
    )
    assert BACKEND_NAMES.search(
        'IN_PROCESS = "llama_cpp"'
    ) and not BACKEND_NAMES.search("rec.in_process")
