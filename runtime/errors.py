"""The one family of user-facing errors.

A ``UserError`` is caught at the boundary (an invoke task or a CLI entry point) and
printed as one line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, a field and what is wrong with it."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
        self.detail = message
        parts = [p for p in (file, field) if p]
        super().__init__(": ".join(parts + [message]))


class ConfigError(UserError):
    """A matrix, registry or inventory YAML file is malformed or names something unknown."""


class ModelError(UserError):
    """A model file is missing, unreadable, or does not match its recorded hash."""


class ArtifactError(UserError):
    """An artifact is malformed, fails its JSON Schema, or has an unsupported version."""


class BackendError(UserError):
    """A backend name is unknown or a backend cannot be used on this host."""
