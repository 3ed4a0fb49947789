"""YAML reading with one-line errors, and pydantic errors turned into one line."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core import filestamp, safefile
from core.errors import ConfigError, UserError
from core.paths import relpath

MAX_YAML_BYTES = (
    8 << 20
)  # an input file larger than this is refused before it is parsed
MAX_YAML_NODES = (
    200_000  # scalars + collections after alias expansion ("billion laughs" guard)
)
QUOTE_CHARS = 80  # error messages quote at most this much of the input, on one line


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` on one line and at most ``limit`` characters (error messages quote input)."""
    try:
        text = repr(value)
    except (
        Exception
    ):  # a hostile __repr__ never reaches here (input is plain data), but be safe
        text = f"<{type(value).__name__}>"
    text = text.replace("\n", " ").replace("\r", " ")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_text(
    path: Path | str,
    *,
    what: str = "text file",
    max_bytes: int | None = None,
    error: type[UserError] = ConfigError,
) -> str:
    """A file read as UTF-8 text, every failure as one line naming the file (no traceback)."""
    path = Path(path)
    src = relpath(path)
    raw = safefile.read_bytes(
        path,
        max_bytes=max_bytes if max_bytes is not None else MAX_YAML_BYTES,
        what=what,
        error=error,
    )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(
            f"is not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line} (offset {exc.start})",
            file=src,
        ) from None


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """Number of nodes ``node`` stands for once every alias is expanded (memoised: linear in the
    document). Stops counting past ``limit``."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        sizes[key] = (
            limit + 1
        )  # a node met again while being counted: a recursive alias
        if isinstance(n, yaml.ScalarNode):
            total = 1
        elif isinstance(n, yaml.SequenceNode):
            total = 1
            for child in n.value:
                total += size(child)
                if total > limit:
                    break
        else:  # MappingNode
            total = 1
            for k, v in n.value:
                total += size(k) + size(v)
                if total > limit:
                    break
        sizes[key] = total
        return total

    return size(node)


# A file's parsed document, kept while its stamp (core.filestamp) is the one it had: one build asks for
# the same registry once per page (host labels, slots, what-if: 1,655 parses, 7 s of a 10,000-artifact
# fleet's build), and parsing YAML in Python is slow. Each caller gets its own deep copy (callers may
# change what they get).
_PARSED: dict[str, tuple[str, Any]] = {}
_PARSED_MAX = 256


def load_yaml(path: Path | str) -> Any:
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return _parse(path)  # read_text says what is wrong
    name = os.path.abspath(path)
    sig = filestamp.stamp(st)
    hit = _PARSED.get(name)
    if hit is not None and hit[0] == sig:
        return copy.deepcopy(hit[1])
    data = _parse(path)
    if filestamp.settled(st):
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[name] = (sig, copy.deepcopy(data))
    return data


def _parse(path: Path) -> Any:
    src = relpath(path)
    text = read_text(path, what="YAML file", max_bytes=MAX_YAML_BYTES)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            raise ConfigError("is empty", file=src)
        n = _expanded_size(node, MAX_YAML_NODES)
        if n > MAX_YAML_NODES:
            raise ConfigError(
                f"expands to more than {MAX_YAML_NODES} values once its aliases (*name) are "
                "expanded (an alias bomb?)",
                file=src,
            )
        loader = yaml.SafeLoader("")
        try:
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"malformed YAML: {where}{problem}"[:200], file=src) from None
    except RecursionError:
        raise ConfigError("is nested too deeply", file=src) from None
    if data is None:
        raise ConfigError("is empty", file=src)
    return data


def pydantic_error_line(
    exc: ValidationError, known: dict[str, list[str]] | None = None
) -> str:
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
        msg = f"{msg} (got {quote(err['input'])})"
    msg = " ".join(msg.removeprefix("Value error, ").split())[:300]
    return f"{loc}: {msg}" if loc else msg
