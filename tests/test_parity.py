"""Backend parity of quality runs: the paired statistics against hand-computed values, a quality
matrix with several backends (and its bad input), the item-by-item comparison and its page
section, the completion style over HTTP, and llama-server's chat template with the real binary."""

from __future__ import annotations

import copy
import html
import math
from pathlib import Path

import pytest

from core import stats
from core.errors import ConfigError
from core.records.quality import QualityRecord
from pipelines import parity
from pipelines.site import parity_pages
from tests.conftest import write_matrix

ROOT = Path(__file__).resolve().parents[1]


# -- statistics -------------------------------------------------------------------------------
def test_mcnemar_exact_against_the_binomial_tail():
    assert (
        stats.mcnemar_exact(0, 0) == 1.0
    )  # nothing discordant: no evidence of a difference
    assert stats.mcnemar_exact(0, 6) == pytest.approx(
        2 / 64
    )  # 2 x P(X <= 0), X ~ Bin(6, 1/2)
    assert stats.mcnemar_exact(1, 5) == pytest.approx(2 * (1 + 6) / 64)
    assert stats.mcnemar_exact(5, 1) == stats.mcnemar_exact(1, 5)  # symmetric
    assert stats.mcnemar_exact(3, 3) == 1.0  # capped
    from scipy.stats import binomtest

    for b, c in ((2, 9), (0, 12), (7, 3), (10, 25)):
        assert stats.mcnemar_exact(b, c) == pytest.approx(
            binomtest(min(b, c), b + c, 0.5).pvalue
        )
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 2)


def test_paired_difference_ci_agresti_min():
    # by hand: b=1, c=5, n=20 -> cells + 1/2: b'=1.5, c'=5.5, n'=22; d = 4/22;
    # var = ((7) - 16/22) / 22^2
    lo, hi = stats.paired_difference_ci(1, 5, 20)
    d, se = 4 / 22, math.sqrt((7 - 16 / 22) / 22**2)
    assert (lo, hi) == (
        pytest.approx(d - 1.959963984540054 * se),
        pytest.approx(d + 1.959963984540054 * se),
    )
    lo, hi = stats.paired_difference_ci(
        0, 0, 10
    )  # agreement everywhere still has an interval around 0
    assert lo < 0 < hi and lo == pytest.approx(-hi)
    assert stats.paired_difference_ci(0, 0, 0) == (None, None)
    assert stats.paired_difference_ci(0, 40, 40)[1] <= 1.0


def test_paired_verdict():
    assert stats.paired_verdict(0, 0) == "identical verdicts"
    assert stats.paired_verdict(1, 2) == "within noise"
    assert stats.paired_verdict(0, 8) == "win" and stats.paired_verdict(8, 0) == "loss"


# -- the comparison ---------------------------------------------------------------------------
def _records(docs: list) -> list[QualityRecord]:
    """The quality records the pipelines take, of this module's documents."""
    return [QualityRecord(d) for d in docs]


def _doc(
    backend: str,
    server: str | None,
    outputs: dict[str, tuple[str, bool]],
    *,
    created: str = "2026-11-26T10:00:00+00:00",
    style: str = "completion",
    status: str = "ok",
    args: list[str] | None = None,
) -> dict:
    ids = sorted(outputs)
    requested = {"n_threads": 1}
    if server:
        requested["server"] = server
    if args:
        requested["server_args"] = args
    tag = f"{backend}-{server}-{args}-{created}"
    return {
        "id": f"{abs(hash(tag)) % 10**12:012d}-20261126T100000Z",
        "key": f"{abs(hash(tag)):064d}"[-64:],
        "created": created,
        "status": status,
        "backend": backend,
        "prompt_style": style,
        "matrix": {
            "name": "quality-parity",
            "file": "data/matrices/quality-parity.yaml",
        },
        "suite": {
            "name": "general",
            "content_sha256": "a" * 64,
            "sample": {"ids": ids},
        },
        "generation": {"max_tokens": 32, "temperature": 0.0},
        "settings": {"requested": requested},
        "host": {"id": "vm-1"},
        "model": {"name": "gemma3-270m-q4_k_m", "sha256": "b" * 64},
        # as real artifacts record it: llama.cpp's commit in process and behind llama-server alike
        "build": {
            "backend": backend,
            **({"server": server} if server else {}),
            **(
                {"llama_cpp_commit": "0c1e57098"}
                if server != "llama_cpp.server"
                else {}
            ),
        },
        "items": [
            {"id": i, "output": outputs[i][0], "passed": outputs[i][1], "error": None}
            for i in ids
        ],
    }


REF = {
    "q1": (" D", True),
    "q2": (" 100", True),
    "q3": (" Paris", False),
    "q4": (" 7", False),
}


def test_parity_groups_compare_each_backend_with_the_in_process_answers():
    server = dict(REF, q1=(" A", False), q4=(" 8", True))  # one verdict lost, one won
    same = copy.deepcopy(REF)
    docs = [
        _doc("llama_cpp", None, REF),
        _doc("openai_http", "llama-server", server),
        _doc("openai_http", "llama_cpp.server", same),
        _doc("openai_http", "llama_cpp.server", server, args=["--flash_attn", "True"]),
    ]
    groups = parity.parity_groups(_records(docs))
    assert len(groups) == 1
    g = groups[0]
    assert (
        list(g.engines)[0] == parity.IN_PROCESS_LABEL
        and g.label == "general · completion"
    )
    pairs = {p.other: p for p in g.pairs}
    assert set(pairs) == {
        "llama-server (HTTP)",
        "llama_cpp.server (HTTP)",
        "llama_cpp.server --flash_attn True (HTTP)",
    }
    p = pairs["llama-server (HTTP)"]
    assert (
        p.n,
        p.identical_output,
        p.same_verdict,
        p.ref_passed,
        p.other_passed,
        p.b,
        p.c,
    ) == (4, 2, 2, 2, 2, 1, 1)
    assert p.delta == 0 and p.p_value == 1.0 and p.verdict == "within noise"
    assert [(d.id, d.diverge_at) for d in p.diffs] == [("q1", 1), ("q4", 1)]
    q = pairs["llama_cpp.server (HTTP)"]
    assert (
        q.identical_output == 4 and q.diffs == [] and q.verdict == "identical verdicts"
    )
    over = {o.other: o for o in parity.overall(groups)}
    assert (
        over["llama-server (HTTP)"].n == 4 and over["llama-server (HTTP)"].suites == 1
    )


def test_parity_needs_the_same_items_and_generation():
    other = _doc("openai_http", "llama-server", REF)
    other["generation"] = {
        "max_tokens": 64,
        "temperature": 0.0,
    }  # different work: not compared
    assert parity.parity_groups(_records([_doc("llama_cpp", None, REF), other])) == []
    chat = _doc(
        "openai_http", "llama-server", REF, style="chat"
    )  # styles are never compared with each other
    assert parity.parity_groups(_records([_doc("llama_cpp", None, REF), chat])) == []


def test_parity_takes_the_newest_complete_artifact_of_an_engine():
    old = _doc(
        "openai_http",
        "llama-server",
        dict(REF, q1=(" A", False)),
        created="2026-11-26T09:00:00+00:00",
    )
    new = _doc("openai_http", "llama-server", REF, created="2026-11-26T11:00:00+00:00")
    broken = _doc(
        "openai_http",
        "llama-server",
        REF,
        created="2026-11-26T12:00:00+00:00",
        status="failed",
    )
    broken["key"] = "f" * 64
    g = parity.parity_groups(
        _records([_doc("llama_cpp", None, REF), old, new, broken])
    )[0]
    assert g.pairs[0].other_id == new["id"] and g.pairs[0].identical_output == 4


def test_parity_section_answers_first_and_escapes_outputs():
    hostile = dict(REF, q1=("<script>alert(1)</script>{{ x }}", False))
    md = parity_pages.parity_section(
        _records(
            [_doc("llama_cpp", None, REF), _doc("openai_http", "llama-server", hostile)]
        )
    )
    first = md.splitlines()[0]
    assert (
        first.startswith("- **llama-server")
        and "3 of 4 identical" in first
        and "1 passed only through llama.cpp in process" in first
    )
    assert "McNemar p = 1.000: within noise" in first
    assert "<script>" not in md and "{{" not in md
    assert "<script>alert(1)</script>" in html.unescape(
        md
    )  # shown as text (pipelines.site.markdown.pre)
    assert "the outputs part at character 0" in md
    assert "No backend parity run yet" in parity_pages.parity_section(
        _records([_doc("llama_cpp", None, REF)])
    )


def _timed(doc: dict, ms: dict[str, float | None]) -> dict:
    for it in doc["items"]:
        v = ms.get(it["id"])
        it["timing"] = {} if v is None else {"e2e_ms": v}
    return doc


def test_score_and_latency_per_backend_on_the_same_items():
    # reference 100/200/300/400 ms, backend +10/+30/+20/(untimed): the mean paired difference
    # over the three items both timed is +20 ms, its Student-t CI95 20 +/- t(2) * 10 / sqrt(3)
    ref = _timed(
        _doc("llama_cpp", None, REF), {"q1": 100, "q2": 200, "q3": 300, "q4": 400}
    )
    other = _timed(
        _doc("openai_http", "llama-server", dict(REF, q4=(" 8", True))),
        {"q1": 110, "q2": 230, "q3": 320, "q4": None},
    )
    o = parity.overall(parity.parity_groups(_records([ref, other])))[0]
    assert (o.ref_ms, o.other_ms) == ([100, 200, 300], [110, 230, 320])
    assert o.ref_latency_ms == pytest.approx(
        200
    ) and o.other_latency_ms == pytest.approx(220)
    assert o.latency_delta_ms == pytest.approx(20)
    half = stats.t_critical(2) * 10 / math.sqrt(3)
    lo, hi = o.latency_delta_ci
    assert (lo, hi) == (pytest.approx(20 - half), pytest.approx(20 + half))
    md = parity_pages.parity_section(_records([ref, other]))
    assert "Score and latency per backend, on the same items" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| llama-server"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # backend, reference, items, backend score, reference score, Δ score, latencies, Δ latency, artifacts
    assert cells[2:5] == ["4", "75%", "50%"] and cells[6:8] == ["220 ms", "200 ms"]
    assert cells[8].startswith("+20 ms<br><small>CI95 ")
    assert "quality-runs/run.md?id=" in cells[9]


# -- a quality matrix with several backends ---------------------------------------------------------
def test_parity_matrix_puts_the_same_items_through_every_backend():
    from runtime.quality.suite_matrix import load

    m = load(ROOT / "data" / "matrices" / "quality-parity.yaml")
    by_backend: dict[str, list] = {}
    for c in m.configurations:
        label = (
            c.backend
            if c.backend == "llama_cpp"
            else f"{c.settings.server} {c.settings.server_args}"
        )
        by_backend.setdefault(label, []).append(c)
    assert len(by_backend) == 4
    shapes = {
        k: [
            (
                c.suite.name,
                c.prompt_style,
                [i.id for i in c.items],
                c.generation.model_dump(),
            )
            for c in v
        ]
        for k, v in by_backend.items()
    }
    first = next(iter(shapes.values()))
    assert all(
        v == first for v in shapes.values()
    )  # the same items, styles and generation everywhere
    assert all(c.generation.temperature == 0.0 for c in m.configurations)  # greedy
    assert {c.settings.n_threads for c in m.configurations} == {1}


def test_quality_matrix_backends_bad_input(data_env):
    head = (
        "schema_version: 1\nkind: quality\nname: x\nmodels: "
        "[gemma3-270m-q4_k_m]\nsuites: [{suite: general, prompt_style: chat}]\n"
    )
    import shutil

    from runtime.quality.suite_matrix import load

    shutil.copytree(ROOT / "data" / "suites", data_env / "suites")
    write_matrix(
        data_env,
        "both",
        head + "backend: llama_cpp\nbackends: [{backend: llama_cpp}]\n",
    )
    with pytest.raises(ConfigError, match="not both") as e:
        load("both")
    assert e.value.field == "backends"
    write_matrix(
        data_env,
        "bad",
        head
        + "backends: [{backend: llama_cpp}, {backend: openai_http, settings: {server: vllm}}]\n",
    )
    with pytest.raises(ConfigError) as e:
        load("bad")
    assert e.value.field == "backends[1].settings" and "server" in str(e.value)
    write_matrix(data_env, "unknown", head + "backends: [{backend: llama_cp}]\n")
    with pytest.raises(ConfigError, match="did you mean 'llama_cpp'") as e:
        load("unknown")
    assert e.value.field == "backends[0].backend"


# -- the completion style over HTTP --------------------------------------------------------------
def test_completion_body_sends_the_in_process_sampler_defaults():
    import inspect

    from llama_cpp import Llama

    from runtime.backends.openai_http import completions

    sig = inspect.signature(Llama.create_completion).parameters
    assert completions.SAMPLER_DEFAULTS == {
        k: sig[k].default for k in completions.SAMPLER_DEFAULTS
    }
    body = completions.body(
        "m", "Q: 2+2\nA:", max_tokens=4, stop=["\n"], temperature=0.0, seed=42
    )
    assert (
        body["repeat_penalty"] == 1.0
        and body["stop"] == ["\n"]
        and body["stream"] is False
    )


def test_completion_error_is_one_line():
    from runtime.backends.openai_http import completions

    with pytest.raises(completions.CompletionError, match="ConnectError"):
        completions.complete(
            "http://127.0.0.1:9/v1",
            "m",
            "x",
            max_tokens=1,
            stop=[],
            temperature=0.0,
            seed=0,
            connect_timeout_s=1.0,
            request_timeout_s=2.0,
        )


def _built() -> bool:
    import os

    from runtime.backends.openai_http import llama_server

    return bool(os.environ.get(llama_server.ENV) or llama_server.cached_builds())


@pytest.mark.model
@pytest.mark.skipif(
    not _built(),
    reason="llama-server is not built here: run `python benchmarks/llama_bench_build.py`",
)
def test_real_llama_server_renders_the_gemma_template_and_completes(embedded_model):
    """The bug the parity run found: with Jinja on (llama-server's default), --chat-template gemma
    was template text and every conversation became the prompt "gemma". Started as the backend
    starts it, the server must render gemma's turns, and answer /v1/completions as in process."""
    import httpx

    from runtime.backends.openai_http.backend import OpenAIHttpBackend
    from runtime.backends.openai_http.config import OpenAIHttpSettings

    b = OpenAIHttpBackend(
        embedded_model,
        OpenAIHttpSettings(
            server="llama-server",
            chat_format="gemma",
            n_threads=1,
            n_ctx=512,
            parallel=1,
        ),
    )
    try:
        b.load(None)
        root = b.base_url.removesuffix("/v1")
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        prompt = httpx.post(
            f"{root}/apply-template", json={"messages": msgs}, timeout=30
        ).json()["prompt"]
        assert (
            prompt
            == "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
        )
        out = b.complete(
            "The capital of France is", max_tokens=6, stop=[], temperature=0.0, seed=42
        )
    finally:
        b.close()
    assert (
        out["output_tokens"] == 6
        and out["finish_reason"] == "length"
        and out["text"].strip()
    )
    assert (
        out["prompt_tokens"] == 6 and out["e2e_ms"] > 0
    )  # <bos> + five tokens, as llama-cpp-python tokenizes it
    import llama_cpp

    llm = llama_cpp.Llama(
        str(embedded_model.path), n_ctx=256, n_threads=1, verbose=False
    )
    try:
        assert (
            len(llm.tokenize(b"The capital of France is", add_bos=True))
            == out["prompt_tokens"]
        )
    finally:
        llm.close()
