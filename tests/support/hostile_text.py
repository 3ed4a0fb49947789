"""Hostile strings planted in artifacts: every string field that the artifact's schema lets carry
them (and, in every free-form object, a key), so that a built site can be checked for text from an
artifact that became markup (a live link, an image, a script, an event handler, emphasis).

Each payload carries a marker (``zq<N>z``) that is plain text: a check finds where a payload
landed by its marker, whatever became of the rest of it.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core import artifacts, hostid

EVIL = "evil.invalid"  # a host name that cannot resolve: any request to it is a leak
PAYLOADS = [
    '<script>alert("zq1z")</script>',
    '<img src="https://evil.invalid/zq2z.png" onerror="alert(\'zq2z\')">',
    "[zq3z](javascript:alert('zq3z'))",
    "![zq4z](https://evil.invalid/zq4z.png)",
    '<a href="https://evil.invalid/zq5z">zq5z</a>',
    "**zq6z** _zq6z_ *zq6z*",
    "{: onclick=\"alert('zq7z')\" }",
    "{{ zq8z }}{% if 1 %}zq8z{% endif %}",
    "<https://evil.invalid/zq9z>",
    '" onmouseover="alert(\'zq10z\')" x="',
    "</code></pre></td></tr></table><svg onload=\"alert('zq11z')\">",
    "zq12z\n# heading zq12z\n- item zq12z\n```\nfence zq12z",
    "[zq13z]\n\n[zq13z]: javascript:alert('zq13z')",
    "<!-- zq14z",
    "| zq15z | `zq15z` | ~~zq15z~~ |",
    '<iframe src="https://evil.invalid/zq16z"></iframe>',
    "javascript:alert('zq17z')",
    "<details open ontoggle=\"alert('zq18z')\">zq18z",
]
MARKERS = [re.search(r"zq\d+z", p).group(0) for p in PAYLOADS]


def _string_paths(node: Any, where: tuple = ()) -> Iterator[tuple]:
    if isinstance(node, str):
        yield where
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _string_paths(v, (*where, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _string_paths(v, (*where, i))


def _object_paths(node: Any, where: tuple = ()) -> Iterator[tuple]:
    if isinstance(node, dict):
        yield where
        for k, v in node.items():
            yield from _object_paths(v, (*where, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _object_paths(v, (*where, i))


def _get(doc: Any, where: tuple) -> Any:
    for k in where:
        doc = doc[k]
    return doc


def _refusals(doc: dict[str, Any]) -> list[tuple]:
    """Where the schema refuses ``doc`` (paths of every error; [] when validate accepts it)."""
    try:
        artifacts.validate(doc)
        return []
    except Exception as exc:
        err = exc
    name = doc["artifact"]
    validator = artifacts._validator(name, artifacts.ARTIFACT_TYPES[name].version)
    paths = [tuple(e.absolute_path) for e in validator.iter_errors(doc)]
    field = getattr(err, "field", None)
    if (
        not paths and field
    ):  # refused by the fast validator alone (a format, e.g. a date-time)
        paths = [tuple(int(p) if p.isdigit() else p for p in str(field).split("."))]
    return paths or [()]


def _pick(salt: str, where: tuple, variant: int) -> bool:
    """Whether ``variant`` (0 or 1) plants the field at ``where``: each field in one of the two."""
    h = hashlib.sha256(f"{salt}|{where!r}".encode()).digest()[0]
    return (h & 1) == variant


def plant(
    doc: dict[str, Any], variant: int, counter: list[int]
) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``doc`` with hostile text in half of its string fields (``variant`` 0 or 1 picks the
    half; variant 2 plants all) and a hostile key in free-form objects; returns it and the dotted
    paths planted. Fields whose schema refuses the text (ids, hashes, enums, patterns, dates) keep
    their value: everything is planted at once, then what the schema refuses is put back."""
    out = copy.deepcopy(doc)
    salt = doc.get("id", "")
    undo: dict[
        tuple, Any
    ] = {}  # planted path -> how to undo it (old value, or _KEY for an added key)
    for where in list(_string_paths(out)):
        if where[:1] in (("artifact",), ("id",), ("key",), ("created",)):
            continue
        if variant < 2 and not _pick(salt, where, variant):
            continue
        parent = _get(out, where[:-1])
        undo[where] = parent[where[-1]]
        parent[where[-1]] = (
            f"{PAYLOADS[counter[0] % len(PAYLOADS)]} {parent[where[-1]]}"
        )
        counter[0] += 1
    for where in list(_object_paths(out)):
        if variant < 2 and not _pick(salt + "key", where, variant):
            continue
        obj = _get(out, where)
        payload = PAYLOADS[counter[0] % len(PAYLOADS)]
        if payload in obj:
            continue
        obj[payload] = f"value {MARKERS[counter[0] % len(PAYLOADS)]}"
        undo[(*where, payload)] = _KEY
        counter[0] += 1
    for _ in range(50):
        refused = _refusals(out)
        if not refused:
            break
        # put back every planting at or under a refused place (deepest first: keys before their objects)
        for where in sorted(
            (w for w in undo if any(w[: len(r)] == r for r in refused)),
            key=len,
            reverse=True,
        ):
            parent = _get(out, where[:-1])
            if undo[where] is _KEY:
                del parent[where[-1]]
            else:
                parent[where[-1]] = undo[where]
            del undo[where]
    else:
        raise AssertionError(
            f"cannot plant {doc.get('id')}: still refused at {refused[:3]}"
        )
    return out, [".".join(map(str, w)) for w in undo]


_KEY = object()


def _other_id(ident: str, k: int) -> str:
    """A different id of the same form: the last digit before the 'Z' (or the milliseconds) moved by k."""
    m = re.search(r"(\d)(?=(\.\d{3})?Z$)", ident)
    if not m:
        raise ValueError(f"no digit to vary in {ident!r}")
    return ident[: m.start()] + str((int(m.group(1)) + k) % 10) + ident[m.end() :]


def plant_tree(data: Path, variants: tuple[int, ...] = (0, 1)) -> dict[str, int]:
    """Beside every artifact under ``data``, one planted copy per variant (a new id and key, so every
    copy is its own configuration): every string field of every artifact is planted in some copy.
    Returns how many fields were planted per artifact type."""
    counts: dict[str, int] = {}
    counter = [0]
    hosts: dict[
        tuple[str, int], dict[str, Any]
    ] = {}  # (host id, variant) -> the planted fingerprint
    for path in list(artifacts.iter_files(data)):
        doc = artifacts.load(path)
        for v in variants:
            copy_, planted = plant(doc, v, counter)
            fp = doc.get("host")
            if isinstance(fp, dict) and isinstance(fp.get("cpu"), dict):
                # one host id, one machine (core.hostid): a host's copies share the first copy's planted
                # fingerprint, under an id of its own where the planting changed what tells machines apart
                if (fp["id"], v) not in hosts:
                    new = copy_["host"]
                    hosts[fp["id"], v] = (
                        dict(new, id=hostid.host_id(new))
                        if hostid.differing_fact(fp, new)
                        else new
                    )
                copy_["host"] = hosts[fp["id"], v]
            copy_["id"] = _other_id(doc["id"], v + 1)
            if "key" in copy_:
                copy_["key"] = hashlib.sha256(f"{doc['key']}|{v}".encode()).hexdigest()
            dest = path.with_name(f"{path.stem}.planted{v}.json")
            artifacts.write(dest, copy_)
            counts[doc["artifact"]] = counts.get(doc["artifact"], 0) + len(planted)
    return counts
