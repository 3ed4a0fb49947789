"""Benchmark matrices: YAML files under data/matrices/ expanded into configurations.

A matrix names a backend, models, base settings, an optional sweep (the cartesian product
of setting values) and tests. ``include:`` pulls a base matrix in (keys given here win).
Everything is validated before anything runs, and an error names the file and the field.

A sweep may name its ``baseline`` (settings that make the reference point, e.g.
``{speculative: none}``): every point of the sweep is then compared with it. ``sweeps:`` holds
several independent, named sweeps in one matrix (a K sweep on one model, an expert sweep on
another), each with its own models, settings, sweep, baseline and tests, the matrix's
top-level values serving as their defaults.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import ConfigError
from core.kinds import parse_test
from core.kinds.base import TestSpec
from core.paths import data_dir, relpath
from core.precision import Precision
from core.yamlio import load_yaml, pydantic_error_line
from runtime import backends

MATRIX_VERSION = 1
MAX_CONFIGURATIONS = (
    10_000  # a matrix that expands to more is refused before it is expanded
)
# Test fields that fix how many samples a test takes: given in a test (or repetitions in a matrix
# or sweep) without a precision, they keep that fixed count.
COUNT_FIELDS = frozenset(
    {"repetitions", "requests", "rounds", "max_requests", "repeats"}
)


class MatrixFile(BaseModel):
    """The YAML format of a matrix (after includes are merged)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        MATRIX_VERSION, description="Format version of this file."
    )
    name: str = Field(
        ..., min_length=1, description="Matrix name, recorded in every artifact."
    )
    description: str = Field("", description="What this matrix is for.")
    backend: str = Field(
        backends.DEFAULT, description="Backend that runs it (see the Methodology page)."
    )
    models: list[str] = Field(
        default_factory=list,
        description=(
            "Model names from data/models.yaml, or paths to .gguf files (required "
            "unless every entry of sweeps names its own)."
        ),
    )
    repetitions: int = Field(
        5,
        ge=1,
        description="Timed repetitions per test (llama-bench -r) when precision is null.",
    )
    precision: Precision | None = Field(
        default_factory=Precision,
        description="Repeat every test until the CI95 half-width of "
        "its mean is within a target or a ceiling is hit (default: ±2%, 3 to 30 samples, 120 s); "
        "null, or a count given without it (repetitions here or in a sweep; repetitions, requests "
        "or rounds in a test): that fixed count.",
    )
    warmup: bool = Field(
        True, description="One untimed warm-up run before the timed ones."
    )
    timeout_s: float = Field(
        1800.0,
        gt=0,
        description="Wall-clock limit of one configuration's child process.",
    )
    requests_kept: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Load, capacity and concurrency tests: most request records an artifact stores per level, "
        "chosen by a seeded reservoir (every statistic is still over all requests; the level says k of n).",
    )
    keep_all_requests: bool = Field(
        False,
        description="Load, capacity and concurrency tests: when a level was sampled, write every request record beside "
        "the artifact (<artifact>.requests.jsonl.gz, its sha256 in the artifact).",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Backend settings shared by every configuration.",
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Settings to sweep: every combination is a configuration.",
    )
    tests: list[Any] = Field(
        default_factory=list,
        description=(
            "Tests: pp512, tg128, tg128@d512, or mappings (kind: chat, ...) (required "
            "unless every entry of sweeps names its own)."
        ),
    )
    include: str | None = Field(
        None, description="A base matrix file merged under this one."
    )
    baseline: dict[str, Any] | None = Field(
        None,
        description=(
            "Settings (over the base settings) of the point every point of the sweep is "
            "compared with, e.g. {speculative: none}."
        ),
    )
    sweeps: list[SweepBlock] = Field(
        default_factory=list,
        description=(
            "Several named sweeps in one matrix, each with its own models, settings, "
            "sweep, baseline and tests (defaults: the matrix's)."
        ),
    )

    @model_validator(mode="after")
    def _blocks(self) -> MatrixFile:
        if self.sweeps:
            if self.sweep or self.baseline is not None:
                raise ValueError(
                    "give either a top-level sweep (and baseline) or sweeps, not both"
                )
            names = [b.name for b in self.sweeps]
            dup = next((n for n in names if names.count(n) > 1), None)
            if dup:
                raise ValueError(f"sweeps: two sweeps are named {dup!r}")
        for name in ("models", "tests"):
            if not getattr(self, name) and (
                not self.sweeps or any(not getattr(b, name) for b in self.sweeps)
            ):
                raise ValueError(
                    f"{name}: required field is missing"
                    + (
                        " (in the matrix or in every entry of sweeps)"
                        if self.sweeps
                        else ""
                    )
                )
        return self

    @field_validator("sweep")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"sweep of {k!r} has no values")
        return v


class SweepBlock(BaseModel):
    """One named sweep of a matrix's ``sweeps:`` list."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        ...,
        min_length=1,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Name of the sweep, recorded in every artifact it produces.",
    )
    description: str = Field("", description="What this sweep is for.")
    models: list[str] = Field(
        default_factory=list, description="Models (default: the matrix's)."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings over the matrix's."
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Settings to sweep: every combination is a point.",
    )
    baseline: dict[str, Any] | None = Field(
        None,
        description="Settings (over this sweep's settings) of the point the others are compared with.",
    )
    tests: list[Any] = Field(
        default_factory=list, description="Tests (default: the matrix's)."
    )
    repetitions: int | None = Field(
        None,
        ge=1,
        description="Timed repetitions of this sweep's tests (default: the matrix's).",
    )
    precision: Precision | None = Field(
        None,
        description="Precision target of this sweep's tests (default: the matrix's; null: a fixed count).",
    )

    @field_validator("sweep")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return MatrixFile._non_empty(v)


MatrixFile.model_rebuild()


@dataclass(frozen=True)
class Block:
    """A sweep ready to expand: its own models, merged settings, parsed tests and baseline."""

    name: str
    description: str
    models: list[str]
    settings: dict[str, Any]
    sweep: dict[str, list[Any]]
    baseline: dict[str, Any] | None
    tests: list[TestSpec]
    field_prefix: str  # where its fields live in the file ("" or "sweeps[2].")


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
    sweep: str = ""  # name of the sweep this point belongs to (the matrix's name for its top-level sweep)
    baseline: Any = None  # the settings of this point's baseline, validated (None: the sweep names none)


@dataclass(frozen=True)
class Matrix:
    path: Path
    spec: MatrixFile
    tests: list[TestSpec]
    blocks: list[Block] = field(
        default_factory=list
    )  # the sweeps to expand (one for a plain matrix)

    @property
    def name(self) -> str:
        return self.spec.name

    def configurations(self) -> list[Configuration]:
        """Every point: per sweep, its baseline first (when named), then the sweep's combinations
        (a combination equal to the baseline is the baseline, not a second point)."""
        cls = backends.settings_class(self.spec.backend)
        out: list[Configuration] = []
        blocks = self.blocks or [_plain_block(self)]
        total = 0
        for block in blocks:  # counted before anything is expanded: 9 values of 9 settings is 387 million points
            n = (
                len(block.models)
                * len(block.tests)
                * (
                    (1 if block.baseline is not None else 0)
                    + math.prod(len(v) for v in block.sweep.values())
                )
            )
            total += n
            if total > MAX_CONFIGURATIONS:
                raise ConfigError(
                    f"expands to more than {MAX_CONFIGURATIONS} configurations (models x sweep values "
                    "x tests); split it into smaller matrices",
                    file=relpath(self.path),
                    field=f"{block.field_prefix}sweep",
                )
        for block in blocks:
            keys = list(block.sweep)
            combos = list(itertools.product(*(block.sweep[k] for k in keys))) or [()]
            for model in block.models:
                base = None
                points: list[tuple[dict[str, Any], Any]] = []
                if block.baseline is not None:
                    base = _validate_settings(
                        cls,
                        {**block.settings, **block.baseline},
                        self.path,
                        {},
                        where=f"{block.field_prefix}baseline",
                    )
                    points.append(
                        (
                            {
                                **{k: getattr(base, k, None) for k in keys},
                                **block.baseline,
                            },
                            base,
                        )
                    )
                for combo in combos:
                    swept = dict(zip(keys, combo))
                    settings = _validate_settings(
                        cls,
                        {**block.settings, **swept},
                        self.path,
                        swept,
                        prefix=block.field_prefix,
                    )
                    if base is not None and settings.model_dump(
                        mode="json"
                    ) == base.model_dump(mode="json"):
                        continue
                    points.append((swept, settings))
                for swept, settings in points:
                    for test in block.tests:
                        out.append(
                            Configuration(
                                self.name,
                                relpath(self.path),
                                self.spec.backend,
                                model,
                                settings,
                                swept,
                                test,
                                self.spec.timeout_s,
                                sweep=block.name,
                                baseline=base,
                            )
                        )
        return out


def _plain_block(m: Matrix) -> Block:
    return Block(
        m.spec.name,
        m.spec.description,
        list(m.spec.models),
        dict(m.spec.settings),
        dict(m.spec.sweep),
        m.spec.baseline,
        list(m.tests),
        "",
    )


def _validate_settings(
    cls: Any,
    values: dict[str, Any],
    path: Path,
    swept: dict[str, Any],
    *,
    prefix: str = "",
    where: str | None = None,
) -> Any:
    try:
        return cls.model_validate(values)
    except ValidationError as exc:
        line = pydantic_error_line(exc, {"*": list(cls.model_fields)})
        if where is None:
            loc = exc.errors()[0]["loc"]
            # a combination refused as a whole (no field in loc) is the sweep's doing when it names a swept setting
            in_sweep = loc[0] in swept if loc else any(k in line for k in swept)
            where = prefix + ("sweep" if in_sweep else "settings")
        raise ConfigError(line, file=relpath(path), field=where) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if (
            k in ("settings", "sweep")
            and isinstance(v, dict)
            and isinstance(out.get(k), dict)
        ):
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
            raise ConfigError(
                f"included file {inc!r} not found", file=relpath(path), field="include"
            )
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
    hint = (
        f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(names)})"
    )
    raise ConfigError(
        f"no matrix named {name_or_path!r}{hint}", file=relpath(matrices_dir())
    )


def _parse_tests(
    raw: list[Any],
    spec: MatrixFile,
    path: Path,
    where: str,
    repetitions: int,
    precision: Precision | None,
) -> list[TestSpec]:
    tests = []
    for i, raw_test in enumerate(raw):
        t = parse_test(raw_test, file=relpath(path), field=f"{where}[{i}]")
        updates: dict[str, Any] = {}
        if t.repetitions is None:
            updates["repetitions"] = repetitions
        if t.warmup is None:
            updates["warmup"] = spec.warmup
        if (
            "precision" not in t.model_fields_set
        ):  # a test's own precision (or null) wins
            # a count the test fixes itself (repetitions, requests, rounds) is kept as a fixed count
            updates["precision"] = (
                None if t.model_fields_set & COUNT_FIELDS else precision
            )
        tests.append(t.model_copy(update=updates))
    return tests


def _matrix_precision(spec: MatrixFile) -> Precision | None:
    """The matrix's precision: given, or the default unless the matrix fixes ``repetitions`` itself."""
    if (
        "precision" in spec.model_fields_set
        or "repetitions" not in spec.model_fields_set
    ):
        return spec.precision
    return None


def _block_precision(b: SweepBlock, spec: MatrixFile) -> Precision | None:
    if "precision" in b.model_fields_set:
        return b.precision
    if "repetitions" in b.model_fields_set:
        return None
    return _matrix_precision(spec)


def load(name_or_path: str | Path) -> Matrix:
    path = find(str(name_or_path))
    raw = _read_with_includes(path)
    try:
        spec = MatrixFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(MatrixFile.model_fields)}),
            file=relpath(path),
        ) from None
    if spec.schema_version != MATRIX_VERSION:
        raise ConfigError(
            f"version {spec.schema_version} is not supported (this almanac reads {MATRIX_VERSION})",
            file=relpath(path),
            field="schema_version",
        )
    try:
        backends.settings_class(spec.backend)
    except Exception as exc:
        raise ConfigError(
            str(exc).removeprefix("backend: "), file=relpath(path), field="backend"
        ) from None
    tests = _parse_tests(
        spec.tests, spec, path, "tests", spec.repetitions, _matrix_precision(spec)
    )
    m = Matrix(path=path, spec=spec, tests=tests)
    if spec.sweeps:
        blocks = []
        for i, b in enumerate(spec.sweeps):
            prefix = f"sweeps[{i}]."
            bprec = _block_precision(b, spec)
            btests = (
                _parse_tests(
                    b.tests,
                    spec,
                    path,
                    f"{prefix}tests",
                    b.repetitions or spec.repetitions,
                    bprec,
                )
                if b.tests
                else _parse_tests(
                    spec.tests,
                    spec,
                    path,
                    "tests",
                    b.repetitions or spec.repetitions,
                    bprec,
                )
            )
            blocks.append(
                Block(
                    b.name,
                    b.description,
                    list(b.models or spec.models),
                    {**spec.settings, **b.settings},
                    dict(b.sweep),
                    b.baseline,
                    btests,
                    prefix,
                )
            )
        m = Matrix(path=path, spec=spec, tests=tests, blocks=blocks)
    m.configurations()  # validates every settings combination now, before anything runs
    return m
