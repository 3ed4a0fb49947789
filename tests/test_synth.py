"""Tests for runtime.models.synth: synthetic GGUF files of a real architecture shape."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if (
    str(ROOT) not in sys.path
):  # so `pytest tests/...` works without installing the package
    sys.path.insert(0, str(ROOT))

from core.errors import ConfigError  # noqa: E402
from runtime.models import synth  # noqa: E402


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run_py(
    code: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime.models.synth", *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module", autouse=True)
def _library_policy() -> None:
    """This host's llama.cpp policy (runtime.backends.llama_cpp.lib_policy) before this module loads a model in
    process, as every process that loads one applies it: where llama.cpp has AMX compiled in, its matmul crashes
    the process on every multi-token decode (SIGSEGV). Without it these tests crashed on an AMX host unless an
    earlier test of the same pytest worker had applied it (on a Xeon with AMX, a worker crashed and xdist hung)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:  # the tests that need the library skip themselves
        return
    from runtime.backends.llama_cpp import lib_policy as llamacpp_lib

    llamacpp_lib.apply()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict]:
    """tiny files written once per module, keyed by (shape, quant)."""
    out = tmp_path_factory.mktemp("synth")
    facts = {}
    for shape, quant in [
        ("tiny-llama", "F16"),
        ("tiny-llama", "Q8_0"),
        ("tiny-llama", "Q4_0"),
        ("tiny-qwen3moe", "Q8_0"),
    ]:
        facts[(shape, quant)] = synth.write_gguf(
            synth.SHAPES[shape], quant, out / f"{shape}-{quant}.gguf"
        )
    return facts


# --- (a) dense files load and decode --------------------------------------------------


@pytest.mark.parametrize("quant", ["F16", "Q8_0", "Q4_0"])
def test_tiny_llama_loads_and_decodes(files: dict, quant: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    np = pytest.importorskip("numpy")
    facts = files[("tiny-llama", quant)]
    shape = synth.SHAPES["tiny-llama"]
    assert (
        facts["size_bytes"] == os.path.getsize(facts["path"]) == shape.file_size(quant)
    )
    assert facts["n_params"] == shape.n_params()
    llm = llama_cpp.Llama(
        model_path=facts["path"], n_ctx=64, verbose=False, logits_all=True
    )
    try:
        md = llm.metadata
        assert md["general.architecture"] == "llama"
        assert md["general.name"] == "tiny-llama"
        assert md["general.file_type"] == str({"F16": 1, "Q8_0": 7, "Q4_0": 2}[quant])
        assert md["almanac.synthetic"] == "true"
        assert md["almanac.shape"] == "tiny-llama"
        assert md["almanac.seed"] == "0"
        assert llm.n_vocab() == shape.n_vocab
        tokens = llm.tokenize(b"Hello, world! 123")
        assert tokens[0] == 1 and len(tokens) > 3  # <s> then text tokens
        llm.eval(tokens)
        logits = np.asarray(llm.scores[: llm.n_tokens])
        assert logits.shape == (len(tokens), shape.n_vocab)
        assert np.isfinite(logits).all()
        assert logits.std() > 0  # not all equal: the weights are not zeros
    finally:
        llm.close()


def test_chat_path_and_detokenize(files: dict) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(
        model_path=files[("tiny-llama", "Q8_0")]["path"], n_ctx=128, verbose=False
    )
    try:
        out = llm.create_chat_completion(
            messages=[{"role": "user", "content": "hi"}], max_tokens=4, seed=1
        )
        assert out["usage"]["completion_tokens"] >= 1
        assert isinstance(out["choices"][0]["message"]["content"], str)
        assert llm.detokenize(llm.tokenize(b"abc xyz", add_bos=False)) == b" abc xyz"
    finally:
        llm.close()


@pytest.mark.parametrize("shape", ["tiny-qwen3", "tiny-olmoe"])
def test_other_architectures_load(tmp_path: Path, shape: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    np = pytest.importorskip("numpy")
    facts = synth.write_gguf(shape, "Q8_0", tmp_path / "m.gguf")
    llm = llama_cpp.Llama(
        model_path=facts["path"], n_ctx=64, verbose=False, logits_all=True
    )
    try:
        assert llm.metadata["general.architecture"] == synth.SHAPES[shape].architecture
        tokens = llm.tokenize(b"some text")
        llm.eval(tokens)
        assert np.isfinite(np.asarray(llm.scores[: llm.n_tokens])).all()
    finally:
        llm.close()


def test_k_quant_via_llama_cpp(tmp_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    shape = synth.SHAPES["tiny-llama"]
    facts = synth.write_gguf(shape, "Q4_K_M", tmp_path / "k.gguf", seed=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "k.gguf"
    ]  # the F16 temp file is gone
    # a prediction of llama.cpp's type choices: exact with 0.3.36, close with any version
    assert (
        abs(facts["size_bytes"] - shape.file_size("Q4_K_M"))
        <= 0.01 * facts["size_bytes"]
    )
    again = synth.write_gguf(shape, "Q4_K_M", tmp_path / "k2.gguf", seed=3)
    assert again["sha256"] == facts["sha256"]
    llm = llama_cpp.Llama(model_path=facts["path"], n_ctx=64, verbose=False)
    try:
        md = llm.metadata
        assert md["general.file_type"] == "15"  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        assert md["almanac.shape"] == "tiny-llama" and md["almanac.seed"] == "3"
        llm.eval(llm.tokenize(b"hello"))
    finally:
        llm.close()


# --- (b) MoE fixture and the expert-count override ------------------------------------

_MOE_PROBE = """
    import json, sys
    import numpy as np
    import llama_cpp
    from runtime.backends.llama_cpp import lib_policy as llamacpp_lib
    llamacpp_lib.apply()  # this host's library policy (AMX: extra buffer types off)
    path, override = sys.argv[1], sys.argv[2]
    kw = {} if override == "none" else {"kv_overrides": {"qwen3moe.expert_used_count": int(override)}}
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, verbose=True, logits_all=True, **kw)
    llm.eval(llm.tokenize(b"mixture of experts"))
    ok = bool(np.isfinite(np.asarray(llm.scores[: llm.n_tokens])).all())
    md = llm.metadata
    print(json.dumps({"finite": ok, "count": md["qwen3moe.expert_count"],
                      "used": md["qwen3moe.expert_used_count"]}))
"""


def _n_expert_used(stderr: str) -> list[int]:
    return [int(m) for m in re.findall(r"n_expert_used\s*=\s*(\d+)", stderr)]


def test_moe_fixture_metadata_and_override(files: dict) -> None:
    pytest.importorskip("llama_cpp")
    shape = synth.SHAPES["tiny-qwen3moe"]
    assert (shape.n_expert, shape.n_expert_used) == (8, 2)
    path = files[("tiny-qwen3moe", "Q8_0")]["path"]

    plain = _run_py(_MOE_PROBE, path, "none")
    assert plain.returncode == 0, plain.stderr[-2000:]
    facts = json.loads(plain.stdout.strip().splitlines()[-1])
    assert facts == {"finite": True, "count": "8", "used": "2"}
    assert _n_expert_used(plain.stderr) == [2]

    over = _run_py(_MOE_PROBE, path, "1")
    assert over.returncode == 0, over.stderr[-2000:]
    facts = json.loads(over.stdout.strip().splitlines()[-1])
    assert facts["finite"] is True
    assert facts["used"] == "2"  # the file's value: overrides show only in the log
    assert _n_expert_used(over.stderr) == [1]


# --- (c) determinism -------------------------------------------------------------------


def test_deterministic_bytes(tmp_path: Path) -> None:
    a = synth.write_gguf("tiny-llama", "Q8_0", tmp_path / "a" / "m.gguf", seed=7)
    b = synth.write_gguf("tiny-llama", "Q8_0", tmp_path / "b" / "m.gguf", seed=7)
    c = synth.write_gguf("tiny-llama", "Q8_0", tmp_path / "c" / "m.gguf", seed=8)
    assert Path(a["path"]).read_bytes() == Path(b["path"]).read_bytes()
    assert (
        a["sha256"]
        == b["sha256"]
        == hashlib.sha256(Path(a["path"]).read_bytes()).hexdigest()
    )
    assert c["sha256"] != a["sha256"] and c["size_bytes"] == a["size_bytes"]
    for key in (
        "path",
        "shape",
        "architecture",
        "quant",
        "n_params",
        "size_bytes",
        "sha256",
        "seed",
        "seconds",
    ):
        assert key in a
    assert (a["shape"], a["architecture"], a["quant"], a["seed"]) == (
        "tiny-llama",
        "llama",
        "Q8_0",
        7,
    )


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    def boom(done: int, total: int) -> None:
        raise KeyboardInterrupt

    target = tmp_path / "m.gguf"
    with pytest.raises(KeyboardInterrupt):
        synth.write_gguf("tiny-llama", "Q8_0", target, progress=boom)
    assert list(tmp_path.iterdir()) == []


def test_progress_reports_total(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    synth.write_gguf(
        "tiny-llama",
        "Q4_0",
        tmp_path / "m.gguf",
        progress=lambda d, t: seen.append((d, t)),
    )
    assert seen and seen[-1][0] == seen[-1][1] and all(d <= t for d, t in seen)


# --- (d) command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--shape", "tiny-lama"], "did you mean tiny-llama"),
        (["--shape", "tiny-llama", "--set", "n_layr=2"], "n_layr"),
        (["--shape", "tiny-llama", "--set", "n_head_kv=3"], "n_head_kv"),
        (["--shape", "tiny-llama", "--set", "n_layer=two"], "n_layer"),
        (["--shape", "tiny-llama", "--set", "n_layer"], "FIELD=VALUE"),
        (["--shape", "tiny-llama", "--quant", "Q9_9"], "quant"),
        (["--shape", "tiny-llama", "--seed", "x"], "--seed"),
        (["--shape", "tiny-llama", "--bogus"], "unrecognized"),
    ],
)
def test_cli_bad_input(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "m.gguf"
    proc = _cli(*args, "--out", str(out))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0] and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "m.gguf"
    proc = _cli(
        "--shape",
        "tiny-llama",
        "--quant",
        "q4_0",
        "--out",
        str(out),
        "--seed",
        "5",
        "--set",
        "n_layer=2",
        "--set",
        "n_ctx_train=512",
    )
    assert proc.returncode == 0, proc.stderr
    first, rest = proc.stdout.split("\n", 1)
    assert first == str(out) and out.is_file()
    facts = json.loads(rest)
    assert facts["shape"] == "tiny-llama+n_ctx_train=512,n_layer=2"
    assert facts["quant"] == "Q4_0" and facts["seed"] == 5
    assert facts["size_bytes"] == out.stat().st_size
    shape = synth.make_shape("tiny-llama", n_layer=2, n_ctx_train=512)
    assert facts["n_params"] == shape.n_params() and facts[
        "size_bytes"
    ] == shape.file_size("Q4_0")


def test_cli_list() -> None:
    proc = _cli("--list")
    assert proc.returncode == 0
    for name in (
        "tiny-llama",
        "tiny-qwen3moe",
        "llama-1b",
        "llama-8b",
        "qwen3moe-30b-a3b",
    ):
        assert name in proc.stdout


# --- (e) shape validation --------------------------------------------------------------


@pytest.mark.parametrize(
    "base, overrides, field",
    [
        ("tiny-llama", {"n_layer": 0}, "n_layer"),
        ("tiny-llama", {"n_embd": -256}, "n_embd"),
        ("tiny-llama", {"n_head": 4, "n_head_kv": 3}, "n_head_kv"),
        ("tiny-llama", {"n_head": 3, "n_head_kv": 1}, "n_head"),
        ("tiny-llama", {"n_embd": 240}, "n_embd"),
        ("tiny-llama", {"n_ff": 100}, "n_ff"),
        ("tiny-llama", {"n_vocab": 100}, "n_vocab"),
        ("tiny-llama", {"n_layer": 2.5}, "n_layer"),
        ("tiny-llama", {"n_layer": True}, "n_layer"),
        ("tiny-llama", {"architecture": "gpt9"}, "architecture"),
        ("tiny-llama", {"n_expert": 8}, "n_expert"),
        ("tiny-llama", {"rms_eps": 0.0}, "rms_eps"),
        ("tiny-llama", {"bogus": 1}, "bogus"),
        ("tiny-qwen3moe", {"n_expert_used": 9}, "n_expert_used"),
        ("tiny-qwen3moe", {"n_expert_used": 0}, "n_expert_used"),
        ("tiny-qwen3moe", {"n_expert": 0}, "n_expert"),
        ("tiny-qwen3moe", {"n_ff_exp": 0}, "n_ff_exp"),
        ("tiny-olmoe", {"n_ff": 256}, "n_ff"),
    ],
)
def test_shape_validation(base: str, overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        synth.make_shape(base, **overrides)
    assert info.value.field == field
    assert field in str(info.value) and "\n" not in str(info.value)


def test_shape_lookup_and_overrides() -> None:
    with pytest.raises(ConfigError, match="did you mean llama-8b"):
        synth.get_shape("llama-8")
    s = synth.make_shape(
        "tiny-qwen3moe", n_expert="16", n_expert_used="4", tie_embeddings="false"
    )
    assert (s.n_expert, s.n_expert_used, s.tie_embeddings) == (16, 4, False)
    assert s.name == "tiny-qwen3moe+n_expert=16,n_expert_used=4,tie_embeddings=false"
    assert synth.make_shape("tiny-llama") is synth.SHAPES["tiny-llama"]
    assert synth.make_shape("tiny-llama", name="mine", n_layer=1).name == "mine"
    with pytest.raises(ConfigError):
        synth.Shape(
            "x",
            "llama",
            n_embd=64,
            n_layer=1,
            n_head=2,
            n_head_kv=4,
            n_ff=128,
            n_vocab=1024,
            n_ctx_train=128,
        )
    with pytest.raises(ConfigError, match="quant"):
        synth.write_gguf("tiny-llama", "Q3_X", "/nonexistent/never.gguf")


def test_registry_shapes_are_valid_and_small_ones_small() -> None:
    for name in (
        "tiny-llama",
        "tiny-qwen3moe",
        "llama-1b",
        "llama-8b",
        "qwen3moe-30b-a3b",
    ):
        assert name in synth.SHAPES and synth.SHAPES[name].name == name
    for name in ("tiny-llama", "tiny-qwen3moe"):
        assert synth.SHAPES[name].file_size("Q8_0") < 8e6
    moe = synth.SHAPES["tiny-qwen3moe"]
    assert (
        moe.architecture == "qwen3moe" and moe.n_expert == 8 and moe.n_expert_used == 2
    )


# --- (f) parameter counts and sizes (computed, nothing written) -----------------------


def test_parameter_counts() -> None:
    p8 = synth.SHAPES["llama-8b"].n_params()
    assert abs(p8 - 8.03e9) / 8.03e9 < 0.02
    s1 = synth.SHAPES["llama-1b"]
    assert (s1.n_embd, s1.n_layer, s1.n_vocab) == (2048, 16, 32000)
    assert 0.9e9 < s1.n_params() < 1.3e9
    moe = synth.SHAPES["qwen3moe-30b-a3b"]
    assert abs(moe.n_params() - 30.5e9) / 30.5e9 < 0.02
    assert abs(moe.n_params_active() - 3.3e9) / 3.3e9 < 0.05
    assert s1.n_params_active() == s1.n_params()


def test_expected_sizes_ordered() -> None:
    s = synth.SHAPES["llama-8b"]
    sizes = [
        s.file_size(q) for q in ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0")
    ]
    assert sizes == sorted(sizes, reverse=True)
    assert 15.5e9 < sizes[0] < 16.5e9  # ~2 bytes per parameter
    assert 4.6e9 < s.file_size("Q4_K_M") < 5.2e9  # the published Q4_K_M is 4.92 GB
