"""The project's committed measurements, apart from whatever the live data/ folder holds now.

A user's `invoke all` adds its own host's artifacts under data/ (issue 19: after it, a test that
read the live folder found the new host's rows and failed). Tests that make assertions about the
committed rows read them from here: the artifacts git has at HEAD (``git ls-tree``), or, outside a
git checkout, the list recorded with the golden pages fixture (tests/fixtures/golden_pages.json).
A file listed but absent (a partial checkout) is left out.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
ARTIFACT_DIRS = ("runs", "hosts", "projections", "quality", "perplexity")


@functools.cache
def committed_files() -> tuple[str, ...]:
    """The committed artifact files under data/ (paths relative to data/), sorted."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", "--", "data"],
                             capture_output=True, text=True, check=True, timeout=30).stdout.split("\n")
        rels = [p[len("data/"):] for p in out if p.endswith(".json")]
    except (OSError, subprocess.SubprocessError):
        rels = json.loads((ROOT / "tests" / "fixtures" / "golden_pages.json").read_text())["committed_files"]
    rels = [r for r in rels if r.split("/", 1)[0] in ARTIFACT_DIRS]
    return tuple(sorted(r for r in rels if (DATA / r).is_file()))


def committed_paths(under: str = "runs") -> list[Path]:
    """The committed artifact files under data/<under>/ (``under`` ending in "-": a prefix of the folder
    name, e.g. "runs/lent-h100-")."""
    prefix = under if under.endswith(("/", "-")) else under + "/"
    return [DATA / r for r in committed_files() if r.startswith(prefix)]


def committed_runs():
    """The committed run artifacts as records, oldest first (core.records.run.read_all's order)."""
    from core.records import run as record

    recs = [record.read(p) for p in committed_paths("runs")]
    recs.sort(key=lambda r: (r.created, r.id))
    return recs


def committed_data(dest: Path) -> Path:
    """A data dir made of the project's inputs (registries, matrices, ...) and the committed
    artifacts only."""
    from tests.support.golden_sets import make_set

    return make_set("committed", dest, list(committed_files()))
