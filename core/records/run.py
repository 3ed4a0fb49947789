"""The run record: the one owner of the run artifact's shape.

Every writer builds a run artifact through :func:`new_run` (runner, failed-run writer,
llama-bench importer, test fixtures) and every reader goes through :class:`RunRecord`
(pipelines included: this module is the data shape, not a backend, and imports nothing
from the backends). What is decided here, once:

* **One id format**: ``<first 12 hex of the key>-<UTC time>.<ms>Z``
  (``5fb683a3eda9-20261126T040430.390Z``), :func:`run_id`. Older artifacts whose id has
  no milliseconds stay valid: the id is only ever read as a whole.
* **The measurement key** (:func:`config_key`): what would have to change for a
  configuration to be measured again (resume identity).
* **Effective settings** (:func:`effective_settings`): what the backend reported it ran
  with, over what was requested; observations the backend reported beside its settings
  (memory buffers, the ``*_requested`` echoes, a random loopback port) are not settings.
  Flash attention is interpreted here and nowhere else (:func:`flash_attention`): the
  backend's report ("on"/"off") wins, else the requested value, else llama.cpp's "auto".
* **Comparability** (:meth:`RunRecord.comparability`): two results ran the same work when
  they share test definition (every parameter except the repetition count, which only
  changes the sample size), backend (with the server software, over HTTP), backend build, model file (sha256), host and
  effective settings. A board that compares some of these on purpose leaves them out
  (``exclude=``) and shows them as columns.
* **History identity** (:attr:`RunRecord.history_key`): the same configuration as asked
  (requested settings, not effective ones) on the same host, model file, backend and
  test, across builds: the series a regression is looked for in.

Files on disk keep schema version 1: no field changed meaning, so no migration is needed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core import artifacts
from core.paths import relpath, runs_dir, slug

ARTIFACT = "run"
METHOD_VERSION = 1  # bump when what a measurement means changes; part of every key

# Keys of settings.effective that are observations reported beside the settings, not
# settings: they never make two results different work.
OBSERVED_EFFECTIVE = frozenset({
    "llama_memory_mib", "gpu_offload_supported", "flash_attn_requested", "n_gpu_layers_requested", "n_layers_total",
    "draft_load_time_s", "draft_model_file", "draft_synthetic", "base_url", "server_command", "request_timeout_s",
    "retries", "lora", "lora_buffer_mib",
})
# Build fields that identify the software that measured (the "backend build").
BUILD_IDENTITY = ("backend_version", "llama_cpp_commit", "server", "server_package", "server_version", "server_commit",
                  "server_build_number", "libraries", "label")
# Test fields that do not change the work: only how many times it is repeated (a fixed count, or
# the precision target that decides it).
TEST_SAMPLE_SIZE = frozenset({"repetitions", "precision"})


# -- identity ---------------------------------------------------------------------------------
def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(_canonical(obj).encode()).hexdigest()


def config_key(backend: str, model_sha256: str, settings: dict[str, Any], test: dict[str, Any], host_id: str,
               backend_version: str, build_label: str | None = None) -> str:
    """Identity of a measurement: what would have to change for it to be measured again.

    ``build_label`` names a variant build (e.g. a deliberately slowed one) measured beside
    the ordinary build; absent, the key is what it always was."""
    ident: dict[str, Any] = {"backend": backend, "backend_version": backend_version, "model_sha256": model_sha256,
                             "settings": settings, "test": test, "host": host_id, "method": METHOD_VERSION}
    if build_label:
        ident["build_label"] = build_label
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def run_id(key: str, created: datetime) -> str:
    """The one id format: key prefix and UTC time to the millisecond (reruns never collide)."""
    created = created.astimezone(timezone.utc)
    return f"{key[:12]}-{created.strftime('%Y%m%dT%H%M%S')}.{created.microsecond // 1000:03d}Z"


def run_path(doc: Mapping[str, Any], root: Path | None = None) -> Path:
    """Where a run artifact lives: ``<root>/<host id>/<model slug>/<test>--<key16>-<time>.json``."""
    root = root or runs_dir()
    safe_test = doc["test"]["name"].replace("/", "_").replace("@", "_at_").replace("+", "_")
    return root / doc["host"]["id"] / slug(doc["model"]["name"]) / f"{safe_test}--{doc['key'][:16]}-{doc['id'].split('-', 1)[1]}.json"


# -- writing ----------------------------------------------------------------------------------
def new_run(*, key: str, created: datetime, status: str, backend: str, test: dict[str, Any],
            requested: dict[str, Any], model: dict[str, Any], host: dict[str, Any], build: dict[str, Any],
            matrix: dict[str, Any], swept: dict[str, Any] | None = None, effective: dict[str, Any] | None = None,
            error: dict[str, Any] | None = None, samples: dict[str, Any] | None = None,
            summary: dict[str, Any] | None = None, details: dict[str, Any] | None = None,
            resources: dict[str, Any] | None = None, log_tail: str = "", run_id_: str | None = None) -> dict[str, Any]:
    """A run artifact (the canonical dict written to disk), built in one place.

    ``build`` must carry backend_version and ``in_process`` (what the backend declares);
    backend, almanac version and method version are filled in when missing. ``model`` is a
    local file's record (``kind: file``, the default) or an endpoint model's (``kind: endpoint``,
    with its ``identity``); a file's identity is its sha256. ``resources`` gets its required keys
    (null when unknown)."""
    from core import __version__

    b = {"backend": backend, "almanac": __version__, "method_version": METHOD_VERSION, **build}
    if "in_process" not in b:
        raise ValueError("build.in_process is required: the backend's declaration (runtime.backends.base.Backend.in_process)")
    model = dict(model)
    model.setdefault("kind", "file")
    if model["kind"] == "file":
        model.setdefault("identity", model.get("sha256") or model.get("name"))
    res = {"peak_rss_bytes": None, "peak_vram_bytes": None, "wall_s": 0.0, "exit_code": None, "signal": None,
           **(resources or {})}
    return {
        "artifact": ARTIFACT,
        "schema_version": artifacts.ARTIFACT_TYPES[ARTIFACT].version,
        "id": run_id_ or run_id(key, created),
        "key": key,
        "created": created.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
        "error": error if status != "ok" else None,
        "matrix": dict(matrix),
        "backend": backend,
        "test": dict(test),
        "settings": {"requested": dict(requested), "swept": dict(swept or {}), "effective": dict(effective or {})},
        "model": dict(model),
        "host": dict(host),
        "build": b,
        "samples": samples or {},
        "summary": summary or {},
        "details": details or {},
        "resources": res,
        "log_tail": log_tail,
    }


def write(doc: dict[str, Any], root: Path | None = None) -> Path:
    """Validate and atomically write a run artifact at its canonical path."""
    return artifacts.write(run_path(doc, root), doc)


# -- interpretation (once) --------------------------------------------------------------------
def flash_attention(requested: Mapping[str, Any], effective: Mapping[str, Any]) -> str | None:
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


def flash_attention_on(requested: Mapping[str, Any], effective: Mapping[str, Any]) -> bool:
    """Whether flash attention ran (llama.cpp's "auto" enables it on CPUs and recent GPUs)."""
    return flash_attention(requested, effective) != "off"


def effective_settings(requested: Mapping[str, Any], effective: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as they ran: requested values, overridden by what the backend reported,
    without observations; flash attention resolved by :func:`flash_attention`."""
    out = {k: v for k, v in requested.items()}
    out.update({k: v for k, v in effective.items() if k not in OBSERVED_EFFECTIVE})
    fa = flash_attention(requested, effective)
    if fa is not None:
        out["flash_attn"] = fa
    return out


# -- reading ----------------------------------------------------------------------------------
class RunRecord(Mapping):
    """A loaded run artifact with typed accessors. Pipelines use the properties; the
    Mapping interface (``rec["host"]``) gives the canonical document for renderers that show
    it whole (the run page) and for code not yet moved to the accessors."""

    __slots__ = ("doc", "path", "_cache")

    def __init__(self, doc: Mapping[str, Any], path: str = ""):
        if isinstance(doc, RunRecord):
            path = path or doc.path
            doc = doc.doc
        self.doc: dict[str, Any] = doc  # type: ignore[assignment]
        self.path: str = path or str(doc.get("_path", ""))
        self._cache: dict[str, Any] = {}

    # Mapping (the canonical document; "_path" for older callers)
    def __getitem__(self, k: str) -> Any:
        if k == "_path":
            return self.path
        return self.doc[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)

    def __repr__(self) -> str:
        return f"RunRecord({self.id!r})"

    # identity and status
    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def key(self) -> str:
        return self.doc["key"]

    @property
    def created(self) -> str:
        return self.doc["created"]

    @property
    def status(self) -> str:
        return self.doc["status"]

    @property
    def ok(self) -> bool:
        return self.doc["status"] == "ok"

    @property
    def error(self) -> dict[str, Any] | None:
        return self.doc.get("error")

    @property
    def error_message(self) -> str | None:
        return (self.doc.get("error") or {}).get("message")

    # what ran
    @property
    def backend(self) -> str:
        return self.doc["backend"]

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
    def almanac_version(self) -> str:
        return self.doc["build"].get("almanac", "")

    @property
    def build_label(self) -> str | None:
        """A variant build's label (e.g. a deliberately slowed build), None for the ordinary one."""
        return self.doc["build"].get("label")

    @property
    def server(self) -> str:
        """The server software an HTTP backend talked to (llama_cpp.server, llama-server, ...); "" in process."""
        return str(self.doc["build"].get("server") or self.doc["build"].get("endpoint") or "")

    @property
    def backend_name(self) -> str:
        """The backend as compared: ``openai_http (llama-server)`` for an HTTP backend, else the backend."""
        return f"{self.backend} ({self.server})" if self.server else self.backend

    @property
    def build_identity(self) -> dict[str, Any]:
        b = self.doc["build"]
        return {k: b[k] for k in BUILD_IDENTITY if b.get(k) not in (None, "")}

    @property
    def backend_build(self) -> str:
        """The backend build in words: version, llama.cpp commit, variant label."""
        b = self.doc["build"]
        parts = [b.get("backend_version") or "?"]
        for k in ("server", "server_package", "server_version", "server_commit"):
            if b.get(k) and str(b[k]) not in parts[0]:
                parts.append(str(b[k]))
        if b.get("llama_cpp_commit") and b["llama_cpp_commit"] not in parts[0]:
            parts.append(f"llama.cpp {b['llama_cpp_commit']}")
        if b.get("label"):
            parts.append(f"[{b['label']}]")
        return " · ".join(parts)

    @property
    def test(self) -> dict[str, Any]:
        return self.doc["test"]

    @property
    def test_name(self) -> str:
        return self.doc["test"]["name"]

    @property
    def test_kind(self) -> str:
        return self.doc["test"]["kind"]

    @property
    def test_definition(self) -> dict[str, Any]:
        """Every parameter of the test except the repetition count."""
        return {k: v for k, v in self.doc["test"].items() if k not in TEST_SAMPLE_SIZE}

    @property
    def requested(self) -> dict[str, Any]:
        return self.doc["settings"]["requested"]

    @property
    def swept(self) -> dict[str, Any]:
        return self.doc["settings"]["swept"]

    @property
    def reported(self) -> dict[str, Any]:
        """settings.effective exactly as the backend reported it (observations included)."""
        return self.doc["settings"]["effective"]

    @property
    def effective(self) -> dict[str, Any]:
        v = self._cache.get("effective")
        if v is None:
            v = self._cache["effective"] = effective_settings(self.requested, self.reported)
        return v

    @property
    def flash_attn(self) -> str | None:
        return flash_attention(self.requested, self.reported)

    @property
    def flash_attn_on(self) -> bool:
        return flash_attention_on(self.requested, self.reported)

    # model, host, matrix
    @property
    def model(self) -> dict[str, Any]:
        return self.doc["model"]

    @property
    def model_name(self) -> str:
        return self.doc["model"]["name"]

    @property
    def model_sha256(self) -> str | None:
        return self.doc["model"].get("sha256")

    @property
    def gguf(self) -> dict[str, Any]:
        return self.doc["model"].get("gguf") or {}

    @property
    def quantization(self) -> str | None:
        return self.gguf.get("quantization")

    @property
    def synthetic(self) -> bool:
        return bool(self.doc["model"].get("synthetic"))

    @property
    def host(self) -> dict[str, Any]:
        return self.doc["host"]

    @property
    def host_id(self) -> str:
        return self.doc["host"]["id"]

    @property
    def host_name(self) -> str:
        return self.doc["host"]["name"]

    @property
    def gpu_names(self) -> str:
        return ", ".join(g.get("name", "") for g in self.doc["host"].get("gpus") or [])

    @property
    def matrix_name(self) -> str:
        return self.doc["matrix"]["name"]

    @property
    def sweep(self) -> str | None:
        return self.doc["matrix"].get("sweep")

    @property
    def baseline_key(self) -> str | None:
        return self.doc["matrix"].get("baseline_key")

    # LoRA adapters
    @property
    def lora_requested(self) -> list[str]:
        """The adapters this configuration asked to attach (names or paths), in order."""
        return list(self.requested.get("lora_adapters") or [])

    @property
    def lora(self) -> dict[str, Any]:
        """What attaching the adapters did, as the backend reported it: each adapter's facts and
        load time, the total load time, the RSS growth ({} without adapters)."""
        return self.reported.get("lora") or {}

    @property
    def lora_adapters(self) -> list[dict[str, Any]]:
        return list(self.lora.get("adapters") or [])

    @property
    def lora_buffer_mib(self) -> list[float]:
        """llama.cpp's own "LoRA buffer size" lines (MiB), one per adapter and buffer type."""
        return [float(x) for x in self.reported.get("lora_buffer_mib") or []]

    # measurements
    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        return self.doc["summary"]

    @property
    def precision(self) -> dict[str, Any] | None:
        """How repetition stopped (core.precision): target, half-width reached, met, why; None
        for an artifact from before repeat-to-precision."""
        return (self.doc.get("details") or {}).get("precision")

    @property
    def samples(self) -> dict[str, Any]:
        return self.doc["samples"]

    @property
    def details(self) -> dict[str, Any]:
        return self.doc["details"]

    @property
    def resources(self) -> dict[str, Any]:
        return self.doc["resources"]

    @property
    def request_records(self) -> list[dict[str, Any]]:
        """A chat test's timed request records (ok or failed; warm-ups left out)."""
        return [r for r in (self.doc.get("samples") or {}).get("requests", []) if isinstance(r, dict)]

    @property
    def repetition_rates(self) -> list[float]:
        """A rate test's tokens/s per timed repetition (the samples its summary is made of)."""
        if self.test_kind != "rate":
            return []
        return [float(v) for v in (self.doc.get("samples") or {}).get("ts", [])]

    @property
    def peak_rss_bytes(self) -> int | None:
        v = (self.doc.get("resources") or {}).get("peak_rss_bytes")
        return int(v) if v else None

    def generation(self) -> dict[str, Any]:
        """What this run generated in its timed part (warm-ups left out): output tokens, the seconds
        spent producing them, prompt tokens processed, and how the time was counted.

        rate tests: n_gen tokens per repetition; the time is the repetitions' own wall time for a
        tg test, llama.cpp's eval time of the generated part (its perf counters) when a prompt shares
        the repetition, none for a pp test. generate, chat and serve: every timed request's output
        tokens and end-to-end time (sequential requests). concurrency: each level's requests and the
        level's wall time (requests in flight together share it). Failed requests count no tokens."""
        out = {"tokens": 0, "seconds": 0.0, "prompt_tokens": 0, "requests": 0, "time": ""}
        samples = self.doc.get("samples") or {}
        kind = self.test_kind
        if kind == "rate":
            t = self.test
            n_gen, n_prompt = int(t.get("n_gen") or 0), int(t.get("n_prompt") or 0)
            ns = [int(v) for v in samples.get("ns", [])]
            out["tokens"] = n_gen * len(ns)
            out["prompt_tokens"] = n_prompt * len(ns)
            if n_gen and not n_prompt:
                out["seconds"], out["time"] = sum(ns) / 1e9, "repetition wall time"
            elif n_gen:
                perf = (self.doc.get("details") or {}).get("perf_counters") or []
                out["seconds"], out["time"] = sum(float(p.get("t_eval_ms") or 0) for p in perf) / 1000.0, "llama.cpp eval time"
            return out
        if kind == "concurrency":
            for level in samples.get("levels", []):
                reqs = [r for r in level.get("requests", []) if isinstance(r, dict)]
                out["tokens"] += sum(int(r.get("output_tokens") or 0) for r in reqs if r.get("ok", True))
                out["prompt_tokens"] += sum(int(r.get("prompt_tokens") or 0) for r in reqs if r.get("ok", True))
                out["requests"] += len(reqs)
                out["seconds"] += float(level.get("wall_s") or 0.0)
            out["time"] = "wall time of each concurrency level"
            return out
        lists = {"serve": ("cold", "warm")}.get(kind, ("requests",))
        for name in lists:
            for r in samples.get(name, []):
                if not isinstance(r, dict):
                    continue
                out["requests"] += 1
                if r.get("ok", True):
                    out["tokens"] += int(r.get("output_tokens") or 0)
                    out["prompt_tokens"] += int(r.get("prompt_tokens") or 0)
                out["seconds"] += float(r.get("e2e_ms") or 0.0) / 1000.0
        out["time"] = "end-to-end time of each timed request"
        return out

    def stat(self, metric: str) -> dict[str, Any] | None:
        """The summary statistics of one metric (n, mean, stddev, ci95_low, ci95_high, ...)."""
        return self.doc["summary"].get(metric)

    # comparability
    def comparability(self, exclude: tuple[str, ...] | frozenset[str] = ()) -> dict[str, Any]:
        """The parts that make two results the same work. ``exclude`` leaves out what a view
        compares on purpose: top-level parts ("host", "build", "model", "backend", "test")
        or single settings as "settings.<name>"."""
        parts: dict[str, Any] = {
            "test": self.test_definition,
            "backend": self.backend_name,
            "build": self.build_identity,
            "model": self.model_sha256 or self.model_name,
            "host": self.host_id,
            "method": self.doc["build"].get("method_version", METHOD_VERSION),
            "settings": self.effective,
        }
        drop_settings = {e.split(".", 1)[1] for e in exclude if e.startswith("settings.")}
        if drop_settings:
            parts["settings"] = {k: v for k, v in parts["settings"].items() if k not in drop_settings}
        for e in exclude:
            if "." not in e:
                parts.pop(e, None)
        return parts

    def comparability_key(self, exclude: tuple[str, ...] | frozenset[str] = ()) -> str:
        ck = self._cache.setdefault("ck", {})
        k = tuple(sorted(exclude))
        if k not in ck:
            ck[k] = digest(self.comparability(exclude))[:16]
        return ck[k]

    @property
    def history_key(self) -> str:
        """Same host, model file, backend, test definition and requested settings: one
        configuration's series across builds (llama.cpp commit, backend version, almanac)."""
        v = self._cache.get("history")
        if v is None:
            v = self._cache["history"] = digest({"test": self.test_definition, "backend": self.backend_name,
                                                 "model": self.model_sha256 or self.model_name, "host": self.host_id,
                                                 "requested": self.requested})[:16]
        return v


def as_record(doc: Mapping[str, Any]) -> RunRecord:
    """A RunRecord for a loaded document (a RunRecord is returned as it is)."""
    return doc if isinstance(doc, RunRecord) else RunRecord(doc)


def read(path: Path | str) -> RunRecord:
    """Read, migrate and validate one run artifact."""
    doc = artifacts.load(path)
    if doc.get("artifact") != ARTIFACT:
        from core.errors import ArtifactError

        raise ArtifactError(f"is a {doc.get('artifact')!r} artifact, not a run", file=relpath(Path(path)), field="artifact")
    return RunRecord(doc, relpath(Path(path)))


def read_all(root: Path | str | None = None) -> list[RunRecord]:
    """Every run artifact under ``root`` (default data/runs), oldest first."""
    out = [RunRecord(doc, relpath(path)) for path, doc in artifacts.iter_artifacts(root or runs_dir(), ARTIFACT)]
    out.sort(key=lambda r: (r.created, r.id))
    return out


def latest_per_key(records: list[RunRecord]) -> list[RunRecord]:
    """The newest artifact of each measurement key (a forced rerun supersedes; history stays on disk)."""
    latest: dict[str, RunRecord] = {}
    for r in records:
        cur = latest.get(r.key)
        if cur is None or (r.created, r.id) > (cur.created, cur.id):
            latest[r.key] = r
    return sorted(latest.values(), key=lambda r: (r.created, r.id))
