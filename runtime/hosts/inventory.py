"""The hosts inventory: data/hosts.yaml names the machines benchmarks run on over SSH.

Each host: address, user, port, the path of a private key (never the key itself), the
Python to run there, labels (cpu, gpu, ...), how its host key is checked and how the
project is installed there. Host keys are verified against a known_hosts file; an unknown
key is refused unless the entry says ``host_key_policy: accept-new`` (trust on first use,
like OpenSSH's StrictHostKeyChecking=accept-new); a changed key is always refused.

``load_inventory(path)`` validates every entry and raises ``ConfigError`` naming the
file, the field and the problem; ``select(inv, names, labels)`` picks hosts.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import ConfigError
from core.paths import data_dir, relpath
from core.yamlio import load_yaml, pydantic_error_line

INVENTORY_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LlamaCppInstall(BaseModel):
    """How llama-cpp-python gets onto the host (it compiles llama.cpp: slow)."""

    model_config = ConfigDict(extra="forbid")

    reuse: bool = Field(
        True,
        description="Reuse a llama-cpp-python already importable by the host's Python when its "
        "version is the pinned one (the venv sees system site-packages).",
    )
    cmake_args: str = Field(
        "",
        description="CMAKE_ARGS for a build on the host, e.g. '-DGGML_CUDA=on "
        "-DCMAKE_CUDA_ARCHITECTURES=90'.",
    )


class Host(BaseModel):
    """One machine of the inventory."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        "",
        description="The host's name (the key of its entry); recorded in its artifacts.",
    )
    address: str = Field(
        ..., min_length=1, description="DNS name or IP address to connect to."
    )
    user: str = Field(..., min_length=1, description="SSH user.")
    port: int = Field(22, ge=1, le=65535, description="SSH port.")
    key: str | None = Field(
        None,
        description="Path to the private key file (only the path is read here; the key "
        "never enters artifacts or logs). Null: the SSH agent.",
    )
    key_passphrase_env: str | None = Field(
        None,
        description="Name of an environment variable holding the key's "
        "passphrase (its value is never logged).",
    )
    python: str = Field(
        "python3", min_length=1, description="Python interpreter on the host (>= 3.11)."
    )
    labels: list[str] = Field(
        default_factory=list, description="Labels to select hosts by (cpu, gpu, ...)."
    )
    known_hosts: str = Field(
        "~/.ssh/known_hosts",
        description="known_hosts file the host key is checked against.",
    )
    host_key_policy: Literal["reject", "accept-new"] = Field(
        "reject",
        description="Unknown host key: reject (default) or accept-new (trust on first use and record it "
        "in known_hosts). A changed key is always refused.",
    )
    workdir: str = Field(
        "~/.cache/inference-almanac/remote",
        description="Folder on the host for the project copy, the venv and the data.",
    )
    install: Literal["venv", "system"] = Field(
        "venv",
        description="venv: a virtual environment under workdir with the project's pinned dependencies "
        "(pip runs only when they change); system: no pip at all, the host's Python must "
        "already import them at the pinned versions.",
    )
    llama_cpp: LlamaCppInstall = Field(
        default_factory=LlamaCppInstall, description="llama-cpp-python on the host."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment for the remote run (not for "
        "secrets), e.g. CUDA_VISIBLE_DEVICES.",
    )
    connect_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Seconds to wait for the TCP connection and SSH handshake.",
    )
    timeout_s: float = Field(
        7200.0,
        gt=0,
        description="Wall-clock limit of the whole remote run (install included).",
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        for label in v:
            if not _NAME.match(label):
                raise ValueError(
                    f"label {label!r} must be letters, digits, '.', '_' or '-'"
                )
        return v

    @field_validator("key_passphrase_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(f"{v!r} is not an environment variable name")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _ENV_NAME.match(k):
                raise ValueError(f"{k!r} is not an environment variable name")
        return v

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if any(c.isspace() for c in v) or v.startswith("-"):
            raise ValueError(f"{v!r} is not a host address")
        return v

    def key_path(self) -> Path | None:
        return Path(self.key).expanduser() if self.key else None

    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts).expanduser()


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        INVENTORY_VERSION, description="Format version of this file."
    )
    hosts: dict[str, Host] = Field(default_factory=dict, description="Hosts by name.")
    host_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Readable labels of hosts by host id "
        "(vm-0372cd29: Dev VM), shown on every page beside the id; a host without "
        "one is named from its fingerprint (core.hostlabel).",
    )


def inventory_path() -> Path:
    return data_dir() / "hosts.yaml"


def _resolve_relative(host: Host, base: Path) -> Host:
    """Key and known_hosts paths relative to the inventory's folder (``~`` expands later)."""
    updates = {}
    for f in ("key", "known_hosts"):
        v = getattr(host, f)
        if v and not v.startswith("~") and not Path(v).is_absolute():
            updates[f] = str((base / v).resolve())
    return host.model_copy(update=updates) if updates else host


def load_inventory(path: Path | str | None = None) -> Inventory:
    """Read and validate the inventory; a bad entry raises ConfigError (file, field, problem)."""
    path = Path(path) if path else inventory_path()
    src = relpath(path)
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("must be a mapping with a 'hosts' key", file=src)
    hosts_raw = raw.get("hosts") or {}
    if not isinstance(hosts_raw, dict):
        raise ConfigError(
            "must be a mapping of host names to entries", file=src, field="hosts"
        )
    hosts: dict[str, Host] = {}
    for name, entry in hosts_raw.items():
        name = str(name)
        if not _NAME.match(name):
            raise ConfigError(
                "a host name must be letters, digits, '.', '_' or '-'",
                file=src,
                field=f"hosts.{name}",
            )
        if not isinstance(entry, dict):
            raise ConfigError(
                "must be a mapping (address, user, ...)",
                file=src,
                field=f"hosts.{name}",
            )
        if "name" in entry and entry["name"] != name:
            raise ConfigError(
                "name is the entry's key; leave it out",
                file=src,
                field=f"hosts.{name}.name",
            )
        try:
            host = Host.model_validate({**entry, "name": name})
        except ValidationError as exc:
            line = pydantic_error_line(
                exc, {"*": [f for f in Host.model_fields if f != "name"]}
            )
            field, _, msg = line.partition(": ")
            if not msg:
                field, msg = "", line
            raise ConfigError(
                msg, file=src, field=f"hosts.{name}" + (f".{field}" if field else "")
            ) from None
        hosts[name] = _resolve_relative(host, path.parent)
    from core.hostlabel import check_labels

    check_labels(raw.get("host_labels"), src)
    rest = {k: v for k, v in raw.items() if k != "hosts"}
    try:
        inv = Inventory.model_validate({**rest, "hosts": {}})
    except ValidationError as exc:
        raise ConfigError(
            pydantic_error_line(exc, {"*": list(Inventory.model_fields)}), file=src
        ) from None
    if inv.schema_version != INVENTORY_VERSION:
        raise ConfigError(
            f"version {inv.schema_version} is not supported (this almanac reads {INVENTORY_VERSION})",
            file=src,
            field="schema_version",
        )
    return inv.model_copy(update={"hosts": hosts})


def select(
    inv: Inventory,
    names: list[str] | tuple[str, ...] = (),
    labels: list[str] | tuple[str, ...] = (),
    source: str = "data/hosts.yaml",
) -> list[Host]:
    """Hosts named in ``names`` plus every host carrying one of ``labels``, inventory order,
    each once. An unknown name or a label no host carries is an error."""
    chosen: dict[str, Host] = {}
    for n in names:
        if n not in inv.hosts:
            close = difflib.get_close_matches(n, list(inv.hosts), n=1)
            hint = (
                f" (did you mean {close[0]!r}?)"
                if close
                else f" (known: {', '.join(inv.hosts) or 'none'})"
            )
            raise ConfigError(f"no host named {n!r}{hint}", file=source, field="hosts")
    for label in labels:
        if not any(label in h.labels for h in inv.hosts.values()):
            known = sorted({lab for h in inv.hosts.values() for lab in h.labels})
            raise ConfigError(
                f"no host has the label {label!r} (labels: {', '.join(known) or 'none'})",
                file=source,
                field="labels",
            )
    for name, host in inv.hosts.items():
        if name in names or any(label in host.labels for label in labels):
            chosen[name] = host
    return list(chosen.values())
