"""The public texts under data/texts/ (texts.yaml names each file, its source and its licence): what
perplexity is measured on (runtime.quality.perplexity) and what the embed kind embeds
(runtime.backends.llama_cpp.embedding). Read here, once, for both."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import ConfigError
from core.paths import data_dir, relpath

TEXTS_FORMAT_VERSION = 1


class TextEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str = Field(..., description="File beside texts.yaml.")
    description: str = ""
    source: str = Field(..., min_length=1, description="Where the text comes from.")
    licence: str = Field(
        ..., min_length=1, description="Under which terms it is copied here."
    )


class TextsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = TEXTS_FORMAT_VERSION
    texts: dict[str, TextEntry]


@dataclass(frozen=True)
class Text:
    name: str
    path: Path
    sha256: str
    source: str
    licence: str
    description: str

    def read(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": relpath(self.path),
            "sha256": self.sha256,
            "source": self.source,
            "licence": self.licence,
            "description": self.description,
        }


def texts_path() -> Path:
    return data_dir() / "texts" / "texts.yaml"


def load_text(name: str) -> Text:
    from core.yamlio import load_yaml, pydantic_error_line

    src = relpath(texts_path())
    try:
        spec = TextsFile.model_validate(load_yaml(texts_path()))
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(TextsFile.model_fields)}), file=src
        ) from None
    if name not in spec.texts:
        raise ConfigError(
            f"no text named {name!r} (known: {', '.join(sorted(spec.texts))})",
            file=src,
            field="texts",
        )
    e = spec.texts[name]
    path = texts_path().parent / e.file
    if not path.is_file():
        raise ConfigError(
            f"text file {e.file!r} not found", file=src, field=f"texts.{name}.file"
        )
    return Text(
        name,
        path,
        hashlib.sha256(path.read_bytes()).hexdigest(),
        e.source,
        e.licence,
        e.description,
    )


def passages(text: str, limit: int | None = None) -> list[str]:
    """The text cut at blank lines, each passage's whitespace folded, empty ones dropped; the first
    ``limit`` (all when None)."""
    parts = [" ".join(p.split()) for p in text.split("\n\n")]
    out = [p for p in parts if p]
    return out if limit is None else out[:limit]
