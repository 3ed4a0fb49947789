"""Quality matrices: which models and settings answer which suites, with a seeded sample size.

``data/matrices/<name>.yaml`` with ``kind: quality``::

    schema_version: 1
    kind: quality
    name: quality
    backend: llama_cpp
    models: [gemma3-270m-q4_k_m]
    settings: {n_ctx: 8192}
    sweep: {type_k: [f16, q8_0]}     # optional: every combination is a configuration
    seed: 1                          # seeds every suite's sample
    generation: {max_tokens: 96}     # optional: overrides the suites' generation settings
    suites:
      - {suite: instruction_precision, sample: 6}
      - {suite: long_context, sample: 4, generation: {max_tokens: 16}}

``backends:`` (instead of ``backend``) puts the same items through several backends, each
with its own settings over the matrix's (backend parity: data/matrices/quality-parity.yaml)::

    backends:
      - {backend: llama_cpp}
      - {backend: openai_http, settings: {server: llama-server, parallel: 1}}

Everything (suites, items, checks, settings) is validated before anything runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import ConfigError
from core.paths import relpath
from core.yamlio import load_yaml, pydantic_error_line
from runtime import backends
from runtime.execution.matrix import _validate_settings
from runtime.execution.matrix import find as find_matrix
from runtime.quality import suites as suites_mod

QUALITY_MATRIX_VERSION = 1


class SuiteRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str = Field(..., description="Suite name in data/suites/ or a path.")
    sample: int | None = Field(
        None, ge=1, description="Seeded sample size (default: every item)."
    )
    generation: dict[str, Any] = Field(
        default_factory=dict, description="Generation overrides for this suite."
    )
    prompt_style: str | None = Field(
        None,
        description="chat, completion or loglikelihood (default: the model's "
        "most preferred style that the suite and the backend support).",
    )


class BackendRef(BaseModel):
    """One backend a quality matrix puts its items through (``backends:``), with its own settings."""

    model_config = ConfigDict(extra="forbid")
    backend: str = Field(..., description="Backend name (llama_cpp, openai_http, ...).")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings of this backend, over the matrix's."
    )


class QualityMatrixFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = QUALITY_MATRIX_VERSION
    kind: Literal["quality"] = Field(
        ..., description="Marks a quality matrix (speed matrices have no kind)."
    )
    name: str = Field(..., min_length=1)
    description: str = ""
    backend: str = backends.DEFAULT
    backends: list[BackendRef] | None = Field(
        None,
        min_length=1,
        description="Several backends answering the same "
        "items (backend parity); each gets the matrix's settings under its own. "
        "Replaces `backend`.",
    )
    models: list[str] = Field(..., min_length=1)
    settings: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    seed: int = Field(0, description="Seed of every suite's sample.")
    generation: dict[str, Any] = Field(
        default_factory=dict, description="Generation overrides for every suite."
    )
    timeout_s: float = Field(
        1800.0,
        gt=0,
        description="Wall-clock limit of one configuration x suite child process.",
    )
    suites: list[SuiteRef] = Field(..., min_length=1)


@dataclass(frozen=True)
class QualityConfiguration:
    matrix: str
    matrix_file: str
    backend: str
    model: str
    settings: Any
    swept: dict[str, Any]
    suite: suites_mod.Suite
    items: list[suites_mod.Item]
    sample: int | None
    seed: int
    generation: suites_mod.Generation
    timeout_s: float
    prompt_style: str = "chat"


def choose_style(
    ref: SuiteRef,
    suite: suites_mod.Suite,
    model: str,
    model_styles: list[str],
    backend_styles: tuple[str, ...],
    backend: str,
) -> str:
    """The prompt style of one (model, suite): the one asked for, else the model's most preferred
    style that the suite and the backend support; ConfigError (one line) when there is none."""
    usable = [st for st in model_styles if st in backend_styles]
    if ref.prompt_style is not None:
        if ref.prompt_style not in suite.prompt_styles:
            raise ValueError(
                f"suite {suite.name!r} declares no prompt style {ref.prompt_style!r} "
                f"(it declares: {', '.join(suite.prompt_styles)})"
            )
        if ref.prompt_style not in usable:
            raise ValueError(
                f"model {model!r} with backend {backend} has no prompt style {ref.prompt_style!r} "
                f"(it supports: {', '.join(usable) or 'none'})"
            )
        return ref.prompt_style
    for st in usable:
        if st in suite.prompt_styles:
            return st
    raise ValueError(
        f"suite {suite.name!r} declares prompt styles [{', '.join(suite.prompt_styles)}]; model {model!r} "
        f"with backend {backend} supports [{', '.join(usable)}]: none in common"
    )


def model_styles(name: str) -> list[str]:
    """The model's prompt styles from the registry (no file is fetched); [chat] for a bare path."""
    from runtime.models import registry as models

    entry = models.load_registry().models.get(name)
    return list(entry.prompt_styles or ["chat"]) if entry is not None else ["chat"]


@dataclass(frozen=True)
class QualityMatrix:
    path: Path
    spec: QualityMatrixFile
    configurations: list[QualityConfiguration]

    @property
    def name(self) -> str:
        return self.spec.name


def _generation(
    base: suites_mod.Generation, *overrides: dict[str, Any], src: str, field: str
) -> suites_mod.Generation:
    merged = base.model_dump()
    for o in overrides:
        merged.update(o)
    try:
        return suites_mod.Generation.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(suites_mod.Generation.model_fields)}),
            file=src,
            field=field,
        ) from None


def load(name_or_path: str | Path) -> QualityMatrix:
    path = find_matrix(str(name_or_path))
    src = relpath(path)
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("a matrix must be a mapping", file=src)
    if raw.get("kind") != "quality":
        raise ConfigError(
            "not a quality matrix (add `kind: quality`; speed matrices run with `invoke bench`)",
            file=src,
            field="kind",
        )
    try:
        spec = QualityMatrixFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(QualityMatrixFile.model_fields)}),
            file=src,
        ) from None
    if spec.schema_version != QUALITY_MATRIX_VERSION:
        raise ConfigError(
            f"version {spec.schema_version} is not supported",
            file=src,
            field="schema_version",
        )
    if spec.backends is not None and "backend" in raw:
        raise ConfigError(
            "give `backend` (one) or `backends` (several), not both",
            file=src,
            field="backends",
        )
    entries = spec.backends or [BackendRef(backend=spec.backend)]
    field_of = (
        (lambda i: f"backends[{i}]") if spec.backends is not None else (lambda i: "")
    )
    classes = []
    for i, entry in enumerate(entries):
        try:
            classes.append(backends.settings_class(entry.backend))
        except Exception as exc:
            raise ConfigError(
                str(exc).removeprefix("backend: "),
                file=src,
                field=f"{field_of(i)}.backend" if field_of(i) else "backend",
            ) from None
    for i, ref in enumerate(
        spec.suites
    ):  # a bad suite name fails here, naming the matrix field
        try:
            suites_mod.find(ref.suite)
        except ConfigError as exc:
            raise ConfigError(
                exc.detail, file=src, field=f"suites[{i}].suite"
            ) from None
    loaded = [suites_mod.load(ref.suite) for ref in spec.suites]
    keys = list(spec.sweep)
    combos = list(itertools.product(*(spec.sweep[k] for k in keys))) or [()]
    cfgs: list[QualityConfiguration] = []
    for b, (entry, cls) in enumerate(zip(entries, classes)):
        backend_styles = tuple(
            getattr(backends.backend_class(entry.backend), "prompt_styles", ("chat",))
        )
        for model in spec.models:
            styles = model_styles(model)
            for combo in combos:
                swept = dict(zip(keys, combo))
                settings = _validate_settings(
                    cls,
                    {**spec.settings, **entry.settings, **swept},
                    path,
                    swept,
                    where=f"{field_of(b)}.settings" if field_of(b) else None,
                )
                for i, (ref, suite) in enumerate(zip(spec.suites, loaded)):
                    try:
                        style = choose_style(
                            ref, suite, model, styles, backend_styles, entry.backend
                        )
                    except ValueError as exc:
                        raise ConfigError(
                            str(exc), file=src, field=f"suites[{i}]"
                        ) from None
                    styled = suite.for_style(style)
                    gen = _generation(
                        suite.generation,
                        spec.generation,
                        ref.generation,
                        src=src,
                        field=f"suites[{i}].generation",
                    )
                    cfgs.append(
                        QualityConfiguration(
                            spec.name,
                            src,
                            entry.backend,
                            model,
                            settings,
                            swept,
                            styled,
                            styled.sample(ref.sample, spec.seed),
                            ref.sample,
                            spec.seed,
                            gen,
                            spec.timeout_s,
                            style,
                        )
                    )
    return QualityMatrix(path, spec, cfgs)
