"""Benchmark matrices: YAML files under data/matrices/ expanded into configurations.

A matrix names a backend, models, base settings, an optional sweep (the cartesian product
of setting values) and tests. ``include:`` pulls a base matrix in (keys given here win).
Everything is validated before anything runs, and an error names the file and the field.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import backends
from .errors import ConfigError
from .paths import data_dir, relpath
from .workloads import TestSpec, parse_test
from .yamlio import load_yaml, pydantic_error_line

MATRIX_VERSION = 1


class MatrixFile(BaseModel):
    """The YAML format of a matrix (after includes are merged)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(MATRIX_VERSION, description="Format version of this file.")
    name: str = Field(..., min_length=1, description="Matrix name, recorded in every artifact.")
    description: str = Field("", description="What this matrix is for.")
    backend: str = Field("llama_cpp", description="Backend that runs it (see the Methodology page).")
    models: list[str] = Field(..., min_length=1, description="Model names from data/models.yaml, or paths to .gguf files.")
    repetitions: int = Field(5, ge=1, description="Timed repetitions per test (llama-bench -r).")
    warmup: bool = Field(True, description="One untimed warm-up run before the timed ones.")
    timeout_s: float = Field(1800.0, gt=0, description="Wall-clock limit of one configuration's child process.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Backend settings shared by every configuration.")
    sweep: dict[str, list[Any]] = Field(default_factory=dict, description="Settings to sweep: every combination is a configuration.")
    tests: list[Any] = Field(..., min_length=1, description="Tests: pp512, tg128, tg128@d512, or mappings (kind: chat, ...).")
    include: str | None = Field(None, description="A base matrix file merged under this one.")

    @field_validator("sweep")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"sweep of {k!r} has no values")
        return v


@dataclass(frozen=True)
class Configuration:
    """One point of a matrix: a model, full settings and a test."""

    matrix: str
    matrix_file: str
    backend: str
    model: str
    settings: Any  # the backend's settings model, validated
    swept: dict[str, Any]  # the values this point takes on swept settings
    test: TestSpec
    timeout_s: float


@dataclass(frozen=True)
class Matrix:
    path: Path
    spec: MatrixFile
    tests: list[TestSpec]

    @property
    def name(self) -> str:
        return self.spec.name

    def configurations(self) -> list[Configuration]:
        cls = backends.settings_class(self.spec.backend)
        keys = list(self.spec.sweep)
        combos = list(itertools.product(*(self.spec.sweep[k] for k in keys))) or [()]
        out: list[Configuration] = []
        for model in self.spec.models:
            for combo in combos:
                swept = dict(zip(keys, combo))
                settings = _validate_settings(cls, {**self.spec.settings, **swept}, self.path, swept)
                for test in self.tests:
                    out.append(Configuration(self.name, relpath(self.path), self.spec.backend, model, settings, swept,
                                             test, self.spec.timeout_s))
        return out


def _validate_settings(cls: Any, values: dict[str, Any], path: Path, swept: dict[str, Any]) -> Any:
    try:
        return cls.model_validate(values)
    except ValidationError as exc:
        line = pydantic_error_line(exc, {"*": list(cls.model_fields)})
        where = "sweep" if exc.errors()[0]["loc"] and exc.errors()[0]["loc"][0] in swept else "settings"
        raise ConfigError(line, file=relpath(path), field=where) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if k in ("settings", "sweep") and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _read_with_includes(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    if path.resolve() in seen:
        raise ConfigError("include cycle", file=relpath(path), field="include")
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("a matrix must be a mapping", file=relpath(path))
    inc = raw.get("include")
    if inc:
        base_path = (path.parent / inc).resolve()
        if not base_path.exists():
            raise ConfigError(f"included file {inc!r} not found", file=relpath(path), field="include")
        base = _read_with_includes(base_path, seen + (path.resolve(),))
        base.pop("include", None)
        raw = _merge(base, {k: v for k, v in raw.items() if k != "include"})
    return raw


def matrices_dir() -> Path:
    return data_dir() / "matrices"


def find(name_or_path: str) -> Path:
    """A matrix by file path or by name in data/matrices/."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    cand = matrices_dir() / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    import difflib

    names = sorted(x.stem for x in matrices_dir().glob("*.yaml"))
    close = difflib.get_close_matches(name_or_path, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(names)})"
    raise ConfigError(f"no matrix named {name_or_path!r}{hint}", file=relpath(matrices_dir()))


def load(name_or_path: str | Path) -> Matrix:
    path = find(str(name_or_path))
    raw = _read_with_includes(path)
    try:
        spec = MatrixFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc, {"*": list(MatrixFile.model_fields)}), file=relpath(path)) from None
    if spec.schema_version != MATRIX_VERSION:
        raise ConfigError(f"version {spec.schema_version} is not supported (this almanac reads {MATRIX_VERSION})",
                          file=relpath(path), field="schema_version")
    try:
        backends.settings_class(spec.backend)
    except Exception as exc:
        raise ConfigError(str(exc).removeprefix("backend: "), file=relpath(path), field="backend") from None
    tests = []
    for i, raw_test in enumerate(spec.tests):
        t = parse_test(raw_test, file=relpath(path), field=f"tests[{i}]")
        updates = {}
        if t.repetitions is None:
            updates["repetitions"] = spec.repetitions
        if t.warmup is None:
            updates["warmup"] = spec.warmup
        tests.append(t.model_copy(update=updates))
    m = Matrix(path=path, spec=spec, tests=tests)
    m.configurations()  # validates every settings combination now, before anything runs
    return m
