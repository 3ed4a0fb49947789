"""The one family of user-facing errors.

A ``UserError`` is caught at the boundary (an invoke task or a CLI entry point) and
printed as one line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, a field and what is wrong with it."""

    MAX_CHARS = 600  # an error quotes at most a line of the input: never a whole file or a multi-line value

    def __init__(
        self, message: str, *, file: str | None = None, field: str | None = None
    ):
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


class ArtifactErrors(ArtifactError):
    """Several artifacts are bad (or two are copies of one): every problem, one line each.

    ``str()`` is the count; ``lines()`` is each problem and the count last, for a boundary that
    reports them all (``invoke validate``, the site build) instead of stopping at the first."""

    def __init__(self, problems: list[str], checked: int):
        self.problems = list(problems)
        self.checked = checked
        n = len(self.problems)
        super().__init__(
            f"{n} of {checked} artifact files {'is' if n == 1 else 'are'} invalid"
        )

    def lines(self) -> list[str]:
        return [*self.problems, str(self)]


class StorageError(UserError):
    """A file or folder cannot be written: no space left, a read-only file system, permission
    denied, a lock file that cannot be created. Names the path and what to do."""
