"""What every artifact model shares: strictness, the one dump, the one-line rejection, and the
field types the JSON Schemas used by hand (a JSON number, a date-time, an id, a sha256)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Annotated, Any, ClassVar, Self, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
)

from core.errors import ArtifactError


def _number(v: Any) -> int | float:
    """A JSON number kept as written (1 stays 1, 1.0 stays 1.0: the artifact's bytes do not change);
    a bool is not a number (JSON Schema's rule)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError("Input should be a number")
    return v


_DATE = (
    r"\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|02-(?:0[1-9]|1\d|2[0-8]))|(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29"
)
#: JSON Schema's ``date-time`` (RFC 3339) as the loader's validator checks it (core.artifacts hands it
#: to fastjsonschema) and as this model does: the T and Z upper-case and no leap second, which is what
#: ``datetime.fromisoformat`` (every page's reader) reads. One notion of valid: fastjsonschema's own
#: format also took ``2026-11-28t10:00:00z`` and ``10:00:60``, which the model then refused.
DATE_TIME_PATTERN = (
    rf"^(?:{_DATE})T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)\Z"
)
_DATE_TIME = re.compile(DATE_TIME_PATTERN)


def _date_time(v: str) -> str:
    try:
        if not _DATE_TIME.match(v):
            raise ValueError
        datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"{v!r} is not a date-time") from None
    return v


def bounded(
    v: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> int | float:
    v = _number(v)
    if gt is not None and not v > gt:
        raise ValueError(f"Input should be greater than {gt}")
    if ge is not None and not v >= ge:
        raise ValueError(f"Input should be greater than or equal to {ge}")
    if le is not None and not v <= le:
        raise ValueError(f"Input should be less than or equal to {le}")
    return v


AS_WRITTEN = PlainSerializer(lambda v: v, return_type=Any)
#: a JSON number (integer or not), returned unchanged
Number = Annotated[
    int | float,
    PlainValidator(_number),
    AS_WRITTEN,
    WithJsonSchema({"type": "number"}),
]
#: a JSON number at least 0
NonNegativeNumber = Annotated[
    int | float,
    PlainValidator(partial(bounded, ge=0)),
    AS_WRITTEN,
    WithJsonSchema({"type": "number", "minimum": 0}),
]
#: a JSON number from 0 to 1 (a rate, a share, a score)
Fraction = Annotated[
    int | float,
    PlainValidator(partial(bounded, ge=0, le=1)),
    AS_WRITTEN,
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1}),
]


def _integral(v: Any) -> Any:
    """A JSON integer as JSON Schema reads one: 8.0 is the integer 8 (the validator, fastjsonschema,
    accepts it for ``"type": "integer"``, so the model must too: one notion of valid); 8.5 and true
    are left for the strict int check to refuse."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


#: after an int's constraints (``Annotated[int, Field(ge=0), INTEGRAL]``: placed last, the schema
#: keeps its ``minimum``/``maximum``), an integral float is read as the integer it is
INTEGRAL = BeforeValidator(_integral)
#: a JSON integer
Integer = Annotated[int, INTEGRAL]
#: a count (an integer at least 0) and a positive integer
Count = Annotated[int, Field(ge=0), INTEGRAL]
Positive = Annotated[int, Field(ge=1), INTEGRAL]
#: a JSON number above 0
PositiveNumber = Annotated[
    int | float,
    PlainValidator(partial(bounded, gt=0)),
    AS_WRITTEN,
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0}),
]
#: an ISO 8601 date-time string, stored as written
DateTime = Annotated[
    str,
    AfterValidator(_date_time),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
ID_PATTERN = r"^[a-z0-9][a-z0-9-]*-[0-9]{8}T[0-9]{6}Z$"
HOST_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"


def absent(description: str | None = None) -> Any:
    """The default of an optional field that, when present, is never null: it is left out of the
    dump when not given, and the schema keeps its type without ``null``."""
    return Field(default=None, description=description)


_MISSING: Any = object()


class _ReadsLikeItsDocument(BaseModel):
    """``obj["field"]`` and ``obj.get("field")`` read what the stored document holds (a field left
    out of it reads as missing, an undeclared one of an open object as written), so code that read
    the document's dicts reads the model unchanged."""

    def get(self, key: str, default: Any = None) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key) if key in self.model_fields_set else default
        return (self.model_extra or {}).get(key, default)

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    @classmethod
    def read(cls, d: Any) -> Self:
        """A stored part read through the model; a part read without validation (a partial document
        a test builds: missing or mistyped fields) reads what it has, the rest as None, and its own
        parts as stored."""
        d = d if isinstance(d, Mapping) else {}
        try:
            return cls.model_validate(d)
        except ValueError:
            known = {name: d.get(name) for name in cls.model_fields}
            return cast(Self, cls.model_construct(**known))


class Closed(_ReadsLikeItsDocument):
    """An object with exactly its declared fields (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Open(_ReadsLikeItsDocument):
    """An object with its declared fields and any others, kept as written."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class Failure(Open):
    """Why a measurement failed: its kind and the message (a type may narrow the kinds)."""

    kind: str
    message: str


class ArtifactModel(Closed):
    """A whole artifact of one type: ``ARTIFACT`` names it; the docstring is its schema's
    description."""

    ARTIFACT: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""

    def dump(self) -> dict[str, Any]:
        """The canonical document: the fields given when it was built, as JSON values, under their
        stored names."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    @classmethod
    def check(cls, doc: Mapping[str, Any], source: str = "<artifact>") -> Self:
        """``doc`` read through the model; a rejection is one ArtifactError naming ``source``, the
        field path and what is wrong."""
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise rejection(exc, source) from None


def rejection(exc: ValidationError, source: str) -> ArtifactError:
    """The first error of a pydantic rejection as one ArtifactError line."""
    err = exc.errors(include_url=False)[0]
    path = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    return ArtifactError(msg, file=source, field=path)
