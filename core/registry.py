"""One registry helper with one rule: a name registered twice is an error naming both places.

Every table of named things (kinds, artifact types, metrics, backends, scorers, checkers,
synthetic shapes, kind sites, per-host pages, write checks) is a :class:`Registry`. It reads like
the dict it replaces; adding a name that is already there with something else raises
:class:`DuplicateName`, which names the thing, the name, where the first registration was made and
where the second was attempted. Registering the very same value again (a module imported twice)
is no conflict. Tests that add a thing take it out again with ``del`` or :meth:`Registry.pop`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
_ROOT = Path(__file__).resolve().parents[1]


class DuplicateName(ValueError):
    """A name registered twice with two different things."""


def _caller(stacklevel: int) -> str:
    """``path:line`` of the frame ``stacklevel`` above :meth:`Registry.add` (1: its caller)."""
    try:
        frame = sys._getframe(stacklevel + 1)
    except ValueError:
        return "?"
    path = Path(frame.f_code.co_filename)
    if path.is_relative_to(_ROOT):
        path = path.relative_to(_ROOT)
    return f"{path}:{frame.f_lineno}"


class Registry(MutableMapping[str, T]):
    """Named things of one sort (``what``, e.g. "metric"), each name registered once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._where: dict[str, str] = {}

    def add(
        self, name: str, item: T, *, where: str | None = None, stacklevel: int = 1
    ) -> T:
        """Register ``item`` under ``name`` and return it. ``where`` says where the registration
        comes from (default: the file and line that called, ``stacklevel`` frames up)."""
        place = where or _caller(stacklevel)
        if name in self._items:
            old = self._items[name]
            if old is item or old == item:
                return old
            raise DuplicateName(
                f"{self.what} {name!r} registered twice: at {self._where[name]} and at {place}"
            )
        self._items[name] = item
        self._where[name] = place
        return item

    def where(self, name: str) -> str:
        """Where ``name`` was registered."""
        return self._where[name]

    def __setitem__(self, name: str, item: T) -> None:
        self.add(name, item, stacklevel=2)

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __delitem__(self, name: str) -> None:
        del self._items[name]
        self._where.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {sorted(self._items)})"
