"""The one family of user-facing errors.

A ``UserError`` is caught at the boundary (an invoke task or a CLI entry point) and
printed as one line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, a field and what is wrong with it."""

    MAX_CHARS = 600  # an error quotes at most a line of the input: never a whole file or a multi-line value

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = _one_line(field, 200) if field else field
        self.detail = _one_line(message, self.MAX_CHARS)
        parts = [p for p in (file, self.field) if p]
        super().__init__(": ".join(parts + [self.detail]))


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line (newlines and runs of whitespace as one space), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


class ConfigError(UserError):
    """A matrix, registry or inventory YAML file is malformed or names something unknown."""


class ModelError(UserError):
    """A model file is missing, unreadable, or does not match its recorded hash."""


class ArtifactError(UserError):
    """An artifact is malformed, fails its JSON Schema, or has an unsupported version."""


class BackendError(UserError):
    """A backend name is unknown or a backend cannot be used on this host."""
