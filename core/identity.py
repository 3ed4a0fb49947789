"""The identity keys of a run, declared once: what makes two measurements the same configuration,
the same work, comparable as one row, or one series across builds.

* **Configuration key** (:func:`config_key`, a run's ``key``): what would have to change for a
  configuration to be measured again (resume identity). A sweep's ``matrix.baseline_key`` is the
  configuration key of its baseline point. Read back, a run's key is the one today's writer makes
  (:func:`configuration_key` over :func:`normalized_test`): a run an older version wrote before its
  test kind gained a field and this version's rerun of it are one configuration, so the rerun
  supersedes it on every page (core.records.run.resolve_baselines follows a sweep's baseline).
* **Work** (:func:`work`, :func:`work_key`): the model's identity, the test's work parameters (every
  parameter but its method fields and labels, core.kinds.base.TestSpec.METHOD_FIELDS /
  LABEL_FIELDS), the backend class (in process, or behind a server) and the method version.
  Boards and comparisons group by work.
* **Comparability** (:func:`comparability`, :func:`comparability_key`): the work plus the
  environment (host, backend, build, effective settings), the method left out; a view that
  compares some of the environment on purpose leaves it out (``exclude``).
* **History** (:func:`history`, :func:`history_key`): the same work as asked (the requested settings
  not left to the default, :func:`requested_explicit`) on the same host and backend, across builds
  and methods: the series a regression is looked for in.

core.records.run.RunRecord reads each part of a run (its model identity, work test, build
identity, effective settings ...) and delegates the composition of every key here; pipelines read
the keys from the record (RunRecord.work_key, comparability_key, history_key).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from core.kinds.base import TestSpec

METHOD_VERSION = 1  # bump when what a measurement means changes; part of every key

# Keys of settings.effective that are observations reported beside the settings, not
# settings: they never make two results different work.
OBSERVED_EFFECTIVE = frozenset(
    {
        "llama_memory_mib",
        "gpu_offload_supported",
        "flash_attn_requested",
        "n_gpu_layers_requested",
        "n_layers_total",
        "draft_load_time_s",
        "draft_model_file",
        "draft_synthetic",
        "base_url",
        "server_command",
        "request_timeout_s",
        "retries",
        "lora",
        "lora_buffer_mib",
        # placement facts that follow from the settings and the host (runtime.hosts.placement)
        "gpus_used",
        "gpus_visible",
        "numa_nodes",
        "cpu_mask_method",
    }
)
# Build fields that identify the software that measured (the "backend build").
BUILD_IDENTITY = (
    "backend_version",
    "llama_cpp_commit",
    "server",
    "server_package",
    "server_version",
    "server_commit",
    "server_build_number",
    "libraries",
    "label",
)
# Test fields that do not change the work, for a kind this installation does not know (a known
# kind's spec declares its own: core.kinds.base.TestSpec.METHOD_FIELDS and LABEL_FIELDS).
TEST_METHOD = TestSpec.METHOD_FIELDS
TEST_LABELS = TestSpec.LABEL_FIELDS
BACKEND_CLASSES = {True: "in process", False: "behind a server"}
# Settings added to a backend after artifacts were measured without them, with the value that means
# "not used" (their default). Requested at that value, a setting asks nothing of the backend: the
# same configuration as an older artifact that does not name it (requested_explicit).
# tests/test_work_identity.py fails when a backend gains a setting whose default is not listed here.
NEUTRAL_SETTINGS: dict[str, Any] = {
    "extra_bufts": None,
    "lora_adapters": [],
    "lora_scale": 1.0,
    "rope_scaling": "none",  # the model's own RoPE (issue 33's long-context rows)
    "n_seq_max": 1,  # one sequence in the context (issue 33's context-vs-throughput row)
    "embedding": False,  # a generating context (issue 33's retrieval row embeds)
    # placement (issue 29): llama.cpp's own defaults, what every run before them used
    "split_mode": "layer",
    "tensor_split": None,
    "numa": "off",
    "cpu_mask": None,
    "cpu_strict": False,
    "prio": 0,
    "poll": 50,
}
# Of those, the ones a backend reports among its effective settings: at their neutral value they
# are no part of the environment either (a run at llama.cpp's defaults is the environment it was).
NEUTRAL_EFFECTIVE = (
    "split_mode",
    "tensor_split",
    "numa",
    "cpu_mask",
    "cpu_strict",
    "prio",
    "poll",
)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(_canonical(obj).encode()).hexdigest()


def config_key(
    backend: str,
    model_identity: str,
    settings: dict[str, Any],
    test: dict[str, Any],
    host_id: str,
    backend_version: str,
    build_label: str | None = None,
    server: dict[str, Any] | None = None,
) -> str:
    """Identity of a measurement: what would have to change for it to be measured again.

    ``model_identity`` is the model's identity (``model.identity``): a local file's sha256 (keyed
    as ``model_sha256``, as it always was, so no existing key changes) or an endpoint model's
    ``endpoint:<hex>``, whose ``server`` (software and version, as detected) is part of the key
    too: the server is the software that measured. ``build_label`` names a variant build (e.g.
    a deliberately slowed one) measured beside the ordinary build; absent, the key is what it
    always was."""
    ident: dict[str, Any] = {
        "backend": backend,
        "backend_version": backend_version,
        "model_sha256": model_identity,
        "settings": settings,
        "test": test,
        "host": host_id,
        "method": METHOD_VERSION,
    }
    if build_label:
        ident["build_label"] = build_label
    if server:
        ident["server"] = server
    return hashlib.sha256(
        json.dumps(ident, sort_keys=True, default=str).encode()
    ).hexdigest()


def normalized_test(test: dict[str, Any], spec: TestSpec | None) -> dict[str, Any]:
    """The test as today's writer stores it (its kind's spec, every field, the stored name): a run
    written before its kind gained a field (one whose default is what the older version did: a
    ``cache_reset``, a ``precision.percentile``) is the same test as a run written since. ``test``
    itself (the same object) when nothing differs, or when the kind is unknown or no longer parses
    it (``spec`` None)."""
    if spec is None:
        return test
    today = spec.to_dict()
    if "name" in test:
        today["name"] = test["name"]
    return test if today == test else today


class Keyed(Protocol):
    """What a configuration key is made of, as a run record reads it."""

    doc: dict[str, Any]

    @property
    def backend(self) -> str: ...
    @property
    def model_identity(self) -> str: ...
    @property
    def requested(self) -> dict[str, Any]: ...
    @property
    def test(self) -> dict[str, Any]: ...
    @property
    def backend_version(self) -> str: ...
    @property
    def build_label(self) -> str | None: ...


def key_recipe(r: Keyed) -> dict[str, Any] | None:
    """The inputs of :func:`config_key` that reproduce a run's stored key with its recorded host id
    (all but the host), or None when no variant reproduces it (an imported run, a failed one keyed
    otherwise)."""
    doc = r.doc
    try:
        base = {
            "backend": r.backend,
            "model_identity": r.model_identity,
            "settings": r.requested,
            "test": r.test,
            "backend_version": r.backend_version,
        }
        model = doc.get("model") or {}
        server = {
            "software": model.get("server"),
            "version": model.get("server_version"),
        }
        variants: list[dict[str, Any]] = [
            {},
            {"build_label": r.build_label},
            {"server": server},
            {"build_label": r.build_label, "server": server},
        ]
        for extra in variants:
            recipe = {**base, **extra}
            if config_key(host_id=doc["host"]["id"], **recipe) == doc.get("key"):
                return recipe
    except (KeyError, TypeError, AttributeError):
        return None
    return None


def configuration_key(r: Keyed, test: dict[str, Any]) -> str:
    """A run's configuration key as today's writer makes it (:func:`config_key` over the test as
    today's writer stores it, ``test``: :func:`normalized_test`): the stored key when the stored
    test is today's, else the stored key's recipe with today's test. A run written by an older
    version and its rerun by this one are then one configuration (the rerun supersedes it on every
    page), not two. A stored key no recipe reproduces stays as it is."""
    stored: str = r.doc.get("key") or r.doc["id"]
    if test is r.test:
        return stored
    recipe = key_recipe(r)
    if recipe is None:
        return stored
    return config_key(host_id=r.doc["host"]["id"], **{**recipe, "test": test})


class Identified(Protocol):
    """What the keys are made of, as a run record reads it (core.records.run.RunRecord)."""

    @property
    def model_identity(self) -> str: ...
    @property
    def work_test(self) -> dict[str, Any]: ...
    @property
    def backend_class(self) -> str: ...
    @property
    def method_version(self) -> int: ...
    @property
    def backend_name(self) -> str: ...
    @property
    def build_identity(self) -> dict[str, Any]: ...
    @property
    def host_id(self) -> str: ...
    @property
    def effective(self) -> dict[str, Any]: ...
    @property
    def stats_method(self) -> int: ...
    @property
    def requested(self) -> dict[str, Any]: ...


def short(parts: Any) -> str:
    """A key as the pages and tables show it: the first 16 hex digits of :func:`digest`."""
    return digest(parts)[:16]


def work(r: Identified) -> dict[str, Any]:
    """What makes two results the same work, wherever and however they were measured: the model's
    identity, the test's work parameters, the backend class and the method version (what a
    measurement means)."""
    return {
        "model": r.model_identity,
        "test": r.work_test,
        "class": r.backend_class,
        "method_version": r.method_version,
    }


def work_key(r: Identified) -> str:
    return short(work(r))


def comparability(
    r: Identified, exclude: tuple[str, ...] | frozenset[str] = ()
) -> dict[str, Any]:
    """The parts that make two results comparable as one row: the work and the environment (the
    method, how precisely it was measured, is left out). ``exclude`` leaves out what a view
    compares on purpose: top-level parts ("host", "build", "model", "backend", "test") or single
    settings as "settings.<name>"."""
    parts: dict[str, Any] = {
        "test": r.work_test,
        "class": r.backend_class,
        "backend": r.backend_name,
        "build": r.build_identity,
        "model": r.model_identity,
        "host": r.host_id,
        "method": r.method_version,
        "settings": r.effective,
    }
    # older results keep their keys; newer ones are not pooled with them (part of the build)
    if r.stats_method != 1:
        parts["build"] = {**parts["build"], "stats_method": r.stats_method}
    drop_settings = {e.split(".", 1)[1] for e in exclude if e.startswith("settings.")}
    if drop_settings:
        parts["settings"] = {
            k: v for k, v in parts["settings"].items() if k not in drop_settings
        }
    for e in exclude:
        if "." not in e:
            parts.pop(e, None)
    return parts


def comparability_key(
    r: Identified, exclude: tuple[str, ...] | frozenset[str] = ()
) -> str:
    return short(comparability(r, exclude))


def requested_explicit(requested: dict[str, Any]) -> dict[str, Any]:
    """The requested settings without those requested as null (left to the backend's default) or
    at the neutral value of a setting added later (NEUTRAL_SETTINGS): the same as not naming them,
    so a setting added to the backend later does not tell two configurations apart."""
    return {
        k: v
        for k, v in requested.items()
        if v is not None and not (k in NEUTRAL_SETTINGS and v == NEUTRAL_SETTINGS[k])
    }


def history(r: Identified) -> dict[str, Any]:
    """Same work, host, backend and requested settings (those not left to the default): one
    configuration's series across builds (llama.cpp commit, backend version, almanac) and
    methods."""
    return {
        "work": work(r),
        "backend": r.backend_name,
        "host": r.host_id,
        "requested": requested_explicit(r.requested),
    }


def history_key(r: Identified) -> str:
    return short(history(r))
