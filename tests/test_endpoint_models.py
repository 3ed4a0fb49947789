"""Endpoint models: a model declared by URL and served name only, measured through its server.

* The real thing: llama.cpp's llama-server on loopback serves the embedded model under a name;
  a registry entry with no local path runs chat, serve and concurrency tests through the
  runner; the artifacts are valid, keyed by the identity the server's report gives, and that
  identity changes when llama-server serves another GGUF under the same name (a synthetic tiny
  llama), while pins refuse the changed model in one line.
* Servers that cannot run here (vLLM, TGI, SGLang, Ollama) are recognised from answers their
  own source and docs define (tests/fixtures/endpoints/*.json, replayed on loopback by
  tests/support/replay_server.py; each fixture names its sources).
* Bad input: one line, exit 2, nothing written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

from core import artifacts
from core.errors import ArtifactError, ConfigError, ModelError
from core.records import run as record
from runtime.backends.openai_http import detect, llama_server
from runtime.backends.openai_http.backend import OpenAIHttpBackend
from runtime.execution import matrix as matrix_mod
from runtime.execution import runner
from runtime.models import registry as models
from runtime.models.endpoint import EndpointSpec, endpoint_identity
from tests.conftest import ROOT, tree_snapshot, write_matrix
from tests.support.replay_server import FIXTURES, ReplayServer, load_fixture

REQ = "    messages: [{role: user, content: Say hello.}]\n    max_tokens: 4\n    ignore_eos: true\n"
TESTS = (
    "tests:\n"
    "  - kind: chat\n    id: ep-chat\n"
    + REQ
    + "    requests: 2\n    warmup_requests: 0\n"
    "  - kind: serve\n    id: ep-serve\n"
    + REQ
    + "    requests: 2\n    warmup_requests: 0\n"
    "  - kind: concurrency\n    id: ep-conc\n"
    + REQ
    + "    levels: [1, 2]\n    rounds: 1\n    warmup_requests: 0\n"
)


def add_models(data_dir: Path, text: str) -> None:
    """Append entries (indented two spaces, under ``models:``) to the data dir's registry."""
    p = data_dir / "models.yaml"
    p.write_text(p.read_text().rstrip("\n") + "\n" + text)


def matrix_body(model: str, backend: str = "openai_http", settings: str = "") -> str:
    return (
        f"schema_version: 1\nname: ep\nbackend: {backend}\nmodels: [{model}]\ntimeout_s: 300\n"
        + (f"settings: {settings}\n" if settings else "")
        + TESTS
    )


def bench(data_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALMANAC_DATA=str(data_dir))
    return subprocess.run(
        [sys.executable, "-m", "invoke", "bench", "--matrix", "ep"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (
        proc.returncode,
        proc.stdout[-2000:],
        proc.stderr[-2000:],
    )
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# -- servers recognised from their documented answers ------------------------------------------
@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_documented_servers_are_recognised(name):
    fx = load_fixture(name)
    assert fx["sources"], "a fixture says where its answers come from"
    with ReplayServer(fx["routes"]) as srv:
        served = detect.probe(srv.base_url, fx["served_name"])
    got = {**served.to_dict(), "identity_basis": sorted(served.identity_facts)}
    assert {k: got[k] for k in fx["expect"]} == fx["expect"]
    assert served.evidence
    # only the model list and info routes were asked: nothing that generates
    assert all(
        not r.split()[1].startswith(("/v1/chat", "/v1/completions", "/generate"))
        for r in srv.requests
    )
    # what is kept is what was read, bounded; the identity is the served name and the weights' facts
    assert "/v1/models" in served.reported and len(json.dumps(served.reported)) < 20_000
    ident = endpoint_identity(fx["served_name"], served.identity_facts)
    assert re.fullmatch(r"endpoint:[0-9a-f]{64}", ident)


def test_identity_follows_the_weights_not_the_server_settings():
    fx = load_fixture("tgi")
    with ReplayServer(fx["routes"]) as srv:
        a = detect.probe(srv.base_url, fx["served_name"])
    routes = json.loads(json.dumps(fx["routes"]))
    routes["GET /info"]["body"]["max_total_tokens"] = (
        4096  # a server setting: same model
    )
    with ReplayServer(routes) as srv:
        b = detect.probe(srv.base_url, fx["served_name"])
    routes["GET /info"]["body"]["model_sha"] = (
        "0" * 40
    )  # another revision of the weights
    with ReplayServer(routes) as srv:
        c = detect.probe(srv.base_url, fx["served_name"])
    ident = [endpoint_identity(fx["served_name"], s.identity_facts) for s in (a, b, c)]
    assert ident[0] == ident[1] != ident[2]
    assert b.context_length == 4096 and c.revision == "0" * 40


def test_unknown_and_hostile_answers_are_read_defensively():
    routes = {
        "GET /v1/models": {
            "body": {
                "object": "list",
                "data": [
                    {
                        "id": "m",
                        "object": "model",
                        "owned_by": "someone",
                        "created": 1,
                        "extra": "x" * 5000,
                    },
                    "not a mapping",
                    {"id": ["odd"]},
                ],
            }
        }
    }
    with ReplayServer(routes) as srv:
        served = detect.probe(srv.base_url, "m")
        with pytest.raises(
            detect.NotServed, match=r"does not serve 'nope' \(its /models lists 'm'"
        ):
            detect.probe(srv.base_url, "nope")
    assert (
        served.server == "unknown" and served.identity_facts
    )  # the /models entry, without its volatile fields
    assert "created" not in served.identity_facts["models_entry"]
    assert len(served.reported["/v1/models"]["extra"]) <= detect.MAX_STRING
    with ReplayServer(
        {"GET /v1/models": {"status": 401, "body": {"error": "no key"}}}
    ) as srv:
        with pytest.raises(
            detect.Unreachable,
            match=r"HTTP 401 \(an API key is needed: set endpoint.api_key_env\)",
        ):
            detect.probe(srv.base_url, "m")
    assert (
        detect.normalize_ftype("Q4_K - Medium") == "Q4_K_M"
        and detect.normalize_ftype("Q2_K - Medium") == "Q2_K"
    )
    assert (
        detect.normalize_ftype("(guessed) IQ2_XS - 2.3125 bpw") == "IQ2_XS"
        and detect.normalize_ftype("all F32") == "F32"
    )


# -- the registry entry ------------------------------------------------------------------------
BAD_ENTRIES = {
    "bad-url": (
        "    endpoint: {base_url: 'ftp://h/v1', model: m}\n",
        r"models.x.endpoint.base_url: base_url must be an http:// or https:// URL",
    ),
    "no-model": (
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1'}\n",
        r"models.x.endpoint.model: required field is missing",
    ),
    "file-hash": (
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m}\n    sha256: "
        + "a" * 64
        + "\n",
        r"sha256 is a local file's hash: an endpoint model pins endpoint.revision",
    ),
    "two-sources": (
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m}\n    path: /models/m.gguf\n",
        r"give exactly one of 'package', 'path', 'synth', 'derived' or 'endpoint'",
    ),
    "bad-identity": (
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m, identity: abc}\n",
        r"models.x.endpoint.identity: .*identity must be 'endpoint:' and 64 lowercase hex digits",
    ),
    "typo": (
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m, revison: abc}\n",
        r"models.x.endpoint.revison: unknown setting 'revison'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_bad_endpoint_entries_are_one_line(case, data_env):
    body, pattern = BAD_ENTRIES[case]
    add_models(data_env, "  x:\n" + body)
    write_matrix(data_env, "ep", matrix_body("x"))
    before = tree_snapshot(data_env)
    line = one_line(bench(data_env))
    assert "models.yaml" in line and re.search(pattern, line), line
    assert tree_snapshot(data_env) == before


def test_what_needs_a_file_refuses_an_endpoint_model(data_env):
    add_models(
        data_env,
        "  served:\n    endpoint: {base_url: 'http://127.0.0.1:9/v1', model: m, digest: 'sha256:AB'}\n",
    )
    reg = models.load_registry()
    assert (
        reg.models["served"].endpoint.digest == "ab"
    )  # normalised once, where it is validated
    ref = models.resolve_any("served", reg)
    assert ref.kind == "endpoint" and ref.path is None and ref.pins == {"digest": "ab"}
    with pytest.raises(
        ModelError,
        match=r"models.served: is an endpoint model \('m' at http://127.0.0.1:9/v1\) with no "
        r"local file",
    ):
        models.resolve("served", reg)
    # a backend that runs local files only: one line naming the matrix, before any server is asked
    write_matrix(
        data_env,
        "ep",
        matrix_body("served", backend="llama_cpp").replace(TESTS, "tests: [tg4]\n"),
    )
    line = one_line(bench(data_env))
    assert re.search(
        r"matrices/ep.yaml: models: 'served' is an endpoint model \(served at http://127.0.0.1:9/v1, no "
        r"local file\): backend llama_cpp runs local files only",
        line,
    ), line


def test_unreachable_endpoint_is_one_line_and_nothing_written(data_env):
    from runtime.backends.openai_http.server import free_port

    port = free_port()  # nobody listens there
    add_models(
        data_env,
        f"  served:\n    endpoint: {{base_url: 'http://127.0.0.1:{port}/v1', model: m}}\n",
    )
    write_matrix(data_env, "ep", matrix_body("served"))
    before = tree_snapshot(data_env)
    line = one_line(bench(data_env))
    assert re.search(
        r"models.yaml: models.served.endpoint.base_url: the endpoint does not answer "
        rf"\(http://127.0.0.1:{port}/v1/models: ConnectError",
        line,
    ), line
    assert tree_snapshot(data_env) == before and not (data_env / "runs").exists()


def test_pinned_revision_the_server_contradicts_is_refused(data_env):
    fx = load_fixture("tgi")
    with ReplayServer(fx["routes"]) as srv:
        add_models(
            data_env,
            f"  tgi-model:\n    endpoint: {{base_url: '{srv.base_url}', model: {fx['served_name']}, "
            f"revision: 0123456789abcdef0123456789abcdef01234567}}\n",
        )
        write_matrix(data_env, "ep", matrix_body("tgi-model"))
        before = tree_snapshot(data_env)
        line = one_line(bench(data_env))
        assert srv.requests and not any(
            "chat" in r for r in srv.requests
        )  # asked, never measured
    assert (
        "data/models.yaml: models.tgi-model.endpoint.revision: pins revision "
        "'0123456789abcdef0123456789abcdef01234567'; the server at "
        in line
        and "(TGI) reports" in line
    )
    assert "reports 'e985a63cdc139290c5f700ff1929f0b5942cced2'" in line
    assert tree_snapshot(data_env) == before and not (data_env / "runs").exists()


def test_pins_the_server_confirms_pass_and_are_recorded(data_env):
    fx = load_fixture("ollama")
    digest = fx["expect"]["digest"]
    with ReplayServer(fx["routes"]) as srv:
        add_models(
            data_env,
            f"  ollama-model:\n    endpoint: {{base_url: '{srv.base_url}', model: llama3.2, "
            f"digest: 'sha256:{digest.upper()}'}}\n",
        )
        write_matrix(data_env, "ep", matrix_body("ollama-model"))
        m = matrix_mod.load("ep")
        refs = runner.resolve_models(
            m.configurations(), models.load_registry(), "ep.yaml"
        )
    ref = refs["ollama-model"]
    rec = ref.record()
    assert (
        rec["pinned"] == {"digest": digest}
        and rec["digest"] == digest
        and rec["server"] == "Ollama"
    )
    assert (
        rec["model_id"] == "llama3.2:latest"
        and rec["quantization"] == "Q4_0"
        and rec["size_bytes"] == 2019393189
    )
    # a valid artifact of it (what the runner writes), with no file name, hash or GGUF facts
    doc = record.new_run(
        key="0" * 64,
        created=_now(),
        status="failed",
        backend="openai_http",
        test={"name": "t", "kind": "chat"},
        requested={},
        model=rec,
        host=_host(),
        matrix={"name": "ep", "file": "ep.yaml"},
        build={"backend_version": "httpx", "in_process": False},
        error={"kind": "error", "message": "x", "signal": None, "exit_code": 1},
    )
    artifacts.validate(doc)
    assert not {"file_name", "sha256", "gguf"} & set(doc["model"])
    r = record.RunRecord(doc)
    assert (
        r.is_endpoint,
        r.has_local_file,
        r.model_file_name,
        r.model_sha256,
        r.gguf,
    ) == (True, False, None, None, {})
    assert (
        r.model_identity == ref.identity
        and r.quantization == "Q4_0"
        and r.model_server == "Ollama"
    )
    assert r.comparability()["model"] == ref.identity


def test_settings_for_a_started_server_refused_for_an_endpoint_model(data_env):
    fx = load_fixture("vllm")
    with ReplayServer(fx["routes"]) as srv:
        add_models(
            data_env,
            f"  vllm-model:\n    endpoint: {{base_url: '{srv.base_url}', model: {fx['served_name']}}}\n",
        )
        for settings, field in (
            ("{server: llama-server}", "settings.server"),
            ("{base_url: 'http://127.0.0.1:1/v1'}", "settings.base_url"),
        ):
            write_matrix(data_env, "ep", matrix_body("vllm-model", settings=settings))
            line = one_line(bench(data_env))
            assert f"matrices/ep.yaml: {field}: " in line and "vllm-model" in line, line
    assert not (data_env / "runs").exists()


def test_a_model_swapped_during_the_run_fails_its_artifact(data_env):
    fx = load_fixture("tgi")
    with ReplayServer(fx["routes"]) as srv:
        add_models(
            data_env,
            f"  tgi-model:\n    endpoint: {{base_url: '{srv.base_url}', model: {fx['served_name']}}}\n",
        )
        write_matrix(data_env, "ep", matrix_body("tgi-model"))
        m = matrix_mod.load("ep")
        cfg = m.configurations()[0]
        ref = runner.resolve_models([cfg], models.load_registry(), "ep.yaml")[
            "tgi-model"
        ]
    settings = runner.merged_settings(cfg, ref)
    key = runner.key_of(cfg, ref, settings, "h", "httpx")
    result = {
        "status": "ok",
        "metrics": {"e2e_ms": [1.0, 2.0]},
        "samples": {},
        "details": {},
        "describe": {
            "build": {"backend": "openai_http"},
            "model": {"identity_after": "endpoint:" + "1" * 64},
        },
    }
    outcome = runner.ChildOutcome(result, 0, None, False, 1, 0.1, "")
    doc = runner.build_artifact(
        cfg=cfg,
        ref=ref,
        settings=settings,
        host=_host(),
        key=key,
        backend_version="httpx",
        outcome=outcome,
    )
    assert doc["status"] == "failed" and doc["error"]["kind"] == "model_changed"
    assert (
        ref.identity in doc["error"]["message"]
        and "endpoint:" + "1" * 64 in doc["error"]["message"]
    )
    assert "e2e_ms" not in doc["summary"]
    artifacts.validate(doc)
    # the same after-run report as before: the measurement stands
    result["describe"]["model"]["identity_after"] = ref.identity
    doc = runner.build_artifact(
        cfg=cfg,
        ref=ref,
        settings=settings,
        host=_host(),
        key=key,
        backend_version="httpx",
        outcome=outcome,
    )
    assert doc["status"] == "ok" and doc["summary"]["e2e_ms"]["n"] == 2


def test_an_endpoint_artifact_newer_than_the_code_is_refused(tmp_path):
    doc = json.loads(
        next((FIXTURES.parent / "endpoint" / "runs").rglob("*.json")).read_text()
    )
    assert doc["model"]["kind"] == "endpoint"
    doc["schema_version"] = 3
    p = tmp_path / "new.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(
        ArtifactError,
        match=r"new.json: .*schema_version 3 is newer than this almanac understands \(2\); "
        r"upgrade inference-almanac",
    ):
        artifacts.load(p)


def test_spec_fields_validated_in_one_place():
    s = EndpointSpec(base_url="http://h:8080/v1/", model="m", digest="sha256:ABC")
    assert (s.base_url, s.digest, s.pins()) == (
        "http://h:8080/v1",
        "abc",
        {"digest": "abc"},
    )
    with pytest.raises(ValueError, match="must not carry a query"):
        EndpointSpec(base_url="http://h/v1?x=1", model="m")


def _now():
    from datetime import datetime

    return datetime.now(UTC)


def _host() -> dict:
    return {
        "id": "h",
        "name": "h",
        "cpu": {"model": "cpu", "physical_cores": 1, "logical_cores": 1, "flags": []},
        "memory_bytes": 1,
        "numa_nodes": 1,
        "os": {},
        "gpus": [],
    }


# -- the real thing: llama-server on loopback -----------------------------------------------------
def _built() -> bool:
    return bool(os.environ.get(llama_server.ENV) or llama_server.cached_builds())


@pytest.mark.model
@pytest.mark.skipif(
    not _built(),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py` "
    "(or set ALMANAC_LLAMA_SERVER)",
)
def test_endpoint_model_served_by_llama_server(data_env, embedded_model):
    """Declared by URL and served name only; chat, serve and concurrency measured; valid artifacts
    keyed by the served model's identity, which changes when another GGUF is served under the name."""
    from tests.support.llama_server_proc import serving

    tiny = models.resolve(
        "synthetic-tiny-llama-q8_0"
    )  # generated into the cache on first use (seconds)
    binary = llama_server.find_binary()
    commit = llama_server.version(binary)["commit"]
    with serving(embedded_model.path, "almanac-served") as url:
        add_models(
            data_env,
            f"  served:\n    endpoint: {{base_url: '{url}', model: almanac-served}}\n",
        )
        write_matrix(data_env, "ep", matrix_body("served"))
        first = runner.run_matrix("ep")
        assert not first.failed, [artifacts.load(p)["error"] for p in first.failed]
        assert len(first.measured) == 3
        again = runner.run_matrix("ep")
        assert (
            len(again.skipped) == 3 and not again.measured
        )  # resume: the same identity
    count, problems = artifacts.validate_tree(data_env)
    assert count == 3 and not problems
    docs = [artifacts.load(p) for p in first.measured]
    ident = {d["model"]["identity"] for d in docs}
    assert len(ident) == 1
    a = docs[0]["model"]
    assert (
        a["kind"] == "endpoint"
        and a["served_name"] == "almanac-served"
        and a["base_url"] == url
    )
    assert not {"file_name", "sha256", "gguf"} & set(a)
    assert (
        a["server"] == "llama-server"
        and a["model_id"] == Path(embedded_model.path).name
    )
    assert a["quantization"] == "Q4_K_M" and a["size_bytes"] > 0 and a["n_params"] > 0
    for d in docs:
        r = record.RunRecord(d)
        assert (
            d["build"]["server"] == "llama-server"
            and d["build"]["llama_cpp_commit"] == commit
        )
        assert (
            d["build"]["in_process"] is False
            and r.backend_name == "openai_http (llama-server)"
        )
        # the configuration key is the identity's (with the server's software and version)
        assert d["key"] == record.config_key(
            "openai_http",
            a["identity"],
            d["settings"]["requested"],
            d["test"],
            d["host"]["id"],
            d["build"]["backend_version"],
            server={"software": "llama-server", "version": a["server_version"]},
        )
        assert all(
            req["ok"]
            for req in (d["samples"].get("requests") or d["samples"].get("warm") or [])
        )
    kinds = {d["test"]["kind"] for d in docs}
    assert kinds == {"chat", "serve", "concurrency"}

    # another GGUF under the same name: another identity, so measured again (nothing skipped)
    with serving(tiny.path, "almanac-served") as url2:
        reg = data_env / "models.yaml"
        reg.write_text(reg.read_text().replace(url, url2))
        second = runner.run_matrix("ep")
        assert len(second.measured) == 3 and not second.skipped and not second.failed
        b = artifacts.load(second.measured[0])["model"]
        assert (
            b["identity"] != a["identity"]
            and b["model_id"] == Path(tiny.path).name
            and b["quantization"] == "Q8_0"
        )
        # a pin on the first identity refuses the swapped model: one line naming the entry and both values
        reg.write_text(
            reg.read_text().replace(
                "model: almanac-served}",
                f"model: almanac-served, identity: '{a['identity']}'}}",
            )
        )
        before = tree_snapshot(data_env / "runs")
        with pytest.raises(ModelError) as exc:
            runner.run_matrix("ep", force=True)
        msg = str(exc.value)
        assert (
            msg.startswith(
                "data/models.yaml: models.served.endpoint.identity: pins identity"
            )
            or "models.served.endpoint.identity: pins identity" in msg
        )
        assert (
            a["identity"] in msg
            and b["identity"] in msg
            and "(llama-server) reports" in msg
        )
        # llama-server reports no digest: a digest pin says so, and what to pin instead
        reg.write_text(
            reg.read_text().replace(
                f"identity: '{a['identity']}'", "digest: 'sha256:00ff'"
            )
        )
        with pytest.raises(
            ModelError,
            match=r"pins digest '00ff'; the server at .* \(llama-server\) reports nothing "
            r"\(llama-server reports no digest: pin identity instead\)",
        ):
            runner.run_matrix("ep", force=True)
        assert (
            tree_snapshot(data_env / "runs") == before
        )  # no artifact written by a refused run


@pytest.mark.model
def test_real_llama_cpp_server_is_recognised(embedded_model, tmp_path):
    """llama-cpp-python's own server on loopback: recognised by its /v1/models, identified by the
    served name alone (it reports nothing of the weights), and the record says so."""
    from runtime.backends.openai_http.server import ManagedServer, free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "runtime.backends.openai_http.llama_cpp_server",
        "--model",
        embedded_model.path,
        "--model_alias",
        "lcs",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "256",
        "--n_threads",
        "1",
    ]
    srv = ManagedServer(
        cmd,
        f"http://127.0.0.1:{port}/v1/models",
        tmp_path / "log.txt",
        startup_timeout_s=120,
        stop_timeout_s=10,
    )
    try:
        srv.start()
        served = detect.probe(f"http://127.0.0.1:{port}/v1", "lcs")
    finally:
        srv.stop()
    assert served.server == "llama_cpp.server" and served.identity_facts == {}
    assert "owned_by 'me'" in served.evidence


def test_backend_uses_the_endpoint_it_was_given():
    from runtime.backends.openai_http.config import OpenAIHttpSettings
    from runtime.models.endpoint import EndpointRef

    ref = EndpointRef(
        name="served",
        base_url="http://127.0.0.1:9/v1",
        served_name="almanac-served",
        api_key_env="EP_KEY",
    )
    b = OpenAIHttpBackend(ref, OpenAIHttpSettings())
    assert (
        not b.managed and b.base_url == ref.base_url and b.api_model == "almanac-served"
    )
    assert b.label() == "endpoint 127.0.0.1:9"
    with pytest.raises(
        ConfigError,
        match=r"served as 'almanac-served' \(data/models.yaml\), not as 'other'",
    ):
        OpenAIHttpBackend.preflight(OpenAIHttpSettings(api_model="other"), ref, None)


def test_a_remote_host_never_reached_writes_failed_artifacts_for_endpoint_and_synthetic_models(
    data_env,
):
    """runtime.remote.failed: a host that was not reached could not ask the endpoint's server, so
    its failed artifact records the declaration (server unknown); a synthetic model made only on
    the host is known by name (this used to raise on its missing path)."""
    from runtime.hosts.inventory import Host
    from runtime.remote import failed

    add_models(
        data_env,
        "  served:\n    endpoint: {base_url: 'http://10.0.0.5:8000/v1', model: qwen, revision: abc}\n",
    )
    write_matrix(
        data_env,
        "ep",
        "schema_version: 1\nname: ep\nbackend: openai_http\n"
        "models: [served, synthetic-tiny-llama-q8_0]\n" + TESTS,
    )
    paths = failed.failed_artifacts(
        matrix=matrix_mod.load("ep"),
        host=Host(name="far", address="10.0.0.9", user="u"),
        kind="unreachable",
        message="host not reached",
        done=set(),
        reported_host=None,
        backend_versions={},
        log_tail="",
        wall_s=1.0,
        root=data_env / "runs",
    )
    docs = [artifacts.load(p) for p in paths]
    assert len(docs) == 6 and all(d["status"] == "failed" for d in docs)
    ep = [d["model"] for d in docs if d["model"]["kind"] == "endpoint"]
    assert (
        len(ep) == 3
        and ep[0]["server"] == "unknown"
        and ep[0]["pinned"] == {"revision": "abc"}
    )
    assert ep[0]["identity_basis"] == [] and ep[0]["served_name"] == "qwen"
    synth = [d["model"] for d in docs if d["model"]["kind"] == "file"]
    assert {m["source"] for m in synth} == {"synth"} and {m["name"] for m in synth} == {
        "synthetic-tiny-llama-q8_0"
    }


def test_keys_of_file_runs_are_unchanged():
    """The configuration key now takes the model's identity; for a file that is its sha256 under the
    same name as before, so every measured file run's key recomputes to what is on disk."""
    from tests.conftest import GOLDEN
    from tests.support.committed import committed_runs

    recs = [
        r
        for r in record.read_all(GOLDEN / "runs") + committed_runs()
        if not r.build_label
        and r.stored_key != "e" * 64  # the hand-made hostile copy
        and "llama_bench" not in r.requested
        and r.has_local_file  # the committed endpoint runs (the H200's engines) key by identity
    ]
    assert len(recs) > 50
    for r in recs:
        assert r.model_identity == (r.model_sha256 or r.model_name)
        assert (
            record.config_key(
                r.backend,
                r.model_identity,
                r.requested,
                r.test,
                r.host_id,
                r.backend_version,
            )
            == r.stored_key
        ), r.path
