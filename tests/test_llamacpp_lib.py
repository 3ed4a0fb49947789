"""runtime/backends/llama_cpp/lib_policy.py: the extra-buffer-type policy, and a real multi-token decode under it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.errors import ConfigError
from runtime.backends.llama_cpp import lib_policy as llamacpp_lib

AMX = "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
NO_AMX = "CPU : SSE3 = 1 | AVX512 = 1 | REPACK = 1 | "


def test_auto_turns_extra_buffer_types_off_only_with_amx():
    assert llamacpp_lib.decide(AMX, "auto")["use_extra_bufts"] is False
    assert llamacpp_lib.decide(NO_AMX, "auto")["use_extra_bufts"] is True
    assert llamacpp_lib.decide("AMX_INT8 = 0 |", "auto")["use_extra_bufts"] is True


def test_explicit_policy_wins_and_bad_value_is_one_line(monkeypatch):
    assert llamacpp_lib.decide(AMX, "on")["use_extra_bufts"] is True
    assert llamacpp_lib.decide(NO_AMX, "off")["use_extra_bufts"] is False
    monkeypatch.setenv(llamacpp_lib.ENV, "maybe")
    with pytest.raises(ConfigError, match="ALMANAC_EXTRA_BUFTS"):
        llamacpp_lib.decide(NO_AMX)


@pytest.mark.model
def test_multi_token_decode_runs_under_the_policy(embedded_model):
    import subprocess
    import sys

    code = (
        "import sys, llama_cpp\n"
        "from runtime.backends.llama_cpp import lib_policy as llamacpp_lib\n"
        "d = llamacpp_lib.apply()\n"
        "l = llama_cpp.Llama(sys.argv[1], verbose=False, n_ctx=256)\n"
        "l.eval(l.tokenize(b'The quick brown fox jumps over the lazy dog'))\n"
        "print(l.n_tokens, d['use_extra_bufts'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(embedded_model.path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    n_tokens, _ = proc.stdout.split()
    assert int(n_tokens) >= 9


ROOT = Path(__file__).resolve().parents[1]
# modules that load a model only inside a process whose backend applied the policy when it started
# (runtime.backends.llama_cpp.backend.LlamaCppBackend.__init__), or that only tokenize with one
_AFTER_THE_BACKEND = {
    "runtime/backends/llama_cpp/speculative.py": "the draft model, loaded by the backend's own process",
    "tests/test_parity.py": "tokenizes only, after the backend of the same test loaded the model",
}


def test_every_module_that_loads_a_model_in_process_applies_the_policy():
    """A module that calls ``llama_cpp.Llama(`` itself applies the library policy first (or is listed above with why
    it need not): on a host whose llama.cpp has AMX compiled in, a multi-token decode without it crashes the process.
    tests/test_synth.py did not, and crashed its pytest worker on a Xeon with AMX whenever no earlier test of that
    worker had applied it."""
    loaders = [
        p.relative_to(ROOT).as_posix()
        for under in ("runtime", "pipelines", "core", "benchmarks", "tests")
        for p in sorted((ROOT / under).rglob("*.py"))
        if "llama_cpp.Llama(" in p.read_text(encoding="utf-8")
    ]
    assert "runtime/backends/llama_cpp/backend.py" in loaders
    assert "tests/test_synth.py" in loaders and "benchmarks/fidelity.py" in loaders
    missing = [
        rel
        for rel in loaders
        if rel not in _AFTER_THE_BACKEND and not _applies_first(ROOT / rel)
    ]
    assert missing == [], f"load a model without the library policy first: {missing}"


def _applies_first(path: Path) -> bool:
    """Whether the policy is applied (``lib_policy.apply()`` under either name) before the module's first load."""
    text = path.read_text(encoding="utf-8")
    applied = re.search(r"\b(?:lib_policy|llamacpp_lib)\.apply\(\)", text)
    return applied is not None and applied.start() < text.index("llama_cpp.Llama(")
