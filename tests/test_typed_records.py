"""Pipelines take typed records only (issue 28, Build item 1): a run reaches a pipeline as the
record the loader made (core.records.run.RunRecord: pipelines.dataset, core.records.run.read_all),
never as a document to wrap on the way in. Entry points that hold raw documents (the tasks, the
importers, a test's fixture) make the records; this test reads every pipelines module's syntax
tree for the wrapper (``as_record``) and for a parameter typed "a record or a dict"."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ROOT / "pipelines"
WRAPPERS = {"as_record"}


def _offences(tree: ast.AST, rel: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in WRAPPERS:
            out.append(f"{rel}:{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name in WRAPPERS:
            out.append(f"{rel}: imports {node.name}")
        elif isinstance(node, ast.arg) and node.annotation is not None:
            members = {ast.unparse(m).split("[")[0] for m in _union(node.annotation)}
            if "RunRecord" in members and members & LOOSE:
                text = ast.unparse(node.annotation)
                out.append(f"{rel}:{node.lineno}: {node.arg}: {text}")
    return out


#: what a "record or document" parameter is typed as beside RunRecord
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


def test_no_pipeline_wraps_a_document_into_a_run_record():
    found = []
    for p in sorted(PIPELINES.rglob("*.py")):
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
