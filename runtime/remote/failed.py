"""Failed run artifacts for configurations a remote host did not measure.

When a host is unreachable, refuses us, crashes or times out, every configuration it had
not finished becomes a failed run artifact here, so the failure is data like any other.
What such an artifact can honestly say:

* host: the fingerprint, when the host was reached and reported it before failing;
  otherwise the inventory's view (``"source": "inventory"``: name, address, port, labels;
  hardware unknown, written as null / 0 / []), with the id ``<name>-inventory``;
* model: name and registry facts; the sha256 is the registry's, or the hash of the file
  when it exists here (a package model fetched here, a path that exists on this machine),
  and null when neither is known (the file lives only on the host). An endpoint model is
  recorded as declared (served name, URL, pins), its server ``unknown``: only the host could
  have asked it, so its identity is that of the declaration, which no measured run shares;
* build: the backend version the host reported, or "unknown (host not reached)".
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.paths import slug
from core.records import run as record
from runtime import backends
from runtime.execution import matrix as matrix_mod
from runtime.hosts.inventory import Host
from runtime.models import registry as models


def done_label(model: Any, test: Any, swept: dict[str, Any]) -> tuple[Any, Any, str]:
    """A configuration's label in the set of finished ones: swept values may be lists (a list of adapters)."""
    import json

    return (model, test, json.dumps(swept, sort_keys=True, default=str))


def inventory_host(host: Host) -> dict[str, Any]:
    return {
        "id": f"{slug(host.name)}-inventory",
        "name": host.name,
        "source": "inventory",
        "address": host.address,
        "port": host.port,
        "labels": list(host.labels),
        "cpu": {
            "model": "unknown (host not fingerprinted)",
            "physical_cores": None,
            "logical_cores": None,
            "flags": [],
        },
        "memory_bytes": 0,
        "numa_nodes": 1,
        "os": {},
        "gpus": [],
    }


def endpoint_record(name: str, entry: models.ModelEntry) -> dict[str, Any]:
    """The model block of an endpoint model the host never asked about (see the module docstring)."""
    from runtime.models.endpoint import endpoint_identity

    spec = entry.endpoint
    return {
        "kind": "endpoint",
        "identity": endpoint_identity(spec.model, {"not_identified_at": spec.base_url}),
        "identity_basis": [],
        "name": name,
        "served_name": spec.model,
        "base_url": spec.base_url,
        "source": "endpoint",
        "synthetic": False,
        "server": "unknown",
        "pinned": spec.pins() or None,
        "reported": {},
        "description": entry.description,
    }


def model_identity(name: str, registry: models.Registry) -> dict[str, Any]:
    """What is known here of a model without fetching or building anything."""
    entry = registry.models.get(name)
    ident: dict[str, Any] = {
        "name": name,
        "file_name": Path(name).name if name.endswith(".gguf") else name,
        "sha256": None,
        "size_bytes": 0,
        "source": "unknown",
        "facts": {},
    }
    path: Path | None = None
    if entry is None:
        path = Path(name) if name.endswith(".gguf") else None
        ident["source"] = "path"
    elif entry.package:
        ident["source"] = f"package:{entry.package}"
        try:
            module = importlib.import_module(entry.package.replace("-", "_"))
            fname, sha = models._package_expected(module)
            ident.update(file_name=fname, sha256=sha)
            cached = models.cache_dir() / "models" / fname
            path = cached if cached.is_file() else None
        except Exception:
            pass
    elif entry.path:
        ident["source"] = "path"
        path = Path(entry.path).expanduser()
        ident["file_name"] = path.name
    else:  # synthetic or derived: made on the host, known here by name only
        ident["source"] = "synth" if entry.synth is not None else "derived"
    if entry is not None and entry.sha256:
        ident["sha256"] = entry.sha256
    if path is not None and path.is_file():
        try:
            ident["sha256"] = ident["sha256"] or models.cached_sha256(path)
            ident["size_bytes"] = path.stat().st_size
            ident["facts"] = models.gguf_facts(path)
        except Exception:
            pass
    if entry is not None:
        ident["facts"].update(description=entry.description, family=entry.family)
    return ident


def failed_artifacts(
    *,
    matrix: matrix_mod.Matrix,
    host: Host,
    kind: str,
    message: str,
    done: set[tuple],
    reported_host: dict[str, Any] | None,
    backend_versions: dict[str, str],
    log_tail: str,
    wall_s: float,
    exit_code: int | None = None,
    signal: str | None = None,
    remote: dict[str, Any] | None = None,
    root: Path | None = None,
) -> list[Path]:
    """Write one failed artifact per configuration of ``matrix`` not in ``done``
    ((model, test name, swept items) tuples the host finished); return their paths."""
    registry = models.load_registry()
    hblock = dict(reported_host) if reported_host else inventory_host(host)
    if reported_host:
        hblock.setdefault("source", "fingerprint")
    paths: list[Path] = []
    idents: dict[str, dict[str, Any]] = {}
    for cfg in matrix.configurations():
        label = done_label(cfg.model, cfg.test.name, cfg.swept)
        if label in done:
            continue
        entry = registry.models.get(cfg.model)
        bversion = backend_versions.get(cfg.backend) or "unknown (host not reached)"
        settings = cfg.settings.recorded()
        if entry is not None and entry.endpoint is not None:
            model = endpoint_record(cfg.model, entry)
            key = record.config_key(
                cfg.backend,
                model["identity"],
                settings,
                cfg.test.to_dict(),
                hblock["id"],
                bversion,
            )
        else:
            ident = idents.setdefault(cfg.model, model_identity(cfg.model, registry))
            key = record.config_key(
                cfg.backend,
                ident["sha256"] or "",
                settings,
                cfg.test.to_dict(),
                hblock["id"],
                bversion,
            )
            facts = ident["facts"]
            model = {
                "name": cfg.model,
                "file_name": ident["file_name"],
                "sha256": ident["sha256"],
                "size_bytes": ident["size_bytes"],
                "source": ident["source"],
                "synthetic": bool(facts.get("synthetic")),
                "gguf": {k: v for k, v in facts.items() if k != "default_settings"},
            }
        doc = record.new_run(
            key=key,
            created=datetime.now(UTC),
            status="failed",
            error={
                "kind": kind,
                "message": message,
                "signal": signal,
                "exit_code": exit_code,
            },
            matrix={"name": cfg.matrix, "file": cfg.matrix_file},
            backend=cfg.backend,
            test=cfg.test.to_dict(),
            requested=settings,
            swept=cfg.swept,
            effective={},
            model=model,
            host=hblock,
            build={
                "backend_version": bversion,
                "in_process": backends.backend_class(cfg.backend).in_process,
            },
            details={"remote": remote or {}},
            resources={
                "wall_s": max(0.0, wall_s),
                "exit_code": exit_code,
                "signal": signal,
            },
            log_tail=log_tail,
        )
        paths.append(record.write(doc, root))
    return paths
