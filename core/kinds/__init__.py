"""Test kinds: what a run measures. One module per kind, registered here by name.

A kind's module (``core/kinds/<name>.py``) declares its spec, metrics, headline and typed
samples/details in one :class:`~core.kinds.base.Kind` and calls :func:`register`. The built-in
kinds are listed once, in ``BUILTIN``; a kind of your own registers the same way from its
module (``ALMANAC_KINDS`` in the environment names extra modules to import, so worker child
processes see them too). A second kind of the same name is an error.
"""

from __future__ import annotations

import difflib
import importlib
import os
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError
from core.kinds.base import Kind, TestSpec
from core.registry import Registry
from core.yamlio import pydantic_error_line

# The one place built-in kinds are named (module paths, imported on first use); the run schema
# lists them in this order (core.schema).
BUILTIN = (
    "core.kinds.rate",
    "core.kinds.chat",
    "core.kinds.serve",
    "core.kinds.concurrency",
    "core.kinds.generate",
    "core.kinds.agent",
    "core.kinds.load",
    "core.kinds.capacity",
    "core.kinds.probe",
    "core.kinds.embed",
    "core.kinds.tokenize",
)

#: The order pages list kinds in (the Methodology page's tables, a backend's kinds), whatever
#: order their modules happen to be imported in; kinds not named here follow, as registered.
LISTED = (
    "chat",
    "generate",
    "rate",
    "agent_loop",
    "serve",
    "concurrency",
    "load",
    "capacity",
    "probe",
    "embed",
    "tokenize",
)

_KINDS: Registry[Kind] = Registry("test kind")
_loaded = False


def register(kind: Kind) -> Kind:
    """Add a kind; a name registered twice is an error naming both places."""
    default = kind.spec.model_fields["kind"].default
    if default != kind.name:
        raise ValueError(
            f"test kind {kind.name!r}: its spec's kind field defaults to {default!r}"
        )
    return _KINDS.add(kind.name, kind, stacklevel=2)


def unregister(name: str) -> None:
    """Remove a kind (tests that register an example kind clean up with this)."""
    _KINDS.pop(name, None)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    extra = tuple(
        m for m in os.environ.get("ALMANAC_KINDS", "").split(",") if m.strip()
    )
    for module in BUILTIN + extra:
        importlib.import_module(module.strip())


def all_kinds() -> dict[str, Kind]:
    """Every registered kind by name, in ``LISTED``'s order, then the others as registered."""
    _load()
    rank = {name: i for i, name in enumerate(LISTED)}
    return dict(sorted(_KINDS.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def get(name: str) -> Kind | None:
    _load()
    return _KINDS.get(name)


def headline(name: str) -> Any:
    """The Metric a kind is ranked and compared on, or None (unknown kind, or a kind without one)."""
    from core.metrics import METRICS

    kind = get(name)
    return METRICS[kind.headline] if kind is not None and kind.headline else None


def columns(name: str) -> tuple[str, ...]:
    """The metrics shown beside the headline in a kind's tables."""
    kind = get(name)
    return kind.columns if kind is not None else ()


def parse_test(raw: Any, *, file: str | None = None, field: str = "tests") -> TestSpec:
    """A test from YAML: a short string (``pp512``, a rate test) or a mapping with ``kind``."""
    _load()
    from core.kinds.rate import RateTest

    try:
        if isinstance(raw, str):
            return RateTest.parse(raw)
        if not isinstance(raw, dict):
            raise ConfigError(
                f"expected a test name or a mapping, got {type(raw).__name__}",
                file=file,
                field=field,
            )
        name = raw.get("kind", "rate")
        kind = _KINDS.get(name) if isinstance(name, str) else None
        if kind is None:
            close = difflib.get_close_matches(str(name), list(_KINDS), n=1)
            hint = (
                f" (did you mean {close[0]!r}?)"
                if close
                else f" (known: {', '.join(sorted(_KINDS))})"
            )
            raise ConfigError(
                f"unknown test kind {name!r}{hint}", file=file, field=f"{field}.kind"
            )
        test = kind.spec.model_validate(raw)
        test.check_name()
        return test
    except ValidationError as exc:
        cls = _KINDS.get(raw.get("kind", "rate")) if isinstance(raw, dict) else None
        fields = list((cls.spec if cls else RateTest).model_fields)
        raise ConfigError(
            pydantic_error_line(exc, {"*": fields}), file=file, field=field
        ) from None
    except ValueError as exc:
        raise ConfigError(str(exc), file=file, field=field) from None


__all__ = [
    "BUILTIN",
    "Kind",
    "TestSpec",
    "all_kinds",
    "columns",
    "get",
    "headline",
    "parse_test",
    "register",
    "unregister",
]
