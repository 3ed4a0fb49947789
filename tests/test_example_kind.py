"""Adding a test kind is one new module plus its site builder (#18).

The example kind (tests/support/example_kind.py: spec, metric, samples/details shapes, where its
values are) is registered; a backend declared in the tests (tests/support/example_backend.py) runs
it through its dispatch table, in the real runner's child process (ALMANAC_KINDS and
ALMANAC_BACKENDS reach it); the artifact it writes is valid and typed; and the site renders it:
the Leaderboard ranks it on its headline metric, the runs browser lists it, Methodology names it,
and its own site builder (tests/support/example_site.py) gets a page, in a strict MkDocs build.
"""

from __future__ import annotations

import importlib
import json

import pytest

from core import artifacts, kinds
from core.metrics import METRICS
from core.records.run import RunRecord
from runtime import backends
from runtime.backends.base import Backend, runs
from tests.conftest import build_site, write_matrix

KIND_MODULE = "tests.support.example_kind"
SITE_MODULE = "tests.support.example_site"


@pytest.fixture
def echo_kind(monkeypatch):
    """The example kind, its backend and its site builder registered here and in every child process."""
    from pipelines.site import kinds as site_kinds
    from tests.support import example_backend

    monkeypatch.setenv("ALMANAC_KINDS", KIND_MODULE)
    monkeypatch.setenv("ALMANAC_BACKENDS", json.dumps(example_backend.REGISTRATION))
    monkeypatch.setenv("ALMANAC_SITE_KINDS", SITE_MODULE)
    mod = importlib.import_module(KIND_MODULE)
    kinds.register(mod.KIND)
    METRICS.setdefault("echo_ms", mod.METRIC)
    site = importlib.import_module(SITE_MODULE)
    site_kinds.register(site.SITE)
    yield mod
    kinds.unregister("echo")
    METRICS.pop("echo_ms", None)
    site_kinds.unregister("echo")
    backends.BACKENDS.pop(example_backend.NAME, None)
    backends._CHECKED.discard(example_backend.NAME)


def test_a_new_kind_runs_writes_a_valid_artifact_and_renders(
    echo_kind, data_env, tmp_path
):
    from pipelines import index
    from pipelines.runs import load_runs
    from pipelines.site import browser, host_boards_page
    from pipelines.site import kinds as site_kinds
    from runtime.execution import runner

    write_matrix(
        data_env,
        "echo",
        "name: echo\nbackend: echoer\nmodels: [gemma3-270m-q4_k_m]\nprecision: null\n"
        "settings: {delay_ms: 3}\n"
        "tests:\n  - {kind: echo, id: echo-ping, word: pong, requests: 5}\n",
    )
    report = runner.run_matrix("echo")
    assert len(report.measured) == 1 and not report.failed, report
    doc = artifacts.load(
        report.measured[0]
    )  # valid against the run schema (any other kind's branch)
    rec = RunRecord(doc)
    assert (
        rec.ok
        and rec.test_kind == "echo"
        and rec.backend == "echoer"
        and rec.in_process
    )
    assert isinstance(rec.spec, echo_kind.EchoTest) and rec.spec.word == "pong"
    assert (
        isinstance(rec.samples, echo_kind.EchoSamples)
        and len(rec.samples.round_trip_ms) == 5
    )
    assert rec.details.echoed == "pong"
    s = rec.stat("echo_ms")
    assert (
        s.n == 5 and s.mean >= 3.0 and rec.headline == s
    )  # slept 3 ms an echo, timed in the child
    assert rec.values("echo_ms") == rec.samples.round_trip_ms

    runs_ = load_runs(data_env / "runs")
    board = host_boards_page.host_boards_page(runs_)
    assert (
        "echo-ping" in board
        and "Echo round trip" in board
        and f"runs/run.md?id={rec.id}" in board
    )
    row = browser.index_rows("run", index.rows_of(runs_))[0]
    assert (
        row["test"] == "echo-ping"
        and row["value"] == round(s.mean, 3)
        and row["unit"] == "ms"
    )
    section = site_kinds.sites()["echo"].section(runs_)
    assert "pong" in section and rec.id in section

    # the whole site, strict, with the kind's page generated and linked from Methodology
    out = tmp_path / "site"
    proc = build_site(data_env, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (out / "kinds" / "echo" / "index.html").read_text()
    assert rec.id in page and "pong" in page
    method = (out / "methodology" / "index.html").read_text()
    assert 'href="../kinds/echo/"' in method


def test_a_shape_the_kind_does_not_declare_is_refused_when_written(echo_kind, data_env):
    """The schema reads a kind it does not name with the base models; the kind's own models check it
    as it is written (core.records.run.check_shapes)."""
    from core.errors import ArtifactError
    from core.records import run as record

    record.check_shapes(
        {
            "test": {"kind": "echo", "name": "x"},
            "samples": {"round_trip_ms": [1.5]},
            "details": {},
        }
    )
    doc = {
        "test": {"kind": "echo", "name": "x"},
        "samples": {"round_trip_ms": ["slow"]},
        "details": {},
    }
    with pytest.raises(
        ArtifactError, match=r"x\.json: samples\.round_trip_ms\.0: .*test kind 'echo'"
    ):
        record.check_shapes(doc, "x.json")


def test_a_backend_must_run_what_it_declares():
    with pytest.raises(
        TypeError, match=r"declares test kinds \['chat'\] but no method runs them"
    ):

        class _NoRunner(Backend):
            name = "x"
            test_kinds = ("rate", "chat")
            in_process = True

            @runs("rate")
            def _rate(self, test) -> None: ...

    with pytest.raises(
        TypeError, match=r"has @runs methods for \['serve'\], which it does not declare"
    ):

        class _Undeclared(Backend):
            name = "y"
            test_kinds = ("rate",)
            in_process = False

            @runs("rate")
            def _rate(self, test) -> None: ...

            @runs("serve")
            def _serve(self, test) -> None: ...

    with pytest.raises(TypeError, match="declare in_process"):

        class _Undeclared2(Backend):
            name = "z"
            test_kinds = ("rate",)

            @runs("rate")
            def _rate(self, test) -> None: ...


def test_a_backend_declaring_an_unknown_kind_is_refused(monkeypatch):
    from core.errors import BackendError

    monkeypatch.setenv(
        "ALMANAC_BACKENDS",
        json.dumps(
            {
                "ghost": [
                    "tests.support.example_backend:EchoerSettings",
                    "tests.support.example_backend:EchoerBackend",
                    "x",
                ]
            }
        ),
    )
    kinds.unregister("echo")  # the example kind is not registered here
    try:
        with pytest.raises(
            BackendError,
            match=r"declares test kinds \['echo'\] that no module registers",
        ):
            backends.backend_class("ghost")
    finally:
        backends.BACKENDS.pop("ghost", None)


def test_the_built_in_backends_dispatch_every_kind_they_declare():
    for name in ("llama_cpp", "openai_http"):
        cls = backends.backend_class(name)
        assert set(cls.dispatch) == set(cls.test_kinds) and cls.test_kinds
        assert all(kinds.get(k) is not None for k in cls.test_kinds)
