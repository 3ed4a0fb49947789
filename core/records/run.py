"""The run record: the one owner of the run artifact's shape.

Every writer builds a run artifact through :func:`new_run` (runner, failed-run writer,
llama-bench importer, test fixtures) and every reader goes through :class:`RunRecord`
(pipelines included: this module is the data shape, not a backend, and imports nothing
from the backends). What is decided here, once:

* **One id format**: ``<first 12 hex of the key>-<UTC time>.<ms>Z``
  (``5fb683a3eda9-20261126T040430.390Z``), :func:`run_id`. Older artifacts whose id has
  no milliseconds stay valid: the id is only ever read as a whole.
* **The identity keys** (configuration, work, comparability, history) are composed in
  core.identity, once; the record reads their parts and delegates (``config_key`` and ``digest``
  are re-exported here for the writers). The measurement key (:func:`config_key`): what would have
  to change for a configuration to be measured again (resume identity).
* **Effective settings** (:func:`effective_settings`): what the backend reported it ran
  with, over what was requested; observations the backend reported beside its settings
  (memory buffers, the ``*_requested`` echoes, a random loopback port) are not settings.
  Flash attention is interpreted here and nowhere else (:func:`flash_attention`): the
  backend's report ("on"/"off") wins, else the requested value, else llama.cpp's "auto".
* **Work, method, environment** (:attr:`RunRecord.work`, :attr:`RunRecord.method`,
  :attr:`RunRecord.environment`). Two results ran the same *work* when the model (its identity: a
  file's sha256, an endpoint model's ``endpoint:<hex>``), the test's work parameters (tokens,
  depth, messages, max_tokens, the sampling that changes the output: every parameter of the test
  but its method fields and labels, core.kinds.base.TestSpec.METHOD_FIELDS / LABEL_FIELDS), the
  backend class (in process, or behind a server) and the method version match. How precisely it
  was measured (repetitions, precision target, warm-up, request counts) is *method*; the host,
  the backend software and its build, and the effective settings (threads, GPU layers, repack,
  ...) are *environment*. Boards and comparisons group by work (:attr:`RunRecord.work_key`);
  method and environment are columns and notes, never a silent reason to share nothing, so a
  host that runs the reference workload shares rows with every host that did, whichever version
  of the almanac measured them.
* **Comparability** (:meth:`RunRecord.comparability`): the work plus the environment (method
  left out). A board that compares some of the environment on purpose leaves it out
  (``exclude=``) and shows it as columns.
* **History identity** (:attr:`RunRecord.history_key`): the same work as asked (the requested
  settings, not the effective ones; a setting requested as null is the backend's default, the
  same as not naming it) on the same host and backend, across builds and methods: the series a
  regression is looked for in.
* **Model identity** (:attr:`RunRecord.model_identity`): a model is a local file (``kind:
  file``: sha256, size, GGUF facts) or an endpoint model (``kind: endpoint``: a served name and
  what its server reports; no file name, no sha256, no GGUF facts). Readers ask the accessors
  (``has_local_file``, ``model_file_name``, ``model_size_bytes``, ``quantization`` ...), which
  answer for both.
* **Reading** (:class:`RunRecord`): typed fields only. The test as its kind's spec, samples
  and details as its kind's models (core.kinds), each metric's statistic as a frozen
  :class:`~core.summary.Summary`, resources as :class:`Resources`. A record is a read-only
  view: it caches what it parsed, so a loaded document is never modified.

Version 2 of the run schema (core.migrations.run_to_2 reads version 1 files): the model is a
local file or an endpoint model, and ``build.in_process`` says what the backend declares.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import artifacts, identity, kinds, quiet
from core.identity import (  # the identity keys, declared in core.identity (re-exported)
    BACKEND_CLASSES,
    BUILD_IDENTITY,
    METHOD_VERSION,
    NEUTRAL_EFFECTIVE,
    NEUTRAL_SETTINGS,
    OBSERVED_EFFECTIVE,
    TEST_LABELS,
    TEST_METHOD,
)
from core.identity import (
    config_key as config_key,
)
from core.identity import (
    digest as digest,
)
from core.kinds.base import Details, Kind, PrecisionRecord, Samples, TestSpec
from core.metrics import Metric
from core.models.run import Resources, Run
from core.paths import relpath, runs_dir, slug
from core.records.base import ArtifactRecord
from core.summary import Summary

ARTIFACT = "run"
#: Which runs a measurement keeps (``build.stats_method``; absent: 1). It tells results apart (they are not
#: pooled into one figure) without changing any resume key, so a result measured by an older almanac is
#: still found by a rerun, but shown as another row, with its almanac and method as environment.
STATS_METHODS = {
    1: "every run kept as measured, whatever else the machine ran",
    2: "runs kept only from a quiet machine (core.quiet: waited for, measured again when disturbed, "
    "a run never quiet kept but left out of figures)",
}
STATS_METHOD = max(STATS_METHODS)

# Server packages that embed llama.cpp without recording its commit (build.server_package starts with one).
LLAMA_CPP_PACKAGES = ("llama-cpp-python",)
# The run's parts whose shape is its test kind's (core.kinds), not the envelope's.
KIND_PARTS = ("samples", "details")
# Metrics that are shares (0 to 1): their interval is capped at 1 as well as kept above 0.
SHARE_UPPER = {"draft_acceptance": 1.0, "pass_rate": 1.0}


def run_id(key: str, created: datetime) -> str:
    """The one id format: key prefix and UTC time to the millisecond (reruns never collide)."""
    created = created.astimezone(UTC)
    return f"{key[:12]}-{created.strftime('%Y%m%dT%H%M%S')}.{created.microsecond // 1000:03d}Z"


def run_path(doc: Mapping[str, Any], root: Path | None = None) -> Path:
    """Where a run artifact lives: ``<root>/<host id>/<model slug>/<test>--<key16>-<time>.json``."""
    root = root or runs_dir()
    safe_test = (
        doc["test"]["name"].replace("/", "_").replace("@", "_at_").replace("+", "_")
    )
    return (
        root
        / doc["host"]["id"]
        / slug(doc["model"]["name"])
        / f"{safe_test}--{doc['key'][:16]}-{doc['id'].split('-', 1)[1]}.json"
    )


# -- writing ----------------------------------------------------------------------------------
def new_run(
    *,
    key: str,
    created: datetime,
    status: str,
    backend: str,
    test: dict[str, Any],
    requested: dict[str, Any],
    model: dict[str, Any],
    host: dict[str, Any],
    build: dict[str, Any],
    matrix: dict[str, Any],
    swept: dict[str, Any] | None = None,
    effective: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    samples: dict[str, Any] | None = None,
    summary: Mapping[str, Summary | Mapping[str, Any]] | None = None,
    details: dict[str, Any] | None = None,
    resources: dict[str, Any] | None = None,
    log_tail: str = "",
    run_id_: str | None = None,
) -> dict[str, Any]:
    """A run artifact (the canonical dict written to disk), built in one place: the model
    (core.models.run.Run), dumped. A value the model refuses is one ArtifactError naming the file it
    would be written to, the field path and what is wrong.

    ``build`` must carry backend_version and ``in_process`` (what the backend declares);
    backend, almanac version and method version are filled in when missing. ``model`` is a
    local file's record (``kind: file``, the default) or an endpoint model's (``kind: endpoint``,
    with its ``identity``); a file's identity is its sha256. ``resources`` gets its required keys
    (null when unknown). ``summary`` maps a metric to its statistic (a Summary or the dict
    core.stats.summarize gives)."""
    from core import __version__

    b = {
        "backend": backend,
        "almanac": __version__,
        "method_version": METHOD_VERSION,
        "stats_method": STATS_METHOD,
        **build,
    }
    if "in_process" not in b:
        raise ValueError(
            "build.in_process is required: the backend's declaration (runtime.backends.base.Backend.in_process)"
        )
    model = dict(model)
    model.setdefault("kind", "file")
    if model["kind"] == "file":
        model.setdefault("identity", model.get("sha256") or model.get("name"))
    elif not str(model.get("identity") or "").startswith("endpoint:"):
        raise ValueError(
            "an endpoint model's record carries its identity (runtime.models.endpoint.EndpointRef.record)"
        )
    res = {
        "peak_rss_bytes": None,
        "peak_vram_bytes": None,
        "wall_s": 0.0,
        "exit_code": None,
        "signal": None,
        **(resources or {}),
    }
    raw = {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id_ or run_id(key, created),
        "key": key,
        "created": created.astimezone(UTC).isoformat(timespec="seconds"),
        "status": status,
        "error": error if status != "ok" else None,
        "matrix": matrix,
        "backend": backend,
        "test": test,
        "settings": {
            "requested": requested,
            "swept": swept or {},
            "effective": effective or {},
        },
        "model": model,
        "host": host,
        "build": b,
        "samples": samples or {},
        "summary": {
            k: v.to_dict() if isinstance(v, Summary) else v
            for k, v in (summary or {}).items()
        },
        "details": details or {},
        "resources": res,
        "log_tail": log_tail,
    }
    try:
        source = relpath(run_path(raw))
    except (KeyError, TypeError, AttributeError):
        source = "<run artifact>"
    # the envelope as JSON values (a tuple is a list, as it is written); samples and details are the
    # kind's, checked against its models when the file is written (check_shapes)
    envelope = json.loads(
        json.dumps({k: v for k, v in raw.items() if k not in KIND_PARTS})
    )
    parts = {k: raw[k] for k in KIND_PARTS}
    return {**Run.check(envelope | parts, source).dump(), **parts}


def check_shapes(doc: Mapping[str, Any], source: str = "<artifact>") -> None:
    """A run's samples and details against its kind's models (core.kinds), as the file is written:
    the run schema checks the built-in kinds on every load; this checks a kind registered from
    elsewhere too (ALMANAC_KINDS), whose runs the schema reads as any kind's."""
    from pydantic import ValidationError

    kind = kinds.get(str((doc.get("test") or {}).get("kind")))
    if kind is None:
        return
    for part, model in (("samples", kind.samples), ("details", kind.details)):
        try:
            model.model_validate(doc.get(part) or {})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in (part, *err["loc"]))
            from core.errors import ArtifactError

            raise ArtifactError(
                f"{err['msg']} (test kind {kind.name!r})", file=source, field=where
            ) from None


artifacts.WRITE_CHECKS[ARTIFACT] = check_shapes


def write(doc: dict[str, Any], root: Path | None = None) -> Path:
    """Validate and atomically write a run artifact at its canonical path."""
    return artifacts.write(run_path(doc, root), doc)


# -- interpretation (once) --------------------------------------------------------------------
def flash_attention(
    requested: Mapping[str, Any], effective: Mapping[str, Any]
) -> str | None:
    """What flash attention was: "on"/"off" as the backend reported it, else as requested
    ("on"/"off"), else "auto" when it was left to llama.cpp; None where the backend has no
    such setting (an HTTP server we do not configure)."""
    fa = effective.get("flash_attn")
    if fa in ("on", "off"):
        return fa
    if isinstance(fa, bool):
        return "on" if fa else "off"
    req = requested.get("flash_attn", fa)
    if isinstance(req, bool):
        return "on" if req else "off"
    if req in ("on", "off", "auto"):
        return req
    return None


def flash_attention_on(
    requested: Mapping[str, Any], effective: Mapping[str, Any]
) -> bool:
    """Whether flash attention ran (llama.cpp's "auto" enables it on CPUs and recent GPUs)."""
    return flash_attention(requested, effective) != "off"


def effective_settings(
    requested: Mapping[str, Any], effective: Mapping[str, Any]
) -> dict[str, Any]:
    """Settings as they ran: requested values, overridden by what the backend reported,
    without observations; flash attention resolved by :func:`flash_attention`."""
    out = {k: v for k, v in requested.items()}
    out.update({k: v for k, v in effective.items() if k not in OBSERVED_EFFECTIVE})
    for k in NEUTRAL_EFFECTIVE:
        if k in out and out[k] == NEUTRAL_SETTINGS[k]:
            del out[k]
    fa = flash_attention(requested, effective)
    if fa is not None:
        out["flash_attn"] = fa
    return out


# -- reading ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LoraAttached:
    """LoRA adapters attached to a run's context (settings.effective.lora, as the backend reported it)."""

    adapters: tuple[dict[str, Any], ...] = ()
    count: int = 0
    scale: float | None = None
    load_time_s: float | None = None
    attach_time_s: float | None = None
    rss_growth_bytes: int | None = None
    method: str | None = None

    def __bool__(self) -> bool:
        """Whether any adapter was attached."""
        return bool(self.adapters or self.count)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LoraAttached:
        d = d if isinstance(d, Mapping) else {}
        return cls(
            tuple(a for a in d.get("adapters") or () if isinstance(a, Mapping)),
            int(d.get("count") or 0),
            d.get("scale"),
            d.get("load_time_s"),
            d.get("attach_time_s"),
            d.get("rss_growth_bytes"),
            d.get("method"),
        )


class RunRecord(ArtifactRecord):
    """A loaded run artifact, read through typed fields: the test as its kind's spec (``spec``), the
    summary as :class:`~core.summary.Summary` values (``stat``, ``summary``), samples and
    details as the kind's models (``samples``, ``details``: core.kinds), resources as
    :class:`Resources`. The Mapping interface (``rec["host"]``) is the canonical document, for
    renderers that show it whole."""

    ARTIFACT = ARTIFACT
    __slots__ = ()

    @property
    def envelope(self) -> Run:
        """The document read through its model (core.models.run.Run: the envelope; samples and
        details stay the kind's, :attr:`samples`, :attr:`details`); a rejection is one ArtifactError
        naming the file, the field path and what is wrong."""
        return self._cached(
            "envelope",
            lambda: Run.check(
                self.doc if self._src is None else self.stored, self.path or self.id
            ),
        )

    # what ran
    @property
    def backend(self) -> str:
        return self.doc["backend"]

    @property
    def in_process(self) -> bool:
        """The backend ran the model in the measuring process (its declaration, build.in_process)."""
        b = self.doc["build"]
        return (
            bool(b["in_process"])
            if "in_process" in b
            else not (b.get("server") or b.get("endpoint"))
        )

    @property
    def build(self) -> dict[str, Any]:
        return self.doc["build"]

    @property
    def backend_version(self) -> str:
        return self.doc["build"].get("backend_version", "")

    @property
    def llama_cpp_commit(self) -> str | None:
        return self.doc["build"].get("llama_cpp_commit")

    @property
    def llama_cpp_based(self) -> bool:
        """llama.cpp ran the model: the build names a llama.cpp commit (llama.cpp in process, llama-server,
        an imported llama-bench result) or a server package that embeds llama.cpp (llama-cpp-python's
        server records its package only). False for any other backend or server (transformers, vLLM, ...)."""
        b = self.doc["build"]
        return bool(b.get("llama_cpp_commit")) or str(
            b.get("server_package") or ""
        ).startswith(LLAMA_CPP_PACKAGES)

    @property
    def almanac_version(self) -> str:
        return self.doc["build"].get("almanac", "")

    @property
    def stats_method(self) -> int:
        """Which runs the measurement kept (STATS_METHODS); 1 for a run measured before it was recorded."""
        return int(self.doc["build"].get("stats_method") or 1)

    @property
    def almanac_method(self) -> str:
        """The almanac that measured and the method its statistics rest on, in words (shown as
        environment, beside the build, where rows differ in it)."""
        return f"{self.almanac_version or '?'} (stats method {self.stats_method})"

    @property
    def build_label(self) -> str | None:
        """A variant build's label (e.g. a deliberately slowed build), None for the ordinary one."""
        return self.doc["build"].get("label")

    @property
    def server(self) -> str:
        """The server software an HTTP backend talked to (llama_cpp.server, llama-server, ...); "" in process."""
        return str(
            self.doc["build"].get("server") or self.doc["build"].get("endpoint") or ""
        )

    @property
    def backend_name(self) -> str:
        """The backend as compared: ``openai_http (llama-server)`` for an HTTP backend, else the backend."""
        return f"{self.backend} ({self.server})" if self.server else self.backend

    @property
    def endpoint(self) -> str:
        """How the run reached the model: ``in-process (<backend>)``, else the server's label as the
        backend recorded it (details.endpoint, or its effective settings), else the backend."""
        if self.in_process:
            return f"in-process ({self.backend})"
        return (
            getattr(self.details, "endpoint", None)
            or self.reported.get("endpoint")
            or self.backend
        )

    def _build_with_stated_version(self) -> dict[str, Any]:
        """The build block, with the server version an endpoint model's registry states (a server that
        reports none: transformers serve) where the build has none (runs before the build recorded it)."""
        b = self.doc["build"]
        stated = (self.doc.get("model") or {}).get("server_version")
        if b.get("server_version") or not stated:
            return b
        return {**b, "server_version": stated}

    @property
    def build_identity(self) -> dict[str, Any]:
        b = self._build_with_stated_version()
        return {k: b[k] for k in BUILD_IDENTITY if b.get(k) not in (None, "")}

    @property
    def backend_build(self) -> str:
        """The backend build in words: version, llama.cpp commit, variant label."""
        b = self._build_with_stated_version()
        parts = [b.get("backend_version") or "?"]
        for k in ("server", "server_package", "server_version", "server_commit"):
            if b.get(k) and str(b[k]) not in parts[0]:
                parts.append(str(b[k]))
        if b.get("llama_cpp_commit") and b["llama_cpp_commit"] not in parts[0]:
            parts.append(f"llama.cpp {b['llama_cpp_commit']}")
        if b.get("label"):
            parts.append(f"[{b['label']}]")
        return " · ".join(parts)

    # the test
    @property
    def test(self) -> dict[str, Any]:
        """The test as stored (every parameter, and its name)."""
        return self.doc["test"]

    @property
    def test_name(self) -> str:
        return self.doc["test"]["name"]

    @property
    def test_kind(self) -> str:
        return self.doc["test"]["kind"]

    @property
    def kind(self) -> Kind | None:
        """The test kind's declaration (core.kinds), None for a kind this installation does not know."""
        return kinds.get(self.test_kind)

    @property
    def spec(self) -> TestSpec | None:
        """The test as its kind's spec (``rec.spec.n_depth``); None for an unknown kind or a test its
        kind no longer parses."""
        return self._cached("spec", self._spec)

    def _spec(self) -> TestSpec | None:
        kind = self.kind
        if kind is None:
            return None
        test = {k: v for k, v in self.doc["test"].items() if k != "name"}
        try:
            return _spec_of(kind.spec, _frozen(test), test)
        except TypeError:
            # a value that cannot be a key (none JSON gives): parsed for this run alone
            return _parse_spec(kind.spec, test)

    @property
    def test_today(self) -> dict[str, Any]:
        """The test as today's writer stores it (core.identity.normalized_test): what the keys are
        made of, so a run written before its kind gained a field and its rerun are one test."""
        return self._cached(
            "test_today", lambda: identity.normalized_test(self.test, self.spec)
        )

    def test_param(self, name: str, default: Any = None) -> Any:
        """One parameter of the test as stored (for a reader that handles several kinds)."""
        return self.doc["test"].get(name, default)

    @property
    def method_fields(self) -> frozenset[str]:
        """The test's fields that are method (how precisely it was measured), as its kind declares."""
        kind = self.kind
        return kind.spec.METHOD_FIELDS if kind is not None else TEST_METHOD

    @property
    def work_test(self) -> dict[str, Any]:
        """The test's work parameters: every parameter but its method fields (repetitions, precision
        target, warm-up, request counts) and its labels (name, id)."""

        def compute() -> dict[str, Any]:
            drop = self.method_fields | (
                self.kind.spec.LABEL_FIELDS if self.kind is not None else TEST_LABELS
            )
            return {k: v for k, v in self.test_today.items() if k not in drop}

        return self._cached("work_test", compute)

    @property
    def test_definition(self) -> dict[str, Any]:
        """The test as work (:attr:`work_test`): what two results must share to be the same test."""
        return self.work_test

    @property
    def method(self) -> dict[str, Any]:
        """How precisely the test was measured: its method fields as stored (repetitions, precision
        target, warm-up, ...), and the method version."""
        t = self.doc["test"]
        out = {k: t[k] for k in sorted(self.method_fields) if k in t}
        out["method_version"] = self.method_version
        return out

    @property
    def method_version(self) -> int:
        return int(self.doc["build"].get("method_version", METHOD_VERSION))

    @property
    def backend_class(self) -> str:
        """The kind of backend, as work sees it: the model run "in process" or "behind a server"."""
        return BACKEND_CLASSES[self.in_process]

    @property
    def work(self) -> dict[str, Any]:
        """What makes two results the same work, wherever and however they were measured: the model's
        identity, the test's work parameters, the backend class and the method version (what a
        measurement means)."""
        return identity.work(self)

    @property
    def work_key(self) -> str:
        return self._cached("work_key", lambda: identity.work_key(self))

    @property
    def environment(self) -> dict[str, Any]:
        """Where and with what it ran: the host, the backend (with its server software), its build and
        the effective settings."""
        return {
            "host": self.host_id,
            "backend": self.backend_name,
            "build": self.build_identity,
            "settings": self.effective,
        }

    # settings
    @property
    def requested(self) -> dict[str, Any]:
        return self.doc["settings"]["requested"]

    @property
    def requested_explicit(self) -> dict[str, Any]:
        """The requested settings without those requested as null (left to the backend's default) or
        at the neutral value of a setting added later (NEUTRAL_SETTINGS): the same as not naming them,
        so a setting added to the backend later does not tell two configurations apart."""
        return self._cached(
            "requested_explicit", lambda: identity.requested_explicit(self.requested)
        )

    @property
    def swept(self) -> dict[str, Any]:
        return self.doc["settings"]["swept"]

    @property
    def reported(self) -> dict[str, Any]:
        """settings.effective exactly as the backend reported it (observations included)."""
        return self.doc["settings"]["effective"]

    @property
    def effective(self) -> dict[str, Any]:
        return self._cached(
            "effective", lambda: effective_settings(self.requested, self.reported)
        )

    @property
    def flash_attn(self) -> str | None:
        return flash_attention(self.requested, self.reported)

    @property
    def flash_attn_on(self) -> bool:
        return flash_attention_on(self.requested, self.reported)

    @property
    def kv_overrides(self) -> dict[str, Any]:
        """The GGUF metadata overrides the run applied (llama.cpp's ``--override-kv``): those the backend
        reported; for a run that reported none, those requested plus ``n_expert_used`` as
        ``<architecture>.expert_used_count``."""
        eff = self.reported.get("kv_overrides")
        if isinstance(eff, dict):
            return dict(eff)
        req = self.requested
        out = dict(req.get("kv_overrides") or {})
        if req.get("n_expert_used") is not None and self.architecture:
            out[f"{self.architecture}.expert_used_count"] = req["n_expert_used"]
        return out

    # model, matrix
    @property
    def model(self) -> dict[str, Any]:
        return self.doc["model"]

    @property
    def model_kind(self) -> str:
        """``file`` (a local GGUF) or ``endpoint`` (a model a server serves, no local file)."""
        return self.doc["model"].get("kind", "file")

    @property
    def is_endpoint(self) -> bool:
        return self.model_kind == "endpoint"

    @property
    def has_local_file(self) -> bool:
        """Whether the model was a local file (what the memory planner and the roofline need)."""
        return self.model_kind == "file"

    @property
    def model_identity(self) -> str:
        """What the configuration key and comparisons use: a file's sha256 (its name where the hash
        is unknown), an endpoint model's ``endpoint:<hex>``."""
        m = self.doc["model"]
        return m.get("identity") or m.get("sha256") or m["name"]

    @property
    def model_file_name(self) -> str | None:
        """The GGUF file's name; None for an endpoint model."""
        return self.doc["model"].get("file_name") if self.has_local_file else None

    @property
    def model_size_bytes(self) -> int | None:
        """The file's size, or the size an endpoint's server reports (None when it reports none)."""
        return self.doc["model"].get("size_bytes")

    @property
    def model_n_params(self) -> int | None:
        return self.doc["model"].get("n_params")

    @property
    def n_params(self) -> int | None:
        return self.model_n_params

    @property
    def served_name(self) -> str | None:
        """The name an endpoint model is served under (the requests' ``model``); None for a file."""
        return self.doc["model"].get("served_name") if self.is_endpoint else None

    @property
    def model_server(self) -> str | None:
        """The server software that reported an endpoint model (llama-server, vLLM, TGI ...)."""
        return self.doc["model"].get("server") if self.is_endpoint else None

    @property
    def model_origin(self) -> str:
        """Where the model came from, in words: the file name, or ``<served name> at <URL> (<server>)``."""
        m = self.doc["model"]
        if self.is_endpoint:
            return f"{m.get('served_name')} at {m.get('base_url')} ({m.get('server') or 'unknown server'})"
        return str(m.get("file_name") or m["name"])

    @property
    def gguf(self) -> dict[str, Any]:
        """GGUF facts of a local file; {} for an endpoint model (none are known)."""
        return (self.doc["model"].get("gguf") or {}) if self.has_local_file else {}

    @property
    def architecture(self) -> str | None:
        return self.gguf.get("architecture")

    @property
    def quantization(self) -> str | None:
        """The file's GGUF quantization, or what an endpoint's server reports."""
        if self.is_endpoint:
            return self.doc["model"].get("quantization")
        return self.gguf.get("quantization")

    @property
    def synthetic(self) -> bool:
        return bool(self.doc["model"].get("synthetic"))

    @property
    def matrix_name(self) -> str:
        return self.doc["matrix"]["name"]

    @property
    def sweep(self) -> str | None:
        return self.doc["matrix"].get("sweep")

    @property
    def key(self) -> str:
        """The configuration key as today's writer makes it (core.identity.configuration_key): the
        stored key, unless the run was written before its test gained a field."""
        return self._cached(
            "key", lambda: identity.configuration_key(self, self.test_today)
        )

    @property
    def stored_key(self) -> str:
        """The key as the artifact stores it (its file name's, resume's)."""
        return self.doc.get("key") or self.doc["id"]

    @property
    def baseline_key(self) -> str | None:
        """The configuration key of the sweep point this run is compared with, as :attr:`key` makes
        keys: its own key when it is the baseline; another run's stored key is made today's by
        :func:`resolve_baselines`, over the loaded set."""
        bk = self.doc["matrix"].get("baseline_key")
        if bk is None or bk != self.stored_key:
            return self._cache.get("baseline_key", bk)
        return self.key

    # LoRA adapters
    @property
    def lora_requested(self) -> list[str]:
        """The adapters this configuration asked to attach (names or paths), in order."""
        return list(self.requested.get("lora_adapters") or [])

    @property
    def lora(self) -> LoraAttached:
        """What attaching the adapters did, as the backend reported it: each adapter's facts and load
        time, the total load time, the RSS growth (an empty record without adapters)."""
        return self._cached(
            "lora", lambda: LoraAttached.from_dict(self.reported.get("lora"))
        )

    @property
    def lora_adapters(self) -> list[dict[str, Any]]:
        """Each attached adapter's facts (name, file, rank, targets, alpha, tensor bytes and types, load time)."""
        return [dict(a) for a in self.lora.adapters]

    @property
    def lora_buffer_mib(self) -> list[float]:
        """llama.cpp's own "LoRA buffer size" lines (MiB), one per adapter and buffer type."""
        return [float(x) for x in self.reported.get("lora_buffer_mib") or []]

    # measurements
    @property
    def summary(self) -> dict[str, Summary]:
        """Every metric's statistic (read-only), with each CI95 of a mean recomputed so that it stays
        in the quantity's domain (core.stats.in_domain: a time or rate never gets a negative bound,
        fewer than 3 samples get no interval and ``ci95_why`` says so); the file is never rewritten."""

        def read() -> dict[str, Summary]:
            from core import stats

            return {
                k: Summary.from_dict(
                    stats.in_domain(v, upper=SHARE_UPPER.get(k))
                    if isinstance(v, dict) and "n" in v
                    else v
                )
                for k, v in self.doc["summary"].items()
            }

        return self._cached("summary", read)

    def stat(self, metric: str) -> Summary | None:
        """The statistic of one metric (n, mean, stddev, ci95_low, ci95_high, ...), None when not summarised."""
        return self.summary.get(metric)

    @property
    def headline_metric(self) -> Metric | None:
        """The metric its kind is ranked and compared on (None: an unranked or unknown kind)."""
        return kinds.headline(self.test_kind)

    @property
    def headline(self) -> Summary | None:
        """The statistic of the kind's headline metric, when it has a mean."""
        m = self.headline_metric
        s = self.stat(m.name) if m is not None else None
        return s if s is not None and s.mean is not None else None

    @property
    def samples(self) -> Samples:
        """The raw records behind the summary, as the kind's samples model (core.kinds)."""
        return self._cached_bounded(
            "samples",
            lambda: self._shape(
                "samples", self.kind.samples if self.kind else None, Samples
            ),
        )

    @property
    def details(self) -> Details:
        """What the run kept beside its samples, as the kind's details model (core.kinds)."""
        return self._cached_bounded(
            "details",
            lambda: self._shape(
                "details", self.kind.details if self.kind else None, Details
            ),
        )

    def _shape(self, part: str, model: type | None, base: type) -> Any:
        """``samples`` or ``details`` as the kind's model. A kind this installation does not know is
        read with the base model's declared fields only: its other fields stay in the file (shown as
        they are), never typed as a known kind's records a pipeline would compute with."""
        raw = self._part(part) or {}
        if model is not None:
            return model.model_validate(raw)
        known = (
            {k: v for k, v in raw.items() if k in base.model_fields}
            if isinstance(raw, dict)
            else {}
        )
        try:
            return base.model_validate(known)
        except (
            ValueError
        ):  # pydantic's ValidationError: a declared field of another type
            return base()

    def values(self, metric: str) -> list[float]:
        """The per-sample values behind one metric of the summary (the kind knows where they are)."""
        kind = self.kind
        return kind.values(self.samples, metric) if kind is not None else []

    @property
    def precision(self) -> PrecisionRecord | None:
        """How repetition stopped (core.precision): target, half-width reached, met, why; None
        for an artifact from before repeat-to-precision."""
        return self.details.precision

    @property
    def resources(self) -> Resources:
        """What the run's process took, as the model reads it (core.models.run.Resources). Kept as a
        heavy part's parsed form is (``_cached_bounded``): the memory pages read it of every run, and a
        model kept on every record to the end of the build cost about 1.5 KB a run."""
        return self._cached_bounded(
            "resources", lambda: Resources.from_dict(self.doc.get("resources"))
        )

    @property
    def disturbed(self) -> bool:
        """Measured without a quiet slot after every attempt (core.quiet): out of figures and verdicts.
        Read from the stored block as Resources.disturbed reads it, without the model: every build asks
        it of every run, and a model of each run's resources kept for it cost about 1.5 KB a run."""
        block = self.doc.get("resources")
        return quiet.record_disturbed(
            block.get("quiet") if isinstance(block, Mapping) else None
        )

    @property
    def log_tail(self) -> str:
        return self._part("log_tail") or ""

    @property
    def records_full(self) -> dict[str, Any] | None:
        """The sidecar of every request record this run names (``details.request_records.full``: file,
        sha256, records, bytes; core.request_records), None for a run that names none. Known without
        reading a loaded run's details from its file."""
        if self._src is not None:
            return self._src.records_full
        from core import request_records

        return request_records.full_file(self.doc)

    @property
    def request_records(self) -> list[Any]:
        """A chat test's timed request records (core.kinds.request.RequestRecord: ok or failed;
        warm-ups left out); [] for another kind."""
        return (
            list(getattr(self.samples, "requests", None) or [])
            if self.test_kind == "chat"
            else []
        )

    def _sweep_totals(self) -> list[dict[str, Any]] | None:
        """A concurrency run's per-level totals as it stored them (``details.sweep``, computed from every
        request before its records were bounded, core.request_records), one row per stored level; None
        when the sweep lacks them (a run measured before they were stored: its records are all there)."""
        sweep = getattr(self.details, "sweep", None)
        rows = sweep.get("levels") if isinstance(sweep, dict) else None
        keys = ("level", "output_tokens", "prompt_tokens", "requests", "wall_s")
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and all(k in r for k in keys) for r in rows
        ):
            return None
        if sorted(float(r["level"]) for r in rows) != sorted(
            float(lv.level) for lv in self.samples.levels or []
        ):
            return None
        return rows

    def generation(self) -> dict[str, Any]:
        """What this run generated in its timed part (warm-ups left out): output tokens, the seconds
        spent producing them, prompt tokens processed, and how the time was counted.

        rate tests: n_gen tokens per repetition; the time is the repetitions' own wall time for a
        tg test, llama.cpp's eval time of the generated part (its perf counters) when a prompt shares
        the repetition, none for a pp test. generate, chat and serve: every timed request's output
        tokens and end-to-end time (sequential requests). concurrency: each level's requests and the
        level's wall time (requests in flight together share it). Failed requests count no tokens.
        A kind this installation does not know generated nothing it can count."""
        out: dict[str, Any] = {
            "tokens": 0,
            "seconds": 0.0,
            "prompt_tokens": 0,
            "requests": 0,
            "time": "",
        }
        kind, samples = self.test_kind, self.samples
        if kind == "rate":
            spec = self.spec
            n_gen, n_prompt = (
                (spec.n_gen, spec.n_prompt) if spec is not None else (0, 0)
            )
            ns = [int(v) for v in samples.ns or []]
            out["tokens"] = n_gen * len(ns)
            out["prompt_tokens"] = n_prompt * len(ns)
            if n_gen and not n_prompt:
                out["seconds"], out["time"] = sum(ns) / 1e9, "repetition wall time"
            elif n_gen:
                perf = self.details.perf_counters or []
                out["seconds"], out["time"] = (
                    sum(float(p.t_eval_ms or 0) for p in perf) / 1000.0,
                    "llama.cpp eval time",
                )
            return out
        if kind == "concurrency":
            # the run's sweep, over every request (its records may be a sample), where it holds the totals
            totals = self._sweep_totals()
            if totals is not None:
                for row in totals:
                    out["tokens"] += int(row["output_tokens"] or 0)
                    out["prompt_tokens"] += int(row["prompt_tokens"] or 0)
                    out["requests"] += int(row["requests"] or 0)
                    out["seconds"] += float(row["wall_s"] or 0.0)
            else:
                for level in samples.levels or []:
                    ok = [r for r in level.requests if r.ok]
                    out["tokens"] += sum(int(r.output_tokens or 0) for r in ok)
                    out["prompt_tokens"] += sum(int(r.prompt_tokens or 0) for r in ok)
                    out["requests"] += len(level.requests)
                    out["seconds"] += float(level.wall_s or 0.0)
            out["time"] = "wall time of each concurrency level"
            return out
        lists = {
            "serve": ("cold", "warm"),
            "chat": ("requests",),
            "generate": ("requests",),
        }.get(kind, ())
        for name in lists:
            for r in getattr(samples, name, None) or []:
                out["requests"] += 1
                if getattr(r, "ok", True):
                    out["tokens"] += int(r.output_tokens or 0)
                    out["prompt_tokens"] += int(r.prompt_tokens or 0)
                out["seconds"] += float(r.e2e_ms or 0.0) / 1000.0
        if lists:
            out["time"] = "end-to-end time of each timed request"
        return out

    # comparability
    def comparability(
        self, exclude: tuple[str, ...] | frozenset[str] = ()
    ) -> dict[str, Any]:
        """The parts that make two results comparable as one row: the work and the environment (the
        method, how precisely it was measured, is left out). ``exclude`` leaves out what a view
        compares on purpose: top-level parts ("host", "build", "model", "backend", "test") or
        single settings as "settings.<name>"."""
        return identity.comparability(self, exclude)

    def comparability_key(self, exclude: tuple[str, ...] | frozenset[str] = ()) -> str:
        ck = self._cache.setdefault("ck", {})
        k = tuple(sorted(exclude))
        if k not in ck:
            ck[k] = identity.comparability_key(self, exclude)
        return ck[k]

    @property
    def history_key(self) -> str:
        """Same work, host, backend and requested settings (those not left to the default): one
        configuration's series across builds (llama.cpp commit, backend version, almanac) and methods."""
        return self._cached("history", lambda: identity.history_key(self))

    #: what a build keeps of a run between builds with its file (pipelines.site.answer_store), by the
    #: name each is cached under: its keys, each a function of the document and the code alone
    KEYS_KEPT = ("key", "ck", "history", "work_key")

    def keys_kept(self) -> dict[str, Any]:
        """Its keys (:data:`KEYS_KEPT`), computed now where not yet: the configuration key, the
        comparability key over every setting, the history key and the work key."""
        _ = (self.key, self.comparability_key(), self.history_key, self.work_key)
        return {n: self._cache[n] for n in self.KEYS_KEPT}

    def keep_keys(self, keys: Mapping[str, Any]) -> None:
        """Take the keys an earlier build computed from this same document (:meth:`keys_kept`)."""
        for n in self.KEYS_KEPT:
            self._cache.setdefault(n, keys[n])


def as_record(doc: Mapping[str, Any]) -> RunRecord:
    """A RunRecord for a loaded document (a RunRecord is returned as it is)."""
    return doc if isinstance(doc, RunRecord) else RunRecord(doc)


def read(path: Path | str) -> RunRecord:
    """Read, migrate and validate one run artifact."""
    doc = artifacts.load(path)
    if doc.get("artifact") != ARTIFACT:
        from core.errors import ArtifactError

        raise ArtifactError(
            f"is a {doc.get('artifact')!r} artifact, not a run",
            file=relpath(Path(path)),
            field="artifact",
        )
    return RunRecord(doc, relpath(Path(path)))


def read_all(root: Path | str | None = None) -> list[RunRecord]:
    """Every run artifact under ``root`` (default data/runs), oldest first."""
    out = [
        RunRecord(doc, relpath(path))
        for path, doc in artifacts.read_set(root or runs_dir(), ARTIFACT)
    ]
    out.sort(key=lambda r: (r.created, r.id))
    return resolve_baselines(out)


def resolve_baselines(records: list[RunRecord]) -> list[RunRecord]:
    """Make every run's ``baseline_key`` that names another run's stored key that run's key as
    today's writer makes it (:attr:`RunRecord.key`): a sweep written by an older version finds its
    baseline under the key its pages group by. Returns ``records``."""
    named = {
        bk
        for r in records
        if (bk := r.doc["matrix"].get("baseline_key")) is not None
        and bk != r.stored_key
    }
    if not named:
        return records
    today = {r.stored_key: r.key for r in records if r.stored_key in named}
    for r in records:
        bk = r.doc["matrix"].get("baseline_key")
        if bk is not None and bk != r.stored_key and today.get(bk, bk) != bk:
            r._cache["baseline_key"] = today[bk]
    return records


def latest_per_key(records: list[RunRecord]) -> list[RunRecord]:
    """The newest artifact of each measurement key (a forced rerun supersedes; history stays on disk).
    Sweeps among them name their baselines by today's keys (:func:`resolve_baselines`, over all of
    ``records``: a baseline a newer run superseded is still named by the key it shares with it)."""
    resolve_baselines(records)
    latest: dict[str, RunRecord] = {}
    for r in records:
        cur = latest.get(r.key)
        if cur is None or (r.created, r.id) > (cur.created, cur.id):
            latest[r.key] = r
    return sorted(latest.values(), key=lambda r: (r.created, r.id))


def _frozen(v: Any) -> Any:
    """A JSON value as a key: each value with its type (1, 1.0 and True are one key to a dict, not to a
    strict model), objects and arrays as tuples."""
    if isinstance(v, dict):
        return (dict, tuple((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return (list, tuple(_frozen(x) for x in v))
    return (type(v), v)


def _parse_spec(spec: type[TestSpec], test: dict[str, Any]) -> TestSpec | None:
    """A stored test's parameters as its kind's spec; None for a test the spec no longer parses."""
    try:
        return spec.model_validate(test)
    except ValueError:
        return None


_SPECS: dict[tuple[type[TestSpec], Any], TestSpec | None] = {}
_SPECS_KEPT = 4096


def _spec_of(spec: type[TestSpec], key: Any, test: dict[str, Any]) -> TestSpec | None:
    """:func:`_parse_spec`, one object for every run of one test (``key``: the test as :func:`_frozen`
    gives it; a spec is frozen): a fleet's runs share a few tests, and a spec kept per run cost about a
    kilobyte a run."""
    k = (spec, key)
    got = _SPECS.get(k, _SPECS)
    if got is _SPECS:
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        got = _SPECS[k] = _parse_spec(spec, test)
    return got  # type: ignore[return-value]
