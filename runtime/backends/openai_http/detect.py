"""What server answers at a URL, and what it says about a model it serves.

:func:`probe` asks an OpenAI-compatible server's ``/models`` and the server's own info routes,
recognises the software and its version, and returns a
:class:`~runtime.models.endpoint.ServedModel`: the underlying model, revision or digest,
quantization, context length, size, parameter count, and the facts that tell one set of
weights from another (the endpoint model's identity, runtime.models.endpoint). Each server
is one small reader below, from the routes its own source or docs define:

============  ==========================================  =================================================
server        recognised by                               what it reports of the model
============  ==========================================  =================================================
llama-server  ``Server: llama.cpp``; owned_by "llamacpp"  /v1/models ``meta`` (ftype, size, n_params, shape),
                                                          /props ``model_path``, ``build_info``
llama_cpp.    owned_by "me" with ``permissions``          the served name only
server
vLLM          owned_by "vllm"                             ``root``, ``max_model_len``; /version
SGLang        owned_by "sglang"                           ``max_model_len``; /get_server_info (newer: /server_info:
                                                          model_path, revision, quantization, version),
                                                          /get_model_info
TGI           /info with ``router`` and ``model_id``      /info ``model_id``, ``model_sha``,
                                                          ``max_total_tokens``, ``version``, ``sha``
Ollama        /api/version                                /api/tags ``digest``, ``size``; /api/show
                                                          ``details.quantization_level``, ``model_info``
transformers  /openapi.json lists /load_model,            the /v1/models id ``<repo>@<revision>`` (its hub
serve         /v1/responses, /v1/audio/transcriptions     cache); no version of its own
============  ==========================================  =================================================

Anything else is ``unknown`` and identified by its /models entry. Every answer is read
defensively (bounded size, any shape) and kept trimmed in ``reported``. Nothing here is
timed: the backend probes before and after a measurement, never during one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from runtime.models.endpoint import ServedModel

MAX_BODY_BYTES = 2 << 20  # an info route's answer; more is not read
MAX_STRING = 300  # characters of one string kept in ``reported``
MAX_ITEMS = 40  # items of one list or keys of one mapping kept in ``reported``
# a size, a count or a context length above this is no fact about a model
MAX_INT = 10**18
# an identification asks a few routes; all of them together get this many timeouts
PROBE_ROUTES = 4

# llama.cpp's llama_ftype_name() strings (src/llama-model-loader.cpp) -> the names GGUF files and
# llama-bench use (LlamaFileType without MOSTLY_); "X - N bpw" and "(guessed) " are handled below.
_FTYPE_SUFFIX = {"Small": "S", "Medium": "M", "Large": "L"}
_FTYPE_SPECIAL = {
    "all F32": "F32",
    "Q2_K - Medium": "Q2_K",
    "MXFP4 MoE": "MXFP4_MOE",
    "IQ3_S mix - 3.66 bpw": "IQ3_M",
}


class Unreachable(Exception):
    """The server did not answer its model list (connection refused, timeout, HTTP error)."""


class BadListing(Unreachable):
    """The server answers its model list with something no listing is: not JSON, nested past what a
    parser follows, or larger than an identification reads."""


class SlowListing(Unreachable):
    """The server's model list did not arrive within the probe's timeout (its bytes drip)."""


class TooSlow(Exception):
    """An answer still arriving when its time was up (a server that drips its bytes)."""


class NotServed(Exception):
    """The server answers but does not list the served name; ``served`` holds what it lists."""

    def __init__(self, name: str, served: list[str]):
        self.name = name
        self.served = served
        listed = ", ".join(repr(str(s)[:100]) for s in served[:10]) or "nothing"
        if len(served) > 10:
            listed += f" and {len(served) - 10} more"
        super().__init__(f"does not serve {name!r} (its /models lists {listed})")


@dataclass(frozen=True)
class Answer:
    """One route's answer: status, the headers we read, the JSON body (None when not JSON)."""

    status: int
    server_header: str | None
    body: Any
    problem: str = ""  # why ``body`` is None for an answer that came: not JSON, too deep, too large


MAX_DIGITS = 30  # a number of more digits in an answer is no count (kept as None)


def _bounded_int(text: str) -> int | None:
    return int(text) if len(text.lstrip("-")) <= MAX_DIGITS else None


def parse_body(raw: bytes) -> tuple[Any, str]:
    """(the JSON of an info route's answer, "") or (None, why not)."""
    try:
        return json.loads(raw, parse_int=_bounded_int), ""
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError:
        return None, "not JSON"


def read_body(
    client: httpx.Client,
    url: str,
    deadline: float,
    method: str = "GET",
    payload: dict[str, Any] | None = None,
    limit: int = MAX_BODY_BYTES,
) -> tuple[int, bytes | None, str | None]:
    """(status, body, Server header) of one request, the body None when larger than ``limit``;
    TooSlow when the answer is not complete by ``deadline`` (time.monotonic()), however slowly its
    bytes come (a read timeout alone restarts with every byte)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TooSlow("no time was left for it")
    timeout = httpx.Timeout(remaining, connect=min(remaining, 5.0))
    with client.stream(method, url, json=payload, timeout=timeout) as resp:
        raw = bytearray()
        for part in resp.iter_bytes():
            raw += part
            if len(raw) > limit:
                return resp.status_code, None, resp.headers.get("server")
            if time.monotonic() > deadline:
                raise TooSlow(
                    f"the answer was still arriving when its time was up ({len(raw)} bytes so far)"
                )
        return resp.status_code, bytes(raw), resp.headers.get("server")


def server_root(base_url: str) -> str:
    """The server's root, where its own routes live: ``http://h:p/v1`` -> ``http://h:p``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        return base[: -len("/v1")]
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}"


def http_get(
    client: httpx.Client, timeout_s: float = 10.0
) -> Callable[[str, str], Answer]:
    """GET (or POST with a JSON body, for Ollama's /api/show) reading at most MAX_BODY_BYTES within
    ``timeout_s`` a route, and all routes within PROBE_ROUTES times that (a dripping answer is TooSlow)."""
    overall = time.monotonic() + PROBE_ROUTES * timeout_s

    def request(
        url: str, method: str = "GET", payload: dict[str, Any] | None = None
    ) -> Answer:
        deadline = min(time.monotonic() + timeout_s, overall)
        status, raw, server = read_body(client, url, deadline, method, payload)
        if raw is None:
            return Answer(
                status,
                server,
                None,
                f"larger than {MAX_BODY_BYTES >> 20} MiB (an identification reads no more)",
            )
        body, problem = parse_body(raw)
        return Answer(status, server, body, problem)

    return request


def probe(
    base_url: str,
    served_name: str,
    *,
    api_key: str | None = None,
    timeout_s: float = 10.0,
) -> ServedModel:
    """Ask the server at ``base_url`` about ``served_name``. Unreachable when its model list does
    not answer; NotServed when it does not list the name."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0))
    with httpx.Client(
        timeout=timeout, headers=headers, trust_env=False, follow_redirects=False
    ) as client:
        return read_server(http_get(client, timeout_s), base_url, served_name)


def read_server(
    request: Callable[..., Answer], base_url: str, served_name: str
) -> ServedModel:
    """:func:`probe` over any request function (``request(url, method="GET", payload=None)``)."""
    base = base_url.rstrip("/")
    root = server_root(base)

    def get(
        path: str, method: str = "GET", payload: dict[str, Any] | None = None
    ) -> Answer | None:
        try:
            return request(root + path, method, payload)
        except (httpx.HTTPError, OSError, TooSlow):
            return None

    try:
        listing = request(base + "/models")
    except TooSlow as exc:
        raise SlowListing(f"{base}/models: {exc}") from None
    except (httpx.HTTPError, OSError) as exc:
        raise Unreachable(
            f"{base}/models: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        ) from None
    if listing.status != 200:
        hint = (
            " (an API key is needed: set endpoint.api_key_env)"
            if listing.status in (401, 403)
            else ""
        )
        raise Unreachable(f"{base}/models answered HTTP {listing.status}{hint}")
    if listing.problem:
        raise BadListing(
            f"{base}/models answered with something that is no model list: {listing.problem}"
        )
    data = _as_dict(listing.body).get("data")
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    entry = _find(entries, served_name)
    if entry is None:
        raise NotServed(
            served_name, [str(e.get("id")) for e in entries if e.get("id") is not None]
        )
    owned = entry.get("owned_by")
    reported: dict[str, Any] = {
        "/v1/models": _small(
            {
                k: v
                for k, v in entry.items()
                if k not in ("created", "permission", "permissions")
            }
        )
    }
    if listing.server_header:
        reported["server_header"] = _small(listing.server_header)
    if listing.server_header == "llama.cpp" or owned == "llamacpp":
        why = (
            "Server header 'llama.cpp'"
            if listing.server_header == "llama.cpp"
            else "/v1/models owned_by 'llamacpp'"
        )
        return _llama_server(entry, get, reported, why)
    if owned == "vllm":
        return _vllm(entry, get, reported)
    if owned == "sglang":
        return _sglang(entry, get, reported)
    if owned == "me" and "permissions" in entry:
        return ServedModel(
            server="llama_cpp.server",
            model_id=None,
            reported=reported,
            evidence="/v1/models owned_by 'me' with permissions (llama-cpp-python's server)",
        )
    info = get("/info")
    if (
        info is not None
        and info.status == 200
        and isinstance(info.body, dict)
        and "model_id" in info.body
        and "router" in info.body
    ):
        return _tgi(info.body, reported)
    version = get("/api/version")
    if (
        version is not None
        and version.status == 200
        and isinstance(version.body, dict)
        and "version" in version.body
    ):
        return _ollama(entry, str(version.body["version"]), get, reported, served_name)
    spec = get("/openapi.json")
    if spec is not None and spec.status == 200 and _transformers_routes(spec.body):
        return _transformers_serve(entry, spec.body, reported)
    facts = {k: v for k, v in reported["/v1/models"].items() if k != "id"}
    return ServedModel(
        server="unknown",
        model_id=None,
        identity_facts={"models_entry": facts} if facts else {},
        reported=reported,
        evidence="no known server answered (owned_by " + repr(owned) + ")",
    )


# -- one reader per server ------------------------------------------------------------------
def _llama_server(
    entry: dict[str, Any], get, reported: dict[str, Any], why: str
) -> ServedModel:
    meta = _as_dict(entry.get("meta"))
    props_ans = get("/props")
    props = (
        _as_dict(props_ans.body)
        if props_ans is not None and props_ans.status == 200
        else {}
    )
    model_path = props.get("model_path")
    file_name = (
        str(model_path).replace("\\", "/").rsplit("/", 1)[-1]
        if isinstance(model_path, str) and model_path
        else None
    )
    build = props.get("build_info")
    version = commit = None
    if isinstance(build, str):
        version = build
        m = re.fullmatch(r"b(\w+)-([0-9a-f]{6,40})", build)
        commit = m.group(2) if m else None
    ftype = meta.get("ftype") or props.get("model_ftype")
    if props:
        gen = _as_dict(props.get("default_generation_settings"))
        reported["/props"] = _small(
            {
                "model_file": file_name,
                "model_alias": props.get("model_alias"),
                "build_info": build,
                "total_slots": props.get("total_slots"),
                "n_ctx": gen.get("n_ctx"),
                "modalities": props.get("modalities"),
            }
        )
    facts = {
        "file": file_name,
        "ftype": ftype,
        "size": _int(meta.get("size")),
        "n_params": _int(meta.get("n_params")),
        "n_vocab": _int(meta.get("n_vocab")),
        "n_embd": _int(meta.get("n_embd")),
        "n_ctx_train": _int(meta.get("n_ctx_train")),
        "vocab_type": _int(meta.get("vocab_type")),
    }
    return ServedModel(
        server="llama-server",
        server_version=version,
        server_commit=commit,
        model_id=file_name,
        quantization=normalize_ftype(ftype),
        context_length=_int(meta.get("n_ctx")),
        size_bytes=_int(meta.get("size")),
        n_params=_int(meta.get("n_params")),
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence=why,
    )


def _vllm(entry: dict[str, Any], get, reported: dict[str, Any]) -> ServedModel:
    ans = get("/version")
    version = None
    if ans is not None and ans.status == 200 and isinstance(ans.body, dict):
        version = _str(ans.body.get("version"))
        reported["/version"] = _small(ans.body)
    root = _str(entry.get("root"))
    facts = {"root": root, "parent": _str(entry.get("parent"))}
    return ServedModel(
        server="vLLM",
        server_version=version,
        model_id=root,
        context_length=_int(entry.get("max_model_len")),
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence="/v1/models owned_by 'vllm'",
    )


SGLANG_SERVER_KEYS = (
    "model_path",
    "served_model_name",
    "revision",
    "quantization",
    "dtype",
    "context_length",
    "kv_cache_dtype",
    "tp_size",
    "load_format",
    "version",
)


def _sglang(entry: dict[str, Any], get, reported: dict[str, Any]) -> ServedModel:
    server: dict[str, Any] = {}
    for route in (
        "/get_server_info",
        "/server_info",
    ):  # newer SGLang docs name the second
        info = get(route)
        if info is not None and info.status == 200 and isinstance(info.body, dict):
            server = info.body
            break
    model = get("/get_model_info")
    minfo = _as_dict(model.body) if model is not None and model.status == 200 else {}
    if server:
        reported["/get_server_info"] = _small(
            {k: server.get(k) for k in SGLANG_SERVER_KEYS if k in server}
        )
    if minfo:
        reported["/get_model_info"] = _small(
            {k: v for k, v in minfo.items() if k != "preferred_sampling_params"}
        )
    model_path = _str(minfo.get("model_path")) or _str(server.get("model_path"))
    facts = {
        "model_path": model_path,
        "revision": _str(server.get("revision")),
        "quantization": _str(server.get("quantization")),
        "weight_version": _str(minfo.get("weight_version")),
    }
    return ServedModel(
        server="SGLang",
        server_version=_str(server.get("version")),
        model_id=model_path,
        revision=_str(server.get("revision")),
        quantization=_str(server.get("quantization")),
        context_length=_int(entry.get("max_model_len")),
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence="/v1/models owned_by 'sglang'",
    )


def _tgi(info: dict[str, Any], reported: dict[str, Any]) -> ServedModel:
    reported["/info"] = _small(info)
    facts = {
        "model_id": _str(info.get("model_id")),
        "model_sha": _str(info.get("model_sha")),
    }
    return ServedModel(
        server="TGI",
        server_version=_str(info.get("version")),
        server_commit=_str(info.get("sha")),
        model_id=_str(info.get("model_id")),
        revision=_str(info.get("model_sha")),
        context_length=_int(info.get("max_total_tokens")),
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence=f"/info router {_str(info.get('router'))!r}",
    )


def _ollama(
    entry: dict[str, Any], version: str, get, reported: dict[str, Any], served_name: str
) -> ServedModel:
    name = str(entry.get("id"))
    reported["/api/version"] = {"version": _small(version)}
    tags = get("/api/tags")
    tag: dict[str, Any] = {}
    if tags is not None and tags.status == 200:
        for m in _as_dict(tags.body).get("models") or []:
            if isinstance(m, dict) and name in (m.get("model"), m.get("name")):
                tag = m
                break
    show_ans = get("/api/show", "POST", {"model": name})
    show = (
        _as_dict(show_ans.body)
        if show_ans is not None and show_ans.status == 200
        else {}
    )
    details = _as_dict(show.get("details")) or _as_dict(tag.get("details"))
    info = _as_dict(show.get("model_info"))
    arch = info.get("general.architecture")
    if tag:
        reported["/api/tags"] = _small(tag)
    if show:
        keep = {k: v for k, v in info.items() if not k.startswith("tokenizer.")}
        reported["/api/show"] = _small(
            {
                "details": details,
                "model_info": keep,
                "capabilities": show.get("capabilities"),
            }
        )
    digest = _str(tag.get("digest"))
    facts = {"digest": digest, "name": name}
    return ServedModel(
        server="Ollama",
        server_version=version,
        model_id=name,
        digest=digest,
        quantization=_str(details.get("quantization_level")),
        context_length=_int(info.get(f"{arch}.context_length")) if arch else None,
        size_bytes=_int(tag.get("size")),
        n_params=_int(info.get("general.parameter_count")),
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence="/api/version answered",
    )


TRANSFORMERS_ROUTES = ("/load_model", "/v1/responses", "/v1/audio/transcriptions")


def _transformers_routes(spec: Any) -> bool:
    """FastAPI's own /openapi.json of ``transformers serve`` (transformers/cli/serving/server.py):
    the routes only that server defines beside the OpenAI ones."""
    paths = _as_dict(spec).get("paths")
    return isinstance(paths, dict) and all(r in paths for r in TRANSFORMERS_ROUTES)


def _transformers_serve(
    entry: dict[str, Any], spec: Any, reported: dict[str, Any]
) -> ServedModel:
    """``transformers serve`` lists the models of its Hugging Face cache as ``<repo>[@<ref>]``
    (owned_by the repo's organisation); it reports no version of its own."""
    reported["/openapi.json"] = {
        "paths": _small(sorted(str(p) for p in _as_dict(spec).get("paths") or {}))
    }
    name = _str(entry.get("id")) or ""
    repo, _, ref = name.partition("@")
    facts = {"repo": repo or None, "revision": ref or None}
    return ServedModel(
        server="transformers serve",
        model_id=repo or None,
        revision=ref or None,
        identity_facts={k: v for k, v in facts.items() if v is not None},
        reported=reported,
        evidence="/openapi.json lists transformers serve's routes ("
        + ", ".join(TRANSFORMERS_ROUTES)
        + ")",
    )


# -- helpers ----------------------------------------------------------------------------------
def _find(entries: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The /models entry of ``name``: its id, one of its aliases (llama-server), or Ollama's
    implicit ``:latest`` tag."""
    for e in entries:
        if e.get("id") == name:
            return e
    for e in entries:
        aliases = e.get("aliases")
        if isinstance(aliases, list) and name in aliases:
            return e
    if ":" not in name:
        for e in entries:
            if e.get("id") == f"{name}:latest":
                return e
    return None


def normalize_ftype(name: Any) -> str | None:
    """llama.cpp's file-type name (``Q4_K - Medium``) as GGUF files name it (``Q4_K_M``)."""
    if not isinstance(name, str) or not name:
        return None
    name = name.removeprefix("(guessed) ").strip()
    if name in _FTYPE_SPECIAL:
        return _FTYPE_SPECIAL[name]
    m = re.fullmatch(r"(\S+) - (Small|Medium|Large)", name)
    if m:
        return f"{m.group(1)}_{_FTYPE_SUFFIX[m.group(2)]}"
    m = re.fullmatch(r"(\S+) - [\d.]+ bpw.*", name)
    if m:
        return m.group(1)
    return name[:40]


def _as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v)
    return s[:MAX_STRING] if s else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if abs(v) <= MAX_INT else None
    if isinstance(v, float) and v.is_integer() and abs(v) <= MAX_INT:
        return int(v)
    # ASCII digits only ("²" and "١٢" are digits to str.isdigit, not to int), and few of them
    if (
        isinstance(v, str)
        and v.isascii()
        and v.isdigit()
        and len(v) <= MAX_DIGITS
        and int(v) <= MAX_INT
    ):
        return int(v)
    return None


def _small(v: Any, depth: int = 0) -> Any:
    """``v`` bounded for the artifact: strings cut, lists and mappings capped, nesting limited."""
    if isinstance(v, str):
        return v if len(v) <= MAX_STRING else v[: MAX_STRING - 1] + "\u2026"
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if depth >= 4:
        return None
    if isinstance(v, list):
        return [_small(x, depth + 1) for x in v[:MAX_ITEMS]]
    if isinstance(v, dict):
        return {
            str(k)[:100]: _small(x, depth + 1) for k, x in list(v.items())[:MAX_ITEMS]
        }
    return _small(str(v), depth)
