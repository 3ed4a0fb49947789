"""The Open data page: where the site publishes every artifact and table, and the artifact
format, generated from the JSON Schemas in data/schema/ (never described by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import artifacts
from core.paths import schema_dir
from pipelines.site.markdown import ROOT, cell, code, fold, prose, table

MAX_DEPTH = (
    4  # nested objects are listed down to this depth; the schema file has the rest
)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node: dict[str, Any], schema: dict[str, Any] | None = None) -> str:
    if "const" in node:
        return f"const {json.dumps(node['const'])}"
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    t = node.get("type")
    if isinstance(t, list):
        return " or ".join(t)
    if t:
        return str(t)
    for k in ("oneOf", "anyOf"):
        if k in node:
            return " or ".join(
                _type(_resolve(schema, x) if schema is not None else x, schema)
                for x in node[k]
                if isinstance(x, dict)
            )
    return "any"


def _object_of(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The object schema behind a node that is one (a nullable reference: ``anyOf [$ref, null]``)."""
    for alt in node.get("anyOf") or []:
        if isinstance(alt, dict) and "$ref" in alt:
            return _resolve(schema, alt)
    return node


def _notes(node: dict[str, Any]) -> str:
    parts = []
    if node.get("description"):
        parts.append(str(node["description"]))
    for k in ("pattern", "format", "minimum", "maximum", "minLength", "minItems"):
        if k in node:
            v = str(node[k])
            # a pattern is code (prose() renders the span): its backslashes are the regex's, not escapes
            parts.append(
                f"{k} `{v}`" if k == "pattern" and "`" not in v else f"{k} {v}"
            )
    return "; ".join(parts)


def fields(
    schema: dict[str, Any],
    node: dict[str, Any] | None = None,
    prefix: str = "",
    depth: int = 0,
) -> list[tuple[str, str, bool, str]]:
    """(dotted path, type, required, notes) for every property, depth first."""
    node = _resolve(schema, node if node is not None else schema)
    out: list[tuple[str, str, bool, str]] = []
    required = set(node.get("required", []))
    for name, sub in (node.get("properties") or {}).items():
        sub = _resolve(schema, sub) if isinstance(sub, dict) else {}
        path = f"{prefix}{name}"
        out.append((path, _type(sub, schema), name in required, _notes(sub)))
        if depth + 1 >= MAX_DEPTH:
            continue
        sub = _object_of(schema, sub)
        if sub.get("properties"):
            out += fields(schema, sub, path + ".", depth + 1)
        items = sub.get("items")
        if isinstance(items, dict) and _resolve(schema, items).get("properties"):
            out += fields(schema, items, path + "[].", depth + 1)
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and _resolve(schema, extra).get("properties"):
            out += fields(schema, extra, path + ".<name>.", depth + 1)
    return out


def kind_fields(
    schema: dict[str, Any],
) -> list[tuple[str, list[tuple[str, str, bool, str]]]]:
    """Per test kind the schema names in its ``allOf`` conditions (``test.kind`` const): the fields of
    its ``samples`` and ``details`` (core/schema.py generates them from the kinds' models)."""
    out = []
    for cond in schema.get("allOf") or []:
        kind = (
            (((cond.get("if") or {}).get("properties") or {}).get("test") or {})
            .get("properties", {})
            .get("kind", {})
        )
        then = ((cond.get("then") or {}).get("properties")) or {}
        if "const" not in kind or not then:
            continue
        node = {
            "properties": {
                part: then[part] for part in ("samples", "details") if part in then
            }
        }
        out.append((str(kind["const"]), fields(schema, node)))
    return out


def artifact_format() -> str:
    """One folded section per artifact type: its schema's title, description and every field (a run's
    samples and details per test kind)."""
    out = []
    for name, atype in sorted(artifacts.ARTIFACT_TYPES.items()):
        path = atype.schema_path()
        schema = json.loads(Path(path).read_text())
        rows = [
            [code(p), cell(t), "yes" if req else "", prose(n)]
            for p, t, req, n in fields(schema)
        ]
        out += [
            f"### `{name}` (version {atype.version})",
            "",
            prose(schema.get("description") or atype.description),
            "",
            f"Schema: {code(path.relative_to(schema_dir().parent.parent).as_posix())}, published at "
            f'<a href="{ROOT}schema/{path.name}" download>schema/{path.name}</a>.',
            "",
            fold(
                "Every field",
                table(
                    ["field", "type", "required", "meaning and constraints"],
                    rows,
                    max_rows=None,
                ),
            ),
            "",
        ]
        for kind, kf in kind_fields(schema):
            krows = [
                [code(p), cell(t), "yes" if req else "", prose(n)]
                for p, t, req, n in kf
            ]
            out += [
                fold(
                    "",
                    table(
                        ["field", "type", "required", "meaning and constraints"],
                        krows,
                        max_rows=None,
                    ),
                    title_html=f"Samples and details of a {code(kind)} run",
                ),
                "",
            ]
    return "\n".join(out)


def published_paths() -> str:
    """The layout of the published data, as a table."""
    rows = [
        [
            code("data/runs/<host>/<model>/<test>--<key>-<time>.json"),
            "run",
            "one measured configuration",
        ],
        [
            code("data/quality/<host>/<model>/<suite>--<key>-<time>.json"),
            "quality",
            "one quality run",
        ],
        [code("data/hosts/<host>/*.json"), "host", "a host probe (memory bandwidth)"],
        [code("data/projections/<host>/*.json"), "projection", "a projection record"],
        [
            code("data/decisions/<host>/*.json"),
            "decision",
            "a go/no-go decision with its evidence",
        ],
        [code("runs/index.json"), "—", "the runs browser's list (also index.csv)"],
        [
            code("quality-runs/index.json"),
            "—",
            "the quality runs browser's list (also index.csv)",
        ],
        [code("tables/<digest>.csv"), "—", "a table of a page, every row (also .json)"],
        [
            code("index/artifacts.parquet"),
            "every type",
            "the index: one row per artifact (path, sha256, id, key, host, model, test, status; also .csv)",
        ],
        [
            code("index/metrics.parquet"),
            "run, quality",
            "the index: one row per artifact and metric (n, mean, median, stddev, p95, p99, CI; also .csv)",
        ],
        [
            code("schema/<type>.v<N>.schema.json"),
            "—",
            "the JSON Schema every artifact of that type follows",
        ],
    ]
    return table(["path in the site", "artifact type", "what"], rows, downloads=False)
