"""YAML reading with one-line errors, and pydantic errors turned into one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .errors import ConfigError
from .paths import relpath


def load_yaml(path: Path | str) -> Any:
    path = Path(path)
    src = relpath(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", file=src) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a YAML file", file=src) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"malformed YAML: {where}{problem}", file=src) from None
    if data is None:
        raise ConfigError("is empty", file=src)
    return data


def pydantic_error_line(exc: ValidationError, known: dict[str, list[str]] | None = None) -> str:
    """The first error of a pydantic ValidationError as 'field.path: message'."""
    import difflib

    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if p != "__root__")
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        name = str(err["loc"][-1]) if err["loc"] else ""
        msg = f"unknown setting {name!r}"
        candidates = (known or {}).get("*", [])
        close = difflib.get_close_matches(name, candidates, n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    elif "input" in err and err["type"] not in ("value_error",):
        msg = f"{msg} (got {err['input']!r})"
    msg = msg.removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg
