"""The two data sets the golden-pages test renders (tests/fixtures/make_golden_pages.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.committed import committed_data


def make_set(name: str, dest: Path, files: list[str]) -> Path:
    """``golden``: the project's committed inputs and the golden artifacts; ``committed``: the project's
    committed inputs and the listed committed artifacts of data/ (tests/support/committed.py)."""
    from tests.conftest import make_golden_data

    if name == "golden":
        return make_golden_data(dest)
    return committed_data(dest, only=list(files))
