"""Endpoint models: a model known only by the server that serves it (no local file).

A registry entry (``data/models.yaml``) declares one with ``endpoint:``::

    my-served-model:
      endpoint:
        base_url: http://127.0.0.1:8080/v1   # the server's OpenAI-compatible root
        model: qwen2.5-7b-instruct           # the name it is served under (the request's "model")
        revision: 0123abc...                 # optional pins, checked before anything runs:
        digest: sha256:0a8c2669...           #   what the server must report
        identity: endpoint:5f0c...           #   or the whole identity (any server)

Everything about such an entry is validated here, once: the fields (:class:`EndpointSpec`),
what the server reported against the pins (:meth:`EndpointRef.identified`), and the model's
identity (:func:`endpoint_identity`). Asking the server is the HTTP backend's job
(``runtime.backends.openai_http.detect``); this module never talks to a network.

The identity is the sha256 of the served name and what the server reports that tells one set
of weights from another (its ``identity_facts``: a Hugging Face revision, an Ollama blob digest,
llama-server's file name, size, type and shape ...), written ``endpoint:<hex>``. It changes when
the served model changes, and stays when only the server's own settings (context size, slots)
do. A server that reports nothing of the kind (llama_cpp.server, an unknown one) gives an
identity of the served name alone, and the record says so (``identity_basis``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import ModelError

IDENTITY_PREFIX = "endpoint:"
# Pins an entry may give, in the order they are checked, and the record field each is checked against.
PINS = ("revision", "digest", "identity")


class EndpointSpec(BaseModel):
    """An endpoint model of the registry: where it is served, under what name, and what it must be."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        ...,
        description="The server's OpenAI-compatible root, e.g. http://127.0.0.1:8080/v1 "
        "(its /models and /chat/completions are used; the server's own info routes are "
        "asked beside it).",
    )
    model: str = Field(
        ...,
        min_length=1,
        max_length=512,
        description="The name the server serves the model under "
        "(the `model` of every request; must be listed by its /models).",
    )
    revision: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Pin: the revision the server must "
        "report (TGI's model_sha, SGLang's revision); the run is refused otherwise.",
    )
    digest: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Pin: the content digest the server must "
        "report (Ollama's blob digest, with or without 'sha256:'); the run is refused otherwise.",
    )
    identity: str | None = Field(
        None,
        description="Pin: the whole identity (endpoint:<hex>, as recorded in an "
        "artifact's model.identity); works for any server, llama-server included.",
    )
    api_key_env: str | None = Field(
        None,
        max_length=200,
        description="Environment variable holding an API key for "
        "this server (sent as a Bearer token; the key itself is never recorded).",
    )
    server_version: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="The server software's version as the operator states it, for a server that "
        "reports none (transformers serve): recorded beside what the server reports, marked as stated.",
    )
    probe_timeout_s: float = Field(
        10.0,
        gt=0,
        le=300,
        description="Longest wait for one of the server's info routes.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"base_url must be an http:// or https:// URL with a host (got {v!r})"
            )
        if parts.query or parts.fragment:
            raise ValueError(
                f"base_url must not carry a query or a fragment (got {v!r})"
            )
        return v.rstrip("/")

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str | None) -> str | None:
        return normalize_digest(v) if v is not None else None

    @field_validator("identity")
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        if v is None:
            return v
        hexpart = v.removeprefix(IDENTITY_PREFIX)
        if (
            not v.startswith(IDENTITY_PREFIX)
            or len(hexpart) != 64
            or any(c not in "0123456789abcdef" for c in hexpart)
        ):
            raise ValueError(
                f"identity must be 'endpoint:' and 64 lowercase hex digits, as an artifact records it (got {v!r})"
            )
        return v

    def pins(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in PINS if getattr(self, k) is not None}


def normalize_digest(value: str) -> str:
    """A digest as compared: lower case, without the ``sha256:`` prefix Ollama writes in places."""
    return value.strip().lower().removeprefix("sha256:")


def endpoint_identity(served_name: str, identity_facts: dict[str, Any]) -> str:
    """``endpoint:<sha256>`` of the served name and the facts that tell the weights apart."""
    blob = json.dumps(
        {"served_name": served_name, "facts": identity_facts},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return IDENTITY_PREFIX + hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class ServedModel:
    """What a server reported about one served model (runtime.backends.openai_http.detect fills it)."""

    server: str  # the server software: llama-server, llama_cpp.server, vLLM, TGI, SGLang, Ollama, unknown
    server_version: str | None = None
    server_commit: str | None = None
    model_id: str | None = (
        None  # the underlying model it names: vLLM's root, TGI's model_id, SGLang's model_path ...
    )
    revision: str | None = None
    digest: str | None = None
    quantization: str | None = None
    context_length: int | None = None
    size_bytes: int | None = None
    n_params: int | None = None
    identity_facts: dict[str, Any] = field(default_factory=dict)
    reported: dict[str, Any] = field(
        default_factory=dict
    )  # route -> what it said (trimmed)
    evidence: str = ""  # how the server software was recognised

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServedModel:
        return cls(**d)


@dataclass(frozen=True)
class EndpointRef:
    """A resolved endpoint model: the registry's declaration and, once the server was asked
    (:meth:`identified`), what it reported and the identity that follows. The counterpart of
    runtime.models.registry.ModelRef for a model without a local file."""

    name: str
    base_url: str
    served_name: str
    pins: dict[str, str] = field(default_factory=dict)
    api_key_env: str | None = None
    probe_timeout_s: float = 10.0
    stated_server_version: str | None = (
        None  # the registry's word, for a server that reports none
    )
    facts: dict[str, Any] = field(
        default_factory=dict
    )  # registry facts: description, family, default_settings ...
    served: ServedModel | None = None

    kind = "endpoint"
    path = None  # no local file

    @property
    def source(self) -> str:
        return "endpoint"

    @property
    def identity(self) -> str:
        """The configuration key's model part; only known once the server was asked."""
        if self.served is None:
            raise RuntimeError(
                f"endpoint model {self.name!r} has not been identified (ask its server first)"
            )
        return endpoint_identity(self.served_name, self.served.identity_facts)

    @property
    def identity_basis(self) -> list[str]:
        return sorted(self.served.identity_facts) if self.served else []

    def identified(
        self, served: ServedModel, registry_file: str = "data/models.yaml"
    ) -> EndpointRef:
        """This reference with what the server reported; a pin the report contradicts is refused
        with one line naming the entry, the pinned value and the reported one."""
        ref = replace(self, served=served)
        for pin, want in self.pins.items():
            if pin == "identity":
                got = ref.identity
            else:
                got = getattr(served, pin)
                if got is not None and pin == "digest":
                    got = normalize_digest(got)
            if got != want:
                shown = "nothing" if got is None else repr(got)
                hint = (
                    f" ({served.server} reports no {pin}: pin identity instead)"
                    if got is None and pin != "identity"
                    else ""
                )
                raise ModelError(
                    f"pins {pin} {want!r}; the server at {self.base_url} ({served.server}) reports {shown}{hint}",
                    file=registry_file,
                    field=f"models.{self.name}.endpoint.{pin}",
                )
        return ref

    def record(self) -> dict[str, Any]:
        """The run artifact's ``model`` block (kind ``endpoint``)."""
        s = self.served
        if s is None:
            raise RuntimeError(f"endpoint model {self.name!r} has not been identified")
        return {
            "kind": "endpoint",
            "identity": self.identity,
            "identity_basis": self.identity_basis,
            "name": self.name,
            "served_name": self.served_name,
            "base_url": self.base_url,
            "source": self.source,
            # random weights served by URL (runtime.models.synth_hf): the registry's family says so
            "synthetic": self.facts.get("family") == "synthetic",
            "server": s.server,
            "server_version": s.server_version or self.stated_server_version,
            **(
                {"server_version_stated": True}
                if not s.server_version and self.stated_server_version
                else {}
            ),
            "model_id": s.model_id,
            "revision": s.revision,
            "digest": s.digest,
            "quantization": s.quantization,
            "context_length": s.context_length,
            "size_bytes": s.size_bytes,
            "n_params": s.n_params,
            "pinned": dict(self.pins) or None,
            "reported": dict(s.reported),
            "description": self.facts.get("description", ""),
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = "endpoint"
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EndpointRef:
        d = {k: v for k, v in d.items() if k != "kind"}
        served = d.pop("served", None)
        return cls(**d, served=ServedModel.from_dict(served) if served else None)


def from_spec(name: str, spec: EndpointSpec, facts: dict[str, Any]) -> EndpointRef:
    return EndpointRef(
        name=name,
        base_url=spec.base_url,
        served_name=spec.model,
        pins=spec.pins(),
        api_key_env=spec.api_key_env,
        probe_timeout_s=spec.probe_timeout_s,
        stated_server_version=spec.server_version,
        facts=facts,
    )
