"""Pipelines read artifacts through typed records, and nothing but the backends knows a backend's
name (#18): both checked by reading the source, as `grep` would. Pipelines also take typed records
only (#28): an artifact reaches a pipeline as the record the loader made (pipelines.dataset,
core.records.run.read_all), never as a document wrapped on the way in; entry points that hold raw
documents (the tasks, the importers, a test's fixture) make the records. Checked on every pipelines
module's syntax tree: no wrapper (``as_record``, ``as_quality``, ...), no parameter typed "a record
or a dict"."""

from __future__ import annotations

import ast
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


WRAPPERS = {
    "as_record",
    "as_quality",
    "as_perplexity",
    "as_host",
    "as_noise",
    "as_projection",
    "as_decision",
}


def _offences(tree: ast.AST, rel: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in WRAPPERS:
            out.append(f"{rel}:{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name in WRAPPERS:
            out.append(f"{rel}: imports {node.name}")
        elif isinstance(node, ast.arg) and node.annotation is not None:
            members = {ast.unparse(m).split("[")[0] for m in _union(node.annotation)}
            if members & RECORDS and members & LOOSE:
                text = ast.unparse(node.annotation)
                out.append(f"{rel}:{node.lineno}: {node.arg}: {text}")
    return out


RECORDS = {
    "RunRecord",
    "QualityRecord",
    "PerplexityRecord",
    "HostRecord",
    "NoiseRecord",
    "ProjectionRecord",
    "DecisionRecord",
}
#: what a "record or document" parameter is typed as beside a record
LOOSE = {"dict", "Mapping", "Any", "typing.Any"}


def _union(ann: ast.expr) -> list[ast.expr]:
    """The members of an annotation's top-level union (``A | B``, ``Union[A, B]``), or itself."""
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _union(ann.left) + _union(ann.right)
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in (
        "Union",
        "typing.Union",
    ):
        sl = ann.slice
        return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
    return [ann]


def test_no_pipeline_wraps_a_document_into_a_record():
    found = []
    for p in _py(ROOT / "pipelines"):
        rel = p.relative_to(ROOT).as_posix()
        found += _offences(ast.parse(p.read_text(), rel), rel)
    assert found == []


def test_the_check_sees_a_wrapper_and_a_loose_parameter():
    src = (
        "from core.records.run import as_record\n"
        "def f(doc: RunRecord | dict, by_key: dict[str, RunRecord]) -> None:\n"
        "    return as_record(doc).id\n"
    )
    assert _offences(ast.parse(src), "x.py") == [
        "x.py: imports as_record",
        "x.py:2: doc: RunRecord | dict",
        "x.py:3: as_record",
    ]
