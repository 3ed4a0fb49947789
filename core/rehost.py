"""Give every artifact of a data folder the host id its own fingerprint gives (issue 27).

An almanac before core.hostid hashed the CPU's model string, cores, memory and GPU names into a
host id, so two different machines could share one (``vm-568ab3c6`` was two VMs: one with AMX and
a 480 MiB L3, one without AMX and a 260 MiB L3). :func:`plan` works out, and :func:`apply` writes:

* every artifact with a fingerprint taken on its host (runs, quality, perplexity, host probes,
  noise) gets ``core.hostid.host_id`` of that fingerprint (the facts it records: an older
  fingerprint keeps its facts and stays older, so it is still joined to a newer fingerprint of the
  same machine on load); an inventory-only or imported host keeps its id;
* an artifact that names its host by id only (decisions, projections) follows the artifacts it
  rests on (the ids it names): the host of the newest of them, noted where they lie on several
  hosts; one that names none follows its old host where that became one host;
* a measured artifact's ``key`` (a configuration's identity on one host) is made again with the new
  host id: exactly (core.records.run.config_key) where the old key is reproduced from the run
  with the old id, otherwise the digest of the old key and the new id; ``matrix.baseline_key``
  likewise. Artifact ids stay as they are, so links to them still hold;
* files move to the new host's folders (a folder named by the old id is renamed; a file name's
  ``--<key[:16]>-`` follows the new key); ``host_labels:`` of hosts.yaml follows its host.

Each file keeps its schema version and every other byte of its content; each rewritten document is
validated before anything is written, and a problem (an invalid file, two files bound for one path)
stops the whole plan with nothing written. Running it again changes nothing.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import artifacts, hostid
from core.errors import ArtifactError, ArtifactErrors
from core.paths import relpath


@dataclass
class Move:
    """One artifact file rewritten: from ``src`` to ``dst`` (the same path where only content changes)."""

    src: Path
    dst: Path
    doc: dict[
        str, Any
    ]  # the file's document as it will be written (its own schema version)
    old_host: str
    new_host: str


@dataclass
class Plan:
    root: Path
    moves: list[Move] = field(default_factory=list)
    hosts: dict[str, set[str]] = field(
        default_factory=dict
    )  # old host id -> the new ids its artifacts got
    notes: list[str] = field(
        default_factory=list
    )  # what a reader should know (one line each)
    labels_text: str | None = None  # hosts.yaml as it will be written (None: unchanged)
    checked: int = 0

    @property
    def splits(self) -> dict[str, set[str]]:
        """Old host ids that were several machines: old id -> their new ids."""
        return {old: new for old, new in self.hosts.items() if len(new) > 1}

    def summary(self) -> list[str]:
        lines = [
            f"{old} -> {', '.join(sorted(new))}"
            for old, new in sorted(self.hosts.items())
            if new != {old}
        ]
        lines += self.notes
        moved = sum(1 for m in self.moves if m.src != m.dst)
        lines.append(
            f"{len(self.moves)} of {self.checked} artifact files rewritten ({moved} moved)"
            + (
                ", hosts.yaml's host_labels updated"
                if self.labels_text is not None
                else ""
            )
        )
        return lines


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _derived_key(old_key: str, new_host: str) -> str:
    from core.records.run import digest

    return digest({"key": old_key, "host": new_host})


def _key_recipe(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The inputs of core.records.run.config_key that reproduce a run's stored key with its recorded
    host id (all but the host), or None when no variant reproduces it (core.identity.key_recipe)."""
    from core import identity
    from core.records.run import RunRecord

    try:
        return identity.key_recipe(RunRecord(doc))
    except (KeyError, TypeError, AttributeError):
        return None


def _new_path(
    root: Path,
    path: Path,
    old_host: str,
    new_host: str,
    old_key: str | None,
    new_key: str | None,
) -> Path:
    rel = path.relative_to(root)
    parts = [new_host if p == old_host else p for p in rel.parts[:-1]]
    name = rel.parts[-1]
    if old_key and new_key and old_key != new_key:
        name = name.replace(f"--{old_key[:16]}-", f"--{new_key[:16]}-")
    return root.joinpath(*parts, name)


def plan(root: Path | str) -> Plan:
    """What :func:`apply` would do to the data folder ``root`` (reads only). An invalid artifact, or
    two artifacts bound for one file, is an ArtifactErrors listing every problem."""
    root = Path(root)
    out = Plan(root)
    problems: list[str] = []
    entries: list[
        tuple[Path, dict[str, Any], dict[str, Any]]
    ] = []  # (path, file's document, current-version document)
    for path in artifacts.iter_files(root):
        out.checked += 1
        try:
            doc = artifacts.load(path)
            raw = artifacts.parse(path.read_text(encoding="utf-8"), relpath(path))
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        entries.append((path, raw, doc))
    if problems:
        raise ArtifactErrors(problems, out.checked)

    # 1. fingerprinted artifacts: the id their own fingerprint gives
    new_id: dict[int, str] = {}  # index in entries -> new host id
    by_artifact: dict[
        str, tuple[str, str]
    ] = {}  # artifact id -> (created, new host id)
    for i, (_, raw, _) in enumerate(entries):
        fp = raw.get("host")
        if (
            isinstance(fp, dict)
            and isinstance(fp.get("id"), str)
            and isinstance(fp.get("cpu"), dict)
        ):
            nid = hostid.host_id(fp) if hostid.measured(fp) else fp["id"]
            new_id[i] = nid
            out.hosts.setdefault(fp["id"], set()).add(nid)
            by_artifact[str(raw.get("id"))] = (str(raw.get("created") or ""), nid)

    # 2. artifacts that name their host by id only: the host of what they rest on
    for i, (path, raw, _) in enumerate(entries):
        if i in new_id or not isinstance(raw.get("host_id"), str):
            continue
        old = raw["host_id"]
        rests = {by_artifact[s] for s in _strings(raw) if s in by_artifact}
        hosts = {h for _, h in rests}
        if hosts:
            nid = max(rests)[1]
            if len(hosts) > 1 and nid != old:
                out.notes.append(
                    f"{relpath(path)} rests on artifacts of {len(hosts)} hosts ({', '.join(sorted(hosts))}): "
                    f"given the host of the newest, {nid}"
                )
        elif len(out.hosts.get(old, ())) == 1:
            nid = next(iter(out.hosts[old]))
        else:
            nid = old
            if len(out.hosts.get(old, ())) > 1:
                out.notes.append(
                    f"{relpath(path)} names host {old}, now {len(out.hosts[old])} hosts, and rests on no "
                    "artifact that tells which: left as it is"
                )
        new_id[i] = nid

    # 3. keys made again with the new host id; documents and paths
    recipes: dict[str, dict[str, Any]] = {}
    for i, (_, raw, doc) in enumerate(entries):
        if (
            doc.get("artifact") == "run"
            and i in new_id
            and new_id[i] != raw["host"]["id"]
        ):
            recipe = _key_recipe(doc)
            if recipe is not None:
                recipes.setdefault(doc["key"], recipe)

    def rekey(old_key: str, nid: str) -> str:
        from core.records.run import config_key

        recipe = recipes.get(old_key)
        return (
            config_key(host_id=nid, **recipe)
            if recipe is not None
            else _derived_key(old_key, nid)
        )

    bound: dict[Path, Path] = {}
    for i, (path, raw, _) in enumerate(entries):
        nid = new_id.get(i)
        if nid is None:
            continue
        fp = raw.get("host")
        has_fp = isinstance(fp, dict) and isinstance(fp.get("cpu"), dict)
        old = fp["id"] if has_fp else raw["host_id"]
        if nid == old:
            continue
        new = copy.deepcopy(raw)
        if has_fp:
            new["host"]["id"] = nid
        else:
            new["host_id"] = nid
        old_key = raw.get("key") if isinstance(raw.get("key"), str) else None
        if old_key is not None:
            new["key"] = rekey(old_key, nid)
        matrix = new.get("matrix")
        if isinstance(matrix, dict) and isinstance(matrix.get("baseline_key"), str):
            matrix["baseline_key"] = rekey(matrix["baseline_key"], nid)
        dst = _new_path(root, path, old, nid, old_key, new.get("key"))
        try:
            artifacts.check(new, relpath(path))
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        if dst in bound:
            problems.append(
                str(
                    ArtifactError(
                        f"would be written to {relpath(dst)}, as {relpath(bound[dst])} would",
                        file=relpath(path),
                    )
                )
            )
            continue
        bound[dst] = path
        out.moves.append(Move(path, dst, new, old, nid))
    moving = {m.src for m in out.moves}
    for m in out.moves:
        if m.dst != m.src and m.dst.exists() and m.dst not in moving:
            problems.append(
                str(
                    ArtifactError(
                        f"would be written to {relpath(m.dst)}, which holds another artifact",
                        file=relpath(m.src),
                    )
                )
            )
    if problems:
        raise ArtifactErrors(problems, out.checked)
    out.labels_text = _labels_text(root / "hosts.yaml", out)
    return out


def _labels_text(path: Path, out: Plan) -> str | None:
    """hosts.yaml with each ``host_labels:`` key that became one new host renamed (comments kept);
    None when nothing changes. A label of a host that became several is noted and left."""
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    from core.hostlabel import configured_labels

    for old in configured_labels(path):
        new = out.hosts.get(old, set())
        if len(new) > 1:
            out.notes.append(
                f"{relpath(path)}: host_labels.{old} names a host that is now {len(new)} hosts "
                f"({', '.join(sorted(new))}): give each its own label"
            )
        elif len(new) == 1 and new != {old}:
            text = re.sub(
                rf"^(\s+){re.escape(old)}(\s*:)",
                rf"\g<1>{next(iter(new))}\g<2>",
                text,
                flags=re.M,
            )
    return None if text == path.read_text(encoding="utf-8") else text


def apply(p: Plan) -> None:
    """Write the plan: every rewritten document (atomically), then remove the files it moved from,
    and folders left empty."""
    for m in p.moves:
        artifacts.atomic_write_text(m.dst, artifacts.dumps(m.doc))
    written = {m.dst for m in p.moves}
    for m in p.moves:
        if m.src != m.dst and m.src not in written:
            m.src.unlink()
            parent = m.src.parent
            while parent != p.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
    if p.labels_text is not None:
        artifacts.atomic_write_text(p.root / "hosts.yaml", p.labels_text)


def reidentify(root: Path | str, dry_run: bool = False) -> Plan:
    """Plan, and unless ``dry_run`` apply, the host ids of the data folder ``root``."""
    p = plan(root)
    if not dry_run:
        apply(p)
    return p


def moved_paths(p: Plan) -> dict[str, str]:
    """Old path -> new path (relative to the plan's folder, POSIX) of every file the plan moves."""
    return {
        m.src.relative_to(p.root).as_posix(): m.dst.relative_to(p.root).as_posix()
        for m in p.moves
        if m.src != m.dst
    }
