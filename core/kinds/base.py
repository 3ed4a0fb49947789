"""The base of every test kind: its spec (what a matrix asks for) and its declaration.

A test kind lives in one module of this package (``rate.py``, ``chat.py``, ...) that owns:
its spec (a pydantic model parsed from matrix YAML), the metrics it measures, its headline
metric and table columns, and the typed shape of its samples and details. The module
declares all of that in one :class:`Kind` and registers it (:func:`core.kinds.register`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.precision import Precision


class TestSpec(BaseModel):
    """Base of every test kind: a name, repetitions and warm-up."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    repetitions: int | None = Field(None, ge=1, description="Timed repetitions (default: the matrix's).")
    warmup: bool | None = Field(None, description="Run one untimed warm-up first (default: the matrix's).")
    precision: Precision | None = Field(None, description="Repeat until the CI95 half-width is within a target "
                                        "(default: the matrix's); null: exactly `repetitions` (or `requests`).")

    label: ClassVar[str] = ""

    @property
    def name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def check_name(self) -> None:
        """A test's name becomes part of an artifact's file name: the rules of an artifact id
        (no hidden file, no path separator, no control characters, bounded length)."""
        name = self.name
        if not TEST_NAME_RE.match(name or "") or len(name) > 80:
            from core.yamlio import quote

            raise ValueError(f"test name {quote(name)} is not a valid id: 1-80 characters, letters, digits and "
                             "._+@- , starting with a letter or digit")

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        d["name"] = self.name
        return d


TEST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$")




class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str



@dataclass(frozen=True)
class Kind:
    """A test kind, declared once by its module.

    ``headline`` is the metric it is ranked and compared on (None: not ranked); ``columns``
    the metrics shown beside it in tables; ``metrics`` every metric its artifacts summarise;
    ``work_fields`` the spec fields that define the work (None: every field but the sample
    size); ``details`` / ``samples``: pydantic models of its artifacts' ``details`` and
    ``samples`` objects, where the kind declares them."""

    name: str
    spec: type[TestSpec]
    description: str
    headline: str | None = None
    columns: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    details: type[BaseModel] | None = None
    samples: type[BaseModel] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
