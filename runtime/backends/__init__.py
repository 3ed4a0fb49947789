"""Backends by name, imported lazily ("name": "module:Class"), so the HTTP path never
imports llama_cpp and pipelines never import a backend at all."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from ..errors import BackendError

# name -> (settings class, backend class, distribution whose version keys the results),
# classes as "module:attribute"
BACKENDS: dict[str, tuple[str, str, str]] = {
    "llama_cpp": ("runtime.backends.llama_cpp.config:LlamaCppSettings",
                  "runtime.backends.llama_cpp.backend:LlamaCppBackend",
                  "llama-cpp-python"),
}


def _import(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _check(name: str) -> tuple[str, str, str]:
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, list(BACKENDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(BACKENDS))})"
        raise BackendError(f"unknown backend {name!r}{hint}", field="backend")
    return BACKENDS[name]


def settings_class(name: str) -> Any:
    """The backend's settings model; importing it never imports the backend's library."""
    return _import(_check(name)[0])


def backend_class(name: str) -> Any:
    return _import(_check(name)[1])


def create(name: str, model: Any, settings: Any) -> Any:
    return backend_class(name)(model, settings)


def version(name: str) -> str:
    """Version of the library behind a backend (part of every result's identity)."""
    from importlib import metadata

    dist = _check(name)[2]
    try:
        return f"{dist} {metadata.version(dist)}"
    except metadata.PackageNotFoundError:
        return f"{dist} (not installed)"
