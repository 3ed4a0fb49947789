"""Where the project's data lives. ``ALMANAC_ROOT`` overrides the repository root."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("ALMANAC_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    env = os.environ.get("ALMANAC_DATA")
    if env:
        return Path(env).resolve()
    return project_root() / "data"


def schema_dir() -> Path:
    """JSON Schemas ship with the code (they describe what this version writes)."""
    return Path(__file__).resolve().parents[1] / "data" / "schema"


def runs_dir() -> Path:
    return data_dir() / "runs"


def cache_dir() -> Path:
    env = os.environ.get("ALMANAC_CACHE")
    if env:
        return Path(env).resolve()
    return Path.home() / ".cache" / "inference-almanac"


def relpath(path: Path | str) -> str:
    """A path relative to the project root when it lies inside it (for messages and artifacts)."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(project_root()))
    except ValueError:
        return str(p)


def slug(text: str) -> str:
    """A name made safe for a file or folder: lowercase letters, digits and single dashes."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "host"
