"""What `.github/workflows/bench-self-hosted.yml` runs besides the benchmark itself.

    python3 .ci/bench_workflow.py labels "almanac-cpu, almanac-gpu" >> "$GITHUB_OUTPUT"
    python3 .ci/bench_workflow.py merge INCOMING DATA

``labels``: the runner labels the workflow fans out over, as a JSON list for the measure job's
``strategy.matrix`` (each label letters, digits, ``.``, ``_``, ``-``; at least one; no repeats).

``merge``: every runner's uploaded ``data/runs`` tree (``INCOMING/runs-<label>/...``, one folder per
workflow artifact) into ``DATA/runs``, each artifact validated (schema, version) and found at the
path its own content names (core.records.run.run_path: host id, model, test, key, time), so a
forged or misplaced file is refused; an artifact already there with the same bytes is skipped, a
different one under the same name is refused. One line per refused file, exit 1, nothing written
then. Only the standard library and core/ (jsonschema, pyyaml, pydantic) are needed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABEL = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def labels(text: str) -> str:
    items = [s for s in re.split(r"[,\s]+", text.strip()) if s]
    bad = [s for s in items if not LABEL.match(s)]
    if not items:
        raise SystemExit("runner_labels: no label given (e.g. almanac-cpu,almanac-gpu)")
    if bad:
        raise SystemExit(
            f"runner_labels: {bad[0]!r} is not a runner label (letters, digits, '.', '_', '-')"
        )
    if len(set(items)) != len(items):
        raise SystemExit("runner_labels: a label is repeated")
    return "labels=" + json.dumps(items, separators=(",", ":"))


def merge(incoming: Path, data: Path) -> tuple[list[tuple[Path, Path]], list[str]]:
    """(source, destination) pairs to copy and the refusals, one line each."""
    sys.path.insert(0, str(ROOT))
    from core import artifacts, request_records
    from core.errors import ArtifactError
    from core.records.run import run_path

    todo: list[tuple[Path, Path]] = []
    refused: list[str] = []
    runs = data / "runs"
    seen: dict[Path, bytes] = {}
    sidecars: dict[
        Path, str
    ] = {}  # every request-records file sent -> its name in messages
    claimed: set[Path] = set()  # those an artifact names (and that matched it)
    for runner in sorted(p for p in incoming.iterdir() if p.is_dir()):
        for src in sorted(runner.rglob("*")):
            rel = src.relative_to(runner)
            name = f"{runner.name}/{rel.as_posix()}"
            if src.is_symlink():
                refused.append(f"{name}: refused (a symbolic link)")
                continue
            if not src.is_file():
                continue
            if src.name.endswith(request_records.SUFFIX):  # comes with its artifact
                sidecars[src] = name
                continue
            if src.suffix != ".json":
                refused.append(f"{name}: refused (not a JSON artifact)")
                continue
            try:
                doc = artifacts.load(src)
            except ArtifactError as exc:
                refused.append(f"{name}: {exc}")
                continue
            if (
                request_records.full_file(doc) is not None
            ):  # its records: one line with it
                claimed.add(request_records.sidecar_path(src))
            if doc.get("artifact") != "run":
                refused.append(f"{name}: refused (not a run artifact)")
                continue
            want = run_path(doc, Path("."))
            if Path(*rel.parts) != want:
                refused.append(f"{name}: refused (its content names {want.as_posix()})")
                continue
            dest = runs / rel
            body = src.read_bytes()
            if dest.exists() and dest.read_bytes() != body:
                refused.append(
                    f"{name}: refused (data/runs/{rel.as_posix()} exists with other content)"
                )
                continue
            if dest in seen and seen[dest] != body:
                refused.append(
                    f"{name}: refused (another runner sent other content under that name)"
                )
                continue
            bad = request_records.problem(src, doc)  # every record it kept beside it
            if bad:
                refused.append(f"{name}: refused ({bad})")
                continue
            if not dest.exists() and dest not in seen:
                seen[dest] = body
                if request_records.full_file(doc) is not None:  # written before it
                    todo.append(
                        (
                            request_records.sidecar_path(src),
                            request_records.sidecar_path(dest),
                        )
                    )
                todo.append((src, dest))
    refused += [
        f"{name}: refused (request records no artifact names)"
        for src, name in sidecars.items()
        if src not in claimed
    ]
    return todo, refused


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "labels":
        print(labels(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "merge":
        incoming, data = Path(argv[1]), Path(argv[2])
        if not incoming.is_dir():
            print(
                f"merge: {incoming} is not a folder (no runner uploaded artifacts?)",
                file=sys.stderr,
            )
            return 1
        todo, refused = merge(incoming, data)
        for line in refused:
            print(line, file=sys.stderr)
        if refused:
            print(
                f"merge: {len(refused)} files refused; nothing merged", file=sys.stderr
            )
            return 1
        sys.path.insert(0, str(ROOT))
        from core import artifacts

        for src, dest in todo:  # an artifact's request records (checked) before it
            artifacts.atomic_write_bytes(dest, src.read_bytes())
        runners = len([p for p in incoming.iterdir() if p.is_dir()])
        n = sum(1 for _, dest in todo if dest.suffix == ".json")
        extra = len(todo) - n
        print(
            f"merged {n} new artifacts from {runners} runners into {data / 'runs'}"
            + (f" (and {extra} request-records files beside them)" if extra else "")
        )
        return 0
    print(__doc__.strip().splitlines()[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
