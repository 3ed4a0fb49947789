"""Backends by name, imported lazily ("name": "module:Class"), so the HTTP path never
imports llama_cpp and pipelines never import a backend at all.

Backend names are written here and in each backend's own package only: everything else asks a
backend class what it is (runtime.backends.base.Backend: ``in_process``, ``servers``,
``test_kinds``) or reads what its artifacts recorded."""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Any

from core.errors import BackendError
from core.registry import Registry

if TYPE_CHECKING:
    from core.records.run import RunRecord

# name -> (settings class, backend class, distribution whose version keys the results),
# classes as "module:attribute"
BACKENDS: Registry[tuple[str, str, str]] = Registry("backend")
_BUILT_IN = {
    "llama_cpp": (
        "runtime.backends.llama_cpp.config:LlamaCppSettings",
        "runtime.backends.llama_cpp.backend:LlamaCppBackend",
        "llama-cpp-python",
    ),
    "openai_http": (
        "runtime.backends.openai_http.config:OpenAIHttpSettings",
        "runtime.backends.openai_http.backend:OpenAIHttpBackend",
        "httpx",
    ),
    # optional extra (pip install -e '.[transformers]'): torch + transformers, in process
    "transformers": (
        "runtime.backends.transformers.config:TransformersSettings",
        "runtime.backends.transformers.backend:TransformersBackend",
        "transformers",
    ),
}
for _name, _triple in _BUILT_IN.items():
    BACKENDS.add(_name, _triple)
DEFAULT = "llama_cpp"  # the backend a matrix runs on when it names none


def _plugins() -> None:
    """Third-party backends: the entry-point group ``inference_almanac.backends`` (value
    "settings_module:Class backend_module:Class dist"), and ``ALMANAC_BACKENDS`` in the
    environment (JSON {name: [settings, backend, dist]}) for ad-hoc ones; both reach the
    worker child processes, which inherit the environment."""
    import json
    import os
    from importlib.metadata import entry_points

    for ep in entry_points(group="inference_almanac.backends"):
        parts = ep.value.split()
        if len(parts) == 3:
            where = f"entry point {ep.name} = {ep.value!r} of {ep.dist.name if ep.dist else '?'}"
            BACKENDS.add(ep.name, (parts[0], parts[1], parts[2]), where=where)
    extra = os.environ.get("ALMANAC_BACKENDS")
    if extra:
        try:
            for name, triple in json.loads(extra).items():
                BACKENDS.add(name, tuple(triple), where="ALMANAC_BACKENDS")
        except (ValueError, TypeError, AttributeError):
            raise BackendError(
                "ALMANAC_BACKENDS is not JSON of {name: [settings, backend, dist]}",
                field="ALMANAC_BACKENDS",
            ) from None


def _import(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _check(name: str) -> tuple[str, str, str]:
    if name not in BACKENDS:
        _plugins()
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, list(BACKENDS), n=1)
        hint = (
            f" (did you mean {close[0]!r}?)"
            if close
            else f" (known: {', '.join(sorted(BACKENDS))})"
        )
        raise BackendError(f"unknown backend {name!r}{hint}", field="backend")
    return BACKENDS[name]


def settings_class(name: str) -> Any:
    """The backend's settings model; importing it never imports the backend's library."""
    return _import(_check(name)[0])


_CHECKED: set[str] = set()


def backend_class(name: str) -> Any:
    """The backend's class; its declared test kinds must be known (core.kinds), or it is refused."""
    cls = _import(_check(name)[1])
    if name not in _CHECKED:
        from core import kinds

        unknown = [k for k in getattr(cls, "test_kinds", ()) if kinds.get(k) is None]
        if unknown:
            raise BackendError(
                f"backend {name!r} declares test kinds {unknown} that no module registers "
                "(core.kinds.BUILTIN, or ALMANAC_KINDS for a kind of your own)",
                field="backend",
            )
        _CHECKED.add(name)
    return cls


def command_lines(run: RunRecord) -> dict[str, str] | None:
    """The command lines that reproduce a run outside the almanac, asked of the backend that ran it
    (``Backend.command_lines``): None when that backend prints none or is not installed here."""
    try:
        cls = backend_class(run.backend)
    except BackendError:
        return None
    lines: dict[str, str] | None = cls.command_lines(run)
    return lines


def preload(name: str) -> None:
    """Import the native libraries a backend needs loaded before anything else (its package's
    ``PRELOAD``), in a worker process before the backend's module pulls numpy & co in. Seen on the
    lent H100 image (its own numpy build): with numpy imported first, a CUDA libllama loaded
    afterwards segfaults in its first std::stringstream. Failures are left to the backend's own
    import, which reports them as data."""
    try:
        package = _check(name)[1].partition(":")[0].rsplit(".", 1)[0]
        modules = getattr(importlib.import_module(package), "PRELOAD", ())
    except Exception:
        return
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:
            pass


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
