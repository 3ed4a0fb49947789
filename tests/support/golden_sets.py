"""The two data sets the golden-pages test renders (tests/fixtures/make_golden_pages.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT_DIRS = ("runs", "hosts", "projections", "quality", "perplexity")


def committed_files() -> list[str]:
    """Every artifact file under data/ now (paths relative to data/)."""
    from core import artifacts

    return sorted(p.relative_to(ROOT / "data").as_posix() for p in artifacts.iter_files(ROOT / "data"))


def make_set(name: str, dest: Path, files: list[str]) -> Path:
    """``golden``: the project's inputs and the golden artifacts; ``committed``: the project's inputs
    and the listed artifacts of data/."""
    from tests.conftest import make_golden_data

    if name == "golden":
        return make_golden_data(dest)
    shutil.copytree(ROOT / "data", dest, ignore=lambda d, names: [
        n for n in names if Path(d) == ROOT / "data" and n in ARTIFACT_DIRS])
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "data" / rel, dest / rel)
    return dest
